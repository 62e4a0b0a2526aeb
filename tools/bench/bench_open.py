#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""open_loop experiment: an open+close loop of a non-library file with no tracer, with
bpftel-agent running (all it loads today), and with libbpf-tools' opensnoop as the
peer. Replicates are interleaved (off, bpftel, opensnoop, off, ...); each ratio is
taken against the same replicate's 'off' run. Also reports the agent's own BPF cost
per openat (BPF_ENABLE_STATS: avg ns of the enter and exit programs).

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

T90 = {2: 6.314, 3: 2.920, 4: 2.353, 5: 2.132, 6: 2.015, 7: 1.943, 8: 1.895, 9: 1.860,
       10: 1.833, 11: 1.812, 12: 1.796, 15: 1.761, 20: 1.729, 30: 1.699}


def ci90(values):
    n = len(values)
    mean = statistics.mean(values)
    if n < 2:
        return mean, 0.0
    t = T90.get(n) or T90[min(T90, key=lambda k: abs(k - n))]
    return mean, t * statistics.stdev(values) / math.sqrt(n)


def loop(binary, iterations):
    out = subprocess.run([binary, str(iterations)], check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip())


def start_agent(agent, cli, sock):
    proc = subprocess.Popen([agent, "--socket", sock, "-q"], stdout=subprocess.DEVNULL,
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

    res = {"off": [], "bpftel": [], "opensnoop": []}
    runs = time_ns = 0
    for _ in range(args.replicates):
        res["off"].append(loop(loop_bin, args.iterations))

        proc = start_agent(agent, cli, sock)
        before = prog_cost(cli, sock)
        res["bpftel"].append(loop(loop_bin, args.iterations))
        after = prog_cost(cli, sock)
        for name in ("shlib_enter_openat", "shlib_exit_openat"):
            runs += after[name][0] - before[name][0] if name == "shlib_exit_openat" else 0
            time_ns += after[name][1] - before[name][1]
        proc.terminate()
        proc.wait()

        snoop = subprocess.Popen(["opensnoop"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        res["opensnoop"].append(loop(loop_bin, args.iterations))
        snoop.terminate()
        snoop.wait()

    print(f"open_loop: open+close of /etc/hostname, {args.iterations} iterations, "
          f"{args.replicates} interleaved replicates")
    print(f"{'config':<10} {'ns/iter':>9} {'ratio to off':>13} {'90% CI':>10}  verdict (<= 1.05x)")
    m, h = ci90(res["off"])
    print(f"{'off':<10} {m:9.1f} {1.0:13.3f} {'':>10}")
    for cfg in ("bpftel", "opensnoop"):
        ratios = [a / b for a, b in zip(res[cfg], res["off"])]
        rm, rh = ci90(ratios)
        verdict = "met" if rm + rh <= 1.05 else ("within noise" if rm - rh <= 1.05 else "MISSED")
        print(f"{cfg:<10} {statistics.mean(res[cfg]):9.1f} {rm:13.3f} {'+/- %.3f' % rh:>10}  "
              f"{verdict if cfg == 'bpftel' else '(peer)'}")
    print(f"bpftel BPF cost per openat (enter + exit, BPF_ENABLE_STATS): "
          f"{time_ns / max(runs, 1):.0f} ns  (target <= 150 ns)")


if __name__ == "__main__":
    main()
