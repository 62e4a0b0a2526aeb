#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, USM module, against real programs: curl (OpenSSL) querying a python3
ssl-wrapped http.server is counted as GET /items/* 200 exactly once per request on the
server's side, with a latency; 50 concurrent curl processes are counted exactly; a
GnuTLS client (gnutls-cli) is counted on its own side, and so is curl through an
HTTPS proxy (TLS inside TLS: nested reads); a request written on a non-blocking socket
and retried after SSL_ERROR_WANT_WRITE is counted once; plaintext curl against
python3 http.server is counted through the socket filter; no query string or payload
byte reaches the agent's output; nothing is left in the kernel after it stops."""
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agentlib import (agent_args, LIBSSL_PROBES, Agent, check, held_bpf_ids,  # noqa: E402
                      make_cert, run, start_http_server, usm_settle, wait_for)
from agentlib import http_count as count, http_rows as rows  # noqa: E402



def wait_count(agent, want, what, **match):
    wait_for(lambda: count(agent, **match) >= want, 60, what)
    # Anything beyond want is in by the time every record emitted has been taken.
    usm_settle(agent)
    got = count(agent, **match)
    check(got == want, f"{what}: {got}")


def retry_marks_of(agent, pid):
    """How many marks of writes to retry the kernel keeps for process pid (the agent's
    usm_tls_retry map, its keys' tgid)."""
    for mid in held_bpf_ids(agent.proc.pid)["map"]:
        show = subprocess.run(["bpftool", "-j", "map", "show", "id", str(mid)],
                              capture_output=True, text=True)
        if show.returncode or json.loads(show.stdout).get("name") != "usm_tls_retry":
            continue
        dump = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(mid)],
                              check=True, capture_output=True, text=True).stdout
        return sum(1 for e in json.loads(dump or "[]")
                   if e["formatted"]["key"]["tgid"] == pid)
    raise AssertionError("the agent holds no usm_tls_retry map")


def main():
    args = agent_args(("curl", "openssl", "gnutls-cli"))

    tmp = tempfile.mkdtemp(prefix="bpftel-usm-")
    cert, key = make_cert(tmp)
    www = os.path.join(tmp, "www")
    os.makedirs(os.path.join(www, "items"))
    for n in ("42", "7") + tuple(str(i) for i in range(100, 150)):
        with open(os.path.join(www, "items", n), "w") as f:
            f.write("item\n")

    agent = Agent(args.agent, args.cli)
    servers = []
    try:
        mods = {m["name"]: m["state"] for m in agent.json("modules")["modules"]}
        check(mods.get("usm") == "running", f"the usm module runs by default: {mods}")
        tls, tls_port = start_http_server(args.python, www, cert, key)
        plain, plain_port = start_http_server(args.python, www)
        servers += [tls, plain]

        def ssl_attached():
            return [r for r in agent.json("libs")["libs"]
                    if r["module"] == "usm" and r["lib"] == "libssl" and
                    r["attached"] >= LIBSSL_PROBES]
        row = wait_for(ssl_attached, 60, "the usm uprobes on libssl")[0]
        # Debian's libssl: SSL_read's and SSL_read_ex's probes are one pair, on the
        # read both call (agentlib.LIBSSL_PROBES); curl reads with SSL_read, python's
        # ssl with SSL_read_ex, and both are counted below.
        check(row["failed"] == 0 and row["attached"] == LIBSSL_PROBES,
              f"usm: {row['attached']} uprobes on {row['path']}, the reads' shared")
        check(row["opens"] >= 1, f"bpftel libs --json: the file opened {row['opens']} times "
                                 "to tell what processes map")
        folded = sorted((f["symbol"], f["with"], f["return"]) for f in row["folded"])
        callees = {f["callee_offset"] for f in row["folded"]}
        check(folded == [("SSL_read", "SSL_read_ex", False), ("SSL_read", "SSL_read_ex", True)]
              and len(callees) == 1 and min(callees) > 0,
              f"bpftel libs --json says which points were folded, and where: {row['folded']}")
        text = agent.cli("libs").stdout
        check(f"SSL_read entry with SSL_read_ex, at file offset {min(callees):#x}" in text,
              "bpftel libs lists the folded points under the table")

        # One request through curl (OpenSSL).
        url = f"https://127.0.0.1:{tls_port}/items/42?x=1"
        out = subprocess.run(["curl", "-sk", url], capture_output=True, text=True, timeout=30)
        check(out.returncode == 0 and out.stdout == "item\n", f"curl {url} answered")
        wait_count(agent, 1, "the server counted GET /items/* 200 once", pid=tls.pid,
                   method="GET", path="/items/*", status=200, protocol="https")
        r = rows(agent, pid=tls.pid, path="/items/*")[0]
        check(r["mean_seconds"] > 0 and r["p99_seconds"] > 0,
              f"latency recorded: mean {r['mean_seconds'] * 1e3:.2f} ms, "
              f"p99 <= {r['p99_seconds'] * 1e3:.2f} ms")

        # 50 concurrent clients, each its own process and connection.
        clients = [subprocess.Popen(["curl", "-sk", "-o", "/dev/null",
                                     f"https://127.0.0.1:{tls_port}/items/{100 + i}"])
                   for i in range(50)]
        check(all(c.wait(timeout=60) == 0 for c in clients), "50 concurrent curls succeeded")
        wait_count(agent, 51, "the server counted all 51 requests, no more", pid=tls.pid,
                   method="GET", path="/items/*", status=200)

        # A GnuTLS client, counted on its own side while it runs.
        gnutls = subprocess.Popen(["gnutls-cli", "--insecure", "--crlf", "-p", str(tls_port),
                                   "127.0.0.1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def gnutls_ready():
                return [r for r in agent.json("libs")["libs"]
                        if r["module"] == "usm" and r["lib"] == "libgnutls" and
                        r["attached"] >= 4 and gnutls.pid in r["pids"]]
            wait_for(gnutls_ready, 60, "the usm uprobes on gnutls-cli's libgnutls")
            # gnutls_record_recv's probes sit on the internal reads it hands reads to
            # (_gnutls_recv_int, and on Debian 12 the kTLS one too), type 23 kept: the
            # response counted below went through them.
            row = gnutls_ready()[0]
            moved = sorted((m["symbol"], m["return"], m["record_type"])
                           for m in row["tail_reads"])
            offsets = {tuple(m["offsets"]) for m in row["tail_reads"]}
            check(moved == [("gnutls_record_recv", False, 23), ("gnutls_record_recv", True, 23)]
                  and len(offsets) == 1 and min(min(offsets)) > 0 and
                  row["attached"] == 3 + 2 * len(min(offsets)) and row["failed"] == 0,
                  f"bpftel libs --json: gnutls_record_recv's entry and return moved to "
                  f"{offsets}, {row['attached']} points attached")
            text = agent.cli("libs").stdout
            at = ", ".join(f"{o:#x}" for o in min(offsets))
            check(f"gnutls_record_recv return, type 23, at file offset {at}" in text,
                  "bpftel libs lists the tail reads under the table")
            # Written before its handshake ends, the request waits in the pipe.
            gnutls.stdin.write(b"GET /items/7 HTTP/1.1\nHost: localhost\nConnection: close\n\n")
            gnutls.stdin.flush()
            wait_count(agent, 1, "gnutls-cli's own GET /items/* 200, through GnuTLS probes",
                       pid=gnutls.pid, method="GET", path="/items/*", status=200)
            # Its reads' entries ran on _gnutls_recv_int's emulated push, not on a
            # single-stepped instruction (gnutls_transport_set_int2's movslq is one):
            # one emulated entry per read returned, and the send's. Another process of
            # the host using GnuTLS meanwhile only adds to the left side.
            c = gnutls_ready()[0]["calls"]
            check(c["returns"] >= 1 and
                  c["entries"] - c["single_stepped_entries"] >= c["returns"] + 1,
                  f"libgnutls calls: {c['entries']} entries, {c['single_stepped_entries']} "
                  f"single-stepped, {c['returns']} returns")
            # The table says the same, between the two JSON reads around it.
            text = agent.cli("libs").stdout
            after = gnutls_ready()[0]["calls"]
            line = [ln for ln in text.splitlines()
                    if ln.startswith("libgnutls ") and " usm " in ln]
            m = re.search(r" (\d+) \((\d+) stepped\)\s+(\d+) ", line[0]) if line else None
            got = tuple(int(g) for g in m.groups()) if m else None
            check("ENTRIES" in text and "RETURNS" in text and got is not None and
                  c["entries"] <= got[0] <= after["entries"] and
                  c["single_stepped_entries"] <= got[1] <= after["single_stepped_entries"] and
                  c["returns"] <= got[2] <= after["returns"],
                  f"bpftel libs shows libgnutls's calls: {got} (entries, stepped, returns)")
        finally:
            gnutls.stdin.close()
            gnutls.wait(timeout=30)
        wait_count(agent, 52, "the server counted the GnuTLS client's request too",
                   pid=tls.pid, path="/items/*")

        # TLS inside TLS: curl through an HTTPS proxy reads the proxy's session from
        # inside its read of the end-to-end one (on one thread): each return is paired
        # with its own entry, and curl's own row gets the response.
        proxy = subprocess.Popen([args.python, os.path.join(HERE, "https_proxy.py"), cert, key],
                                 stdout=subprocess.PIPE, text=True)
        servers.append(proxy)
        proxy_port = int(proxy.stdout.readline().split()[1])
        client = subprocess.Popen(["curl", "-sk", "--proxy-insecure", "-x",
                                   f"https://127.0.0.1:{proxy_port}",
                                   f"https://127.0.0.1:{tls_port}/items/42"],
                                  stdout=subprocess.PIPE, text=True)
        out, _ = client.communicate(timeout=30)
        check(client.returncode == 0 and out == "item\n", "curl through the HTTPS proxy answered")
        wait_count(agent, 1, "curl's own GET /items/* 200 through the proxy, its response "
                   "read inside a read of the proxy's session", pid=client.pid, side="client",
                   method="GET", path="/items/*", status=200)
        wait_count(agent, 53, "the server counted the proxied request", pid=tls.pid,
                   path="/items/*")

        # A request whose write fails with SSL_ERROR_WANT_WRITE and is retried whole (a
        # non-blocking python client): one request on each side, none left unanswered,
        # each retry counted as such (bpf/lib/usm_tls_retry.h).
        before = agent.json("http")["counters"]
        out = subprocess.run([args.python, os.path.join(HERE, "tls_retry_app.py"), cert, key],
                             capture_output=True, text=True, timeout=120)
        app = json.loads(out.stdout) if out.returncode == 0 else {}
        check(app.get("status") == "201" and app.get("retries", 0) >= 1,
              f"tls_retry_app.py: its write failed and was retried: {out.stdout} {out.stderr}")
        for side in ("client", "server"):
            wait_count(agent, 1, f"the retried POST /upload/* 201 once on the {side} side",
                       pid=app["pid"], side=side, method="POST", path="/upload/*", status=201)
        # The counters are the host's: another process's traffic meanwhile could only
        # add paired requests and retries of its own.
        after = agent.json("http")["counters"]
        got = {k: after["pairing"][k] - before["pairing"][k]
               for k in ("requests", "paired", "unanswered")}
        check(got["unanswered"] == 0 and got["paired"] >= 2,
              f"the retries were no requests of their own: {got}")
        check(after["tls_write_retries"] - before["tls_write_retries"] >= app["retries"],
              f"tls_write_retries counted the {app['retries']} retries: "
              f"{after['tls_write_retries'] - before['tls_write_retries']}")

        # The same write failed in a process that never retries it: the kernel keeps
        # its mark while the process lives, and the sweep deletes it once the process is
        # gone: without the sweep it would stay. Marks older than 10 s go too
        # (USM_TLS_RETRY_MAX_AGE_NS), so the mark must be there only when this look
        # ended within 10 s of the write's start (the app's "before", CLOCK_MONOTONIC
        # as the kernel's): on a machine slower than that, the look proves nothing.
        app = subprocess.Popen([args.python, os.path.join(HERE, "tls_retry_app.py"), cert,
                                key, "stop"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
        try:
            ready, _, _ = select.select([app.stdout], [], [], 120)
            check(ready, "tls_retry_app.py stop: its line within 120 s")
            line = json.loads(app.stdout.readline() or "{}")
            stopped = line.get("pid")
            check(stopped == app.pid, f"tls_retry_app.py stop: its pid {stopped}")
            marks = retry_marks_of(agent, stopped)
            looked = time.monotonic() - line["before"]
            if looked < 10:
                check(marks == 1, f"a write failed and not retried keeps its mark: {marks}")
            else:
                print(f"the mark's look ended {looked:.1f} s after the write, past the "
                      f"10 s its mark may live: its presence not checked ({marks})")
        finally:
            app.kill()
            app.wait()
        # Deleted by the module's sweep (without it the mark would stay for good): as the
        # process's, or as older than 10 s where this machine took that long. Which rule
        # deleted it is not told here; test_bpf_usm test_tls_write_retry_sweep checks
        # each rule apart.
        wait_for(lambda: retry_marks_of(agent, app.pid) == 0, 60,
                 "the sweep to delete the mark of a process gone")

        # Plaintext, through the socket filter: each end under the process that owns its
        # socket (test_usm_sides.py tests the sides further).
        out = subprocess.run(["curl", "-s", f"http://127.0.0.1:{plain_port}/items/7?secret=1"],
                             capture_output=True, text=True, timeout=30)
        check(out.stdout == "item\n", "plaintext curl answered")
        wait_count(agent, 1, "plaintext GET /items/* 200 counted from packets, server side",
                   pid=plain.pid, protocol="http", method="GET", path="/items/*", status=200)

        raw = agent.cli("http", "--json").stdout
        check("x=1" not in raw and "secret" not in raw and "item\\n" not in raw,
              "no query string or payload byte in the output")
        json.loads(raw)
        table = agent.cli("http").stdout
        check(any(str(tls.pid) in ln and "/items/*" in ln and " 53 " in f" {ln} "
                  for ln in table.splitlines()),
              "bpftel http shows the server's row with 53 requests")
        counters = agent.json("http")["counters"]
        check(counters["lost"] == 0 and counters["malformed"] == 0,
              f"no event lost or malformed: {counters}")

        for s in servers:
            s.kill()
            s.wait()
        servers = []
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        check(True, f"none of what the agent held remains: {agent.released()}")
    finally:
        for s in servers:
            s.kill()
            s.wait()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_usm: all checks passed")


if __name__ == "__main__":
    run(main)
