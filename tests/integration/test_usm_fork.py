#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, the uprobe registry and processes it was never told about: a process
loads its own copy of libssl (the only user of that file), forks and exits. Its child
uses the library without ever opening it, so the watcher never reports it. Once the
parent is gone the file has no known process; its probes firing for the child keep it
attached (not released after the grace period), a /proc scan finds the child and lists
it, and the child's HTTPS requests are counted under its pid.

Then the same with a quiet child (it makes no call) and a grace of 1 s: at the grace's
end the file is not released before a /proc scan, which finds the child; its later
requests are counted."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agentlib import (agent_args, Agent, check, http_count, make_cert,  # noqa: E402
                      run, start_http_server, wait_for)

LIBSSL = "/usr/lib/x86_64-linux-gnu/libssl.so.3"


def parent_attached(agent, parent, copy):
    """forked_tls_client.py's parent loaded the copy of libssl and the copy is attached,
    its one process the parent: a function giving the copy's row of `bpftel libs`."""
    line = parent.stdout.readline().split()
    check(line == ["loaded", str(parent.pid)], f"the parent loaded libssl: {line}")

    def row():
        rows = [r for r in agent.json("libs")["libs"]
                if r["module"] == "usm" and r["path"].endswith(copy)]
        return rows[0] if rows else None
    wait_for(lambda: (row() or {}).get("pids") == [parent.pid] and row()["attached"] > 0,
             30, "the copy of libssl attached, its one process the parent")
    return row


def forked(parent):
    """The parent told to fork: it exits, its child stays. The child's pid."""
    parent.stdin.write("fork\n")
    parent.stdin.flush()
    line = parent.stdout.readline().split()
    check(line[:1] == ["child"], f"the parent forked: {line}")
    check(parent.wait(timeout=30) == 0, "the parent exited")
    return int(line[1])


def idle_copy(agent, python, env, copy):
    """The parent loads the copy, forks and exits: the copy is idle, no process known.
    Another /proc scan (a library event lost anywhere on the host asks for one) may list
    the child first, as it should; the round is then run again, a new parent and child,
    up to 3 times. Returns (parent, child, row, idle_used before)."""
    for rnd in range(3):
        parent = subprocess.Popen([python, os.path.join(HERE, "forked_tls_client.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)
        row = parent_attached(agent, parent, copy)
        before = agent.json("libs")
        child = forked(parent)

        def idle_or_found():
            r = row()
            if r is None:
                return None
            if r["pids"] == [] and r["state"] == "idle":
                return "idle"
            if (r["pids"] == [child] and rnd < 2 and
                    agent.json("libs")["proc_scans"] > before["proc_scans"]):
                return "found"
            return None
        got = wait_for(idle_or_found, 30, "the copy idle: its one known process gone")
        if got == "idle":
            return parent, child, row, before["idle_used"]
        print("note: a /proc scan found the child before the copy went idle: again")
        parent.stdin.close()
        parent.kill()
        parent.wait()
        os.kill(child, 9)
    raise AssertionError("unreachable: the last round waits for idle only")


def quiet_child(agent, python, env, copy, port):
    """The parent forks and exits; its child makes no call: the file's grace ends with
    no process known and no call seen, a /proc scan finds the child before the file
    is released, and its request is counted. Returns the child's pid. Another scan (a
    library event lost anywhere on the host asks for one) may find the child before
    the grace ends, as it should: the round is then run again, a new parent and child,
    up to 3 times."""
    for rnd in range(3):
        parent = subprocess.Popen([python, os.path.join(HERE, "forked_tls_client.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)
        try:
            row = parent_attached(agent, parent, copy)
            before = agent.json("libs")
            child = forked(parent)
            wait_for(lambda: row() is not None and row()["pids"] == [child], 60,
                     "the quiet child found by a /proc scan at the grace's end")
            r, now = row(), agent.json("libs")
            check(r["state"] == "in_use" and r["attached"] > 0,
                  f"the copy kept attached: {r['state']}, {r['attached']} points")
            if (now["idle_scans"] == before["idle_scans"] and
                    now["proc_scans"] > before["proc_scans"] and rnd < 2):
                print("note: another /proc scan found the child before the grace ended "
                      f"(proc_scans {before['proc_scans']} -> {now['proc_scans']}): again")
                os.kill(child, 9)
                continue
            check(now["idle_scans"] > before["idle_scans"],
                  f"a scan asked for at the grace's end (idle_scans {before['idle_scans']} "
                  f"-> {now['idle_scans']})")
            parent.stdin.write(f"get https://127.0.0.1:{port}/index\n")
            parent.stdin.flush()
            check(parent.stdout.readline().split() == ["status", "200"],
                  "the child's GET answered")
            wait_for(lambda: http_count(agent, pid=child, side="client", method="GET",
                                        status=200) == 1, 30,
                     "the quiet child's request counted under its pid")
            return child
        finally:
            parent.stdin.close()
            parent.kill()
            parent.wait()
    raise AssertionError("unreachable: the last round checks")


def main():
    args = agent_args(("openssl",))
    tmp = tempfile.mkdtemp(prefix="bpftel-fork-")
    libdir = os.path.join(tmp, "lib")
    os.makedirs(libdir)
    copy = os.path.join(libdir, "libssl.so.3")
    shutil.copy(LIBSSL, copy)
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        # Long enough that the file cannot be released for being idle meanwhile.
        f.write("uprobe_grace = 600\nmetrics_addr = 127.0.0.1:0\n")
    cert, key = make_cert(tmp)
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    with open(os.path.join(www, "index"), "w") as f:
        f.write("hi\n")

    agent = Agent(args.agent, args.cli, ["-c", conf])
    procs, child = [], 0
    try:
        server, port = start_http_server(args.python, www, cert, key)
        procs.append(server)
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        parent, child, row, used_before = idle_copy(agent, args.python, env, copy)
        procs.append(parent)

        # The child uses the library: its probes fire with no known process.
        url = f"https://127.0.0.1:{port}/index"
        parent.stdin.write(f"get {url}\n")
        parent.stdin.flush()
        check(parent.stdout.readline().split() == ["status", "200"], "the child's GET answered")
        wait_for(lambda: row() is not None and row()["pids"] == [child], 60,
                 "the child found by a /proc scan and listed, the file kept attached")
        r = row()
        check(r["state"] == "in_use" and r["attached"] > 0,
              f"the copy is in use, {r['attached']} points attached")
        # At least: a file of another process of the host may be used so meanwhile.
        check(agent.json("libs")["idle_used"] >= used_before + 1,
              "idle_used counted the file used while no process was known")
        wait_for(lambda: http_count(agent, pid=child, side="client", method="GET",
                                    status=200) == 1, 30,
                 "the child's request counted under its pid")
        parent.stdin.write(f"get {url}\n")
        parent.stdin.flush()
        check(parent.stdout.readline().split() == ["status", "200"], "the child's 2nd GET")
        wait_for(lambda: http_count(agent, pid=child, side="client", method="GET",
                                    status=200) == 2, 30, "and its second one")

        parent.stdin.close()
        for p in procs:
            p.kill()
            p.wait()
        procs = []
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        check(True, f"none of what the agent held remains: {agent.released()}")
        agent.cleanup()

        with open(conf, "w") as f:
            f.write("uprobe_grace = 1\nmetrics_addr = 127.0.0.1:0\n")
        agent = Agent(args.agent, args.cli, ["-c", conf])
        server, port = start_http_server(args.python, www, cert, key)
        procs.append(server)
        child = quiet_child(agent, args.python, env, copy, port)
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        check(True, f"none of what the agent held remains: {agent.released()}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        if child:
            try:
                os.kill(child, 9)
            except ProcessLookupError:
                pass
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_usm_fork: all checks passed")


if __name__ == "__main__":
    run(main)
