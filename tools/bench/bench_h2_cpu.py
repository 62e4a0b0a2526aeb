#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The agent's own CPU while it decodes HTTP/2: h2load -n N -c 4 -m 10 against nghttpd
(both the system OpenSSL), RUNS times, with the agent of BUILD (defaults); prints the
wall time, the agent's CPU time (utime + stime of /proc/PID/stat) and nghttpd's over
those runs. The share of a core the agent takes is what h2load and nghttpd lose on a
machine they fill (BENCHMARKS.md, h2load). Run as root after tools/dev.sh test.

    tools/bench/bench_h2_cpu.py [--build build] [--runs 3] [-n 20000]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=20000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bpftel-h2cpu-")
    srv, port = bench.start_nghttpd(tmp)
    ag = None
    try:
        ag = bench.Agent(args.build, tmp)
        bench.usm_on_libssl(ag)
        a0, s0, t0 = cpu_s(ag.proc.pid), cpu_s(srv.pid), time.monotonic()
        rps = [bench.h2load_rps(port, args.n) for _ in range(args.runs)]
        a1, s1, t1 = cpu_s(ag.proc.pid), cpu_s(srv.pid), time.monotonic()
        print(f"{args.runs} x h2load -n {args.n}: wall {t1 - t0:.2f} s, agent CPU "
              f"{a1 - a0:.2f} s ({(a1 - a0) / (t1 - t0) * 100:.0f} % of a core), nghttpd CPU "
              f"{s1 - s0:.2f} s; req/s {', '.join(f'{r:.0f}' for r in rps)}")
    finally:
        if ag:
            ag.stop()
        srv.kill()
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
