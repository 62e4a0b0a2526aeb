#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""open_loop experiment: an open+close loop of a non-library file with no tracer, with
bpftel-agent running (all it loads today; as by default, with BPF_ENABLE_STATS on, and
with --no-run-stats), and with libbpf-tools' opensnoop as the peer. Replicates are
interleaved (off, bpftel, bpftel-nostats, opensnoop, off, ...); each ratio is taken
against the same replicate's 'off' run. Also reports the agent's own BPF cost per
openat (BPF_ENABLE_STATS: run_time_ns / run_cnt of the program on openat's exit).
The floor: tools/tp_floor attaches an empty program to the same tracepoint (with and
without BPF_ENABLE_STATS); no syscall-tracepoint watcher can cost less than it.

  tools/bench/bench_open.py [--replicates 10] [--iterations 100000] [--build build]

Run as root after tools/dev.sh test (which builds everything). Installs
libbpf-tools with apt-get if opensnoop is missing."""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import ci90  # noqa: E402



def loop(binary, iterations):
    out = subprocess.run([binary, str(iterations)], check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip())


def start_agent(agent, cli, sock, *extra):
    proc = subprocess.Popen([agent, "--socket", sock, "--metrics-addr", "127.0.0.1:0", "-q", *extra], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(300):
        if subprocess.run([cli, "--socket", sock, "stats"], capture_output=True).returncode == 0:
            return proc
        time.sleep(0.05)
    proc.kill()
    sys.exit("bench_open: the agent did not come up")


def prog_cost(cli, sock):
    stats = json.loads(subprocess.run([cli, "--socket", sock, "stats", "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    return {p["name"]: (p["run_cnt"], p["run_time_ns"]) for p in stats["programs"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=100000)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "build"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_open: run as root")
    build = os.path.abspath(args.build)
    agent, cli = f"{build}/user/bpftel-agent", f"{build}/tools/bpftel"
    loop_bin = f"{build}/tools/open_loop"
    if not shutil.which("opensnoop"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "libbpf-tools"], check=True,
                       stdout=subprocess.DEVNULL)
    sock = os.path.join(tempfile.mkdtemp(prefix="bpftel-bench-"), "s.sock")

    res = {"off": [], "bpftel": [], "bpftel-nostats": [], "empty-tp": [], "empty-tp-stats": [],
           "opensnoop": []}
    runs = time_ns = 0
    for _ in range(args.replicates):
        res["off"].append(loop(loop_bin, args.iterations))

        proc = start_agent(agent, cli, sock)
        before = prog_cost(cli, sock)
        res["bpftel"].append(loop(loop_bin, args.iterations))
        after = prog_cost(cli, sock)
        name = "shlib_fexit_open" if "shlib_fexit_open" in after else "shlib_exit_openat"
        runs += after[name][0] - before[name][0]
        time_ns += after[name][1] - before[name][1]
        proc.terminate()
        proc.wait()

        proc = start_agent(agent, cli, sock, "--no-run-stats")
        res["bpftel-nostats"].append(loop(loop_bin, args.iterations))
        proc.terminate()
        proc.wait()

        for cfg, extra in (("empty-tp", []), ("empty-tp-stats", ["--run-stats"])):
            floor = subprocess.Popen([f"{build}/tools/tp_floor", *extra], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            if floor.stdout.readline().strip() != "ready":
                sys.exit("bench_open: tp_floor did not attach")
            res[cfg].append(loop(loop_bin, args.iterations))
            floor.stdin.close()
            floor.wait()

        snoop = subprocess.Popen(["opensnoop"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        res["opensnoop"].append(loop(loop_bin, args.iterations))
        snoop.terminate()
        snoop.wait()

    print(f"open_loop: open+close of /etc/hostname, {args.iterations} iterations, "
          f"{args.replicates} interleaved replicates")
    print(f"{'config':<15} {'ns/iter':>9} {'ratio to off':>13} {'90% CI':>10}  verdict (<= 1.05x)")
    m, h = ci90(res["off"])
    print(f"{'off':<15} {m:9.1f} {1.0:13.3f} {'':>10}")
    for cfg in ("bpftel", "bpftel-nostats", "empty-tp", "empty-tp-stats", "opensnoop"):
        ratios = [a / b for a, b in zip(res[cfg], res["off"])]
        rm, rh = ci90(ratios)
        verdict = "met" if rm + rh <= 1.05 else ("within noise" if rm - rh <= 1.05 else "MISSED")
        print(f"{cfg:<15} {statistics.mean(res[cfg]):9.1f} {rm:13.3f} {'+/- %.3f' % rh:>10}  "
              f"{verdict if cfg.startswith('bpftel') else '(floor)' if 'tp' in cfg else '(peer)'}")
    print(f"bpftel BPF cost per openat (its exit program, BPF_ENABLE_STATS): "
          f"{time_ns / max(runs, 1):.0f} ns  (target <= 150 ns)")


if __name__ == "__main__":
    main()
