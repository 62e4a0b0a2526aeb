#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""cuda_calls experiment: the cost the GPU module adds per kernel launch call.

A loop of cudaLaunchKernel calls into the stub libcudart.so.13 the tests build
(tests/gpu/cuda_pattern.c, mode 'loopfor'), or with --api driver of cuLaunchKernel calls
into the stub libcuda.so.1 (mode 'culoopfor'), side by side, each loop for --seconds:
  off         no probe
  empty       empty uprobe + uretprobe on the function (tools/uprobe_floor --ret)
  empty-multi the same attached as the agent attaches them, a multi-uprobe link each
              (tools/uprobe_floor --multi): the kernel's dispatch differs
  bpftel      bpftel-agent running (the GPU module's uprobe + uretprobe on it), default
              settings (run stats sampled: BPF_ENABLE_STATS on 1 s of every 10 s)
  bpftel-ns   bpftel-agent --no-run-stats
  bpftel-shm  bpftel-agent --no-run-stats, gpu_launch_shared_mem = on (the launches' stack
              read of their shared memory: off by default)
Replicates interleave the configurations. Every loop runs as long (default 10 s, the
run-stats period), so that the 1 s with run stats on weighs in the bpftel row what it
weighs in operation (a 100000-call loop fell inside the agent's first window, all of it
with run stats on), and no row's first calls (page faults, map inserts) weigh more.
The target compares bpftel with empty-multi: the uprobe traps are the kernel's, what is
over them is our code, and the agent attaches multi-uprobe links. (Measured on 6.18: a
multi-uprobe link's dispatch is ~45-65 ns cheaper a call than the perf-event uprobe's,
so against empty, the higher floor, the ratio would flatter the agent; both shown.)

  tools/bench/bench_cuda.py [--api runtime|driver] [--replicates 10] [--seconds 10]
                            [--build build]

Run as root after tools/dev.sh test."""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import ci90  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration"))
from test_gpu import NPROBES, NPROBES_DRIVER  # noqa: E402



def cli_json(cli, sock, *args):
    res = subprocess.run([cli, "--socket", sock, *args, "--json"], capture_output=True,
                         text=True)
    return json.loads(res.stdout) if res.returncode == 0 else None


def run_loop(pattern, stub, calls, ready=None, mode="loop"):
    """Start the loop, call ready(pid) until true, then let it run; returns ns/call."""
    proc = subprocess.Popen([pattern, stub, mode, str(calls)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline().split()[1])
    deadline = time.monotonic() + 15
    while ready and not ready(pid):
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("bench_cuda: the agent did not attach to the stub")
        time.sleep(0.02)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    ns = float(proc.stdout.readline())
    proc.stdout.readline()  # done
    proc.stdin.close()
    proc.wait()
    return ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", choices=("runtime", "driver"), default="runtime")
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10,
                    help="each loop's length (default 10 s: the run-stats period)")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "build"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_cuda: run as root")
    build = os.path.abspath(args.build)
    agent, cli = f"{build}/user/bpftel-agent", f"{build}/tools/bpftel"
    pattern = f"{build}/tests/cuda_pattern"
    # The library, the function, cuda_pattern's loop mode, and the GPU module's probe
    # points on that library (entry + return per function it probes there).
    stub, func, mode, nprobes = {
        "runtime": (f"{build}/tests/stub-cuda/libcudart.so.13", "cudaLaunchKernel", "loopfor",
                    NPROBES),
        # Less the 2 of the stub's alias (cuMemcpyHtoD_v2_ptds), folded.
        "driver": (f"{build}/tests/stub-cuda/libcuda.so.1", "cuLaunchKernel", "culoopfor",
                   NPROBES_DRIVER - 2),
    }[args.api]
    tmp = tempfile.mkdtemp(prefix="bpftel-bench-")
    atexit.register(shutil.rmtree, tmp, True)
    sock = os.path.join(tmp, "s.sock")

    def attached(pid):
        libs = cli_json(cli, sock, "libs")
        return libs and any(r["module"] == "gpu" and pid in r["pids"] and
                            r["attached"] == nprobes for r in libs["libs"])

    shm_conf = os.path.join(os.path.dirname(sock), "shm.conf")
    with open(shm_conf, "w") as f:
        f.write("gpu_launch_shared_mem = on\n")
    res = {"off": [], "empty": [], "empty-multi": [], "bpftel": [], "bpftel-ns": [],
           "bpftel-shm": []}
    enter_ns = ret_ns = runs = 0
    for _ in range(args.replicates):
        res["off"].append(run_loop(pattern, stub, args.seconds, mode=mode))

        for cfg, how in (("empty", "--ret"), ("empty-multi", "--multi")):
            floor = subprocess.Popen([f"{build}/tools/uprobe_floor", stub, func, how],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
            if floor.stdout.readline().strip() != "ready":
                sys.exit(f"bench_cuda: uprobe_floor {how} did not attach")
            res[cfg].append(run_loop(pattern, stub, args.seconds, mode=mode))
            floor.stdin.close()
            floor.wait()

        for cfg, extra in (("bpftel", []), ("bpftel-ns", ["--no-run-stats"]),
                           ("bpftel-shm", ["--no-run-stats", "-c", shm_conf])):
            proc = subprocess.Popen([agent, "--socket", sock, "--metrics-addr", "127.0.0.1:0", "-q", *extra],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                res[cfg].append(run_loop(pattern, stub, args.seconds, attached, mode))
                if cfg == "bpftel":
                    progs = {p["name"]: p for p in cli_json(cli, sock, "stats")["programs"]}
                    e, r = progs.get("gpu_uprobe"), progs.get("gpu_uretprobe")
                    if e and r:
                        runs += e["run_cnt"]
                        enter_ns += e["run_time_ns"]
                        ret_ns += r["run_time_ns"]
            finally:
                proc.terminate()
                proc.wait()

    print(f"cuda_calls: {func} on the stub {os.path.basename(stub)}, loops of "
          f"{args.seconds:g} s, {args.replicates} interleaved replicates")
    print(f"{'config':<11} {'ns/call':>9} {'90% CI':>10}  {'vs empty':>9} {'90% CI':>10}"
          f"  {'vs multi':>9} {'90% CI':>10}  verdict (<= 1.15x empty-multi)")
    for cfg in res:
        m, h = ci90(res[cfg])
        line = f"{cfg:<11} {m:9.1f} {'+/- %.1f' % h:>10}"
        if cfg.startswith("bpftel") or cfg == "empty-multi":
            rm, rh = ci90([a / b for a, b in zip(res[cfg], res["empty"])])
            line += f"  {rm:9.3f} {'+/- %.3f' % rh:>10}"
        if cfg.startswith("bpftel"):
            # The verdict against the floor of the agent's own mechanism (multi-uprobe
            # links): against the perf-event floor, dearer, it would flatter us.
            rm, rh = ci90([a / b for a, b in zip(res[cfg], res["empty-multi"])])
            verdict = "met" if rm + rh <= 1.15 else ("within noise" if rm - rh <= 1.15
                                                     else "MISSED")
            line += f"  {rm:9.3f} {'+/- %.3f' % rh:>10}  {verdict}"
        print(line)
    if runs:
        print(f"bpftel BPF cost per call (sampled run stats): entry {enter_ns / runs:.0f} ns, "
              f"return {ret_ns / runs:.0f} ns")


if __name__ == "__main__":
    main()
