#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Two containers of one image, in small: two overlayfs mounts of one lower layer that
holds a copy of libssl, each bind-mounted over the system's libssl in a mount namespace
of its own. The kernel maps, and attaches uprobes to, the layer's one file for both,
while stat of the two overlays' files (newer kernels, 6.18 here) shows two files. So:
  1. one `bpftel libs` row holds a process of each, with one set of probes;
  2. curl in one of them, while the other's process holds its libssl, is counted once
     per request on its own side and on the server's, and every request and response
     is parsed once per side.
Without the layer's identity (the agent before it), the second overlay got probes of
its own on the same file, and every call ran both: each request curl wrote was parsed
twice."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agentlib import (agent_args, LIBSSL_PROBES, Agent, check, make_cert,  # noqa: E402
                      run, skip, start_http_server, usm_settle, wait_for)
from agentlib import http_count as count  # noqa: E402

LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"

HOLD = ("import ssl, sys; print('ready', flush=True); sys.stdin.readline()")


def in_overlay(merged, argv):
    """argv in a mount namespace of its own where the system's libssl is merged's."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f"mount --bind {merged}/libssl.so.3 {LIBSSL} && exec \"$@\"", "sh", *argv]


def main():
    args = agent_args(("curl", "openssl", "unshare"))
    if not os.path.exists(LIBSSL):
        skip("needs the system libssl")

    tmp = tempfile.mkdtemp(prefix="bpftel-overlay-")
    os.chmod(tmp, 0o755)
    cert, key = make_cert(tmp)
    www = os.path.join(tmp, "www")
    os.makedirs(os.path.join(www, "items"))
    for i in range(10):
        with open(os.path.join(www, "items", str(i)), "w") as f:
            f.write("item\n")
    layers = os.path.join(tmp, "layers")
    os.makedirs(layers)
    subprocess.run(["mount", "-t", "tmpfs", "none", layers], check=True)
    mounted = [layers]
    agent = procs = server = None
    try:
        os.makedirs(f"{layers}/lower")
        shutil.copy(LIBSSL, f"{layers}/lower/libssl.so.3")
        merged = []
        for i in (1, 2):
            for d in (f"u{i}", f"w{i}", f"m{i}"):
                os.makedirs(f"{layers}/{d}")
            subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                            f"lowerdir={layers}/lower,upperdir={layers}/u{i},"
                            f"workdir={layers}/w{i}", f"{layers}/m{i}"], check=True)
            mounted.insert(0, f"{layers}/m{i}")
            merged.append(f"{layers}/m{i}")
        st = [os.stat(f"{m}/libssl.so.3") for m in merged]
        check(st[0].st_dev != st[1].st_dev,
              f"stat shows two files: devices {st[0].st_dev:#x} and {st[1].st_dev:#x}")

        agent = Agent(args.agent, args.cli)
        server, port = start_http_server(args.python, www, cert, key)
        procs = [subprocess.Popen(in_overlay(m, [args.python, "-c", HOLD]),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for m in merged]
        for p in procs:
            check(p.stdout.readline().strip() == "ready",
                  f"a process in its own overlay ({p.pid}) loaded libssl")
        pids = {p.pid for p in procs}

        def theirs():
            return [r for r in agent.json("libs")["libs"]
                    if r["module"] == "usm" and r["lib"] == "libssl" and
                    pids & set(r["pids"])]
        wait_for(lambda: [r for r in theirs() if pids <= set(r["pids"]) and
                          r["attached"] >= LIBSSL_PROBES] or len(theirs()) > 1, 30,
                 "the two processes' libssl probed")
        rows = theirs()
        check(len(rows) == 1 and pids <= set(rows[0]["pids"]),
              f"one libs row holds both processes: {[(r['file'], r['pids']) for r in rows]}")
        row = rows[0]
        check(row["attached"] == LIBSSL_PROBES and row["failed"] == 0,
              f"one set of probes: {row['attached']} points, {row['links']} "
              f"{row['link_mode']} links, on the layer's file {row['file']}")

        usm_settle(agent)
        before = agent.json("http")["counters"]["pairing"]
        urls = [f"https://127.0.0.1:{port}/items/{i}" for i in range(10)]
        curl = subprocess.run(in_overlay(merged[0], ["curl", "-sk", *urls]),
                              capture_output=True, text=True, timeout=60)
        check(curl.returncode == 0 and curl.stdout == "item\n" * 10,
              "curl in the first overlay made 10 HTTPS requests")
        wait_for(lambda: count(agent, side="server", pid=server.pid) >= 10, 30,
                 "the server's side to count 10")
        usm_settle(agent)
        srv = count(agent, side="server", pid=server.pid, path="/items/*", status=200)
        cli = count(agent, side="client", path="/items/*", status=200)
        check(srv == 10, f"the server's side counted {srv} requests (10 made)")
        check(cli == 10, f"curl's side counted {cli} requests (10 made)")
        # A request written twice (two entry probes) pairs once: the other waits for a
        # response that never comes. Every message is parsed once per side: 20 requests
        # and 20 responses since before curl ran, not 40 (a few more where the host's
        # own exchanges fell in the same seconds: the counters are the host's).
        after = agent.json("http")["counters"]["pairing"]
        req, resp = (after[k] - before[k] for k in ("requests", "responses"))
        check(20 <= req < 30 and 20 <= resp < 30,
              f"requests parsed: {req}, responses: {resp} (10 of each per side, each once)")
        check(agent.stop() == 0, "the agent stops cleanly")
    finally:
        for p in procs or []:
            p.kill()
            p.wait()
        if server:
            server.kill()
            server.wait()
        if agent:
            agent.cleanup()
        for m in mounted:
            subprocess.run(["umount", "-l", m], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(main)
