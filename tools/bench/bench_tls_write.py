#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tls_write_loop: what a TLS write costs the process that makes it, side by side in one
run (replicates interleave the configurations, the order rotating):

  off       tools/bench/tls_loop.py's write loop alone: SSL_write_ex of an HTTP request
            on the real libssl over memory BIOs, as fast as Python can call it
  bpftrace  under bpftrace's bare uprobe + uretprobe pair on SSL_write_ex that only
            counts (the peer: two traps per call); skipped, with a note, without bpftrace
  bpftel    under bpftel-agent as by default (the USM module on every libssl function)
  always    under bpftel-agent with run_stats = always: its BPF run time per TLS call

and the BPF time per TLS call of the request/response loop (2 SSL_write_ex + 2
SSL_read_ex per pair: the read side, entry and return) with run_stats = always.
Then what real HTTPS requests cost (run_stats = always): curl fetching R URLs from
tests/integration/http_server.py (both OpenSSL), and gnutls-cli (GnuTLS) against it:
the USM programs' runs per request (entry, return) and BPF ns per probed call.
Targets (issue 16): bpftel >= 1.5x the bpftrace pair's rate; <= 300 ns BPF per call.

  tools/bench/bench_tls_write.py [--replicates 5] [--writes 200000] [--requests 200]
                                 [--build build]

Run as root after tools/dev.sh test."""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
from stats import ci90  # noqa: E402

LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"
CONFIGS = ["off", "bpftrace", "bpftel", "always"]
PROGS = ("usm_tls_uprobe", "usm_tls_uretprobe")


def loop(cert, key, n, mode, ready=None):
    """ns per write (mode "write") or per request/response pair (mode "pairs")."""
    argv = [sys.executable, os.path.join(HERE, "tls_loop.py"), cert, key, str(n)]
    proc = subprocess.Popen(argv + (["write"] if mode == "write" else []),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    deadline = time.monotonic() + 15
    while ready and not ready(proc.pid):
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("bench_tls_write: the agent did not attach")
        time.sleep(0.02)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    ns = float(proc.stdout.readline())
    proc.wait()
    return ns


class Agent:
    def __init__(self, build, tmp, conf_text):
        self.cli = f"{build}/tools/bpftel"
        self.sock = os.path.join(tmp, f"w{time.monotonic_ns()}.sock")
        conf = os.path.join(tmp, f"w{time.monotonic_ns()}.conf")
        with open(conf, "w") as f:
            f.write(conf_text)
        self.proc = subprocess.Popen([f"{build}/user/bpftel-agent", "--socket", self.sock,
                                      "--metrics-addr", "127.0.0.1:0", "-q", "-c", conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            if self.json("modules"):
                return
            time.sleep(0.05)
        self.stop()
        sys.exit("bench_tls_write: the agent did not come up")

    def json(self, *args):
        r = subprocess.run([self.cli, "--socket", self.sock, *args, "--json"],
                           capture_output=True, text=True)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def attached(self, pid):
        libs = self.json("libs")
        return libs and any(r["module"] == "usm" and r["lib"] == "libssl" and
                            r["attached"] >= 4 and pid in r["pids"] for r in libs["libs"])

    def cost(self):
        """{program: (runs, run ns)} of the TLS programs."""
        st = self.json("stats")
        return {p["name"]: (p["run_cnt"], p["run_time_ns"]) for p in st["programs"]
                if p["name"] in PROGS}

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def ns_per_call(before, after):
    """BPF ns per TLS call: both programs' run time over the entry's runs (every call
    runs the entry program once; these loops make no other probed call)."""
    calls = after[PROGS[0]][0] - before[PROGS[0]][0]
    ns = sum(after[p][1] - before[p][1] for p in PROGS if p in after)
    return ns / calls if calls else float("nan")


BT_SCRIPT = (f"uprobe:{LIBSSL}:SSL_write_ex {{ @calls = count(); }} "
             f"uretprobe:{LIBSSL}:SSL_write_ex {{ @returns = count(); }} "
             "BEGIN { printf(\"ready\\n\"); }")


def under_bpftrace(cert, key, n):
    """ns per write under the bpftrace pair; checks that it saw every call."""
    bt = subprocess.Popen(["bpftrace", "-e", BT_SCRIPT], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    for line in bt.stdout:  # BEGIN fires once every probe is attached
        if line.strip() == "ready":
            break
    else:
        sys.exit("bench_tls_write: bpftrace did not start")
    ns = loop(cert, key, n, "write")
    bt.send_signal(2)
    out = bt.communicate()[0]
    seen = {m[0]: int(m[1]) for m in re.findall(r"@(\w+): (\d+)", out)}
    if seen.get("calls", 0) < n or seen.get("returns", 0) < n:
        sys.exit(f"bench_tls_write: bpftrace saw {seen}, expected >= {n} each")
    return ns


def measure(build, replicates, writes, tmp, log=None):
    """{config: [writes/s]}, {"write": [ns], "pairs": [ns]} BPF per TLS call, and a
    note when the bpftrace peer is skipped."""
    cert, key = os.path.join(tmp, "wc.pem"), os.path.join(tmp, "wk.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    skip = None if shutil.which("bpftrace") else \
        "bpftrace missing: peer skipped (tools/dev.sh installs it)"
    configs = [c for c in CONFIGS if not (skip and c == "bpftrace")]
    rate = {c: [] for c in configs}
    cost = {"write": [], "pairs": []}

    def run_agent(cfg):
        ag = Agent(build, tmp, "run_stats = always\n" if cfg == "always" else "# defaults\n")
        try:
            before = ag.cost() if cfg == "always" else None
            rate[cfg].append(1e9 / loop(cert, key, writes, "write", ag.attached))
            if before:
                mid = ag.cost()
                cost["write"].append(ns_per_call(before, mid))
                loop(cert, key, writes // 4, "pairs", ag.attached)
                cost["pairs"].append(ns_per_call(mid, ag.cost()))
        finally:
            ag.stop()

    runners = {"off": lambda c: rate[c].append(1e9 / loop(cert, key, writes, "write")),
               "bpftrace": lambda c: rate[c].append(1e9 / under_bpftrace(cert, key, writes)),
               "bpftel": run_agent, "always": run_agent}
    for r in range(replicates):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for cfg in order:
            runners[cfg](cfg)
        if log:
            print(f"bench_tls_write: replicate {r + 1}/{replicates}: " +
                  ", ".join(f"{c} {rate[c][-1] / 1000:.1f}k/s" for c in configs) +
                  f"; BPF ns/call write {cost['write'][-1]:.0f}, pairs {cost['pairs'][-1]:.0f}",
                  file=log, flush=True)
    return rate, cost, skip


def requests_cost(build, tmp, n, log=None):
    """{client: (entry runs, return runs) per request, BPF ns per probed call}."""
    cert, key = os.path.join(tmp, "rc.pem"), os.path.join(tmp, "rk.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    www = os.path.join(tmp, "rwww", "items")
    os.makedirs(www, exist_ok=True)
    for i in range(50):
        with open(os.path.join(www, str(i)), "w") as f:
            f.write("item\n")
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "integration",
                                                            "http_server.py"), str(port),
                               os.path.dirname(www), cert, key], stdout=subprocess.PIPE,
                              text=True)
    server.stdout.readline()
    ag = Agent(build, tmp, "run_stats = always\n")
    out = {}
    try:
        deadline = time.monotonic() + 15
        while not ag.attached(server.pid):
            if time.monotonic() > deadline:
                sys.exit("bench_tls_write: the agent did not attach to the server")
            time.sleep(0.02)
        # One request first: curl's libssl attached (a new process each run).
        subprocess.run(["curl", "-sk", f"https://127.0.0.1:{port}/items/0"], check=True,
                       stdout=subprocess.DEVNULL)
        clients = {"curl": lambda: subprocess.run(
            ["curl", "-sk", *[f"https://127.0.0.1:{port}/items/{i % 50}" for i in range(n)]],
            check=True, stdout=subprocess.DEVNULL)}
        if shutil.which("gnutls-cli"):
            def gnutls():
                for i in range(n // 10):
                    subprocess.run(["gnutls-cli", "--insecure", "--crlf", "-p", str(port),
                                    "127.0.0.1"], input=f"GET /items/{i % 50} HTTP/1.1\n"
                                   "Host: localhost\nConnection: close\n\n".encode(),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   timeout=30)
            clients["gnutls-cli"] = gnutls
        for name, run in clients.items():
            reqs = n if name == "curl" else n // 10
            before = ag.cost()
            run()
            time.sleep(0.2)  # the server's last response write
            after = ag.cost()
            runs = [(after[p][0] - before[p][0]) / reqs for p in PROGS]
            out[name] = (runs, ns_per_call(before, after))
            if log:
                print(f"bench_tls_write: {name}: {runs[0]:.2f} entry + {runs[1]:.2f} return "
                      f"runs per request, {out[name][1]:.0f} BPF ns per call", file=log,
                      flush=True)
    finally:
        ag.stop()
        server.kill()
        server.wait()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=5)
    ap.add_argument("--writes", type=int, default=200000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_tls_write: run as root")
    tmp = tempfile.mkdtemp(prefix="bpftel-bench-tlsw-")
    try:
        rate, cost, skip = measure(os.path.abspath(args.build), args.replicates, args.writes,
                                   tmp, sys.stderr)
        reqs = requests_cost(os.path.abspath(args.build), tmp, args.requests, sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tls_write_loop: {args.writes} SSL_write_ex per run, {args.replicates} "
          "interleaved replicates")
    for cfg, vals in rate.items():
        m, h = ci90(vals)
        print(f"{cfg:<9} {m / 1000:8.1f} k writes/s +/- {h / 1000:.1f}")
    if skip:
        print(skip)
    else:
        m, h = ci90([a / b for a, b in zip(rate["bpftel"], rate["bpftrace"])])
        print(f"bpftel / bpftrace pair: {m:.2f}x +/- {h:.2f} (target >= 1.5x: "
              f"{'met' if m - h >= 1.5 else 'within noise' if m + h >= 1.5 else 'MISSED'})")
    for what, vals in cost.items():
        m, h = ci90(vals)
        print(f"BPF ns per TLS call, {what} loop (run_stats = always): {m:.0f} +/- {h:.0f} "
              f"(target <= 300: {'met' if m + h <= 300 else 'MISSED'})")
    for name, (runs, ns) in reqs.items():
        print(f"HTTPS requests, {name} -> python http.server: {runs[0]:.2f} entry + "
              f"{runs[1]:.2f} return runs per request, {ns:.0f} BPF ns per probed call")


if __name__ == "__main__":
    main()
