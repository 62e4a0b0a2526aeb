#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tls_call_ns of several agent builds side by side: the BPF time per TLS call (both
USM TLS programs' run time over the entry's runs, run_stats = always) of
tools/bench/tls_loop.py's write loop (every call an SSL_write_ex of an HTTP request)
and request/response loop (2 SSL_write_ex + 2 SSL_read_ex per pair), replicates
interleaved, the order rotating. For cutting the programs apart: build variants of
bpf/lib/usm_tls.h (each one's bpftel-agent and bpftel in DIR/user and DIR/tools, as a
build directory has them) and compare them with the build as it is.

  tools/bench/bench_tls_cost.py build,/tmp/variant1,... [--replicates 3] [--writes 50000]

Run as root after tools/dev.sh test."""
import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_tls_write as tw  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", help="comma-separated build directories")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--writes", type=int, default=50000)
    a = ap.parse_args()
    builds = a.builds.split(",")
    tmp = tempfile.mkdtemp(prefix="bench_tls_cost.")
    atexit.register(shutil.rmtree, tmp, True)
    cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    ns = {b: {"write": [], "pairs": []} for b in builds}
    for r in range(a.replicates):
        for b in builds[r % len(builds):] + builds[:r % len(builds)]:
            ag = tw.Agent(b, tmp, "run_stats = always\n")
            try:
                before = ag.cost()
                tw.loop(cert, key, a.writes, "write", ag.attached)
                mid = ag.cost()
                tw.loop(cert, key, a.writes // 4, "pairs", ag.attached)
                ns[b]["write"].append(tw.ns_per_call(before, mid))
                ns[b]["pairs"].append(tw.ns_per_call(mid, ag.cost()))
            finally:
                ag.stop()
    print(f"BPF ns per TLS call (run_stats = always), {a.replicates} interleaved replicates")
    print(f"{'build':40s} {'write loop':>18s} {'request/response':>18s}")
    for b in builds:
        cells = []
        for k in ("write", "pairs"):
            v = ns[b][k]
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            cells.append(f"{statistics.mean(v):8.0f} +/- {sd:5.0f}")
        print(f"{b:40s} {cells[0]:>18s} {cells[1]:>18s}")


if __name__ == "__main__":
    main()
