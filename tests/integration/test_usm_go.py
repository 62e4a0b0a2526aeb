#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, Go's crypto/tls (which never loads libssl), with tests/go/tlsapp built by
Debian's golang-go at test time:

  1. A Go HTTPS server started before the agent is found by the start-up /proc scan;
     one started after it, stripped (-ldflags=-s -w), is found at its exec; Go clients
     are found at their exec too (each waits to be told before its first request).
  2. HTTP/2 (ALPN, Go's default): 5 GETs counted as 5 on the server's side under the
     server's pid and 5 on the client's under the client's, version 2, the route
     normalized; HTTP/1.1 (GODEBUG=http2client=0): 3 404s on each side, version 1.1.
  3. The server's rows carry the connection, read from the Go Conn's socket.
  4. A Go executable whose .go.buildinfo says go1.16 (a copy with that one field
     changed) is refused, with its reason, in `bpftel libs`.
  5. A Go client run and gone while the agent is stopped (SIGSTOP), as kubectl is gone
     before an agent reads its messages: its row is named as it was run, "tlsapp",
     not "?" (it opens no library to be named after).
  6. Nothing is left in the kernel after the agent stops."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (Agent, check, make_cert, require_root, skip,  # noqa: E402
                      usm_settle, wait_for)
from agentlib import http_count as count, http_rows as rows  # noqa: E402


def settled_count(agent, want, what, **match):
    wait_for(lambda: count(agent, **match) >= want, 30, what)
    usm_settle(agent)
    got = count(agent, **match)
    check(got == want, f"{what}: {got}")


def go_rows(agent, pid):
    """bpftel libs' rows of Go executables that pid runs."""
    return [r for r in agent.json("libs")["libs"] if r["lib"] == "go" and pid in r["pids"]]


def attached(agent, pid):
    return sum(r["attached"] or 0 for r in go_rows(agent, pid) if r["module"] == "usm")


def go_calls(agent):
    """The calls counted on the Go executables' usm probe points: (entries, of them on
    single-stepped instructions), summed over the rows."""
    calls = [r["calls"] for r in agent.json("libs")["libs"]
             if r["lib"] == "go" and r["module"] == "usm" and r["calls"]]
    return (sum(c["entries"] for c in calls), sum(c["single_stepped_entries"] for c in calls),
            sum(c["returns"] for c in calls))


def check_trap_weighting(agent):
    """usm_go_uprobe's entries are on the stack checks' JBE (emulated) and Read's RETs
    (single-stepped): each kind is counted apart, and a run of the program is charged the
    two calibrated costs weighted by those counts."""
    seen = {}

    def settled():  # the servers are idle: the counts hold still around a stats read
        seen["calls"] = go_calls(agent)
        seen["stats"] = agent.json("stats")
        return go_calls(agent) == seen["calls"]
    wait_for(settled, 30, "the Go probes' counts to hold still")
    (entries, stepped, returns), stats = seen["calls"], seen["stats"]
    check(returns == 0 and stepped >= 8 and entries - stepped >= stepped,
          f"Go probe points' calls: {entries} entries, {stepped} of them on Read's RETs "
          f"(single-stepped, one per Read returned), no uretprobe")
    tc = stats["agent"]["trap_cost"]
    prog = [p for p in stats["programs"] if p["name"] == "usm_go_uprobe"][0]
    want = ((entries - stepped) * tc["uprobe_emulated_ns"] + stepped * tc["uprobe_ns"]) / entries
    check(prog["trap_entry_instructions"] == "mixed" and
          abs(prog["trap_cost_ns"] - want) < 0.5,
          f"usm_go_uprobe charged {prog['trap_cost_ns']:.1f} ns a run: the emulated "
          f"{tc['uprobe_emulated_ns']:.0f} and the single-stepped {tc['uprobe_ns']:.0f} "
          f"weighted by those calls ({want:.1f})")


def start_server(app, cert, key):
    proc = subprocess.Popen([app, "server", "0", cert, key], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"]:
        proc.kill()
        raise AssertionError(f"{app} server did not start: {line}")
    return proc, int(line[1])


def go_client(agent, app, url, n, env=None):
    """tlsapp client: started, its probes attached, then told to make its n requests.
    Returns (pid, the lines it printed)."""
    proc = subprocess.Popen([app, "client", url, str(n), "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    try:
        check(proc.stdout.readline().strip() == "started", f"Go client {proc.pid} started")
        wait_for(lambda: attached(agent, proc.pid) >= 3, 30,
                 f"the Go client's probes (pid {proc.pid})")
        out, _ = proc.communicate("go\n", timeout=60)
    finally:
        proc.kill()
        proc.wait()
    return proc.pid, out.split("\n")[:-1]


def patched_version(src, dst, version):
    """A copy of src whose .go.buildinfo names another version (inline form, Go 1.18+:
    a length byte at 32, then the string)."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    at = data.find(b"\xff Go buildinf:")
    check(at >= 0 and data[at + 15] & 2, f"{src} has an inline .go.buildinfo")
    old = data[at + 33:at + 33 + data[at + 32]]
    new = (version + ".9" * 8).encode()[:len(old)]  # "go1.16.9" for "go1.19.8"
    data[at + 33:at + 33 + len(old)] = new
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, 0o755)
    return new.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--go-app", required=True)
    ap.add_argument("--go-stripped", required=True)
    ap.add_argument("--go-pie", required=True)
    args = ap.parse_args()
    require_root()
    if not shutil.which("openssl"):
        skip("openssl is not installed (tools/dev.sh test installs it)")

    tmp = tempfile.mkdtemp(prefix="bpftel-go-")
    cert, key = make_cert(tmp)
    old_go = os.path.join(tmp, "tlsapp-old")
    old_version = patched_version(args.go_app, old_go, "go1.16")
    early, early_port = start_server(args.go_app, cert, key)
    # Another, from a directory whose name holds a newline: /proc/<pid>/maps shows it
    # escaped ("\012"), its exe link as it is.
    odd_dir = os.path.join(tmp, "new\nline")
    os.makedirs(odd_dir)
    odd_app = os.path.join(odd_dir, "tlsapp")
    shutil.copy(args.go_app, odd_app)
    odd, _ = start_server(odd_app, cert, key)
    agent = Agent(args.agent, args.cli)
    procs = [early, odd]
    try:
        wait_for(lambda: attached(agent, early.pid) >= 3, 30,
                 "the start-up scan to find the Go server started before the agent")
        row = go_rows(agent, early.pid)[0]
        check(row["attached"] >= 3 and row["failed"] == 0 and row["refused"] is None,
              f"the early Go server found by the scan: {row['attached']} probes on "
              f"{row['path']}")
        wait_for(lambda: attached(agent, odd.pid) >= 3, 30,
                 "the start-up scan to find the Go server in a directory named with a newline")
        check(True, f"so is one whose path holds a newline: {go_rows(agent, odd.pid)[0]['path']!r}")
        late, late_port = start_server(args.go_stripped, cert, key)
        procs.append(late)
        wait_for(lambda: attached(agent, late.pid) >= 3, 30,
                 "the stripped Go server, found at its exec")
        check(go_rows(agent, late.pid)[0]["refused"] is None,
              "a stripped Go executable (-ldflags=-s -w) is supported")

        # HTTP/2, Go's default over TLS.
        pid, out = go_client(agent, args.go_app, f"https://127.0.0.1:{early_port}/items/7", 5)
        check(out == ["200 HTTP/2.0"] * 5, f"the Go client's 5 requests over HTTP/2: {out}")
        settled_count(agent, 5, "Go server, HTTP/2: GET /items/* 200", pid=early.pid,
                      side="server", version="2", path="/items/*", status=200)
        settled_count(agent, 5, "Go client, HTTP/2: GET /items/* 200", pid=pid,
                      side="client", version="2", path="/items/*", status=200)
        # HTTP/1.1, to the stripped server, from a client built as PIE (as distributions
        # build Go programs: its function table in .data.rel.ro.gopclntab).
        pid1, out = go_client(agent, args.go_pie, f"https://127.0.0.1:{late_port}/none/3", 3,
                              env={"GODEBUG": "http2client=0"})
        check(out == ["404 HTTP/1.1"] * 3, f"the Go client's 3 requests over HTTP/1.1: {out}")
        settled_count(agent, 3, "stripped Go server, HTTP/1.1: GET /none/* 404", pid=late.pid,
                      side="server", version="1.1", path="/none/*", status=404)
        settled_count(agent, 3, "Go client, HTTP/1.1: GET /none/* 404", pid=pid1,
                      side="client", version="1.1", path="/none/*", status=404)
        check(count(agent, pid=early.pid) == 5 and count(agent, pid=late.pid) == 3 and
              count(agent, pid=pid) == 5 and count(agent, pid=pid1) == 3,
              "nothing else counted for the Go processes")
        check_trap_weighting(agent)
        for srv, port in ((early, early_port), (late, late_port)):
            conn = rows(agent, pid=srv.pid, side="server")[0]["connection"]
            check(conn["server"] == f"127.0.0.1:{port}" and conn["client"],
                  f"the Go server's rows carry the connection, from its Conn: {conn}")

        # A Go executable this agent cannot probe: refused, with its reason.
        old, _ = start_server(old_go, cert, key)
        procs.append(old)
        wait_for(lambda: any(r["refused"] for r in go_rows(agent, old.pid)), 30,
                 "the go1.16 executable refused")
        row = go_rows(agent, old.pid)[0]
        check(row["refused"] == "unsupported" and "before 1.17" in row["refused_detail"]
              and old_version in row["refused_detail"],
              f"refused: {row['refused']}: {row['refused_detail']}")
        text = agent.cli("libs").stdout
        check("unsupported" in text and "tlsapp-old" in text,
              "bpftel libs lists it among the refused files")

        # Run and gone while the agent is stopped; tlsapp's probes stay attached (the
        # early server runs it).
        os.kill(agent.proc.pid, signal.SIGSTOP)
        try:
            gone = subprocess.Popen([args.go_app, "client",
                                     f"https://127.0.0.1:{early_port}/items/9", "1"],
                                    stdout=subprocess.PIPE, text=True)
            out = gone.communicate(timeout=60)[0].split("\n")[:-1]
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        check(out == ["200 HTTP/2.0"] and not os.path.exists(f"/proc/{gone.pid}"),
              f"a Go client ({gone.pid}) made its request and exited, the agent stopped: {out}")
        settled_count(agent, 1, "the gone Go client's GET /items/* 200", pid=gone.pid,
                      side="client", path="/items/*")

        def named():  # its row, named (it folds into "(exited)" 30 s after it was read)
            r = rows(agent, pid=gone.pid, side="client")
            return r and r[0]["comm"] != "?" and r[0]["comm"]
        comm = wait_for(named, 60, "the gone Go client's row to be named")
        check(comm == "tlsapp", f"the gone Go client's row is named as it was run: {comm!r}")
        # Started while USM is stopped: the watcher reported no exec then (USM alone
        # asks for them); USM's start makes it read /proc for what it missed.
        agent.cli("module", "stop", "usm")
        while_off = os.path.join(tmp, "tlsapp-while-off")
        shutil.copy(args.go_app, while_off)
        off, _ = start_server(while_off, cert, key)
        procs.append(off)
        agent.cli("module", "start", "usm")
        wait_for(lambda: attached(agent, off.pid) >= 3, 60,
                 "the Go server started while USM was stopped, found once it started")
        check(go_rows(agent, off.pid)[0]["path"].endswith("tlsapp-while-off"),
              f"a Go server run while USM was stopped is probed once it starts again "
              f"({attached(agent, off.pid)} probes)")
        c = agent.json("http")["counters"]
        print(f"counters: tls_calls {c['tls_calls']}, h2_calls {c['h2_calls']}, "
              f"go_read_unpaired {c['go_read_unpaired']}, "
              f"tls_connection_unknown {c['tls_connection_unknown']}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.stop()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    check(True, f"none of what the agent held remains: {agent.released()}")
    print("PASS")


if __name__ == "__main__":
    main()
