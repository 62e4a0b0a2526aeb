#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A user's flood of HTTP/2 session starts cannot evict root's live sessions.

A gRPC client (h2_client.py, python's ssl and h2, the system OpenSSL) connects to a gRPC
server (grpc_server.py) after the agent started, and makes a call. Then an unprivileged
user (nobody) starts HTTP/2 sessions, each a preface written on a TLS session over
memory (no peer needed), and keeps them: 8 processes 256 each, a quarter of the
kernel's table (usm_h2_conns: 8192), then one process twice the table. The kernel
admits the first 2048, that user's share, and refuses the rest, counted exactly
(h2_over_share, bpftel_http2_starts_over_share_total, the "starts over a user's share"
of bpftel http), and the shares name nobody as the holder of what it was admitted
(JSON, bpftel http, /metrics). Userspace, whose decoders hold 1024 sessions, lets the
user fill what root's leave, more than its share (256) while there is room, then makes
room for its new sessions with its own (user_cap), though each process holds no more
than its own cap, not with root's older ones. So the live connection's sessions, older
than the flood, stay in both, and its next 3 calls are counted on both sides. Without
either share the flood evicts them (LRU) and those calls are lost. Last, with
user_share_percent = 100 on SIGHUP, nobody's next starts are all admitted, though it
holds its share. Back at a quarter, `bpftel module restart usm`: the HTTP/2 sessions'
table starts afresh, nobody's count of it too, and nobody's next starts are admitted.
Nothing is left in the kernel after the agent stops."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (LIBSSL_PROBES, Agent, agent_args, check, make_cert,  # noqa: E402
                      run, skip, usm_settle, wait_for)
from agentlib import http_count as count  # noqa: E402

SYS_PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
H2_CONNS_MAX = 8192            # bpf/usm.h USM_H2_CONNS_MAX
SHARE = H2_CONNS_MAX // 4      # bpf/fair_share_defs.h FAIR_SHARE_DIV
FLOOD = 2 * H2_CONNS_MAX
HOLDERS = 8                    # processes that take the share between them
USER_SESSIONS = 1024 // 4      # user/modules/usm/h2_sessions.h USM_H2_SESSIONS_PER_USER
NOBODY = 65534

# FLOOD_CODE, run as nobody: argv[1] TLS sessions over memory BIOs, each writing an
# HTTP/2 preface (the handshake cannot finish: no peer; the write's entry probe sees
# the bytes all the same), all kept until stdin closes.
FLOOD_BODY = """
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
held = []
for _ in range(int(sys.argv[-1])):
    s = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO())
    try:
        s.write(b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n")
    except ssl.SSLError:
        pass
    held.append(s)
print("held", len(held), flush=True)
sys.stdin.read()
"""
FLOOD_CODE = "import ssl, sys\n" + FLOOD_BODY


def as_user(uid, gid=NOBODY):
    """The command prefix that runs a flood as uid (real and effective), no groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def flood(agent, procs, n, prefix=(), code=FLOOD_CODE, args=()):
    """n HTTP/2 session starts made and kept by a new process (prefix, then python's
    code with args and n), appended to procs: how many the kernel refused meanwhile."""
    before = agent.json("http")["counters"]["h2_over_share"]
    p = subprocess.Popen([*prefix, SYS_PYTHON, "-c", code, *args, str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    procs.append(p)
    got = p.stdout.readline().split()
    check(got == ["held", str(n)], f"a flood holds {n} session starts")
    return agent.json("http")["counters"]["h2_over_share"] - before


def end_floods(procs):
    """The floods told to end (their stdin closed): each exits 0."""
    for p in procs:
        p.stdin.close()
        check(p.wait(timeout=60) == 0, "the flood ended")


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def main():
    args = agent_args(tools=("setpriv",))
    if subprocess.run([SYS_PYTHON, "-c", "import h2"], capture_output=True).returncode:
        skip("python3-h2 is not installed (tools/dev.sh test installs it)")
    tmp = tempfile.mkdtemp(prefix="bpftel-share-")
    cert, key = make_cert(tmp)
    procs = []
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        f.write("metrics_addr = 127.0.0.1:0\n")
    agent = Agent(args.agent, args.cli, ["-c", conf])
    try:
        wait_for(lambda: [r for r in agent.json("libs")["libs"]
                          if r["module"] == "usm" and r["lib"] == "libssl" and
                          r["attached"] >= LIBSSL_PROBES], 60, "the usm uprobes on libssl")
        grpc = subprocess.Popen([SYS_PYTHON, os.path.join(HERE, "grpc_server.py"), cert, key],
                                stdout=subprocess.PIPE, text=True)
        procs.append(grpc)
        line = grpc.stdout.readline().split()
        check(line[:1] == ["ready"], f"grpc_server.py started: {line}")
        live = subprocess.Popen([SYS_PYTHON, os.path.join(HERE, "h2_client.py"), line[1]],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(live)
        check(live.stdout.readline().strip() == "connected",
              "a gRPC client connected after the agent, its first call made")
        early = "/bpftel.test.Echo/Early"
        wait_for(lambda: count(agent, pid=live.pid, side="client", path=early) == 1 and
                 count(agent, pid=grpc.pid, side="server", path=early) == 1, 60,
                 "the first call counted on both sides")

        floods = []
        over = sum(flood(agent, floods, SHARE // HOLDERS, as_user(NOBODY))
                   for _ in range(HOLDERS))
        over += flood(agent, floods, FLOOD, as_user(NOBODY))
        attempts = SHARE + FLOOD
        live.stdin.write("go 3 /bpftel.test.Echo/Ok\n")
        live.stdin.flush()
        check(live.stdout.readline().strip() == "done", "3 calls more on the live connection")
        ok = "/bpftel.test.Echo/Ok"
        try:
            wait_for(lambda: count(agent, pid=live.pid, side="client", path=ok) >= 3 and
                     count(agent, pid=grpc.pid, side="server", path=ok) >= 3, 60,
                     "the live connection's 3 calls, on both sides")
        except AssertionError:
            c = agent.json("http")["counters"]
            print(f"h2_midstream {c['h2_midstream']}, http2 {c['http2']}")
            raise
        usm_settle(agent)
        check(count(agent, pid=live.pid, side="client", path=ok) == 3 and
              count(agent, pid=grpc.pid, side="server", path=ok) == 3,
              "the live connection's calls counted once each, on both sides")
        # Every start of nobody's is a session userspace decodes, or refused and counted;
        # the sessions are those and the live connection's two (client, server).
        h2 = agent.json("http")["counters"]["http2"]
        admitted = h2["sessions"] - 2
        print(f"nobody's starts: {attempts}, admitted {admitted}, refused {over}")
        check(admitted + over == attempts, f"each of nobody's {attempts} starts admitted "
              f"({admitted}) or refused and counted ({over})")
        # At most its share: a sweep that corrects the count while sessions start may
        # count some twice until the next one (refused early), never fewer.
        check(0 < admitted <= SHARE, f"nobody's sessions within its share: {admitted} <= {SHARE}")
        # Userspace's decoders (1024): nobody fills what root's two leave, then makes
        # room with its own, holding more than its share (256).
        dropped = h2["dropped"]
        check(dropped["user_cap"] == admitted - (USER_SESSIONS * 4 - 2) and
              dropped["process_cap"] == 0 and dropped["evicted"] == 0,
              f"userspace kept {USER_SESSIONS * 4 - 2} of nobody's sessions, then made room "
              f"with nobody's own: {dropped}")
        text = agent.cli("http").stdout
        check(f"starts over a user's share {over} (user_share_percent = 25)" in text,
              "bpftel http shows the starts refused, and the share")
        url = f"http://{agent.json('stats')['agent']['metrics_addr']}/metrics"
        with urllib.request.urlopen(url, timeout=120) as r:
            metrics = r.read().decode()
        check(f"bpftel_http2_starts_over_share_total {over}" in metrics,
              "/metrics: bpftel_http2_starts_over_share_total")
        # Who holds the most, once a correction (every 10 s) has counted the flood.
        # And who was refused the most: nobody, each of its starts refused.
        refused_by = [{"kind": "user", "uid": NOBODY, "refused": over}] if over else []
        sessions = wait_for(lambda: (lambda t: t if t["holders"] and
                                     t["holders"][0]["entries"] == admitted and
                                     t["refused_by"] == refused_by else None)(
            agent.json("http")["shares"]["http2_sessions"]), 60,
            f"the shares to name nobody holding {admitted} HTTP/2 sessions, "
            f"refused {over}")
        check(sessions["holders"] == [{"kind": "user", "uid": NOBODY, "entries": admitted}] and
              sessions["share"] == SHARE and sessions["entries"] == H2_CONNS_MAX,
              f"nobody alone holds HTTP/2 sessions, {admitted} of its {SHARE}: {sessions}")
        text = agent.cli("http").stdout
        check(f"HTTP/2 sessions (share {SHARE} of {H2_CONNS_MAX}): uid {NOBODY} {admitted}"
              in text, "bpftel http names the holder")
        said = [ln for ln in agent.logs().splitlines()
                if "holds its share of the kernel's HTTP/2 sessions" in ln]
        # (Only once nobody holds the whole of it: a correction during the flood may
        # have refused a few early.)
        check(len(said) == 0 if admitted < SHARE else
              len(said) == 1 and f"uid {NOBODY} " in said[0] and
              "raise user_share_percent" in said[0],
              f"the log says once who holds its whole share, and names the setting: {said}")
        with urllib.request.urlopen(url, timeout=120) as r:
            metrics = r.read().decode()
        check(f'bpftel_http_user_share_entries{{table="http2_sessions"}} {SHARE}' in metrics and
              f'bpftel_http_user_share_top_holder_entries{{table="http2_sessions"}} {admitted}'
              in metrics, "/metrics: the share and its top holder")
        # No bound from the next start on (SIGHUP, no restart): nobody, at its share
        # already, has all its next starts admitted, and none refused.
        with open(conf, "w") as f:
            f.write("metrics_addr = 127.0.0.1:0\nuser_share_percent = 100\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: agent.json("http")["user_share_percent"] == 100, 30,
                 "user_share_percent = 100 applied")
        check(flood(agent, floods, USER_SESSIONS, as_user(NOBODY)) == 0,
              f"{USER_SESSIONS} more starts, none refused")
        usm_settle(agent)
        more = agent.json("http")["counters"]["http2"]["sessions"] - 2 - admitted
        check(more == USER_SESSIONS, f"nobody's {USER_SESSIONS} next starts admitted: {more}")

        # Back to a quarter, nobody over it; then a restart, which keeps the TLS
        # sessions' table and its users' counts, not the HTTP/2 sessions' (their kernel
        # state cannot be resumed mid-stream): nobody's count of those goes with them,
        # and its next starts are admitted, not refused as if it still held them.
        with open(conf, "w") as f:
            f.write("metrics_addr = 127.0.0.1:0\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: agent.json("http")["user_share_percent"] == 25, 30,
                 "user_share_percent = 25 applied again")
        agent.cli("module", "restart", "usm")
        wait_for(lambda: [r for r in agent.json("libs")["libs"]
                          if r["module"] == "usm" and r["lib"] == "libssl" and
                          r["attached"] >= LIBSSL_PROBES], 60, "the usm uprobes on libssl again")
        check(flood(agent, floods, USER_SESSIONS, as_user(NOBODY)) == 0,
              f"after `bpftel module restart usm` nobody's {USER_SESSIONS} next starts are "
              "admitted, none refused")
        end_floods(floods)
    finally:
        kill_all(procs + floods)
        agent.stop()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    check(True, f"none of what the agent held remains: {agent.released()}")


if __name__ == "__main__":
    run(main)
