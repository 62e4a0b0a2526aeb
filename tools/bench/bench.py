#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""bench.py: every experiment, A/B, one command.

  tools/bench/bench.py [--replicates 10] [--build build] [--only open_loop,idle,...]
                       [--baseline-build DIR | --baseline-rev REV] [--write BENCHMARKS.md]

Per experiment it interleaves A and B replicates (A B A B ...) and prints the means of
A and B, the mean of the per-replicate changes (B - A) / A in % (not the change of the
means: the two differ where replicates vary) with a 90 % confidence interval (Student
t over those changes), and a verdict against an effect-size tolerance of 5 %:
"same" (the interval lies inside +/-5 %), "worse"/"better" (it lies outside), or
"unclear" (it straddles a bound: more replicates would tell).

Experiments (A -> B):
  open_loop     open+close loop ns/iter (10 s runs): no agent -> floor (an empty program on
                the same tracepoint), floor -> agent (defaults: run stats sampled),
                floor -> agent with run_stats = always (target: agent <= +2 % over the
                floor); also opensnoop
  recv_loop     recv(2) on an empty socket, ns/call (5 s runs, tools/recv_loop): no agent
                -> floor (an empty program on sys_enter_recvfrom, USM's tracepoint for
                sessions with their own BIO), floor -> agent with tls_recv_fd = on,
                floor -> the same with run_stats = always (its BPF ns per recvfrom in
                the note)
  tls_requests  HTTPS requests/s (one curl, a TLS connection each; --tls-requests N
                per measurement, 1000 by default): no agent -> agent (target >= 0.97x
                no agent), duty-weighted by configuration (duty_by_config: the N
                requests outlast a run-stats window)
  h2load        HTTP/2 requests/s, h2load -n 20000 -c 4 -m 10 against nghttpd (both the
                system OpenSSL): no agent -> agent, every request checked decoded on both
                sides (target >= 0.9x no agent)
  go_https      Go HTTPS requests/s (tests/go/tlsapp, Go's crypto/tls on both ends), one
                connection each, HTTP/2 and HTTP/1.1: no agent -> agent, every request
                checked counted on both sides (target >= 0.9x no agent); and no agent
                -> the floor (tools/uprobe_floor --go: empty programs on the agent's
                probe points, found by the agent's code), all traps, the entries only
                (the stack checks' JBE, emulated) and Read's RETs only (single-stepped).
                For these three, the agent's rate is duty-weighted (duty_weighted):
                measured once inside a run-stats window and once outside, weighted by
                the time each lasts (1 s and 9 s of every 10 by default); the note
                gives both.
  tls_write_loop SSL_write_ex calls/s of an in-memory TLS write loop (the real libssl):
                bpftrace's bare uprobe+uretprobe pair -> agent (target >= 1.5x the
                pair; no agent in the note; the peer skipped, with a note, without
                bpftrace); BPF ns per TLS call with run_stats = always in that loop, a
                request/response loop and real HTTPS requests (target <= 300 ns), with
                the USM programs' runs per request (bench_tls_write.py)
  gnutls_reads  GnuTLS request/response pairs/s over memory (tools/gnutls_loop: 2
                gnutls_record_send + 2 gnutls_record_recv per pair, each an HTTP
                message): no agent -> agent (duty-weighted), and bpftrace counting on
                gnutls_record_recv's entry and return and gnutls_record_send's entry
                (the peer) -> agent
  cuda_calls    stub cudaLaunchKernel ns/call over one run-stats period (10 s): empty
                uprobe+uretprobe -> agent
  idle          agent PSS (KiB) and CPU (% of one CPU) over 30 s idle, all modules loaded
                (target PSS <= 16 MiB)
  pipeline      ring buffer -> workers events/s at offered loads, and loss
  restart       ms for `bpftel module restart gpu` + `restart usm` (target <= 100 ms)
  restart_links the same with a library in use by each module: per-probe links (the
                kernel without multi-uprobe links, injected) -> multi-uprobe links
  control       `stats` latency p50/p99/max while 50 clients restart modules, and while
                40 idle libraries are swept (target p99 <= 100 ms)
  sigterm       seconds from SIGTERM to exit after 100 restarts, and the agent's links
                left 1 s later (target <= 2 s, 0 links)

With --baseline-build DIR (a build of another revision) or --baseline-rev REV (built
here in a git worktree under build-bench/), A is that build's agent and B this one's,
for every experiment that runs an agent: two builds compared the same way.

Run as root after tools/dev.sh test. Takes about 6 minutes with 10 replicates."""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import bench_control  # noqa: E402
import bench_open  # noqa: E402
import bench_cuda  # noqa: E402
import bench_tls  # noqa: E402
import bench_tls_write  # noqa: E402
from stats import ci90 as _ci90  # noqa: E402

TOLERANCE = 5.0  # %


def ci90(values):
    return _ci90(values, float("inf"))



def verdict(lo, hi, higher_is_better):
    if -TOLERANCE <= lo and hi <= TOLERANCE:
        return "same"
    if lo > TOLERANCE or hi < -TOLERANCE:
        worse = (lo > TOLERANCE) != higher_is_better
        return "worse" if worse else "better"
    return "unclear"


class Agent:
    def __init__(self, build, tmp, extra=(), env=None):
        self.sock = os.path.join(tmp, f"a{time.monotonic_ns()}.sock")
        self.cli = f"{build}/tools/bpftel"
        self.proc = subprocess.Popen([f"{build}/user/bpftel-agent", "--socket", self.sock,
                                      "--metrics-addr", "127.0.0.1:0", "-q", *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})})
        for _ in range(600):
            if self.json("modules"):
                return
            time.sleep(0.05)
        self.stop()
        sys.exit("bench: the agent did not come up")

    def json(self, *args):
        r = subprocess.run([self.cli, "--socket", self.sock, *args, "--json"],
                           capture_output=True, text=True)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run_stats_window(ag):
    """(stats on now, windows closed so far, on fraction) of the agent's sampled run
    stats, or None when they are not sampled."""
    d = ((ag.json("stats") or {}).get("agent") or {}).get("run_stats_detail") or {}
    if d.get("mode") != "sampled":
        return None
    return d["stats_on"], d["windows"], d["on_s"] / d["period_s"]


def duty_weighted(ag, measure, tries=3, prepare=None):
    """A rate measured under the agent as by default, weighted by its run-stats duty.

    By default the agent holds BPF_ENABLE_STATS (two clock reads on every run of every
    BPF program) on_s of every period_s, from its start. A workload of a fraction of a
    second run right after the start lies inside the first window (pessimistic), one run
    later outside any (optimistic). So run it once inside a window and once outside, and
    weight the two rates by the time each state lasts: on * in + (1 - on) * out, the
    rate a long run sees. A run a window's edge crossed is run again. Returns (weighted,
    in window, outside); the last two are None when run stats are not sampled.

    With prepare, each run is prepare() then measure(what prepare returned): what
    prepare does (start a client, wait for its probes) happens before the wait for the
    window, and the run inside one starts at the window's opening, so that as much of
    it as the window lasts is left for the timed part."""
    def wait_for(want_on):
        deadline = time.monotonic() + 60
        while (st := run_stats_window(ag)) and st[0] != want_on:
            if time.monotonic() > deadline:
                sys.exit("bench: the agent's run-stats windows did not come")
            time.sleep(0.02)
        return st

    def once(want_on):
        for _ in range(tries):
            handle = prepare() if prepare else None
            if want_on:
                # Past the window the agent opens as it starts (its config applied,
                # before it answers): a run "inside a window" starts at a window's
                # opening, not in the agent's first second, still attaching.
                wait_for(False)
            st = wait_for(want_on)
            rate = measure(handle) if prepare else measure()
            if st is None:
                return rate, None
            after = run_stats_window(ag)
            if after and after[0] == want_on and after[1] == st[1]:
                return rate, st[2]
        sys.exit(f"bench: none of {tries} runs fitted {'in' if want_on else 'outside'} "
                 "a run-stats window")

    rin, on = once(True)
    if on is None:
        return rin, None, None
    rout, _ = once(False)
    return on * rin + (1 - on) * rout, rin, rout


def agent_rate(args, ag, measure, windows, prepare=None):
    """The agent's rate for a row's B side: one run when two builds are compared (both
    agents alike), else duty-weighted (duty_weighted), what it was made of appended to
    windows (for duty_note)."""
    if args.compare:
        return measure(prepare()) if prepare else measure()
    rate, rin, rout = duty_weighted(ag, measure, prepare=prepare)
    if rin is not None:
        windows.append((rin, rout))
    return rate


def duty_by_config(build, tmp, measure, ready, on_fraction):
    """duty_weighted for a workload longer than a run-stats window: measured under one
    agent with run_stats = always (inside a window, for all of it) and under one with
    run_stats = off (outside), each started then made ready by ready(agent), weighted
    as duty_weighted weights them. Returns (weighted, always, off)."""
    rates = {}
    for mode in ("always", "off"):
        conf = os.path.join(tmp, f"run_stats_{mode}.conf")
        with open(conf, "w") as f:
            f.write(f"run_stats = {mode}\n")
        ag = Agent(build, tmp, extra=("-c", conf))
        try:
            ready(ag)
            rates[mode] = measure()
        finally:
            ag.stop()
    on = on_fraction
    return on * rates["always"] + (1 - on) * rates["off"], rates["always"], rates["off"]


def default_duty(build, tmp):
    """The fraction of the time a default agent holds run stats (run_stats_duty)."""
    ag = Agent(build, tmp)
    try:
        st = run_stats_window(ag)
    finally:
        ag.stop()
    return st[2] if st else 0.0


class Row:
    def __init__(self, name, unit, a_label, b_label, higher_is_better=False, note=""):
        self.name, self.unit, self.a_label, self.b_label = name, unit, a_label, b_label
        self.higher, self.note = higher_is_better, note
        self.a, self.b = [], []

    def result(self):
        ratios = [(b - a) / a * 100 for a, b in zip(self.a, self.b) if a]
        d, h = ci90(ratios) if ratios else (0.0, float("inf"))
        return (statistics.mean(self.a), statistics.mean(self.b), d, h,
                verdict(d - h, d + h, self.higher))


def floor_rows(name, unit, res, notes):
    """A floor experiment's rows from res (ns per iteration by configuration): no agent
    -> the floor, the floor -> the agent, the floor -> the agent with run_stats =
    always; notes: the three rows' notes."""
    rows = []
    for (suffix, a, b), note in zip(((" floor", "off", "floor"), ("", "floor", "bpftel"),
                                     (" always", "floor", "always")), notes):
        row = Row(name + suffix, unit, {"off": "no agent", "floor": "floor"}[a],
                  {"floor": "floor", "bpftel": "agent", "always": "agent always"}[b],
                  note=note)
        row.a, row.b = res[a], res[b]
        rows.append(row)
    return rows


def open_loop(args, a_build, b_build, tmp, reps):
    """Side by side (bench_open.py): no agent, the floor (an empty program on the same
    tracepoint), the agent as by default (run stats sampled), the agent with run_stats =
    always, and opensnoop; 10 s loops, a whole duty cycle of sampled run stats. With a
    baseline, the two builds' agents (defaults) instead."""
    if args.compare:
        loop = f"{b_build}/tools/open_loop"
        row = Row("open_loop", "ns/iter", "agent A", "agent")
        for _ in range(reps):
            for build, vals in ((a_build, row.a), (b_build, row.b)):
                ag = Agent(build, tmp)
                time.sleep(1.0)
                vals.append(bench_open.loop(loop, 10))
                ag.stop()
        return [row]
    res, cost = bench_open.measure(b_build, reps, 10, tmp, sys.stderr)
    rows = floor_rows("open_loop", "ns/iter", res, (
        "an empty program on sys_exit_openat",
        "agent as by default (run stats sampled 1 s of 10); target <= +2 % over the floor",
        f"run_stats = always; BPF cost per openat {cost[1] / max(cost[0], 1):.0f} ns"))
    d, h = ci90([(b / a - 1) * 100 for a, b in zip(res["floor"], res["bpftel"])])
    rows[1].note += (": met" if d + h <= 2 else ": within noise" if d - h <= 2
                     else f": MISSED by {d - 2:.1f} points")
    m, h = ci90([a / b for a, b in zip(res["opensnoop"], res["off"])])
    rows[0].note += f"; opensnoop (peer): {m:.2f}x no agent +/- {h:.2f}"
    return rows


def recv_loop(args, a_build, b_build, tmp, reps):
    """Side by side, replicates interleaved (the order rotates): no agent, the floor
    (tools/tp_floor --recvfrom: an empty program on sys_enter_recvfrom, USM's
    tracepoint), the agent with tls_recv_fd = on (run stats sampled), the same with
    run_stats = always; 5 s loops of recv(2) on an empty socket (tools/recv_loop), a
    thread in no TLS read: nearly every recvfrom of a host. The BPF ns per recvfrom from
    the always runs. With a baseline, the baseline's agent as by default against this
    build's with tls_recv_fd = on: what turning it on costs every recv."""
    loop = f"{b_build}/tools/recv_loop"
    secs = 5
    conf_on = os.path.join(tmp, "recv-on.conf")
    with open(conf_on, "w") as f:
        f.write("tls_recv_fd = on\n")
    if args.compare:
        row = Row("recv_loop", "ns/call", "agent A", "agent on")
        for _ in range(reps):
            for build, vals, extra in ((a_build, row.a, ()), (b_build, row.b, ("-c", conf_on))):
                ag = Agent(build, tmp, extra)
                time.sleep(1.0)
                vals.append(bench_open.loop(loop, secs))
                ag.stop()
        row.note = "agent A as by default; agent with tls_recv_fd = on"
        return [row]
    conf = os.path.join(tmp, "recv-always.conf")
    with open(conf, "w") as f:
        f.write("tls_recv_fd = on\nrun_stats = always\n")
    configs = ("off", "floor", "bpftel", "always")
    res = {c: [] for c in configs}
    cost = [0, 0]

    def prog(ag):
        progs = (ag.json("stats") or {}).get("programs") or []
        p = [x for x in progs if x.get("name") == "usm_tls_recv"]
        return (p[0]["run_cnt"], p[0]["run_time_ns"]) if p else (0, 0)

    def run(cfg):
        if cfg == "off":
            res[cfg].append(bench_open.loop(loop, secs))
            return
        if cfg == "floor":
            fl = subprocess.Popen([f"{b_build}/tools/tp_floor", "--recvfrom"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if fl.stdout.readline().strip() != "ready":
                sys.exit("bench: tp_floor --recvfrom did not attach")
            res[cfg].append(bench_open.loop(loop, secs))
            fl.stdin.close()
            fl.wait()
            return
        ag = Agent(b_build, tmp, ("-c", conf if cfg == "always" else conf_on))
        time.sleep(1.0)  # its start-up (the /proc scan, attaches) is not the loop's
        before = prog(ag)
        res[cfg].append(bench_open.loop(loop, secs))
        after = prog(ag)
        if cfg == "always":
            cost[0] += after[0] - before[0]
            cost[1] += after[1] - before[1]
        ag.stop()

    for r in range(reps):
        for cfg in configs[r % 4:] + configs[:r % 4]:
            run(cfg)
    return floor_rows("recv_loop", "ns/call", res, (
        "an empty program on sys_enter_recvfrom",
        "agent with tls_recv_fd = on (run stats sampled)",
        f"run_stats = always; BPF cost per recvfrom {cost[1] / max(cost[0], 1):.0f} ns over "
        f"{cost[0]} runs"))


def make_cert(tmp, name):
    """A self-signed certificate and key for localhost: (cert, key) under tmp."""
    cert, key = os.path.join(tmp, f"{name}-cert.pem"), os.path.join(tmp, f"{name}-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    return cert, key


def tls_requests(args, a_build, b_build, tmp, reps):
    cert, key = make_cert(tmp, "c")
    www = os.path.join(tmp, "www", "items")
    os.makedirs(www, exist_ok=True)
    for i in range(50):
        with open(os.path.join(www, str(i)), "w") as f:
            f.write("item\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "integration",
                                                            "http_server.py"), str(port),
                               os.path.dirname(www), cert, key], stdout=subprocess.PIPE,
                              text=True)
    server.stdout.readline()
    row = Row("tls_requests", "req/s", "agent A" if args.compare else "no agent", "agent",
              higher_is_better=True)
    windows = []
    n = args.tls_requests
    try:
        on = 0.0 if args.compare else default_duty(b_build, tmp)
        for _ in range(reps):
            if args.compare:
                ag = Agent(a_build, tmp)
                usm_on_libssl(ag)
                row.a.append(bench_tls.requests_per_s(port, n))
                ag.stop()
                ag = Agent(b_build, tmp)
                usm_on_libssl(ag)  # measured attached, not attaching
                row.b.append(bench_tls.requests_per_s(port, n))
                ag.stop()
                continue
            row.a.append(bench_tls.requests_per_s(port, n))
            # n requests outlast a run-stats window: duty-weighted by configuration.
            rate, rin, rout = duty_by_config(b_build, tmp,
                                             lambda: bench_tls.requests_per_s(port, n),
                                             usm_on_libssl, on)
            row.b.append(rate)
            windows.append((rin, rout))
    finally:
        server.kill()
        server.wait()
    if not args.compare:
        rm, rh = ci90([b / a for a, b in zip(row.a, row.b)])
        row.note = (f"agent/no agent {rm:.3f}x +/- {rh:.3f}; target >= 0.97x: " +
                    ("met" if rm - rh >= 0.97 else "within noise" if rm + rh >= 0.97
                     else "MISSED") + duty_note(windows, row.a))
    return [row]


def duty_note(windows, off):
    """What the duty weighting (duty_weighted) was made of, against no agent."""
    if not windows:
        return ""
    rin = ci90([w[0] / a for w, a in zip(windows, off)])
    rout = ci90([w[1] / a for w, a in zip(windows, off)])
    return (f"; duty-weighted: inside a run-stats window {rin[0]:.3f}x +/- {rin[1]:.3f}, "
            f"outside {rout[0]:.3f}x +/- {rout[1]:.3f}")


def h2load_rps(port, n):
    """h2load's requests/s for n requests over 4 connections of 10 streams each."""
    out = subprocess.run(["h2load", "-n", str(n), "-c", "4", "-m", "10",
                          f"https://127.0.0.1:{port}/items/1"], capture_output=True, text=True,
                         check=True).stdout
    if f"{n} succeeded" not in out:
        sys.exit(f"bench: h2load failed:\n{out}")
    return float(re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", out).group(1))


def usm_on_libssl(ag):
    """Wait for the USM probes on libssl: 7 points on Debian 12's (SSL_read and
    SSL_read_ex share theirs, tests/integration/agentlib.py's LIBSSL_PROBES), 9 where
    they do not."""
    for _ in range(600):
        libs = (ag.json("libs") or {}).get("libs", [])
        if any(r["module"] == "usm" and r["lib"] == "libssl" and r["attached"] >= 7
               for r in libs):
            return
        time.sleep(0.05)
    sys.exit("bench: USM's uprobes did not attach to libssl")


# The peer for h2load: bpftrace on the functions that move data, as its users write it
# (reads: entry and return; writes: entry), only counting. The agent's writes sit past
# the prologue, and its reads on the function SSL_read and SSL_read_ex both call
# (user/manager/prologue.h): fewer single-steps than this peer takes.
H2_BT = ("uprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_read, "
         "uprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_read_ex { @reads = count(); } "
         "uretprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_read, "
         "uretprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_read_ex { @returns = count(); } "
         "uprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_write, "
         "uprobe:/lib/x86_64-linux-gnu/libssl.so.3:SSL_write_ex { @writes = count(); } "
         "BEGIN { printf(\"ready\\n\"); }")


def under_bpftrace_h2(port, n):
    bt = subprocess.Popen(["bpftrace", "-e", H2_BT], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    for line in bt.stdout:
        if line.strip() == "ready":
            break
    else:
        sys.exit("bench: bpftrace did not start")
    rps = h2load_rps(port, n)
    bt.send_signal(2)
    out = bt.communicate()[0]
    seen = {m[0]: int(m[1]) for m in re.findall(r"@(\w+): (\d+)", out)}
    if not seen.get("reads") or not seen.get("writes"):
        sys.exit(f"bench: bpftrace saw {seen}")
    return rps


def start_nghttpd(tmp):
    """nghttpd over TLS on a free local port, serving /items/1 from tmp, once it
    accepts: (the server, its port)."""
    cert, key = make_cert(tmp, "h2")
    www = os.path.join(tmp, "h2www", "items")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "1"), "w") as f:
        f.write("item\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["nghttpd", "--address=127.0.0.1", "-d", os.path.dirname(www),
                               str(port), key, cert], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return server, port


def without_peer(args, row, peer):
    """A row whose bpftrace peer did not run: the peer's row says why (compare mode has
    none)."""
    if args.compare:
        return [row]
    peer.note = "skipped: bpftrace is not installed (tools/dev.sh test installs it)"
    return [row, peer]


def h2load(args, a_build, b_build, tmp, reps):
    """HTTP/2 over TLS (nghttpd, h2load: both the system OpenSSL), requests/s with no
    agent, under bpftrace's counting probes on the same functions (the peer's floor:
    the traps) and with the agent, interleaved; with the agent on, every request is
    decoded on both sides (checked: the agent counted them)."""
    if not shutil.which("nghttpd") or not shutil.which("h2load"):
        return [Row("h2load", "req/s", "-", "-", note="skipped: nghttp2-server and "
                    "nghttp2-client are not installed")]
    server, port = start_nghttpd(tmp)
    n = 20000
    row = Row("h2load", "req/s", "agent A" if args.compare else "no agent", "agent",
              higher_is_better=True)
    peer = Row("h2load peer", "req/s", "bpftrace", "agent", higher_is_better=True)
    windows = []
    bt = shutil.which("bpftrace") and not args.compare
    try:
        h2load_rps(port, 1000)  # warm up: sessions, page cache
        for _ in range(reps):
            if args.compare:
                ag = Agent(a_build, tmp)
                usm_on_libssl(ag)
                row.a.append(h2load_rps(port, n))
                ag.stop()
            else:
                row.a.append(h2load_rps(port, n))
            if bt:
                peer.a.append(under_bpftrace_h2(port, n))
            ag = Agent(b_build, tmp)
            usm_on_libssl(ag)
            runs = []

            def run():
                runs.append(n)
                return h2load_rps(port, n)
            row.b.append(agent_rate(args, ag, run, windows))
            want = 2 * sum(runs)  # each request is decoded on both sides
            for _ in range(200):  # records still in the ring buffer: read every 50 ms
                counted = ag.json("http")["counters"]["http2"]["requests"]
                if counted >= want:
                    break
                time.sleep(0.05)
            if counted != want:
                c = (ag.json("http")["counters"]["http2"], [x for x in ag.json("stats")["losses"] if x["module"] == "usm"])
                ag.stop()
                sys.exit(f"bench: the agent decoded {counted} HTTP/2 requests, not {want}: "
                         f"{c}")
            ag.stop()
    finally:
        server.kill()
        server.wait()
    if not args.compare:
        rm, rh = ci90([b / a for a, b in zip(row.a, row.b)])
        row.note = (f"h2load -n {n} -c 4 -m 10 -> nghttpd; every request decoded on both "
                    f"sides; agent/no agent {rm:.3f}x +/- {rh:.3f}; target >= 0.9x: " +
                    ("met" if rm - rh >= 0.9 else "within noise" if rm + rh >= 0.9
                     else "MISSED") + duty_note(windows, row.a))
    if not bt:
        return without_peer(args, row, peer)
    peer.b = row.b
    pm, ph = ci90([a / b for a, b in zip(peer.a, row.a)])
    peer.note = (f"bpftrace counting at the functions' entries (reads entry+return, writes "
                 f"entry), {pm:.3f}x +/- {ph:.3f} of no agent")
    return [row, peer]


# The peer for gnutls_reads: bpftrace where users put it (the read's entry and return,
# the write's entry), only counting. The agent's reads sit on the internal read
# gnutls_record_recv hands them to (user/manager/tailread.h), its writes past the
# prologue: no single-step.
GNUTLS_LIB = "/lib/x86_64-linux-gnu/libgnutls.so.30"
GNUTLS_BT = (f"uprobe:{GNUTLS_LIB}:gnutls_record_recv {{ @reads = count(); }} "
             f"uretprobe:{GNUTLS_LIB}:gnutls_record_recv {{ @returns = count(); }} "
             f"uprobe:{GNUTLS_LIB}:gnutls_record_send {{ @writes = count(); }} "
             "BEGIN { printf(\"ready\\n\"); }")


def gnutls_start(app, n, ag=None):
    """tools/gnutls_loop of n pairs, loaded and waiting for its go; with an agent, once
    the USM probes are on its libgnutls."""
    proc = subprocess.Popen([app, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    if proc.stdout.readline().strip() != "loaded":
        sys.exit("bench: gnutls_loop did not start")
    for _ in range(600 if ag else 0):
        libs = (ag.json("libs") or {}).get("libs", [])
        if any(r["module"] == "usm" and r["lib"] == "libgnutls" and r["attached"] >= 4 and
               proc.pid in r["pids"] for r in libs):
            break
        time.sleep(0.05)
    else:
        if ag:
            sys.exit("bench: USM's uprobes did not attach to libgnutls")
    return proc


def gnutls_finish(proc):
    """Pairs/s of a loop gnutls_start started."""
    out, _ = proc.communicate("go\n")
    if proc.returncode:
        sys.exit(f"bench: gnutls_loop failed: {out[-200:]}")
    return 1e9 / float(out.split()[-1])


def gnutls_reads(args, a_build, b_build, tmp, reps):
    """GnuTLS request/response pairs over memory (tools/gnutls_loop: per pair 2
    gnutls_record_send and 2 gnutls_record_recv, each an HTTP message's start), pairs/s:
    no agent (agent A) -> the agent, duty-weighted, each run's requests checked counted
    (or dropped at a full queue, counted as such); and the peer, bpftrace counting at
    the reads' entry and return and the writes' entry -> the agent; interleaved."""
    app = os.path.join(b_build, "tools", "gnutls_loop")
    if not os.path.exists(app) or not os.path.exists(GNUTLS_LIB):
        return [Row("gnutls_reads", "pairs/s", "-", "-", note="skipped: tools/gnutls_loop "
                    "not built (libgnutls28-dev) or no libgnutls.so.30")]
    n = 20000
    row = Row("gnutls_reads", "pairs/s", "agent A" if args.compare else "no agent", "agent",
              higher_is_better=True)
    peer = Row("gnutls_reads peer", "pairs/s", "bpftrace", "agent", higher_is_better=True)
    bt = shutil.which("bpftrace") and not args.compare
    windows, dropped = [], 0
    for _ in range(reps):
        if args.compare:
            ag = Agent(a_build, tmp)
            row.a.append(gnutls_finish(gnutls_start(app, n, ag)))
            ag.stop()
        else:
            row.a.append(gnutls_finish(gnutls_start(app, n)))
        if bt:
            proc = subprocess.Popen(["bpftrace", "-e", GNUTLS_BT], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            for line in proc.stdout:
                if line.strip() == "ready":
                    break
            peer.a.append(gnutls_finish(gnutls_start(app, n)))
            proc.send_signal(2)
            seen = {m[0]: int(m[1]) for m in re.findall(r"@(\w+): (\d+)",
                                                         proc.communicate()[0])}
            if seen.get("returns", 0) < 2 * n or seen.get("writes", 0) < 2 * n:
                sys.exit(f"bench: bpftrace saw {seen}, expected >= {2 * n} each")
        ag = Agent(b_build, tmp)
        pids = []

        def run(proc):
            pids.append(proc.pid)
            return gnutls_finish(proc)
        row.b.append(agent_rate(args, ag, run, windows,
                                lambda: gnutls_start(app, n, ag)))
        # Each run: n requests on each side, each counted once (a request whose
        # response was dropped, as unanswered), or dropped, counted where: the ring
        # buffer full (kernel) or the workers' queue full.
        want = 2 * n * len(pids)
        for _ in range(200):
            counted = sum(r["count"] for r in ag.json("http")["endpoints"]
                          if r["pid"] in pids)
            lost = [x for x in ag.json("stats")["losses"] if x["module"] == "usm"][0]
            if counted + lost["queue_full"] + lost["kernel"] >= want:
                break
            time.sleep(0.05)
        if counted > want or counted + lost["queue_full"] + lost["kernel"] < want:
            c = ag.json("http")["counters"]
            ag.stop()
            sys.exit(f"bench: the agent counted {counted} GnuTLS requests and dropped "
                     f"{lost['queue_full']} + {lost['kernel']}, not {want}: {c} {lost}")
        dropped += lost["queue_full"] + lost["kernel"]
        ag.stop()
    if not args.compare:
        rm, rh = ci90([b / a for a, b in zip(row.a, row.b)])
        row.note = (f"gnutls_loop {n} pairs; agent/no agent {rm:.3f}x +/- {rh:.3f}; "
                    f"records dropped, counted (ring buffer or queue full): {dropped}" +
                    duty_note(windows, row.a))
    if not bt:
        return without_peer(args, row, peer)
    peer.b = row.b
    pm, ph = ci90([b / a for a, b in zip(peer.a, peer.b)])
    fm, fh = ci90([p / a for p, a in zip(peer.a, row.a)])
    peer.note = (f"bpftrace counting on gnutls_record_recv entry+return and "
                 f"gnutls_record_send entry: {fm:.3f}x +/- {fh:.3f} of no agent; "
                 f"agent/bpftrace {pm:.3f}x +/- {ph:.3f}")
    return [row, peer]


def tls_write_loop(args, a_build, b_build, tmp, reps):
    """Side by side (bench_tls_write.py): no agent, bpftrace's pair, the agent (defaults)
    and the agent with run_stats = always, interleaved; then real HTTPS requests."""
    rate, cost, skip = bench_tls_write.measure(b_build, reps, 200000, tmp, sys.stderr)
    reqs = bench_tls_write.requests_cost(b_build, tmp, 200, sys.stderr)
    off, _ = ci90(rate["off"])
    row = Row("tls_write_loop", "writes/s", "bpftrace pair" if not skip else "-", "agent",
              higher_is_better=True)
    row.b = rate["bpftel"]
    if skip:
        row.note = f"{skip}; no agent {off:.0f}/s"
    else:
        row.a = rate["bpftrace"]
        rm, rh = ci90([a / b for a, b in zip(rate["bpftel"], rate["bpftrace"])])
        row.note = (f"agent/pair {rm:.2f}x +/- {rh:.2f}, target >= 1.5x: " +
                    ("met" if rm - rh >= 1.5 else "within noise" if rm + rh >= 1.5
                     else "MISSED") + f"; no agent {off:.0f}/s")
    rows = [row]
    for what, label in (("write", "write loop"), ("pairs", "request/response loop")):
        r = Row(f"tls_call_ns {what}", "ns/call", "-", "agent always",
                note=f"BPF ns per TLS call, {label}, every call an HTTP message start; "
                     f"target <= 300")
        r.b = cost[what]
        m, h = ci90(r.b)
        r.note += ": met" if m + h <= 300 else ": MISSED"
        rows.append(r)
    for name, (runs, ns) in reqs.items():
        r = Row(f"tls_call_ns {name}", "ns/call", "-", "agent always",
                note=f"200 HTTPS requests{' / 10 (one process each)' if name != 'curl' else ''}"
                     f" -> python http.server: {runs[0]:.2f} entry + {runs[1]:.2f} return "
                     f"runs per request; target <= 300: {'met' if ns <= 300 else 'MISSED'}")
        r.b = [ns]
        rows.append(r)
    return rows


def cuda_calls(args, a_build, b_build, tmp, reps):
    pattern = f"{b_build}/tests/cuda_pattern"
    stub = f"{b_build}/tests/stub-cuda/libcudart.so.13"

    def with_agent(build):
        ag = Agent(build, tmp)

        def attached(pid):
            libs = ag.json("libs")
            # Any build's count of probe points on libcudart (16 before issue 20, more
            # with each function probed since): a row shows its attached points once
            # its file's attach is done, so any is all of that build's.
            return libs and any(r["module"] == "gpu" and pid in r["pids"] and
                                r["attached"] > 0 for r in libs["libs"])
        # A whole run-stats period (10 s), as bench_cuda.py: not the first window only.
        ns = bench_cuda.run_loop(pattern, stub, 10, attached, "loopfor")
        ag.stop()
        return ns
    row = Row("cuda_calls", "ns/call", "agent A" if args.compare else "empty multi-uprobes",
              "agent")
    for _ in range(reps):
        if args.compare:
            row.a.append(with_agent(a_build))
        else:
            # The floor attached as the agent attaches (multi-uprobe links): the
            # perf-event one's dispatch costs ~45-65 ns more a call (bench_cuda.py).
            floor = subprocess.Popen([f"{b_build}/tools/uprobe_floor", stub, "cudaLaunchKernel",
                                      "--multi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
            if floor.stdout.readline().strip() != "ready":
                floor.kill()
                sys.exit("bench: tools/uprobe_floor --multi did not attach")
            row.a.append(bench_cuda.run_loop(pattern, stub, 10, mode="loopfor"))
            floor.stdin.close()
            floor.wait()
        row.b.append(with_agent(b_build))
    return [row]


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle(args, a_build, b_build, tmp, reps):
    builds = [("A", a_build), ("B", b_build)] if args.compare else [("B", b_build)]
    pss = Row("idle_pss", "KiB", "agent A" if args.compare else "-", "agent")
    cpu = Row("idle_cpu", "% CPU", "agent A" if args.compare else "-", "agent")
    ags = {k: Agent(b, tmp) for k, b in builds}  # side by side: the same 30 s for both
    time.sleep(2)
    c0 = {k: cpu_s(a.proc.pid) for k, a in ags.items()}
    time.sleep(30)
    for k, a in ags.items():
        use = (cpu_s(a.proc.pid) - c0[k]) / 30 * 100
        (pss.a if k == "A" else pss.b).append(pss_kib(a.proc.pid))
        (cpu.a if k == "A" else cpu.b).append(use)
        a.stop()
    pss.note = f"target <= 16384 KiB: {'met' if max(pss.b) <= 16384 else 'MISSED'}"
    return [pss, cpu]


def pipeline(args, a_build, b_build, tmp, reps):
    out = subprocess.run([f"{b_build}/tests/bench_pipeline", "-d", "2", "-r", "2e6"],
                         check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\S+(?: \S+)?)\s*\|\s*([\d.]+)\s*\|\s*"
                     r"([\d.]+)\s*\|\s*([\d.]+)%", line)
        if m:
            r = Row(f"pipeline {m[1]}p {m[3].strip()}", "Mev/s", "offered", "processed",
                    higher_is_better=True, note=f"loss {m[6]} %")
            r.a, r.b = [float(m[4])], [float(m[5])]
            rows.append(r)
    return rows


def restart(args, a_build, b_build, tmp, reps):
    def once(build):
        ag = Agent(build, tmp)
        times = []
        for _ in range(reps):
            t0 = time.monotonic()
            for mod in ("gpu", "usm"):
                subprocess.run([ag.cli, "--socket", ag.sock, "module", "restart", mod],
                               check=True, capture_output=True)
            times.append((time.monotonic() - t0) * 1000)
        ag.stop()
        return times
    row = Row("restart", "ms", "agent A" if args.compare else "-", "agent",
              note="target <= 100 ms")
    row.b = once(b_build)
    row.a = once(a_build) if args.compare else []
    row.note += f": {'met' if statistics.mean(row.b) <= 100 else 'MISSED'}"
    return [row]


def control(args, a_build, b_build, tmp, reps):
    return bench_control.control(args, a_build, b_build, tmp, reps, Agent, Row)


def sigterm(args, a_build, b_build, tmp, reps):
    return bench_control.sigterm(args, a_build, b_build, tmp, reps, Agent, Row)


def restart_links(args, a_build, b_build, tmp, reps):
    return bench_control.restart_links(args, a_build, b_build, tmp, reps, Agent, Row)


def go_start(ag, app, url, n, env=None, server=None):
    """A tlsapp client of n requests on one connection, started and waiting for its go;
    with an agent, once the client's probes are attached (it is found at its exec) and
    the server's (found by the agent's start-up scan)."""
    proc = subprocess.Popen([app, "client", url, str(n), "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    if proc.stdout.readline().strip() != "started":
        sys.exit("bench: tlsapp client did not start")
    for _ in range(600 if ag else 0):
        libs = (ag.json("libs") or {}).get("libs", [])
        ready = {p for r in libs if r["lib"] == "go" and r["module"] == "usm" and
                 r["attached"] >= 3 for p in r["pids"]}
        if proc.pid in ready and (server is None or server in ready):
            break
        time.sleep(0.05)
    else:
        if ag:
            sys.exit("bench: USM's probes did not attach to the Go client")
    return proc, n


def go_finish(started):
    """Requests/s of a client go_start started, from its go to its exit; and its pid."""
    proc, n = started
    t0 = time.monotonic()
    out, _ = proc.communicate("go\n")
    took = time.monotonic() - t0
    if proc.returncode or len(out.split("\n")) != n + 1:
        sys.exit(f"bench: tlsapp client failed: {out[-200:]}")
    return n / took, proc.pid


def go_rps(ag, app, url, n, env=None, server=None):
    """tlsapp client: n requests on one connection; requests/s from its go to its exit."""
    return go_finish(go_start(ag, app, url, n, env, server))


class GoFloor:
    """tools/uprobe_floor --go: empty programs where the USM module probes a Go
    executable (all, "entries" or "rets"); held until stop()."""

    def __init__(self, build, app, only=None):
        self.proc = subprocess.Popen([f"{build}/tools/uprobe_floor", "--go", app,
                                      *([only] if only else [])], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            sys.exit("bench: uprobe_floor --go did not attach")

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()


def go_https(args, a_build, b_build, tmp, reps):
    """Go's net/http over Go's crypto/tls (tests/go/tlsapp, server and client): requests/s
    of one client's n sequential GETs on one connection, HTTP/2 (Go's default) and
    HTTP/1.1, with no agent and with the agent, interleaved; with the agent on, every
    request is counted on both sides (checked). Interleaved with them, the floor: the
    same traps with empty programs (all of them, the entries only, Read's RETs only),
    which no uprobe-based agent can go under on this kernel."""
    app = os.path.join(b_build, "tests", "go", "tlsapp")
    if not os.path.exists(app):
        return [Row("go_https", "req/s", "-", "-", note="skipped: tests/go/tlsapp not built "
                    "(golang-go)")]
    cert, key = make_cert(tmp, "go")
    server = subprocess.Popen([app, "server", "0", cert, key], stdout=subprocess.PIPE,
                              text=True)
    port = int(server.stdout.readline().split()[1])
    n = 1500  # ~0.5 s with the agent: a run fits in a 1 s run-stats window
    rows = []
    try:
        for proto, env in (("2", None), ("1.1", {"GODEBUG": "http2client=0"})):
            url = f"https://127.0.0.1:{port}/items/1"
            row = Row(f"go_https/{proto}", "req/s", "agent A" if args.compare else "no agent",
                      "agent", higher_is_better=True)
            floors = {only: Row(f"go_https/{proto} floor {only or 'all'}", "req/s",
                                "no agent", f"floor {only or 'all'}", higher_is_better=True)
                      for only in (None, "entries", "rets")}
            windows = []
            go_rps(None, app, url, 200, env)  # warm up
            for _ in range(reps):
                if not args.compare:
                    for only, frow in floors.items():
                        frow.a.append(go_rps(None, app, url, n, env)[0])
                        fl = GoFloor(b_build, app, only)
                        frow.b.append(go_rps(None, app, url, n, env)[0])
                        fl.stop()
                if args.compare:
                    ag = Agent(a_build, tmp)
                    row.a.append(go_rps(ag, app, url, n, env, server.pid)[0])
                    ag.stop()
                else:
                    row.a.append(go_rps(None, app, url, n, env)[0])
                ag = Agent(b_build, tmp)
                pids = []

                def run(started):
                    rps, pid = go_finish(started)
                    pids.append(pid)
                    return rps
                row.b.append(agent_rate(args, ag, run, windows,
                                        lambda: go_start(ag, app, url, n, env, server.pid)))
                # Each client's requests on both sides: the server's are all of this
                # agent's rows of the server pid, for every run it measured.
                want = 2 * n * len(pids)
                counted = 0
                for _ in range(200):
                    eps = ag.json("http")["endpoints"]
                    counted = sum(r["count"] for r in eps if r["pid"] in (*pids, server.pid)
                                  and r["version"] == proto)
                    if counted >= want:
                        break
                    time.sleep(0.05)
                if counted != want:
                    c = ag.json("http")
                    ag.stop()
                    rows_seen = [(r["pid"], r["side"], r["version"], r["count"])
                                 for r in c["endpoints"]]
                    sys.exit(f"bench: the agent counted {counted} Go requests, not {want}: "
                             f"{rows_seen} {c['counters']['http2']}")
                ag.stop()
            if not args.compare:
                rm, rh = ci90([b / a for a, b in zip(row.a, row.b)])
                row.note = (f"tlsapp client -> tlsapp server, {n} GETs on one connection, "
                            f"HTTP/{proto}; every request counted on both sides; agent/no "
                            f"agent {rm:.3f}x +/- {rh:.3f}; target >= 0.9x: " +
                            ("met" if rm - rh >= 0.9 else "within noise" if rm + rh >= 0.9
                             else "MISSED") + duty_note(windows, row.a))
                fm, fh = ci90([b / a for a, b in zip(floors[None].b, row.b)])
                row.note += f"; agent/floor all {fm:.3f}x +/- {fh:.3f}"
                where = {None: "all the agent's probe points",
                         "entries": "the entries of Write and Read (their JBE)",
                         "rets": "Read's RETs"}
                for only, frow in floors.items():
                    fm, fh = ci90([b / a for a, b in zip(frow.a, frow.b)])
                    frow.note = (f"tools/uprobe_floor --go {only or ''}: empty programs on "
                                 f"{where[only]}; floor/no agent {fm:.3f}x +/- {fh:.3f}")
            rows.append(row)
            if not args.compare:
                rows.extend(floors.values())
    finally:
        server.kill()
        server.wait()
    return rows


EXPERIMENTS = {"open_loop": open_loop, "recv_loop": recv_loop, "tls_requests": tls_requests, "h2load": h2load,
               "go_https": go_https,
               "tls_write_loop": tls_write_loop, "gnutls_reads": gnutls_reads,
               "cuda_calls": cuda_calls,
               "idle": idle, "pipeline": pipeline, "restart": restart,
               "restart_links": restart_links, "control": control, "sigterm": sigterm}


def build_rev(rev):
    wt = os.path.join(ROOT, "build-bench", rev.replace("/", "_"))
    if not os.path.isdir(wt):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", wt, rev], check=True)
    subprocess.run(["cmake", "-S", wt, "-B", f"{wt}/build", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                    "-DBPFTEL_TESTS=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", f"{wt}/build", "-j", str(os.cpu_count() or 2)],
                   check=True, stdout=subprocess.DEVNULL)
    return f"{wt}/build"


def table(rows, args, took):
    head = (f"$ {shlex.join(['tools/bench/bench.py'] + sys.argv[1:])}    # {took / 60:.1f} min"
            f", {os.uname().release}, {os.cpu_count()} CPUs")
    lines = [head, "",
             "| experiment | unit | A | B | A | B | mean of (B-A)/A % | 90% CI | verdict (±5 %) | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if len(r.a) == 1 and len(r.b) == 1:  # one measurement each: no interval
            a, b = r.a[0], r.b[0]
            lines.append(f"| {r.name} | {r.unit} | {r.a_label} | {r.b_label} | {a:.1f} | "
                         f"{b:.1f} | {(b - a) / a * 100 if a else 0:+.1f} | - | - | {r.note} |")
        elif r.a and r.b:
            a, b, d, h, v = r.result()
            lines.append(f"| {r.name} | {r.unit} | {r.a_label} | {r.b_label} | {a:.1f} | "
                         f"{b:.1f} | {d:+.1f} | ±{h:.1f} | {v} | {r.note} |")
        elif r.b:
            b, hb = ci90(r.b) if len(r.b) > 1 else (r.b[0], None)
            lines.append(f"| {r.name} | {r.unit} | {r.a_label} | {r.b_label} | - | "
                         f"{b:.1f}{'' if hb is None else f' ±{hb:.1f}'} | - | - | - | "
                         f"{r.note} |")
        else:  # skipped: its note says why
            lines.append(f"| {r.name} | {r.unit} | {r.a_label} | {r.b_label} | - | - | - | "
                         f"- | - | {r.note} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    ap.add_argument("--tls-requests", type=int, default=1000,
                    help="HTTPS requests per tls_requests measurement (default 1000)")
    ap.add_argument("--baseline-build")
    ap.add_argument("--baseline-rev")
    ap.add_argument("--write", metavar="FILE", help="replace the table between the "
                    "bench.py markers in FILE (BENCHMARKS.md)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: run as root")
    b_build = os.path.abspath(args.build)
    a_build = b_build
    if args.baseline_rev:
        a_build = build_rev(args.baseline_rev)
    elif args.baseline_build:
        a_build = os.path.abspath(args.baseline_build)
    args.compare = a_build != b_build
    tmp = tempfile.mkdtemp(prefix="bpftel-bench-")
    t0 = time.monotonic()
    rows = []
    try:
        for name in args.only.split(","):
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            rows += EXPERIMENTS[name](args, a_build, b_build, tmp, args.replicates)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = table(rows, args, time.monotonic() - t0)
    print(out)
    if args.write:
        with open(args.write) as f:
            text = f.read()
        begin, end = "<!-- bench.py:begin -->", "<!-- bench.py:end -->"
        block = f"{begin}\n```\n{out}\n```\n{end}"
        if begin in text:
            text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text,
                          flags=re.S)
        else:
            text += "\n" + block + "\n"
        with open(args.write, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
