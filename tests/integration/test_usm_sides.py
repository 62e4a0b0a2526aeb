#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""USM data an operator can trust, against real programs:

  1. A python `ssl` server and a python `urllib` client on one host, 20 requests: the
     server's side counts 20 under the server's pid, the client's side 20 under the
     client's, and /metrics has a server and a client histogram of 20 each, never 40.
     curl, whose session has a BIO of its own (no SSL_set_fd), gets its connection.
  2. Plaintext: curl, and a python client on one kept-alive connection, against a python
     server, and curl against `python3 -m http.server`: both ends' pids (learnt from
     their connect and accept), both sides.
  3. A process in a cgroup named like a docker scope: its container id on its rows,
     and as a metrics label only with `metrics_labels = container`.
  4. A flood: one client sends 9 methods x 300 statuses; then a new process's new
     endpoint is still counted; series stay within http_series_max plus the overflow
     series; promtool stays clean; the path /caf\\xe9 is counted 5 times, escaped.
  5. Bodies that look like an HTTP/2 start (an upload) leave an HTTPS session HTTP/1.
  6. A server closes an HTTPS connection and accepts the next at the same fd number
     while the agent is stopped (SIGSTOP): once it runs again, the first connection's
     messages are given its own addresses, not the next one's; after two such reuses,
     none (counted tls_connection_reused).
  7. Clients run and gone while the agent is stopped: curl's client row is named
     "curl", as the watcher saw it open libssl, and a plaintext python client's as the
     watcher saw it connect, not "?".
  8. A served body that begins like a request, in a segment of its own, then bytes from
     the client that begin like a response: read by their first bytes, an exchange the
     other way round. The ends' sockets say which is whose (the server's accepted, the
     client's connected): not the process's rows, counted as ends_reversed.

The VM's cgroups are v1 (the cgroup is made under the pids hierarchy); on a v2 host the
same test would make it under /sys/fs/cgroup."""
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (agent_args, LIBSSL_PROBES, Agent, check, free_port, make_cert,  # noqa: E402
                      run, usm_settle, wait_for)
from agentlib import http_count as count, http_rows as rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONTAINER = "4f2b8a6c1d3e5f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"


def start_server(python, port, cert=None, key=None):
    args = [python, os.path.join(HERE, "status_server.py"), str(port)]
    if cert:
        args += [cert, key]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"]:
        proc.kill()
        raise AssertionError(f"status_server.py did not start: {line}")
    return proc


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def settled_count(agent, want, what, **match):
    wait_for(lambda: count(agent, **match) >= want, 30, what)
    usm_settle(agent)
    return count(agent, **match)


def metrics(agent):
    url = f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics"
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read().decode()


def sample(text, family, **labels):
    """The value of family{labels...} (a subset of its labels), summed."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(family + "{"):
            continue
        body, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in body for k, v in labels.items()):
            total += float(value)
    return total


def promtool_clean(text, what):
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True)
    check(res.returncode == 0, f"promtool check metrics {what}: {(res.stdout + res.stderr)[:200]}")


def server_attached(agent, server):
    wait_for(lambda: [r for r in agent.json("libs")["libs"]
                      if r.get("module") == "usm" and r["lib"] == "libssl" and
                      server.pid in r["pids"] and r["attached"] >= LIBSSL_PROBES], 30,
             "usm attached to the server's libssl")


def tls_sides(agent, python, tmp):
    cert, key = make_cert(tmp)
    port = free_port()
    server = start_server(python, port, cert, key)
    code = ("import ssl, urllib.request, sys\n"
            "ctx = ssl.create_default_context(); ctx.check_hostname = False\n"
            "ctx.verify_mode = ssl.CERT_NONE\n"
            "for i in range(20):\n"
            "    urllib.request.urlopen(f'https://127.0.0.1:{sys.argv[1]}/orders/{i}', "
            "context=ctx).read()\n")
    try:
        server_attached(agent, server)
        client = subprocess.run([python, "-c", code, str(port)], capture_output=True, text=True,
                                timeout=120)
        check(client.returncode == 0, f"urllib client made 20 HTTPS requests: {client.stderr}")
        srv = settled_count(agent, 20, "the server's side", pid=server.pid, side="server")
        check(srv == 20, f"server side: 20 requests under the server's pid {server.pid}: {srv}")
        cli_rows = rows(agent, side="client", path="/orders/*")
        cli = sum(r["count"] for r in cli_rows)
        pids = {r["pid"] for r in cli_rows}
        check(cli == 20 and len(pids) == 1 and server.pid not in pids,
              f"client side: 20 requests under another pid {pids}: {cli}")
        conn = rows(agent, pid=server.pid, side="server")[0]["connection"]
        check(conn["server"] == f"127.0.0.1:{port}" and conn["client"].startswith("127.0.0.1:"),
              f"the server's rows carry the connection: {conn}")
        # curl sets its session up with a BIO of its own, no SSL_set_fd: the recvfrom
        # inside its response's read names the socket (tls_recv_fd = on, this test's
        # configuration). Its request, written before any
        # read, is the one message of its session without a connection (it was two, the
        # response's too, before: each row then had none). tls_connection_unknown counts
        # the host's TLS messages alike (any curl meanwhile): shown, not asserted; the
        # rows' connections are this exchange's own.
        unknown = agent.json("http")["counters"]["tls_connection_unknown"]
        curl = subprocess.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{local_port}",
                               f"https://127.0.0.1:{port}/bio/1"], capture_output=True,
                              text=True, timeout=60)
        check(curl.returncode == 0, f"curl made an HTTPS request: {curl.stderr}")
        got = settled_count(agent, 1, "curl's request on the server's side", pid=server.pid,
                            side="server", path="/bio/*")
        crow = rows(agent, side="client", path="/bio/*")
        ccon = crow[0]["connection"] if len(crow) == 1 else None
        want = {"client": f"127.0.0.1:{curl.stdout}", "server": f"127.0.0.1:{port}"}
        srow = rows(agent, pid=server.pid, side="server", path="/bio/*")[0]["connection"]
        unknown = agent.json("http")["counters"]["tls_connection_unknown"] - unknown
        check(got == 1 and ccon == want and srow == want and
              agent.json("http")["tls_recv_fd"] is True,
              f"curl's row (its own BIO) carries its connection, the server's alike: {ccon}, "
              f"server {srow}, want {want}; tls_connection_unknown +{unknown}")
        text = metrics(agent)
        s = sample(text, "bpftel_http_server_request_duration_seconds_count",
                   http_route="/orders/*", http_response_status_code="200")
        c = sample(text, "bpftel_http_client_request_duration_seconds_count",
                   http_route="/orders/*", http_response_status_code="200")
        check(s == 20 and c == 20, f"/metrics: server histogram {s:.0f}, client {c:.0f} (not 40)")
        promtool_clean(text, "after HTTPS")
    finally:
        server.kill()
        server.wait()


# A TLS server, one connection at a time: "once" answers one request per connection
# and closes it; "keep" answers each request on a connection until its client closes.
ONE_AT_A_TIME = """
import select, socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
keep = sys.argv[4] == "keep"
while True:
    c, peer = s.accept()
    print("accepted", c.fileno(), peer[1], flush=True)
    try:
        t = ctx.wrap_socket(c, server_side=True)
        req = b""
        while keep:  # each request on the connection, until its client closes it
            if not t.pending():  # not in SSL_read meanwhile: a restart cannot split one
                select.select([t], [], [])
            got = t.recv(4096)
            if not got:
                break
            req += got
            while b"\\r\\n\\r\\n" in req:
                req = req.split(b"\\r\\n\\r\\n", 1)[1]
                t.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
        if not keep:
            t.recv(4096)
            t.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n"
                      b"Connection: close\\r\\n\\r\\nok")
        t.close()
    except (OSError, ssl.SSLError):
        c.close()
"""


def fd_reused(agent, python, tmp):
    """Case 6: the server's fd of a connection is closed and given to the next ones
    while the agent is stopped, and the first's request and response are read from the
    ring buffer after that. Once: they are given their own connection (the fd's one
    before), not the next one's. Twice: no connection, counted."""
    cert, key = make_cert(tmp)
    port = free_port()
    server = subprocess.Popen([python, "-c", ONE_AT_A_TIME, str(port), cert, key, "once"],
                              stdout=subprocess.PIPE, text=True)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    stopped = False
    later = []

    def accepted():
        line = server.stdout.readline().split()
        check(line[:1] == ["accepted"], f"the server accepted: {line}")
        return line[1], line[2]

    def exchange(path, reuses):
        """A request on path, then reuses connections given its server fd (the last
        kept open), all while the agent is stopped: the request's client port."""
        nonlocal stopped
        os.kill(agent.proc.pid, signal.SIGSTOP)
        stopped = True
        # The request's own connection stays open until the others are accepted: only
        # the server's fd number is reused.
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30)) as a:
            a.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            while a.recv(4096):
                pass
            fd, cport = accepted()
            for i in range(reuses):
                later.append(socket.create_connection(("127.0.0.1", port), timeout=30))
                again = accepted()
                check(again[0] == fd, f"the server gave the next connection fd {fd}: {again}")
                if i < reuses - 1:
                    later.pop().close()
        os.kill(agent.proc.pid, signal.SIGCONT)
        stopped = False
        got = settled_count(agent, 1, f"{path}", pid=server.pid, side="server", path=path)
        check(got == 1, f"{path}: counted once on the server's side: {got}")
        while later:  # the server waits on its handshake: its end frees the server
            later.pop().close()
        return cport

    try:
        check(server.stdout.readline().split() == ["ready"], "the one-at-a-time server started")
        server_attached(agent, server)
        before = agent.json("http")["counters"]["tls_connection_reused"]
        cport = exchange("/reused/once", 1)
        conn = rows(agent, pid=server.pid, side="server", path="/reused/once")[0]["connection"]
        reused = agent.json("http")["counters"]["tls_connection_reused"] - before
        check(conn["client"] == f"127.0.0.1:{cport}" and conn["server"] == f"127.0.0.1:{port}"
              and reused == 0,
              f"its fd given once more: the request's own connection (client port {cport}), "
              f"not the next one's: {conn}, tls_connection_reused +{reused}")
        exchange("/reused/twice", 2)
        conn = rows(agent, pid=server.pid, side="server", path="/reused/twice")[0]["connection"]
        reused = agent.json("http")["counters"]["tls_connection_reused"] - before
        check(conn["client"] is None and conn["server"] is None and reused == 2,
              f"given twice more: no connection, not another's, counted: {conn}, "
              f"tls_connection_reused +{reused}")
    finally:
        if stopped:
            os.kill(agent.proc.pid, signal.SIGCONT)
        for b in later:
            b.close()
        server.kill()
        server.wait()


def kept_across_restart(agent, python, tmp):
    """A keep-alive HTTPS connection made before `bpftel module restart usm` is still
    known after it where USM learns a session's socket anew at its reads (curl's own
    BIO, tls_recv_fd on): the restart keeps the watcher recording sockets for USM, so
    the fd's entry of the connect before is taken, not refused as from a stretch it was
    off. The server's session, set up by SSL_set_fd before the restart, keeps its
    socket after it: the new instance reuses the TLS sessions' table (the server waits
    in select, not in SSL_read: a read whose entry the old instance saw is lost, its
    return unseen). curl --rate starts its second request on the connection a gap
    after its first: the restart and re-attach must be seen done before that gap can
    have ended, or the round is run again, the gap longer."""
    cert, key = make_cert(tmp)
    port = free_port()
    server = subprocess.Popen([python, "-c", ONE_AT_A_TIME, str(port), cert, key, "keep"],
                              stdout=subprocess.PIPE, text=True)
    client = None
    try:
        check(server.stdout.readline().split() == ["ready"], "the keep-alive server started")
        server_attached(agent, server)
        for rnd, (rate, gap) in enumerate((("2/m", 30), ("1/m", 60), ("20/h", 180))):
            before, after = f"/kept/before{rnd}", f"/kept/after{rnd}"
            started = time.monotonic()
            client = subprocess.Popen(["curl", "-sk", "--rate", rate,
                                       f"https://127.0.0.1:{port}{before}",
                                       f"https://127.0.0.1:{port}{after}"],
                                      stdout=subprocess.PIPE)
            settled_count(agent, 1, f"curl's {before}", pid=client.pid, side="client",
                          path=before)
            agent.cli("module", "restart", "usm")
            wait_for(lambda: [r for r in agent.json("libs")["libs"]
                              if r.get("module") == "usm" and r["lib"] == "libssl" and
                              client.pid in r["pids"] and server.pid in r["pids"] and
                              r["attached"] >= LIBSSL_PROBES],
                     60, "usm attached to curl's and the server's libssl again")
            in_time = time.monotonic() - started < gap
            out = client.communicate(timeout=gap + 120)[0]
            check(client.returncode == 0 and out == b"okok", f"curl's two requests: {out!r}")
            if in_time:
                break
            print(f"note: the restart was not seen done within {gap} s of curl's start: "
                  "again, the gap longer")
        check(in_time, "the restart done before curl's second request, in one round")
        settled_count(agent, 1, f"curl's {after}", pid=client.pid, side="client", path=after)
        conn = rows(agent, pid=client.pid, side="client", path=after)[0]["connection"]
        check(conn["server"] == f"127.0.0.1:{port}" and conn["client"],
              f"the keep-alive connection made before the restart is known after it: {conn}")
        settled_count(agent, 1, f"the server's {after}", pid=server.pid, side="server",
                      path=after)
        sconn = rows(agent, pid=server.pid, side="server", path=after)[0]["connection"]
        check(sconn == conn, f"the server's session, set up before the restart, keeps its "
              f"socket after it: {sconn}, curl's {conn}")
    finally:
        for p in (client, server):
            if p:
                p.kill()
                p.wait()


def gone_client(agent, python, tmp):
    """Case 7: nothing of a client's /proc is left to read when its messages are: curl
    over TLS (named after its open of libssl), and a python client over plaintext that
    loads no library the watcher reports (named after its connect)."""
    cert, key = make_cert(tmp)
    port, plain_port = free_port(), free_port()
    server = start_server(python, port, cert, key)
    plain = start_server(python, plain_port)
    get = ("import socket, sys\n"
           "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
           "s.sendall(b'GET /gone/plain HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
           "s.recv(4096)\n")
    stopped = False
    try:
        server_attached(agent, server)
        os.kill(agent.proc.pid, signal.SIGSTOP)
        stopped = True
        curl = subprocess.Popen(["curl", "-sk", f"https://127.0.0.1:{port}/gone/1"],
                                stdout=subprocess.PIPE, text=True)
        out = curl.communicate(timeout=60)[0]
        client = subprocess.run([python, "-S", "-c", get, str(plain_port)], timeout=60)
        check(curl.returncode == 0 and client.returncode == 0 and
              not os.path.exists(f"/proc/{curl.pid}"),
              f"curl ({curl.pid}) and a python client made their requests and exited, "
              f"the agent stopped: {out!r}")
        os.kill(agent.proc.pid, signal.SIGCONT)
        stopped = False
        got = settled_count(agent, 1, "curl's request", pid=curl.pid, side="client")
        # The watcher's thread reads curl's open of libssl, which names it, on its own.
        wait_for(lambda: rows(agent, pid=curl.pid, side="client")[0]["comm"] != "?", 30,
                 "curl's row to be named")
        row = rows(agent, pid=curl.pid, side="client")[0]
        check(got == 1 and row["comm"] == "curl",
              f"curl's row, read after it exited: {got} request, named {row['comm']!r}")
        got = settled_count(agent, 1, "the python client's request", side="client",
                            path="/gone/plain")
        row = rows(agent, side="client", path="/gone/plain")[0]
        check(got == 1 and row["comm"] == os.path.basename(python)[:15],
              f"the python client's row, read after it exited: {got} request, "
              f"pid {row['pid']} named {row['comm']!r}")
    finally:
        if stopped:
            os.kill(agent.proc.pid, signal.SIGCONT)
        for p in (server, plain):
            p.kill()
            p.wait()


def lookalike_bodies(agent, python, tmp):
    """One kept-alive HTTPS connection: two uploads whose bodies begin like an HTTP/2
    SETTINGS frame and like the connection preface, each written on its own, then a GET.
    The session stays HTTP/1: all three requests counted on both sides (the GET was
    hidden when a body turned the session into HTTP/2), the lookalikes counted as
    h2_starts_refused, no HTTP/2 row for either end."""
    cert, key = make_cert(tmp)
    port = free_port()
    server = start_server(python, port, cert, key)
    client = None
    code = ("import socket, ssl, sys\n"
            "ctx = ssl.create_default_context(); ctx.check_hostname = False\n"
            "ctx.verify_mode = ssl.CERT_NONE\n"
            "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))))\n"
            "got = b''\n"
            "def ask(head, body=b''):\n"
            "    global got\n"
            "    s.sendall(head)\n"
            "    if body:\n"
            "        s.sendall(body)\n"
            "    want = got.count(b'ok\\n') + 1\n"
            "    while got.count(b'ok\\n') < want:\n"
            "        got += s.recv(4096)\n"
            "for i, body in enumerate((bytes([0, 0, 12, 4, 0, 0, 0, 0, 0]) + bytes(12),\n"
            "                          b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n')):\n"
            "    ask(b'POST /upload/%d HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: %d\\r\\n\\r\\n'\n"
            "        % (i, len(body)), body)\n"
            "ask(b'GET /after/2 HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n')\n"
            "print('done', flush=True); sys.stdin.readline()\n")
    try:
        server_attached(agent, server)
        before = agent.json("http")["counters"]
        client = subprocess.Popen([python, "-c", code, str(port)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        check(client.stdout.readline().strip() == "done", "the client made its 3 requests")
        got = {}
        for side, pid in (("client", client.pid), ("server", server.pid)):
            after = settled_count(agent, 1, f"the GET after the uploads, {side} side", pid=pid,
                                  side=side, path="/after/*")
            up = count(agent, pid=pid, side=side, path="/upload/*")
            got[side] = (up, after)
        check(got == {"client": (2, 1), "server": (2, 1)},
              f"uploads and the GET after them (uploads, GETs) per side: {got}")
        now = agent.json("http")["counters"]
        refused = now["h2_starts_refused"] - before["h2_starts_refused"]
        check(refused >= 2, f"the client's two lookalike bodies counted as h2_starts_refused: "
                            f"{refused}")
        h2 = [r for pid in (client.pid, server.pid) for r in rows(agent, pid=pid, version="2")]
        check(not h2, f"no HTTP/2 row for either end: {h2}")
        client.stdin.close()
        client.wait(timeout=30)
    finally:
        if client and client.poll() is None:
            client.kill()
        server.kill()
        server.wait()


def plaintext_sides(agent, python):
    port = free_port()
    server = start_server(python, port)
    keep = ("import http.client, sys\n"
            "c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]))\n"
            "print('connected', flush=True)\n"
            "for i in range(3):\n"
            "    c.request('GET', f'/kept/{i}'); c.getresponse().read()\n"
            "print('done', flush=True); sys.stdin.readline()\n")
    try:
        curl = subprocess.Popen(["curl", "-s", "-o", "/dev/null",
                                 f"http://127.0.0.1:{port}/plain/1"])
        curl.wait(timeout=30)
        srv = settled_count(agent, 1, "curl's request on the server's side", pid=server.pid,
                            side="server", path="/plain/*")
        cli = count(agent, pid=curl.pid, side="client", path="/plain/*")
        # Named whether its message was read before curl exited (/proc) or after (as
        # the watcher saw it connect).
        comm = rows(agent, pid=curl.pid, side="client")[0]["comm"]
        check(srv == 1 and cli == 1 and comm == "curl",
              f"plaintext curl: server pid {server.pid} counted {srv}, curl pid {curl.pid} "
              f"counted {cli}, named {comm!r}")
        kept = subprocess.Popen([python, "-c", keep, str(port)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        kept.stdout.readline()
        kept.stdout.readline()
        n = settled_count(agent, 3, "the kept-alive client", pid=kept.pid, side="client",
                          path="/kept/*")
        m = count(agent, pid=server.pid, side="server", path="/kept/*")
        check(n == 3 and m == 3, f"a long-lived python client: its pid {kept.pid} counted {n}, "
                                 f"the server's {m}")
        kept.stdin.close()
        kept.wait(timeout=30)
    finally:
        server.kill()
        server.wait()
    # The stock server, as users run it: python3 -m http.server (HTTP/1.0).
    port = free_port()
    www = tempfile.mkdtemp(prefix="bpftel-www-")
    os.makedirs(os.path.join(www, "stock"))
    with open(os.path.join(www, "stock", "7"), "w") as f:
        f.write("x\n")
    stock = subprocess.Popen([python, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                              "--directory", www], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_open(port), 30, "python3 -m http.server to listen")
        curl = subprocess.Popen(["curl", "-s", "-o", "/dev/null",
                                 f"http://127.0.0.1:{port}/stock/7"])
        curl.wait(timeout=30)
        srv = settled_count(agent, 1, "curl's request to http.server", pid=stock.pid,
                            side="server", path="/stock/*")
        cli = count(agent, pid=curl.pid, side="client", path="/stock/*")
        check(srv == 1 and cli == 1,
              f"plaintext curl against python3 -m http.server: server pid {stock.pid} "
              f"counted {srv}, curl pid {curl.pid} counted {cli}")
    finally:
        stock.kill()
        stock.wait()
        shutil.rmtree(www, ignore_errors=True)


def read_exact(sock, n):
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise AssertionError(f"connection closed after {len(got)} of {n} bytes")
        got += chunk
    return got


def reversed_ends(agent):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    try:
        for s in (cli, srv):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        before = agent.json("http")["counters"]["ends_reversed"]
        req = b"GET /real/1 HTTP/1.1\r\nHost: x\r\n\r\n"
        body = b"GET /evil/1 HTTP/1.1\r\n\r\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        cli.sendall(req)
        read_exact(srv, len(req))
        srv.sendall(head)
        read_exact(cli, len(head))  # received: the body goes in a segment of its own
        srv.sendall(body)
        read_exact(cli, len(body))
        cli.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        read_exact(srv, 19)
        wait_for(lambda: agent.json("http")["counters"]["ends_reversed"] > before, 60,
                 "the reversed exchange to be counted")
        usm_settle(agent)  # the body's record, had one been made, taken too
        me = os.getpid()
        real = count(agent, pid=me, side="server", path="/real/*")
        evil = [r for r in rows(agent, pid=me) if r["path"].startswith("/evil")]
        check(real == 1 and not evil,
              f"a body that begins like a request: the real request counted {real} on the "
              f"server's side, no row of pid {me} for the body's: {evil}")
    finally:
        for s in (cli, srv, lst):
            s.close()


def in_docker_cgroup(pid):
    """Move pid into a cgroup named like a docker scope: (its directory, the parent)."""
    parent = "/sys/fs/cgroup/pids/system.slice"
    if not os.path.isdir("/sys/fs/cgroup/pids"):
        parent = "/sys/fs/cgroup/system.slice"  # cgroup v2
    os.makedirs(parent, exist_ok=True)
    d = os.path.join(parent, f"docker-{CONTAINER}.scope")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(pid))
    return d


def container_identity(agent, python, conf):
    port = free_port()
    server = start_server(python, port)
    d = None
    try:
        d = in_docker_cgroup(server.pid)
        subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/ct/1"],
                       check=True, timeout=30)
        settled_count(agent, 1, "the request in the container", pid=server.pid, side="server",
                      path="/ct/*")
        r = rows(agent, pid=server.pid, side="server", path="/ct/*")[0]
        check(r["container_id"] == CONTAINER and r["container_runtime"] == "docker" and
              r["cgroup"].endswith(f"docker-{CONTAINER}.scope") and r["cgroup_id"],
              f"the row carries its container: {r['container_runtime']} {r['container_id'][:12]}"
              f", cgroup {r['cgroup']} (id {r['cgroup_id']})")
        check("container_id=" not in metrics(agent),
              "no container_id label in /metrics by default")
        # Opted in: SIGHUP's reload starts the series over, labelled; the label appears
        # with the first request counted after it (one a try: the reload is async).
        with open(conf, "a") as f:
            f.write("metrics_labels = container\n")
        agent.proc.send_signal(signal.SIGHUP)
        label = f'container_id="{CONTAINER}"'

        def labelled():
            subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/ct/2"],
                           check=True, timeout=30)
            return label in metrics(agent)
        wait_for(labelled, 30, "the container_id label once metrics_labels = container")
        check(label in metrics(agent), "with metrics_labels = container, the series carry "
                                       "container_id")
        user_owned_container(agent, python, label)
    finally:
        server.kill()
        server.wait()
        if d:
            os.rmdir(d)


def labelled_count(text, label):
    """The server requests counted in series carrying label."""
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("bpftel_http_server_request_duration_seconds_count{")
               and label in line)


def user_owned_container(agent, python, root_label):
    """A user given a cgroup subtree names one docker-<the root container's id>.scope:
    its server's requests are the id's with uid 1000, not the root container's."""
    hier = "/sys/fs/cgroup/pids" if os.path.isdir("/sys/fs/cgroup/pids") else "/sys/fs/cgroup"
    top = os.path.join(hier, f"bpftel-deleg-{os.getpid()}")
    deleg = os.path.join(top, "user@1000.service")
    d = os.path.join(deleg, f"docker-{CONTAINER}.scope")
    port = free_port()
    server = start_server(python, port)
    try:
        os.makedirs(d)
        os.chown(deleg, 1000, 1000)  # what systemd's Delegate= does
        os.chown(d, 1000, 1000)
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(server.pid))
        # The last of labelled()'s requests may still be in flight: counted first.
        usm_settle(agent)
        before = labelled_count(metrics(agent), root_label)
        subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/ct/3"],
                       check=True, timeout=30)
        settled_count(agent, 1, "the request in the user's cgroup", pid=server.pid,
                      side="server", path="/ct/*")
        r = rows(agent, pid=server.pid, side="server", path="/ct/*")[0]
        check(r["container_id"] == CONTAINER and r["container_owner_uid"] == 1000,
              f"a user's docker-<id>.scope: container {r['container_id'][:12]} owned by uid "
              f"{r['container_owner_uid']}")
        user_label = f'container_id="{CONTAINER}@uid1000"'
        wait_for(lambda: labelled_count(metrics(agent), user_label) == 1, 30,
                 "the user's request in its own series")
        after = labelled_count(metrics(agent), root_label)
        check(after == before, f"the root container's series counted {before} requests "
                               f"before the user's request, {after} after")
        out = agent.cli("http").stdout
        check(f"ct:{CONTAINER[:12]}@uid1000" in out,
              "bpftel http shows the user's container with its owner")
    finally:
        server.kill()
        server.wait()
        for p in (d, deleg, top):
            if os.path.isdir(p):
                os.rmdir(p)


CAFE = r"""
import socket, sys
# Raw bytes: a path with a byte that is not UTF-8 (http.client would refuse to send it).
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
f = s.makefile('rb')
for i in range(5):
    s.sendall(b'GET /caf\xe9/x HTTP/1.1\r\nHost: t\r\n\r\n')
    n = 0
    while True:
        line = f.readline()
        if line.lower().startswith(b'content-length:'):
            n = int(line.split(b':')[1])
        if line in (b'\r\n', b''):
            break
    f.read(n)
print(5)
"""

FLOOD = r"""
import http.client, sys
c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]))
n = 0
for m in ('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PURGE'):
    for s in range(200, 500):
        c.request(m, f'/s/{s}/x')
        c.getresponse().read()
        n += 1
print(n)
"""


def flood(agent, python):
    port = free_port()
    server = start_server(python, port)
    try:
        # Bytes >= 0x80 first (before the flood fills this server's rows).
        cafe = subprocess.run([python, "-c", CAFE, str(port)], capture_output=True, text=True,
                              timeout=60)
        check(cafe.stdout.strip() == "5", f"5 requests of /caf\\xe9/x sent {cafe.stderr[-200:]}")
        n = settled_count(agent, 5, "/caf\\xe9/x", pid=server.pid, side="server",
                          path="/caf\\xE9/x")
        json_text = agent.cli("http", "--json").stdout
        table = agent.cli("http").stdout
        check(n == 5 and "/caf\\\\xE9/x" in json_text and "/caf\\xE9/x" in table and
              "\xe9" not in table,
              f"/caf\\xe9/x counted {n} times, escaped as /caf\\xE9/x in JSON and the table")
        # A method outside the standard set: its own row, method _OTHER.
        purge = subprocess.run([python, "-c", CAFE.replace("b'GET /caf\\xe9/x", "b'PURGE /p/x")
                                .replace("range(5)", "range(2)"), str(port)],
                               capture_output=True, text=True, timeout=60)
        n = settled_count(agent, 2, "PURGE /p/x", pid=server.pid, side="server",
                          method="_OTHER", path="/p/x", status=200)
        check(purge.returncode == 0 and n == 2, f"PURGE /p/x counted under _OTHER: {n}")
        # A status outside 100..599: rejected and counted, not a row.
        before = agent.json("http")["counters"]["rejected"]["status"]
        bad = subprocess.run([python, "-c", CAFE.replace("/caf\\xe9/x", "/s/999/x")
                              .replace("range(5)", "range(1)"), str(port)],
                             capture_output=True, text=True, timeout=60)
        wait_for(lambda: agent.json("http")["counters"]["rejected"]["status"] >= before + 1,
                 30, "the 999 response counted as rejected")
        check(bad.returncode == 0 and count(agent, pid=server.pid, status=999) == 0,
              "a 999 status is rejected (counted under rejected.status), in no row")
        fl = subprocess.run([python, "-c", FLOOD, str(port)], capture_output=True, text=True,
                            timeout=600)
        check(fl.returncode == 0 and fl.stdout.strip() == "2700",
              f"one client sent 9 methods (PURGE among them) x 300 statuses: "
              f"{fl.stdout.strip()} {fl.stderr[-200:]}")
        usm_settle(agent, what="USM's userspace to take the flood")
        total = count(agent, pid=server.pid, side="server") - 7
        check(total == 2700, f"every request of the flood counted on the server's side, in its "
                             f"rows or its overflow row: {total}")
        curl = subprocess.Popen(["curl", "-s", "-o", "/dev/null",
                                 f"http://127.0.0.1:{port}/legit/1"])
        curl.wait(timeout=30)
        n = settled_count(agent, 1, "the new process's new endpoint", pid=curl.pid,
                          side="client", path="/legit/*")
        check(n == 1, f"after the flood, a new process's new endpoint is counted: {n}")
        text = metrics(agent)
        series = [ln for ln in text.splitlines()
                  if re.match(r"bpftel_http_(server|client)_request_duration_seconds_count\{", ln)]
        over = [ln for ln in series if 'http_route="(overflow)"' in ln]
        check(len(series) <= 50 + 2 and over,
              f"/metrics: {len(series)} HTTP series (budget 50, plus one overflow series a "
              f"side: {len(over)})")
        check(sample(text, "bpftel_http_overflow_requests_total", reason="series_budget") > 0,
              "bpftel_http_overflow_requests_total counts what the budget folded")
        promtool_clean(text, "after the flood")
        # A module restart keeps the endpoint table (it belongs to the module, not to its
        # BPF object): Prometheus sees no counter reset. The scrapes above are HTTP the
        # socket filter sees too (the test's client, the agent's server): taken first.
        usm_settle(agent, what="USM's userspace to take the scrapes")
        before = count(agent, pid=server.pid)  # this server's: the host's may move
        agent.cli("module", "restart", "usm")
        after = count(agent, pid=server.pid)
        check(after == before and before >= 2700,
              f"bpftel module restart usm keeps the table: {before} -> {after}")
        wait_for(lambda: any(r["name"] == "usm" and r["state"] == "running"
                             for r in agent.json("modules")["modules"]), 30, "usm running again")
        curl = subprocess.Popen(["curl", "-s", "-o", "/dev/null",
                                 f"http://127.0.0.1:{port}/after/restart"])
        curl.wait(timeout=30)
        n = settled_count(agent, 1, "a request after the restart", pid=curl.pid,
                          side="client", path="/after/restart")
        check(n == 1, f"a request after the restart is counted in the same table: {n}")
    finally:
        server.kill()
        server.wait()


def main():
    args = agent_args(("curl", "openssl", "promtool"))
    tmp = tempfile.mkdtemp(prefix="bpftel-sides-")
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        # The flood's 2700 requests are counted exactly: a queue deep enough that a
        # starved worker drops none of them (queue_full) on a slow machine.
        f.write("http_series_max = 50\nmetrics_addr = 127.0.0.1:0\ntls_recv_fd = on\n"
                "queue_len = 16384\n")
    agent = Agent(args.agent, args.cli, ["-c", conf])
    try:
        tls_sides(agent, args.python, tmp)
        lookalike_bodies(agent, args.python, tmp)
        fd_reused(agent, args.python, tmp)
        kept_across_restart(agent, args.python, tmp)
        gone_client(agent, args.python, tmp)
        plaintext_sides(agent, args.python)
        reversed_ends(agent)
        container_identity(agent, args.python, conf)
        flood(agent, args.python)
        check(agent.stop() == 0, "the agent stops cleanly")
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(main)
