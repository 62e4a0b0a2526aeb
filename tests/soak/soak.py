#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Soak and faults, against the real agent and real workloads.

  soak.py --agent A --cli C --pattern P --stub S [--rounds N] [--flood-seconds T]

1. Restart rounds: N times `bpftel module restart` of gpu and usm (alternating, through
   the CLI) while an HTTPS workload (curl against python3 ssl http.server) and a CUDA
   stub workload (cuda_pattern loop) run. Afterwards the agent's fds, the kernel's BPF
   programs, maps and links, and tracefs uprobe entries equal what they were after the
   first start; both modules still count their workloads.
2. kill -9 of the agent mid-run, then a new agent: nothing of the old one stays in the
   kernel once the new one is up, and the new one works.
3. A module that cannot start (fault injected: usm's load fails twice) is reported by
   `bpftel modules` and /metrics, gpu and the watcher run and count meanwhile, and a
   later `bpftel module start usm` works.
4. Event flood: a program opening files named like libssl as fast as it can for T
   seconds; the agent's memory stays bounded, and every open is processed or counted
   as lost: kernel matched = emitted + lost, received = emitted.

CI runs a short form (tests/CMakeLists.txt); by hand: --rounds 1000 --flood-seconds 60.
(cuda_pattern: tests/gpu/cuda_pattern.c; stub: the tests' libcudart.so.13.)"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from agentlib import (Agent, bpf_ids, check, held_bpf_ids, make_cert,  # noqa: E402
                      require_root, run, skip, start_http_server, wait_for)

UPROBE_EVENTS = "/sys/kernel/tracing/uprobe_events"


def agent_objects(pid):
    """The BPF programs, maps and links the agent holds, counted: its own only (the
    host's, a systemd unit's cgroup programs, come and go meanwhile)."""
    return {k: len(v) for k, v in held_bpf_ids(pid).items()}


def uprobe_entries():
    try:
        with open(UPROBE_EVENTS) as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def fds(pid):
    """The agent's open fds, the fewest of 10 looks over 0.1 s: handling a detection
    opens /proc files for a moment, and the CUDA workload makes detections all along."""
    least = None
    for _ in range(10):
        n = len(os.listdir(f"/proc/{pid}/fd"))
        least = n if least is None else min(least, n)
        time.sleep(0.01)
    return least


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Workloads:
    """An HTTPS server queried by curl in a loop, and a CUDA stub launch loop."""

    def __init__(self, tmp, pattern, stub):
        self.procs = []
        cert, key = make_cert(tmp)
        os.makedirs(os.path.join(tmp, "www", "items"))
        with open(os.path.join(tmp, "www", "items", "1"), "w") as f:
            f.write("x\n")
        srv, self.port = start_http_server(sys.executable, os.path.join(tmp, "www"), cert, key)
        self.server_pid = srv.pid
        self.procs.append(srv)
        self.procs.append(subprocess.Popen(
            ["sh", "-c", f"while :; do curl -sk -o /dev/null https://127.0.0.1:{self.port}/"
                         f"items/1; sleep 0.05; done"]))
        # Short-lived CUDA processes, one after the other. Not one long hot loop: on
        # this kernel (6.18) a uprobe attached while a thread runs the probed function
        # in a tight loop never fires for that process (BENCHMARKS.md, "uprobes and
        # running processes"), so a module restart would lose a looping process.
        self.procs.append(subprocess.Popen(
            ["sh", "-c", f"while :; do echo go | {pattern} {stub} stub >/dev/null; done"]))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def steady(agent):
    """(fds, kernel objects, uprobe entries) once two looks in a row agree and no link
    waits for the reaper, else None."""
    first = (fds(agent.proc.pid), agent_objects(agent.proc.pid), uprobe_entries())
    if agent.json("stats")["agent"]["links_releasing"]:
        return None
    return first if (fds(agent.proc.pid), agent_objects(agent.proc.pid),
                     uprobe_entries()) == first else None


def https_count(agent, pid):
    return sum(r["count"] for r in agent.json("http")["endpoints"] if r.get("pid") == pid)


def cuda_pids(agent):
    """Processes whose whole stub pattern (5 launches) was counted."""
    return {p["pid"] for p in agent.json("gpu")["processes"] if p["launches"] >= 5}


def with_agent_and_workloads(args, tmp, body, env=None):
    """body(agent, work) with an agent and both workloads running; then the agent exits
    0 on SIGTERM and the kernel holds what it held before the agent started."""
    agent = Agent(args.agent, args.cli, env=env)
    work = None
    try:
        work = Workloads(tmp, args.pattern, args.stub)
        body(agent, work)
        work.stop()
        work = None
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
    finally:
        if work:
            work.stop()
        agent.cleanup()
    agent.released(60)
    check(True, f"kernel objects back to the baseline: none left of the "
                f"{ {k: len(v) for k, v in agent.bpf_held.items()} } the agent held")


def restart_rounds(args, agent, work):
    wait_for(lambda: https_count(agent, work.server_pid) > 0, 120, "HTTPS counted")
    wait_for(lambda: cuda_pids(agent), 120, "CUDA launches counted")
    base = wait_for(lambda: steady(agent), 60, "the agent's objects to hold steady")
    t0 = time.monotonic()
    for i in range(args.rounds):
        name = "gpu" if i % 2 == 0 else "usm"
        res = agent.cli("module", "restart", name, check=False)
        if res.returncode:
            raise AssertionError(f"round {i}: bpftel module restart {name}: {res.stderr}")
    took = time.monotonic() - t0
    check(True, f"{args.rounds} restarts through the CLI in {took:.1f} s "
                f"({took / max(args.rounds, 1) * 1000:.0f} ms each)")
    # A restart does not wait for the old instance's uprobes to leave the kernel (~80 ms
    # each); the agent's reaper thread destroys them in the background.
    t0 = time.monotonic()
    wait_for(lambda: agent.json("stats")["agent"]["links_releasing"] == 0, 300,
             "the reaper to destroy the stopped instances' links")
    check(True, f"the reaper destroyed the old instances' links "
                f"{time.monotonic() - t0:.1f} s after the last restart")
    # Links and programs go away asynchronously in the kernel: wait for them to settle.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = (fds(agent.proc.pid), agent_objects(agent.proc.pid), uprobe_entries())
        if now == base:
            break
        time.sleep(0.2)
    check(now == base, f"after {args.rounds} rounds: fds {now[0]} (was {base[0]}), "
                       f"kernel {now[1]} (was {base[1]}), uprobe entries {now[2]} "
                       f"(was {base[2]})")
    h0, seen = https_count(agent, work.server_pid), cuda_pids(agent)
    wait_for(lambda: https_count(agent, work.server_pid) > h0 and cuda_pids(agent) - seen, 120,
             "both workloads counted again")
    check(True, "after the rounds both modules count their workloads")


def kill9(args, tmp):
    """kill -9, then a new agent: every object of the old one leaves the kernel (the
    kernel frees them with its fds), and the new one works."""
    agent = Agent(args.agent, args.cli)
    old = held_bpf_ids(agent.proc.pid)
    agent.proc.send_signal(signal.SIGKILL)
    agent.proc.wait()
    agent.cleanup()
    fresh = Agent(args.agent, args.cli)
    try:
        mods = {m["name"]: m["state"] for m in fresh.json("modules")["modules"]}
        check(all(s == "running" for s in mods.values()), f"a new agent runs: {mods}")
        wait_for(lambda: not any(ids & bpf_ids(k) for k, ids in old.items()), 60,
                 "the killed agent's objects to leave the kernel")
        check(True, f"after kill -9 and a new start, none of the killed agent's "
                    f"{ {k: len(v) for k, v in old.items()} } objects remain")
        check(fresh.stop() == 0, "the new agent stops cleanly")
    finally:
        fresh.cleanup()
    fresh.released(60)
    check(True, "nothing left of the new agent's either")


def flood(args):
    agent = Agent(args.agent, args.cli)
    tmp = tempfile.mkdtemp(prefix="bpftel-flood-")
    try:
        lib = os.path.join(tmp, "libssl.so.3")
        shutil.copy("/etc/hostname", lib)  # a name that matches; its content is not read
        before = agent.json("stats")["events"]
        lost0 = [l for l in agent.json("stats")["losses"] if l["module"] == "sharedlibs"][0]
        rss0 = rss_kib(agent.proc.pid)
        code = ("import os, sys, time\n"
                "end = time.monotonic() + float(sys.argv[2]); n = 0\n"
                "while time.monotonic() < end:\n"
                "    os.close(os.open(sys.argv[1], os.O_RDONLY)); n += 1\n"
                "print(n)\n")
        peak = rss0
        proc = subprocess.Popen([sys.executable, "-c", code, lib, str(args.flood_seconds)],
                                stdout=subprocess.PIPE, text=True)
        while proc.poll() is None:
            peak = max(peak, rss_kib(agent.proc.pid))
            time.sleep(0.2)
        generated = int(proc.stdout.read())

        def balanced():
            """Both sides' sums, from one reading where they hold: the host's other
            processes may open libraries meanwhile, an event of theirs then being
            emitted and not yet taken (a reading between is not a loss)."""
            st = agent.json("stats")
            after = st["events"]
            lost1 = [x for x in st["losses"] if x["module"] == "sharedlibs"][0]
            d = {k: after[k] - before[k] for k in ("matched", "emitted", "lost", "received",
                                                    "path_unreadable", "path_too_long",
                                                    "exec_lost")}
            dl = {k: lost1[k] - lost0[k] for k in ("queue_full", "too_big", "parse")}
            kernel = d["matched"] == (d["emitted"] + d["lost"] + d["exec_lost"] +
                                      d["path_unreadable"] + d["path_too_long"])
            user = d["received"] + dl["queue_full"] + dl["too_big"] == d["emitted"]
            return (d, dl) if kernel and user else None
        try:
            d, dl = wait_for(balanced, 60, "every event emitted taken or counted dropped, "
                                           "and every match emitted or counted lost")
        except AssertionError:
            d = dl = None
        # Every flood open matched; another process of the host may have opened a
        # library meanwhile, which the kernel counts too.
        if d is None:
            st = agent.json("stats")
            check(False, f"the kernel's and userspace's sums never held together: "
                         f"{st['events']} (before {before}), losses "
                         f"{[x for x in st['losses'] if x['module'] == 'sharedlibs']}")
        check(d["matched"] >= generated,
              f"{generated} opens generated, {d['matched']} matched in the kernel")
        check(True, f"kernel: matched {d['matched']} = emitted {d['emitted']} + lost "
                    f"{d['lost']}")
        check(True, f"userspace: emitted {d['emitted']} = received {d['received']} + "
                    f"dropped at the full queue {dl['queue_full']} + too big {dl['too_big']}")
        if args.rss_bound_mib:
            check(peak - rss0 < args.rss_bound_mib * 1024,
                  f"agent RSS {rss0} KiB before, peak {peak} KiB during the flood (bound "
                  f"{args.rss_bound_mib} MiB growth)")
        else:
            print(f"note: agent RSS {rss0} KiB before, peak {peak} KiB during the flood "
                  f"(not checked: sanitizer build)")
        check(agent.stop() == 0, "the agent stops cleanly after the flood")
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def start_failure(args, tmp):
    """A module whose start fails is reported, the others keep running and counting,
    and it starts later. The failure is injected (BPFTEL_FAULTS): USM's object load
    fails with ENOMEM twice, at the agent's start and at the first `module start`."""
    os.makedirs(os.path.join(tmp, "faults"))
    with_agent_and_workloads(args, os.path.join(tmp, "faults"), faulty_run,
                             env={"BPFTEL_FAULTS": "usm.load=ENOMEM*2"})


def faulty_run(agent, work):
    def mods():
        return {m["name"]: m for m in agent.json("modules")["modules"]}

    m = mods()
    usm = m["usm"]
    check(usm["state"] == "closed" and usm["start_failures"] == 1 and
          usm["last_error"] == {"step": "load", "errno": 12,
                                "message": "Cannot allocate memory"},
          f"usm's failed start is reported: {usm['state']}, {usm['last_error']}, "
          f"start_failures {usm['start_failures']}")
    check(m["gpu"]["state"] == "running" and m["sharedlibs"]["state"] == "running",
          "gpu and the shared-libraries watcher run")
    table = agent.cli("modules").stdout
    check("load: Cannot allocate memory" in table, "`bpftel modules` shows why")

    wait_for(lambda: cuda_pids(agent), 120, "CUDA launches counted while usm is down")
    check(True, "gpu counts its workload while usm is down")

    res = agent.cli("module", "start", "usm", check=False)
    check(res.returncode != 0 and "Cannot allocate memory" in res.stderr,
          f"a second start fails the same way: rc {res.returncode}, "
          f"{res.stderr.strip()}")
    m = mods()
    check(m["usm"]["start_failures"] == 2 and m["gpu"]["state"] == "running",
          "it is counted (2) and gpu still runs")
    metrics = urllib.request.urlopen(
        f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics", timeout=120
    ).read().decode()
    check('bpftel_module_start_failures_total{module="usm"} 2' in metrics,
          "/metrics: bpftel_module_start_failures_total{module=\"usm\"} 2")

    seen = cuda_pids(agent)
    agent.cli("module", "start", "usm")
    m = mods()
    check(m["usm"]["state"] == "running" and m["usm"]["last_error"] is None,
          "the third start works: usm running, last_error cleared")
    wait_for(lambda: https_count(agent, work.server_pid) > 0, 120, "HTTPS counted")
    wait_for(lambda: cuda_pids(agent) - seen, 120, "more CUDA processes counted")
    check(True, "usm counts HTTPS, and gpu kept counting CUDA")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--flood-seconds", type=float, default=60)
    ap.add_argument("--rss-bound-mib", type=int, default=64,
                    help="agent RSS growth allowed during the flood; 0: not checked "
                         "(sanitizers hold freed memory in quarantine)")
    args = ap.parse_args()
    require_root()
    for tool in ("curl", "openssl"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    tmp = tempfile.mkdtemp(prefix="bpftel-soak-")
    with_agent_and_workloads(args, tmp, lambda agent, work: restart_rounds(args, agent, work))
    kill9(args, tmp)
    start_failure(args, tmp)
    flood(args)
    shutil.rmtree(tmp, ignore_errors=True)
    print("soak: all checks passed")


if __name__ == "__main__":
    run(main)
