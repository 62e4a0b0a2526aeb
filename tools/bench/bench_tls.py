#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tls experiments: what the USM module adds to TLS traffic.

tls_calls: tools/bench/tls_loop.py (a TLS client and server in one process over memory
BIOs: 2 SSL_write_ex + 2 SSL_read_ex per request/response pair), side by side:
  off      no probe
  empty    empty uprobes + uretprobes on SSL_write_ex and SSL_read_ex (tools/uprobe_floor)
  bpftel   bpftel-agent running (the USM module's probes on the same symbols)
tls_requests: requests/s of local HTTPS (one curl process fetching R URLs one after the
other from tests/integration/http_server.py, a new TLS connection each: HTTP/1.0), agent
off vs on. Replicates interleave the configurations.

  tools/bench/bench_tls.py [--replicates 8] [--pairs 20000] [--requests 200] [--build build]

Run as root after tools/dev.sh test."""
import argparse
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import ci90  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"


def cli_json(cli, sock, *args):
    res = subprocess.run([cli, "--socket", sock, *args, "--json"], capture_output=True,
                         text=True)
    return json.loads(res.stdout) if res.returncode == 0 else None


def tls_loop(cert, key, pairs, ready=None):
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "tls_loop.py"), cert, key,
                             str(pairs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    proc.stdout.readline()
    deadline = time.monotonic() + 15
    while ready and not ready(proc.pid):
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("bench_tls: the agent did not attach")
        time.sleep(0.02)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    ns = float(proc.stdout.readline())
    proc.wait()
    return ns


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def requests_per_s(port, n):
    urls = [f"https://127.0.0.1:{port}/items/{i % 50}" for i in range(n)]
    t0 = time.perf_counter()
    subprocess.run(["curl", "-sk", *urls], check=True, stdout=subprocess.DEVNULL)
    return n / (time.perf_counter() - t0)


def start_agent(agent, cli, sock):
    proc = subprocess.Popen([agent, "--socket", sock, "--metrics-addr", "127.0.0.1:0", "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(300):
        if cli_json(cli, sock, "modules"):
            return proc
        time.sleep(0.05)
    proc.kill()
    sys.exit("bench_tls: the agent did not come up")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_tls: run as root")
    build = os.path.abspath(args.build)
    agent, cli = f"{build}/user/bpftel-agent", f"{build}/tools/bpftel"
    tmp = tempfile.mkdtemp(prefix="bpftel-bench-tls-")
    atexit.register(shutil.rmtree, tmp, True)
    sock = os.path.join(tmp, "s.sock")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    www = os.path.join(tmp, "www", "items")
    os.makedirs(www)
    for i in range(50):
        with open(os.path.join(www, str(i)), "w") as f:
            f.write("item\n")
    port = free_port()
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "integration",
                                                            "http_server.py"), str(port),
                               os.path.dirname(www), cert, key], stdout=subprocess.PIPE,
                              text=True)
    server.stdout.readline()

    def attached(pid):
        libs = cli_json(cli, sock, "libs")
        return libs and any(r["module"] == "usm" and r["lib"] == "libssl" and
                            r["attached"] >= 4 and pid in r["pids"] for r in libs["libs"])

    calls = {"off": [], "empty": [], "bpftel": []}
    rps = {"off": [], "bpftel": []}
    try:
        for _ in range(args.replicates):
            calls["off"].append(tls_loop(cert, key, args.pairs))
            rps["off"].append(requests_per_s(port, args.requests))
            floors = []
            for sym in ("SSL_write_ex", "SSL_read_ex"):
                f = subprocess.Popen([f"{build}/tools/uprobe_floor", LIBSSL, sym, "--ret"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                if f.stdout.readline().strip() != "ready":
                    sys.exit("bench_tls: uprobe_floor did not attach")
                floors.append(f)
            calls["empty"].append(tls_loop(cert, key, args.pairs))
            for f in floors:
                f.stdin.close()
                f.wait()
            proc = start_agent(agent, cli, sock)
            try:
                calls["bpftel"].append(tls_loop(cert, key, args.pairs, attached))
                rps["bpftel"].append(requests_per_s(port, args.requests))
            finally:
                proc.terminate()
                proc.wait()
    finally:
        server.kill()
        server.wait()

    print(f"tls_calls: {args.pairs} request/response pairs over memory BIOs "
          f"(2 SSL_write_ex + 2 SSL_read_ex each), {args.replicates} interleaved replicates")
    print(f"{'config':<8} {'ns/pair':>9} {'90% CI':>10}  {'vs empty':>9} {'90% CI':>10}"
          f"  verdict (<= 1.15x empty)")
    for cfg, vals in calls.items():
        m, h = ci90(vals)
        line = f"{cfg:<8} {m:9.0f} {'+/- %.0f' % h:>10}"
        if cfg == "bpftel":
            rm, rh = ci90([a / b for a, b in zip(vals, calls["empty"])])
            verdict = "met" if rm + rh <= 1.15 else ("within noise" if rm - rh <= 1.15
                                                     else "MISSED")
            line += f"  {rm:9.3f} {'+/- %.3f' % rh:>10}  {verdict}"
        print(line)
    print(f"\ntls_requests: {args.requests} HTTPS requests (curl, one connection each) per "
          f"replicate")
    m_off, h_off = ci90(rps["off"])
    m_on, h_on = ci90(rps["bpftel"])
    rm, rh = ci90([a / b for a, b in zip(rps["bpftel"], rps["off"])])
    print(f"off      {m_off:8.1f} req/s +/- {h_off:.1f}")
    print(f"bpftel   {m_on:8.1f} req/s +/- {h_on:.1f}   ratio on/off {rm:.3f} +/- {rh:.3f}")


if __name__ == "__main__":
    main()
