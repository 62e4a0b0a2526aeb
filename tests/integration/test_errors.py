#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, errors telemetry of one module (--module gpu, usm or sharedlibs): real
errors induced in the real programs of the real agent, through the stub libraries and
helpers the tests build, are shown by `bpftel errors`, its --json and /metrics under the
module, program, map or helper, op and errno, each with a count equal to the number of
errors induced. The other modules get errors of their own, as witnesses. Then the module
restarts: its counts and the others' are exactly as they were (errors are counted since
the agent started, across restarts).

  gpu:        cuda_pattern processes fill gpu_allocs (16384) through the stub libcudart,
              each up to its share (a quarter: bpf/lib/gpu_state.h), and one more
              allocates K: K x (gpu_uretprobe, gpu_allocs, insert, E2BIG); cudaMalloc
              with an unmapped devPtr: (gpu_uretprobe, probe_read_user, EFAULT) each
  usm:        SSL_read_ex through the stub libssl with an unmapped `readbytes`:
              (usm_tls_uretprobe, probe_read_user, EFAULT) each
  sharedlibs: opens of a FIFO named libssl.so.3 whose path is unmapped while the open
              waits: (the openat program, probe_read_user_str, EFAULT) each. The watcher
              is shared: `module restart` refuses it, and it keeps its counts through the
              others' restarts; a SIGHUP that stops every module stops it (every
              module's counts are shown as they were while it is stopped), and the next
              one starts it again, counting on from them.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, free_port, require_root, run, wait_for  # noqa: E402

from test_gpu import NPROBES as GPU_NPROBES  # noqa: E402 (on the stub libcudart)

# Every module running, and none (the watcher stops with its last subscriber).
FULL = "modules = gpu, usm\nlibsets = crypto, gpu\n"
NONE = "modules = none\nlibsets = none\n"


class Helper:
    """A helper that prints 'loaded PID', waits for a line, plays, prints 'done'."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline().split()
        if line[:1] != ["loaded"]:
            self.proc.kill()
            raise AssertionError(f"{argv} did not start: {line}")
        self.pid = int(line[1])

    def play(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        out = []
        for line in self.proc.stdout:
            if line.strip() == "done":
                return out
            out.append(line.strip())
        raise AssertionError(f"helper {self.pid} ended early: {out}")

    def finish(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def attached(agent, module, pid, want):
    wait_for(lambda: any(r["module"] == module and pid in r["pids"] and r["attached"] == want
                         for r in agent.json("libs")["libs"]), 30,
             f"{module}'s {want} uprobes on pid {pid}'s library")


def counts(agent):
    """(module, program, map or helper, op, errno name) -> count, from --json."""
    return {(e["module"], e["program"], e.get("map") or e.get("helper"), e["op"],
             e["errno_name"]): e["count"] for e in agent.json("errors")["errors"]}


def map_entries(agent, module, name):
    return [m for m in agent.json("stats")["maps"]
            if m["module"] == module and m["map"] == name][0]


def induce_gpu(agent, a, want, full):
    """The allocation map filled, then K more; and bad devPtrs. Returns when counted."""
    if full:
        m = map_entries(agent, "gpu", "gpu_allocs")
        more = 10
        left = m["capacity"] - m["entries"]
        share = m["capacity"] // 4  # what one process may hold (bpf/lib/gpu_state.h)
        counts = []
        while left > 0:
            counts.append(min(share, left))
            left -= counts[-1]
        counts.append(more)  # the map is full: each of these fails to insert
        helpers = []
        try:
            for n in counts:  # all alive together: a process's entries go when it exits
                h = Helper([a.pattern, a.stub, "malloc", str(n)])
                helpers.append(h)
                attached(agent, "gpu", h.pid, GPU_NPROBES)
                check(h.play() == [f"malloc {n} failed 0"], f"{n} cudaMalloc through the stub")
        finally:
            for h in helpers:
                h.finish()
        want[("gpu", "gpu_uretprobe", "gpu_allocs", "insert", "E2BIG")] = more
    h = Helper([a.pattern, a.stub, "badptr", "5"])
    try:
        attached(agent, "gpu", h.pid, GPU_NPROBES)
        check(h.play() == ["malloc 5 failed 0"], "5 cudaMalloc with an unmapped devPtr")
    finally:
        h.finish()
    key = ("gpu", "gpu_uretprobe", "probe_read_user", "call", "EFAULT")
    want[key] = want.get(key, 0) + 5


def induce_usm(agent, a, want, full):
    n = 4 if full else 2
    h = Helper([a.tls_pattern, a.ssl, "badlen", str(n)])
    try:
        attached(agent, "usm", h.pid, 6)  # 4 entries, the 2 reads' returns (stub: no SSL_set_fd)
        check(h.play() == [f"read_ex {n} ok {n}"],
              f"{n} SSL_read_ex with an unmapped `readbytes`")
    finally:
        h.finish()
    key = ("usm", "usm_tls_uretprobe", "probe_read_user", "call", "EFAULT")
    want[key] = want.get(key, 0) + n


def openat_program(agent):
    """The watcher's program that sees openat here (the fexit where the kernel takes it)."""
    return [p["name"] for p in agent.json("stats")["programs"]
            if p["component"] == "sharedlibs" and p["probe"] == "openat"][0]


def induce_sharedlibs(agent, a, want, full, fifo):
    n = 3 if full else 1
    subprocess.run([a.lib_open, "openat", fifo, str(n), "unmapped"], check=True,
                   capture_output=True, timeout=60)
    key = ("sharedlibs", openat_program(agent), "probe_read_user_str", "call", "EFAULT")
    want[key] = want.get(key, 0) + n


def metrics(agent):
    """The errors families of /metrics, as the same keys."""
    url = f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics"
    with urllib.request.urlopen(url, timeout=120) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r'^bpftel_ebpf_(map|helper)_errors_total\{(.*)\} (\d+)$', text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        op = lab.get("op", "call")
        out[(lab["module"], lab["program"], lab.get("map") or lab["helper"], op,
             lab["errno"])] = int(m.group(3))
    return out


def table(agent):
    """`bpftel errors` rows as the same keys: MODULE PROGRAM MAP/HELPER OP ERRNO (N) COUNT."""
    out = {}
    for line in agent.cli("errors").stdout.splitlines()[1:]:
        f = line.split()
        if len(f) == 7 and f[5].startswith("("):
            out[tuple(f[:5])] = int(f[6])
    return out


# Rows the test did not cause, as last seen: another process's calls through the same
# programs (a path it unmapped, a packet cut short) count there too, on the CI's host.
others_seen = {}


def check_shown(agent, want, modules):
    """Each module's rows, through the three surfaces, hold want's counts exactly; a row
    the test did not cause may be there too, shown, and never going down (a restart
    keeps the counts)."""
    for name, got in (("bpftel errors --json", counts(agent)), ("bpftel errors", table(agent)),
                      ("/metrics", metrics(agent))):
        for mod in modules:
            mine = {k: v for k, v in got.items() if k[0] == mod}
            exp = {k: v for k, v in want.items() if k[0] == mod}
            others = {k: v for k, v in mine.items() if k not in exp}
            note = f" (not the test's: {sorted(others.items())})" if others else ""
            check(all(mine.get(k) == v for k, v in exp.items()) and
                  all(v >= others_seen.get(k, 0) for k, v in others.items()),
                  f"{name}, {mod}: {sorted(mine.items()) or 'no rows'}{note}")
            for k, v in others.items():
                others_seen[k] = max(v, others_seen.get(k, 0))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def modules(agent):
    return {m["name"]: m["state"] for m in agent.json("modules")["modules"]}


def restart(agent, a, module, want, conf, fifo, addr):
    others = [m for m in ("gpu", "usm", "sharedlibs") if m != module]
    if module != "sharedlibs":
        check(agent.cli("module", "restart", module).returncode == 0, f"{module} restarted")
        check_shown(agent, want, [module] + others)
        return
    res = agent.cli("module", "restart", "sharedlibs", check=False)
    check(res.returncode == 1 and "shared component" in (res.stdout + res.stderr),
          "the watcher cannot be restarted on its own: it runs while a module needs it")
    for m in ("gpu", "usm"):
        agent.cli("module", "restart", m)
    check_shown(agent, want, ["sharedlibs", "gpu", "usm"])
    write(conf, NONE + addr)
    agent.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: modules(agent)["sharedlibs"] == "closed", 30,
             "the watcher to stop with its last subscriber")
    check_shown(agent, want, ["sharedlibs", "gpu", "usm"])
    write(conf, FULL + addr)
    agent.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: all(s == "running" for s in modules(agent).values()), 30,
             "every module to run again")
    check_shown(agent, want, ["sharedlibs", "gpu", "usm"])
    induce_sharedlibs(agent, a, want, False, fifo)
    check_shown(agent, want, ["sharedlibs"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--module", required=True, choices=["gpu", "usm", "sharedlibs"])
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--tls-pattern", required=True)
    ap.add_argument("--ssl", required=True)
    ap.add_argument("--lib-open", required=True)
    a = ap.parse_args()
    require_root()

    tmp = tempfile.mkdtemp(prefix="bpftel-errors-")
    conf = os.path.join(tmp, "bpftel.conf")
    fifo = os.path.join(tmp, "libssl.so.3")
    os.mkfifo(fifo)
    addr = f"metrics_addr = 127.0.0.1:{free_port()}\n"  # the same across reloads
    write(conf, FULL + addr)
    agent = Agent(a.agent, a.cli, ["-c", conf])
    try:
        check(all(s == "running" for s in modules(agent).values()),
              f"every module runs: {modules(agent)}")
        want = {}
        induce_gpu(agent, a, want, a.module == "gpu")
        induce_usm(agent, a, want, a.module == "usm")
        induce_sharedlibs(agent, a, want, a.module == "sharedlibs", fifo)
        check_shown(agent, want, ["gpu", "usm", "sharedlibs"])
        restart(agent, a, a.module, want, conf, fifo, addr)
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_errors ({a.module}): all checks passed")


if __name__ == "__main__":
    run(main)
