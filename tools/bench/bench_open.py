#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""open_loop experiment: an open+close loop of a non-library file, side by side in one
run, replicates interleaved (the order rotates each replicate):

  off       no tracer
  floor     tools/tp_floor: an empty program on sys_exit_openat, the watcher's own
            tracepoint: no syscall-tracepoint watcher can cost less
  bpftel    bpftel-agent as by default: the watcher, the GPU and USM modules, run stats
            sampled (BPF_ENABLE_STATS on 1 s of every 10 s)
  always    bpftel-agent with run_stats = always (exact run counts: stats always on)
  opensnoop libbpf-tools' opensnoop, output discarded (the peer)

Each loop runs for --seconds (10 by default: a whole duty cycle of sampled run stats,
so that it holds as much of a window as any other 10 s); each ratio is taken against
the same replicate's run of the row it is compared with. Target: bpftel <= 1.02x the
floor. Also the agent's BPF cost per openat, from the always run (BPF_ENABLE_STATS:
run_time_ns / run_cnt of the program on openat's exit).

  tools/bench/bench_open.py [--replicates 10] [--seconds 10] [--build build]

Run as root after tools/dev.sh test (which builds everything). Installs
libbpf-tools with apt-get if opensnoop is missing."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import ci90  # noqa: E402

CONFIGS = ("off", "floor", "bpftel", "always", "opensnoop")
TARGET = 1.02  # bpftel / floor


def loop(binary, seconds):
    out = subprocess.run([binary, "-d", str(seconds)], check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip())


def start_agent(agent, cli, sock, conf):
    proc = subprocess.Popen([agent, "--socket", sock, "--metrics-addr", "127.0.0.1:0", "-q",
                             "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if subprocess.run([cli, "--socket", sock, "modules"],
                          capture_output=True).returncode == 0:
            return proc
        time.sleep(0.05)
    proc.kill()
    sys.exit("bench_open: the agent did not come up")


def prog_cost(cli, sock):
    stats = json.loads(subprocess.run([cli, "--socket", sock, "stats", "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    return {p["name"]: (p["run_cnt"], p["run_time_ns"]) for p in stats["programs"]}


def measure(build, replicates, seconds, tmp, log=None):
    """{config: [ns/iter per replicate]}, and the always run's (runs, ns) per openat."""
    agent, cli = f"{build}/user/bpftel-agent", f"{build}/tools/bpftel"
    loop_bin = f"{build}/tools/open_loop"
    if not shutil.which("opensnoop"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "libbpf-tools"], check=True,
                       stdout=subprocess.DEVNULL)
    sock = os.path.join(tmp, "open.sock")
    confs = {"bpftel": os.path.join(tmp, "sampled.conf"),
             "always": os.path.join(tmp, "always.conf")}
    with open(confs["bpftel"], "w") as f:
        f.write("# the defaults\n")
    with open(confs["always"], "w") as f:
        f.write("run_stats = always\n")
    res = {c: [] for c in CONFIGS}
    cost = [0, 0]

    def run_agent(cfg):
        proc = start_agent(agent, cli, sock, confs[cfg])
        time.sleep(1.0)  # its start-up (the /proc scan, attaches) is not the loop's
        before = prog_cost(cli, sock) if cfg == "always" else None
        res[cfg].append(loop(loop_bin, seconds))
        if before:
            after = prog_cost(cli, sock)
            name = "shlib_fexit_open" if "shlib_fexit_open" in after else "shlib_exit_openat"
            cost[0] += after[name][0] - before[name][0]
            cost[1] += after[name][1] - before[name][1]
        proc.terminate()
        proc.wait()

    def run_floor(_):
        floor = subprocess.Popen([f"{build}/tools/tp_floor"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        if floor.stdout.readline().strip() != "ready":
            sys.exit("bench_open: tp_floor did not attach")
        res["floor"].append(loop(loop_bin, seconds))
        floor.stdin.close()
        floor.wait()

    def run_snoop(_):
        snoop = subprocess.Popen(["opensnoop"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        res["opensnoop"].append(loop(loop_bin, seconds))
        snoop.terminate()
        snoop.wait()

    runners = {"off": lambda _: res["off"].append(loop(loop_bin, seconds)),
               "floor": run_floor, "bpftel": run_agent, "always": run_agent,
               "opensnoop": run_snoop}
    for r in range(replicates):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for cfg in order:
            runners[cfg](cfg)
        if log:
            print(f"bench_open: replicate {r + 1}/{replicates}: " +
                  ", ".join(f"{c} {res[c][-1]:.0f}" for c in CONFIGS), file=log, flush=True)
    return res, cost


def ratio(res, cfg, base):
    return ci90([a / b for a, b in zip(res[cfg], res[base])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "build"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_open: run as root")
    tmp = tempfile.mkdtemp(prefix="bpftel-bench-")
    try:
        res, cost = measure(os.path.abspath(args.build), args.replicates, args.seconds, tmp,
                            sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"open_loop: open+close of /etc/hostname for {args.seconds:g} s per run, "
          f"{args.replicates} interleaved replicates")
    print(f"{'config':<10} {'ns/iter':>9} {'vs off':>7} {'90% CI':>10} {'vs floor':>9} "
          f"{'90% CI':>10}  verdict (<= {TARGET}x floor)")
    for cfg in CONFIGS:
        m = statistics.mean(res[cfg])
        ro, ho = ratio(res, cfg, "off")
        rf, hf = ratio(res, cfg, "floor")
        verdict = {"off": "", "floor": "(floor)", "opensnoop": "(peer)"}.get(cfg)
        if verdict is None:
            verdict = ("met" if rf + hf <= TARGET else
                       "within noise" if rf - hf <= TARGET else
                       f"MISSED by {100 * (rf - TARGET):.1f} points")
        print(f"{cfg:<10} {m:9.1f} {ro:7.3f} {'+/- %.3f' % ho:>10} {rf:9.3f} "
              f"{'+/- %.3f' % hf:>10}  {verdict}")
    print(f"bpftel BPF cost per openat (its exit program, run_stats = always): "
          f"{cost[1] / max(cost[0], 1):.0f} ns")


if __name__ == "__main__":
    main()
