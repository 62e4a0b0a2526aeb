#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The control socket and /metrics answer while the agent does slow work.

While 50 `bpftel module restart` run at once, and while 40 processes each load their own
copy of libssl (usm attaches to each) and exit (the sweep then detaches all of them),
`bpftel stats --json` and GET /metrics are polled every 100 ms: every answer must
arrive (the CLI's own 5 s limit, and 10 s for /metrics), and the restarts and the
sweep must finish. Latencies are printed, not asserted: tools/bench measures them."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import agent_args, LIBSSL_PROBES, Agent, check, run, skip, wait_for  # noqa: E402

LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"


class Poller(threading.Thread):
    """stats and /metrics every 100 ms until stopped; every failure kept."""

    def __init__(self, agent):
        super().__init__(daemon=True)
        self.agent = agent
        self.url = f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics"
        self.stop_flag = threading.Event()
        self.lat = {"stats": [], "metrics": []}
        self.failures = []

    def run(self):
        while not self.stop_flag.is_set():
            t0 = time.monotonic()
            res = self.agent.cli("stats", "--json", check=False)
            t1 = time.monotonic()
            if res.returncode:
                self.failures.append(f"stats: {res.stderr.strip()}")
            else:
                self.lat["stats"].append(t1 - t0)
            try:
                with urllib.request.urlopen(self.url, timeout=60) as r:
                    r.read()
                self.lat["metrics"].append(time.monotonic() - t1)
            except OSError as e:
                self.failures.append(f"metrics: {e}")
            self.stop_flag.wait(0.1)

    def finish(self, what):
        self.stop_flag.set()
        self.join()
        for k, v in self.lat.items():
            v.sort()
            if v:
                print(f"note: {what}: {k}: {len(v)} answers, p50 {v[len(v) // 2] * 1e3:.1f} ms, "
                      f"p99 {v[int(len(v) * 0.99)] * 1e3:.1f} ms, max {v[-1] * 1e3:.1f} ms")
        check(not self.failures and all(self.lat.values()),
              f"{what}: every stats and /metrics answer arrived "
              f"({len(self.lat['stats'])} and {len(self.lat['metrics'])}); failures: "
              f"{self.failures[:3]}")


def restarts(agent):
    return {m["name"]: m["restarts"] for m in agent.json("modules")["modules"]}


def restart_storm(agent, rounds):
    """50 clients at once, each restarting gpu or usm `rounds` times in a row."""
    before = restarts(agent)
    poller = Poller(agent)
    poller.start()
    cmd = (f'for i in $(seq {rounds}); do "$0" --socket "$1" module restart "$2" || exit 1; '
           f'done')
    procs = [subprocess.Popen(["sh", "-c", cmd, agent.cli_bin, agent.socket,
                               "gpu" if i % 2 else "usm"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(50)]
    rcs = [p.wait(timeout=600) for p in procs]
    after = restarts(agent)
    check(all(rc == 0 for rc in rcs),
          f"50 concurrent clients x {rounds} restarts answered: {sum(rc == 0 for rc in rcs)} "
          f"clients succeeded; the modules restarted gpu {after['gpu'] - before['gpu']}, usm "
          f"{after['usm'] - before['usm']} times (requests waiting together share a restart)")
    poller.finish(f"during 50 concurrent clients x {rounds} restarts")


LOAD = r"""
import ctypes, sys
ctypes.CDLL(sys.argv[1])
print("loaded", flush=True)
sys.stdin.readline()
"""


def sweep_storm(agent, python, tmp):
    paths = []
    for i in range(40):
        d = os.path.join(tmp, f"copy{i}")
        os.makedirs(d)
        paths.append(os.path.join(d, "libssl.so.3"))
        shutil.copy(LIBSSL, paths[-1])
    procs = [subprocess.Popen([python, "-c", LOAD, p], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for p in paths]
    for p in procs:
        p.stdout.readline()

    def attached():
        rows = {r["path"]: r for r in agent.json("libs")["libs"] if r.get("module") == "usm"}
        return all(p in rows and rows[p]["attached"] >= LIBSSL_PROBES for p in paths)
    wait_for(attached, 120, "usm attached to the 40 copies")
    check(True, "usm attached to the 40 copies of libssl")
    poller = Poller(agent)
    poller.start()
    for p in procs:
        p.stdin.close()
        p.wait(timeout=30)

    def swept():
        return not {r["path"] for r in agent.json("libs")["libs"]} & set(paths)
    wait_for(swept, 120, "the sweep to drop the 40 files")
    wait_for(lambda: agent.json("stats")["agent"]["links_releasing"] == 0, 120,
             "the reaper to destroy their links")
    check(True, "the 40 files were swept and their links destroyed")
    poller.finish("during the sweep of 40 files")


def main():
    args = agent_args()
    if not os.path.exists(LIBSSL):
        skip("needs the system libssl")
    tmp = tempfile.mkdtemp(prefix="bpftel-responsive-")
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        # Detach an unused file at the first sweep: the sweep is what is under test.
        f.write("uprobe_grace = 0\nmetrics_addr = 127.0.0.1:0\n")
    agent = Agent(args.agent, args.cli, ["-c", conf])
    try:
        restart_storm(agent, 4)
        sweep_storm(agent, args.python, tmp)
        rc = agent.stop()
        check(rc == 0, f"the agent stops cleanly (exit {rc})" + ("" if rc == 0 else
              f"; its log:\n{agent.logs()[-20000:]}"))
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(main)
