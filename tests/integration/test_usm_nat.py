#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Plaintext HTTP NATed on its way through the host is counted once.

Two network namespaces, a client's and a server's, each behind a veth pair, routed by
the host, with the client's traffic masqueraded out of the server's side (a container
reaching a service through the host's NAT). The socket filter, in the host's namespace,
sees each segment twice: on the client's veth with the client's address, and on the
server's with the host's. The two copies share their TCP numbers (nat_copies.h):

  1. A keep-alive connection made and accepted before the agent ran (neither end
     known): 3 requests are 3 unattributed exchanges, not 6; 3 NAT copies counted.
     A squatter in a user namespace of its own (`unshare -Urn`, as any user can) that
     connects over the same 4-tuple, its addresses on its loopback, is not taken for
     their owner: counted in the watcher's userns_sockets, and given no row.
  2. A connection made before the agent, accepted by the server only after it started
     (its end known, the client's not): 2 requests counted on the server's side, none
     unattributed; 2 NAT copies.
  3. curl after the agent started (both ends known, each copy knows one): 1 request on
     the server's side and 1 on curl's, no NAT copy.
  4. Cleartext HTTP/2 (h2c, python's h2 on both ends): a client connected before the
     agent ran, accepted by the server after it started, sends its first request: it
     is counted once, on the server's side; 1 NAT copy. (h2c hands a first request on
     with its response: its copies are noted when decoded, in the order seen.)
  5. A request the server never answers, followed on its connection by one it does:
     unanswered once in counters.pairing, not once per copy (its other copy is a NAT
     copy), and a request once there.
  6. A POST with `Expect: 100-continue`: its `100 Continue` counts once in
     counters.pairing.interim, not once per copy (the other is a NAT copy).

/metrics' bpftel_http_nat_copies_total says the same. The namespaces, the veth pairs
and the NAT rule are removed at the end, and ip_forward restored."""
import os
import queue
import subprocess
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (agent_args, Agent, check, skip, usm_settle, wait_for)  # noqa: E402
from agentlib import http_count as count  # noqa: E402

NS_C, NS_S = "bpftel-nat-c", "bpftel-nat-s"
SYS_PYTHON = "/usr/bin/python3"  # Debian's, with python3-h2 (case 4's ends)
HOST_C, HOST_S = "bpftnat-hc", "bpftnat-hs"
NET_C, NET_S = "10.231.7", "10.231.8"
SERVER = f"{NET_S}.2"
NAT_RULE = ["-s", f"{NET_C}.0/24", "-o", HOST_S, "-j", "MASQUERADE"]
IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"
# The host's ip_forward before this test set it, kept until it is restored: a run
# killed before its end (ctest's timeout) leaves it for the next run to restore.
FORWARD_SAVED = "/run/bpftel-test-usm-nat.ip_forward"
# Forwarding between the two, whatever the host's FORWARD policy (docker sets DROP).
FORWARD_RULES = [["-i", HOST_C, "-o", HOST_S, "-j", "ACCEPT"],
                 ["-i", HOST_S, "-o", HOST_C, "-j", "ACCEPT"]]

# An HTTP/1.1 server that accepts a connection when told to on stdin ("accept"), or at
# once, and answers each request on it with 200, but those of /lost/*, which it never
# answers; a request with Expect: 100-continue gets 100 Continue before its 2-byte body.
SERVER_PY = r"""
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)

def serve(c):
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        hdrs = []
        while True:
            h = f.readline()
            if h in (b"\r\n", b""):
                break
            hdrs.append(h.lower())
        if b"expect: 100-continue\r\n" in hdrs:
            c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            f.read(2)
        if b" /lost/" not in line:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

def accept():
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
    print("accepted", flush=True)

def accept_all():
    while True:
        accept()

for cmd in sys.stdin:
    if cmd.strip() == "accept":
        accept()
    elif cmd.strip() == "serve":
        threading.Thread(target=accept_all, daemon=True).start()
"""

# A keep-alive client: connects, says "connected PORT" (its own), then one GET per
# path on stdin, printing each status ("sent" for /lost/*, whose answer it does not
# wait for); for /interim/*, a POST of 2 bytes sent once its 100 Continue is read.
CLIENT_PY = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("connected", c.getsockname()[1], flush=True)
f = c.makefile("rb")
for path in sys.stdin:
    if path.startswith("/interim/"):
        c.sendall(f"POST {path.strip()} HTTP/1.1\r\nHost: s\r\nExpect: 100-continue\r\n"
                  "Content-Length: 2\r\n\r\n".encode())
        if f.readline().split()[1] != b"100" or f.readline() != b"\r\n":
            sys.exit("no 100 Continue")
        c.sendall(b"ok")
    else:
        c.sendall(f"GET {path.strip()} HTTP/1.1\r\nHost: s\r\n\r\n".encode())
    if path.startswith("/lost/"):
        print("sent", flush=True)
        continue
    status = f.readline().split()[1].decode()
    while f.readline() != b"\r\n":
        pass
    f.read(2)
    print(status, flush=True)
"""


# An h2c client (python's h2): connects, says "connected", and on a line on stdin sends
# the connection preface and one GET of argv[3], printing the response's status.
H2C_CLIENT_PY = r"""
import socket, sys, time
import h2.config, h2.connection, h2.events
for _ in range(300):
    try:
        s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
        s.settimeout(None)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("no connection")
print("connected", flush=True)
sys.stdin.readline()
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":path", sys.argv[3]), (":scheme", "http"),
                   (":authority", "s")], end_stream=True)
s.sendall(c.data_to_send())
while True:
    data = s.recv(65536)
    if not data:
        sys.exit(1)
    for e in c.receive_data(data):
        if isinstance(e, h2.events.ResponseReceived):
            print(dict(e.headers)[b":status"].decode(), flush=True)
        if isinstance(e, h2.events.StreamEnded):
            sys.exit(0)
    s.sendall(c.data_to_send())
"""


# An h2c server (python's h2) that accepts one connection when told to on stdin, then
# answers each request with 200.
H2C_SERVER_PY = r"""
import socket, sys
import h2.config, h2.connection, h2.events
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(4)
print("ready", flush=True)
sys.stdin.readline()
c, _ = s.accept()
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
conn.initiate_connection()
c.sendall(conn.data_to_send())
print("accepted", flush=True)
while True:
    data = c.recv(65536)
    if not data:
        break
    for e in conn.receive_data(data):
        if isinstance(e, h2.events.RequestReceived):
            conn.send_headers(e.stream_id, [(":status", "200")], end_stream=True)
    c.sendall(conn.data_to_send())
"""


# The squatter, in a user and network namespace of its own: the client's and the
# server's addresses on its loopback device, a connection from the client's address and
# port (argv[1]) to the server's, accepted; "squatted", then it waits on stdin.
SQUAT_PY = r"""
import socket, subprocess, sys
for cmd in (["ip", "addr", "add", "CLIENT/32", "dev", "lo"],
            ["ip", "addr", "add", "SERVER/32", "dev", "lo"], ["ip", "link", "set", "lo", "up"]):
    subprocess.run(cmd, check=True)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("SERVER", 18080))
s.listen(1)
c = socket.socket()
c.bind(("CLIENT", int(sys.argv[1])))
c.connect(("SERVER", 18080))
a, _ = s.accept()
print("squatted", flush=True)
sys.stdin.readline()
"""


def sh(*cmd, check_rc=True):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check_rc and res.returncode:
        raise AssertionError(f"{' '.join(cmd)}: {res.stderr.strip()}")
    return res


def teardown():
    sh("iptables", "-t", "nat", "-D", "POSTROUTING", *NAT_RULE, check_rc=False)
    for rule in FORWARD_RULES:
        sh("iptables", "-D", "FORWARD", *rule, check_rc=False)
    for ns in (NS_C, NS_S):
        sh("ip", "netns", "del", ns, check_rc=False)
    for dev in (HOST_C, HOST_S):
        sh("ip", "link", "del", dev, check_rc=False)


def setup():
    """The two namespaces behind the host, the client's masqueraded (the caller restores
    ip_forward and tears it down, whether this finished or not)."""
    teardown()  # a run killed before its own teardown
    for ns, host, peer, net in ((NS_C, HOST_C, "eth0", NET_C), (NS_S, HOST_S, "eth0", NET_S)):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host, "type", "veth", "peer", "name", f"{host}p")
        sh("ip", "link", "set", f"{host}p", "netns", ns)
        sh("ip", "-n", ns, "link", "set", f"{host}p", "name", peer)
        sh("ip", "addr", "add", f"{net}.1/24", "dev", host)
        sh("ip", "link", "set", host, "up")
        sh("ip", "-n", ns, "addr", "add", f"{net}.2/24", "dev", peer)
        sh("ip", "-n", ns, "link", "set", peer, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", f"{net}.1")
    with open(IP_FORWARD, "w") as f:
        f.write("1")
    sh("iptables", "-t", "nat", "-A", "POSTROUTING", *NAT_RULE)
    for rule in FORWARD_RULES:
        sh("iptables", "-I", "FORWARD", *rule)


def in_ns(ns, python, code, *args):
    """python running code in namespace ns (pumped())."""
    return pumped(["ip", "netns", "exec", ns, python, "-c", code, *args])


def pumped(cmd):
    """cmd running, its stdout's lines queued (proc.lines) by a thread, so that waiting
    for one has a deadline (line_of)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.lines = queue.Queue()

    def pump():
        for line in proc.stdout:
            proc.lines.put(line.strip())
        proc.lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return proc


def port_of(proc, what):
    """A client's "connected PORT" line: its port."""
    try:
        got = proc.lines.get(timeout=60)
    except queue.Empty:
        got = "(nothing in 60 s)"
    words = (got or "").split()
    check(len(words) == 2 and words[0] == "connected", f"{what}: {got!r}")
    return int(words[1])


def say(proc, text):
    """A line to proc's stdin, sent now."""
    proc.stdin.write(text)
    proc.stdin.flush()


def line_of(proc, want, what):
    try:
        got = proc.lines.get(timeout=60)
    except queue.Empty:
        got = "(nothing in 60 s)"
    check(got == want, f"{what}: {got!r}")


def original_forward():
    """ip_forward as the host had it: saved by this run, or by one killed before its end."""
    if os.path.exists(FORWARD_SAVED):
        with open(FORWARD_SAVED) as f:
            return f.read().strip()
    with open(IP_FORWARD) as f:
        forward = f.read().strip()
    with open(FORWARD_SAVED, "w") as f:
        f.write(forward)
    return forward


def counters(agent):
    return agent.json("http")["counters"]


def metric(agent, family):
    url = f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics"
    with urllib.request.urlopen(url, timeout=120) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(family + " "):
                return float(line.split()[1])
    return None


def pairing_grew(agent, before, keys):
    """What counters.pairing's keys and the NAT copies grew by since before."""
    c = counters(agent)
    return ({k: c["pairing"][k] - before["pairing"][k] for k in keys},
            c["nat_copies"] - before["nat_copies"])


def settled(agent, pred, what):
    wait_for(pred, 30, what)
    usm_settle(agent)


def main():
    args = agent_args(("ip", "iptables", "curl"))
    if subprocess.run([SYS_PYTHON, "-c", "import h2"], capture_output=True).returncode:
        skip("python3-h2 is not installed (tools/dev.sh test installs it)")
    forward = original_forward()
    procs = []
    try:
        setup()
        h2srv = in_ns(NS_S, SYS_PYTHON, H2C_SERVER_PY, SERVER, "18081")
        procs.append(h2srv)
        line_of(h2srv, "ready", "case 4: the h2c server listens")
        # Case 4's connection: made before the agent runs, accepted after it started.
        h2cli = in_ns(NS_C, SYS_PYTHON, H2C_CLIENT_PY, SERVER, "18081", "/h2c/1")
        procs.append(h2cli)
        line_of(h2cli, "connected", "case 4: the h2c client connected through the NAT")
        srv = in_ns(NS_S, args.python, SERVER_PY, SERVER, "18080")
        procs.append(srv)
        line_of(srv, "ready", "the server in its namespace listens")
        # Case 1's connection: made and accepted before the agent runs.
        say(srv, "accept\n")
        early = in_ns(NS_C, args.python, CLIENT_PY, SERVER, "18080")
        procs.append(early)
        early_port = port_of(early, "case 1: the client connected through the NAT")
        line_of(srv, "accepted", "case 1: the server accepted before the agent ran")
        # Case 2's: connected before the agent, accepted after it started.
        late = in_ns(NS_C, args.python, CLIENT_PY, SERVER, "18080")
        procs.append(late)
        port_of(late, "case 2: the client connected before the agent ran")

        agent = Agent(args.agent, args.cli)
        # The host's own plaintext (a connection older than the agent) may count too:
        # every figure below is this test's, from here.
        base = counters(agent)

        def grew(c, key):
            return c[key] - base[key]

        try:
            # Case 1's squatter, with the agent running (it records connects and
            # accepts as they happen).
            squat = pumped(["unshare", "-Urn", args.python, "-c",
                            SQUAT_PY.replace("CLIENT", f"{NET_C}.2").replace("SERVER", SERVER),
                            str(early_port)])
            procs.append(squat)
            line_of(squat, "squatted",
                    f"case 1: a squatter (pid {squat.pid}) connected over {NET_C}.2:{early_port}"
                    f" -> {SERVER}:18080 in a user namespace of its own")
            wait_for(lambda: agent.json("stats")["events"]["userns_sockets"] >= 2, 60,
                     "the squatter's connect and accept counted in userns_sockets")
            for i in range(3):
                say(early, f"/early/{i}\n")
                line_of(early, "200", f"case 1: request {i} answered")
            settled(agent, lambda: count(agent, path="/early/*") >= 3,
                    "case 1's requests")
            c = counters(agent)
            got = count(agent, path="/early/*")
            check(got == 3 and grew(c, "unattributed") == 3 and grew(c, "nat_copies") == 3 and
                  count(agent, pid=squat.pid) == 0,
                  f"case 1, neither end known: 3 requests counted {got} times, unattributed "
                  f"+{grew(c, 'unattributed')}, NAT copies +{grew(c, 'nat_copies')} (3 each), "
                  f"{count(agent, pid=squat.pid)} under the squatter's pid")

            say(srv, "accept\n")
            line_of(srv, "accepted", "case 2: the server accepted with the agent running")
            for i in range(2):
                say(late, f"/late/{i}\n")
                line_of(late, "200", f"case 2: request {i} answered")
            settled(agent, lambda: count(agent, path="/late/*", side="server") >= 2,
                    "case 2's requests on the server's side")
            c = counters(agent)
            # `ip netns exec` execs the server: its pid is the server's.
            srv_n = count(agent, path="/late/*", side="server", pid=srv.pid)
            other = count(agent, path="/late/*") - srv_n
            check(srv_n == 2 and other == 0 and grew(c, "unattributed") == 3 and
                  grew(c, "nat_copies") == 5,
                  f"case 2, the server's end known: 2 requests on its side {srv_n}, "
                  f"elsewhere {other}, unattributed +{grew(c, 'unattributed')} (3), NAT "
                  f"copies +{grew(c, 'nat_copies')} (5)")

            say(srv, "serve\n")
            res = subprocess.run(["ip", "netns", "exec", NS_C, "curl", "-s", "-o",
                                  "/dev/null", "-w", "%{http_code}",
                                  f"http://{SERVER}:18080/fresh/1"],
                                 capture_output=True, text=True, timeout=60)
            check(res.stdout == "200", f"case 3: curl's request answered: {res.stdout!r}")
            settled(agent, lambda: count(agent, path="/fresh/*") >= 2,
                    "case 3's request on both sides")
            c = counters(agent)
            sides = {s: count(agent, path="/fresh/*", side=s) for s in ("server", "client")}
            check(sides == {"server": 1, "client": 1} and grew(c, "nat_copies") == 5 and
                  grew(c, "unattributed") == 3,
                  f"case 3, both ends known: once per side {sides}, NAT copies "
                  f"+{grew(c, 'nat_copies')} (5), unattributed +{grew(c, 'unattributed')} (3)")

            say(h2srv, "accept\n")
            line_of(h2srv, "accepted", "case 4: the h2c server accepted, its SETTINGS sent")
            say(h2cli, "go\n")
            line_of(h2cli, "200", "case 4: the h2c request answered")
            settled(agent, lambda: count(agent, path="/h2c/*") >= 1, "case 4's request")
            c = counters(agent)
            srv_n = count(agent, path="/h2c/*", side="server", pid=h2srv.pid)
            other = count(agent, path="/h2c/*") - srv_n
            h2c = {k: c["h2c"][k] - base["h2c"][k] for k in ("requests", "responses")}
            check(srv_n == 1 and other == 0 and grew(c, "unattributed") == 3 and
                  grew(c, "nat_copies") == 6 and h2c == {"requests": 2, "responses": 2},
                  f"case 4, h2c, the server's end known: both copies decoded {h2c}, counted "
                  f"{srv_n} on the server's side, {other} elsewhere, unattributed "
                  f"+{grew(c, 'unattributed')} (3), NAT copies +{grew(c, 'nat_copies')} (6)")

            # Case 5: both ends known (the server serves every connection since case 3).
            before = counters(agent)
            lost = in_ns(NS_C, args.python, CLIENT_PY, SERVER, "18080")
            procs.append(lost)
            port_of(lost, "case 5: a client connected with the agent running")
            say(lost, "/lost/1\n")
            line_of(lost, "sent", "case 5: the request the server does not answer sent")
            say(lost, "/next/1\n")
            line_of(lost, "200", "case 5: the next request on the connection answered")
            settled(agent, lambda: count(agent, path="/next/*") >= 2,
                    "case 5's answered request on both sides")
            pairing, copies = pairing_grew(agent, before, ("requests", "unanswered", "evicted"))
            check(pairing == {"requests": 3, "unanswered": 1, "evicted": 0} and copies == 1 and
                  count(agent, path="/lost/*") == 0,
                  f"case 5, a request never answered: pairing {pairing} (requests 3: the "
                  f"answered one on each side and the lost one once; unanswered 1), NAT "
                  f"copies +{copies} (1), no row for it")
            lost_before = before["pairing"]["unanswered"]

            # Case 6, on case 5's connection: the 100 Continue's two copies.
            before = counters(agent)
            say(lost, "/interim/1\n")
            line_of(lost, "200", "case 6: the POST answered 100 Continue, then 200")
            settled(agent, lambda: count(agent, path="/interim/*") >= 2,
                    "case 6's request on both sides")
            pairing, copies = pairing_grew(agent, before, ("requests", "interim", "responses"))
            check(pairing == {"requests": 2, "interim": 1, "responses": 2} and copies == 1,
                  f"case 6, an interim response: pairing {pairing} (interim 1, not 2: its "
                  f"other copy a NAT copy), NAT copies +{copies} (1)")

            m = metric(agent, "bpftel_http_nat_copies_total")
            check(m == base["nat_copies"] + 8,
                  f"/metrics: bpftel_http_nat_copies_total {m} (+8)")
            # Case 5's lost request on /metrics too, read between two reads of the JSON
            # (the host's counter: other traffic meanwhile may only add). Last: a scrape
            # is plaintext HTTP the module pairs too.
            lo = counters(agent)["pairing"]["unanswered"]
            m = metric(agent, 'bpftel_http_requests_unpaired_total{reason="unanswered"}')
            hi = counters(agent)["pairing"]["unanswered"]
            check(m is not None and lo <= m <= hi and m >= lost_before + 1,
                  f"/metrics: bpftel_http_requests_unpaired_total{{reason=\"unanswered\"}} "
                  f"{m}, the JSON's {lo}..{hi}")
        finally:
            agent.stop()
            agent.cleanup()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        teardown()
        with open(IP_FORWARD, "w") as f:
            f.write(forward)
        os.unlink(FORWARD_SAVED)
    left = sh("ip", "netns", "list").stdout
    check(NS_C not in left and NS_S not in left, "the namespaces are gone")
    print("PASS")


if __name__ == "__main__":
    main()
