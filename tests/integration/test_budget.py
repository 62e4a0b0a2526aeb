#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Self-overhead budget, end to end: with `max_cpu_percent = gpu:7`, a hot loop of
cudaLaunchKernel through the stub libcudart (cuda_pattern spin) pushes the GPU module
over its budget; `bpftel modules` shows it throttled with the reason, `bpftel libs`
shows the file's uprobes shed and the window's load, /metrics says so; when the loop
stops the module takes
the file back and runs again. A stub pattern played before the hot loop and one played
after the recovery are each counted exactly. No fixed sleeps: every wait is on a
condition."""
import argparse
import json
import os
import subprocess
import re
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, require_root, run, wait_for  # noqa: E402
from test_gpu import (EXPECTED_CALLS, NPROBES, Pattern, gpu_row, lib_rows,  # noqa: E402
                      nonzero)

CONFIG = ("modules = gpu\nlibsets = gpu\nmax_cpu_percent = gpu:7\nmax_cpu_window = 1\n"
          "run_stats_duty = 1/2\nmetrics_addr = 127.0.0.1:0\n")


def gpu_module(agent):
    return next(m for m in agent.json("modules")["modules"] if m["name"] == "gpu")


def metrics(agent):
    addr = agent.json("stats")["agent"]["metrics_addr"]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=120) as r:
        return r.read().decode()


def metric(text, name):
    m = re.search(rf'^{name}{{module="gpu"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def attached(agent, pid):
    return [r for r in lib_rows(agent, pid) if r["attached"] == NPROBES]


def play_counted(agent, args, when):
    """A stub pattern in a new process, counted exactly."""
    pat = Pattern(args.pattern, args.stub, "stub")
    try:
        wait_for(lambda: attached(agent, pat.pid), 30,
                 f"the gpu module's uprobes on pid {pat.pid} ({when})")
        pat.play()
        p = wait_for(lambda: (lambda r: r if r and nonzero(r["calls"]) == EXPECTED_CALLS
                              else None)(gpu_row(agent, pat.pid)),
                     30, f"the stub pattern counted ({when})")
        check(nonzero(p["calls"]) == EXPECTED_CALLS and p["launches"] == 5,
              f"{when}: the stub pattern of pid {pat.pid} counted exactly: {p['calls']}")
    finally:
        pat.finish()


def left_of(prog_ids):
    """Programs of prog_ids still in the kernel, and links that hold one of them."""
    out = {}
    for kind in ("prog", "link"):
        res = subprocess.run(["bpftool", "-j", kind, "list"], capture_output=True, text=True)
        objs = json.loads(res.stdout or "[]")
        out[kind] = [o["id"] for o in objs
                     if (o["id"] if kind == "prog" else o.get("prog_id")) in prog_ids]
    return out if out["prog"] or out["link"] else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--stub", required=True)
    args = ap.parse_args()
    require_root()

    agent = None
    conf = None
    try:
        conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
        conf.write(CONFIG)
        conf.close()
        agent = Agent(args.agent, args.cli, ["-c", conf.name])
        m = gpu_module(agent)
        # 7: not 7.0 again once made a fraction (0.07 * 100); the budget is still this one.
        check(m["state"] == "running" and m["budget"]["max_cpu_percent"] == 7 and
              m["throttled"] is None and m["throttle_episodes"] == 0,
              f"gpu runs with a budget of 7 % of one CPU: {m['budget']}")

        play_counted(agent, args, "before the hot loop")

        hot = Pattern(args.pattern, args.stub, "spin")
        try:
            wait_for(lambda: attached(agent, hot.pid), 30,
                     f"the gpu module's uprobes on the hot loop's pid {hot.pid}")
            hot.proc.stdin.write("go\n")
            hot.proc.stdin.flush()
            m = wait_for(lambda: (lambda x: x if x["state"] == "throttled" else None)(
                gpu_module(agent)), 30, "the gpu module to be throttled")
            th = m["throttled"]
            load = m["budget"]["cpu_percent"]  # a window was measured against this budget
            check(isinstance(load, (int, float)) and load >= 0,
                  f"bpftel modules: the last window's load shown: {m['budget']}")
            check(args.stub.split("/")[-1] in th["reason"] and "budget 7.00 %" in th["reason"]
                  and any(f.endswith("libcudart.so.13") for f in th["files"]) and
                  th["since"] > 0 and m["throttle_episodes"] >= 1,
                  f"bpftel modules: throttled: {th['reason']}")
            table = agent.cli("modules").stdout
            check(re.search(r"^gpu\s+throttled\s", table, re.M) and "shed:" in table,
                  "the modules table shows gpu throttled and the file it shed")
            rows = lib_rows(agent, hot.pid)
            check(rows and all(r["throttled"] and r["attached"] == 0 for r in rows),
                  "bpftel libs: the stub's uprobes shed for gpu: "
                  f"{[(r['attached'], r['throttled']) for r in rows]}")
            text = metrics(agent)
            check(metric(text, "bpftel_module_throttled") == 1 and
                  metric(text, "bpftel_module_throttle_episodes_total") >= 1 and
                  metric(text, "bpftel_module_up") == 1,
                  "/metrics: bpftel_module_throttled 1, an episode counted, still up")

            # The loop stops: its process goes quiet, the module takes the file back.
            hot.proc.stdin.write("stop\n")
            hot.proc.stdin.flush()
            for line in hot.proc.stdout:
                if line.startswith("calls"):
                    check(int(line.split()[1]) > 0,
                          f"the hot loop stopped after {line.split()[1]} calls")
                    break
            m = wait_for(lambda: (lambda x: x if x["state"] == "running" else None)(
                gpu_module(agent)), 30, "the gpu module to run again")
            check(m["throttled"] is None and m["throttle_episodes"] >= 1,
                  "bpftel modules: running again once the loop stopped")
            wait_for(lambda: attached(agent, hot.pid), 30,
                     "the stub's uprobes attached again for the idle process")
            check(metric(metrics(agent), "bpftel_module_throttled") == 0,
                  "/metrics: bpftel_module_throttled back to 0")
        finally:
            hot.finish()

        play_counted(agent, args, "after the recovery")
        check(gpu_module(agent)["state"] == "running", "still running after the pattern")
        ours = {p["id"] for p in agent.json("stats")["programs"]}
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        # The kernel frees detached programs after a grace period: wait for it.
        wait_for(lambda: not left_of(ours), 30, "the agent's programs and links to go")
        check(True, f"none of the agent's {len(ours)} programs, nor a link to one, remains")
    finally:
        if agent:
            agent.cleanup()
        if conf:
            os.unlink(conf.name)
    print("test_budget: all checks passed")


if __name__ == "__main__":
    run(main)
