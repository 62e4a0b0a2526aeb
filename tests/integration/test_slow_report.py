#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A module's report that waits on another process's file system does not hold the agent.

`bpftel gpu` names kernels by the symbols of their host functions, read from the ELF
object that holds them in the process: here cuda_pattern itself, run (through the
dynamic loader) from an overlay whose lower layer is a FUSE file system that never
answers the agent (stall_fuse.py), the FUSE mount detached. Once the pattern has
launched its kernels, a `gpu` request waits on that file system; meanwhile `bpftel
stats` and `bpftel modules` are answered, and the `gpu` answer is still to come; the
report holds no lock while it waits: a second pattern (from an ordinary file) that
exits meanwhile is dropped from the module's process map by its sweep, and the answer,
read again, does not list it; /metrics is answered, the waiting kernels unnamed. When the FUSE server goes, the open fails, and the `gpu`
answer comes: the pattern's calls counted exactly, its kernels unnamed.

The agent's deadline for an open is raised (BPFTEL_PROCFILE_TIMEOUT_MS) so that the
report waits for as long as the test needs: what is checked is which thread waits, not
a race with the 2 s default. The `gpu` request goes through a socket of the test's own,
with no deadline of its own (the CLI's would be one more race)."""
import argparse
import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, require_root, run, skip, wait_for  # noqa: E402
from test_gpu import (EXPECTED_CALLS, gpu_row, nonzero, samples, scrape,  # noqa: E402
                      wait_attached)

LOADER = "/lib64/ld-linux-x86-64.so.2"


def gpu_procs_pids(agent_pid):
    """The pids of the agent's GPU process map (its keys), as bpftool dumps them: the
    map named gpu_procs that the agent holds (another agent's is not looked at)."""
    held = set()
    for fd in os.listdir(f"/proc/{agent_pid}/fdinfo"):
        with contextlib.suppress(OSError):
            with open(f"/proc/{agent_pid}/fdinfo/{fd}") as f:
                held |= {int(ln.split()[1]) for ln in f if ln.startswith("map_id:")}
    maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout or "[]")
    ids = [m["id"] for m in maps if m.get("name") == "gpu_procs" and m["id"] in held]
    if len(ids) != 1:
        raise AssertionError(f"the agent's gpu_procs map: ids {ids}")
    out = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(ids[0])],
                         capture_output=True, text=True, timeout=60)
    if out.returncode:
        raise AssertionError(f"bpftool map dump id {ids[0]}: {out.stderr.strip()}")
    pids = set()
    for e in json.loads(out.stdout):
        if "formatted" in e:
            pids.add(int(e["formatted"]["key"]))
        else:
            pids.add(int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little"))
    return pids


@contextlib.contextmanager
def stalled_copy(python, tmp, source, stall_pid):
    """A copy of source on an overlay over a FUSE file system that stalls stall_pid, the
    FUSE mount detached: yields (its path, the FUSE server, whose stdout says "stalled
    OP" for each request it leaves waiting; unbuffered, so that select() sees every line
    not read yet)."""
    fuse, lower, ovl = (os.path.join(tmp, d) for d in ("fuse", "empty", "ovl"))
    for d in (fuse, lower, ovl):
        os.makedirs(d)
    server = subprocess.Popen([python, os.path.join(os.path.dirname(__file__), "stall_fuse.py"),
                               fuse, "cuda_pattern", source, str(stall_pid), "7001"],
                              stdout=subprocess.PIPE, bufsize=0,
                              env={**os.environ, "STALL_FUSE_SAY": "1"})
    fuse_mounted = ovl_mounted = False
    try:
        if server.stdout.readline().strip() != b"ready":
            raise AssertionError("the FUSE server did not mount")
        fuse_mounted = True
        res = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                              f"lowerdir={fuse}:{lower}", ovl], capture_output=True,
                             text=True, timeout=60)
        if res.returncode:
            skip(f"this kernel does not mount overlayfs over FUSE: {res.stderr.strip()}")
        ovl_mounted = True
        subprocess.run(["umount", "-l", fuse], check=True, timeout=60)
        fuse_mounted = False
        yield os.path.join(ovl, "cuda_pattern"), server
    finally:
        server.kill()  # its death fails the requests still waiting
        server.wait()
        for path, mounted in ((ovl, ovl_mounted), (fuse, fuse_mounted)):
            if mounted:
                subprocess.run(["umount", "-l", path], check=False, timeout=60)


def played(agent, pat, what):
    """cuda_pattern pat loaded, its probes attached, its calls played (it waits then):
    its pid."""
    line = pat.stdout.readline().split()
    check(line[:1] == ["loaded"], f"{what}: {line}")
    pid = int(line[1])
    wait_attached(agent, pid)
    pat.stdin.write("go\n")
    pat.stdin.flush()
    for line in pat.stdout:
        if line.strip() == "done":
            break
    return pid


def ask(path, cmd, out):
    """One request on a socket of our own, its answer (or the error) into out."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
        out.append(json.loads(buf))
    except (OSError, ValueError) as e:
        out.append(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--stub", required=True)
    args = ap.parse_args()
    require_root()
    if not os.path.exists(LOADER) or not os.path.exists("/dev/fuse"):
        skip(f"needs {LOADER} and /dev/fuse")
    tmp = tempfile.mkdtemp(prefix="bpftel-slow-report-")
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        f.write("modules = gpu\nlibsets = gpu\nmetrics_addr = 127.0.0.1:0\n")
    agent = Agent(args.agent, args.cli, ["-c", conf],
                  env={"BPFTEL_PROCFILE_TIMEOUT_MS": "600000"})
    pat = pat2 = None
    try:
        with stalled_copy(args.python, os.path.join(tmp, "fs"), args.pattern,
                          agent.proc.pid) as (path, server):
            pat = subprocess.Popen([LOADER, path, args.stub, "stub"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            pid = played(agent, pat, "cuda_pattern ran from the overlay")
            pat2 = subprocess.Popen([args.pattern, args.stub, "stub"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            pid2 = played(agent, pat2, "the second cuda_pattern ran")
            check(pid2 in gpu_procs_pids(agent.proc.pid),
                  f"the second pattern {pid2} is in gpu_procs")

            # What the agent left waiting before the request (the reports before it),
            # read: the next stall is the request's.
            while select.select([server.stdout], [], [], 0)[0]:
                server.stdout.readline()
            answer = []
            asker = threading.Thread(target=ask, args=(agent.socket, "gpu", answer),
                                     daemon=True)
            asker.start()
            ready, _, _ = select.select([server.stdout], [], [], 60)
            said = server.stdout.readline().decode().strip() if ready else ""
            check(said.startswith("stalled"),
                  f"the gpu report's open waits on the FUSE file system: {said!r}")
            for cmd in ("stats", "modules"):
                res = agent.cli(cmd, "--json", check=False)
                check(res.returncode == 0, f"bpftel {cmd} answered while the gpu report "
                      f"waits: rc {res.returncode} {res.stderr.strip()}")
            # The second pattern exits: the sweep drops it while the report waits.
            pat2.stdin.close()
            pat2.wait(timeout=30)
            wait_for(lambda: pid2 not in gpu_procs_pids(agent.proc.pid), 60,
                     f"the sweep to drop the exited pattern {pid2} while the report waits")
            # /metrics is scraped meanwhile: it does not wait on those files too (one
            # report names at a time), its kernels counted unnamed (kernel="other").
            got = samples(scrape(agent), "bpftel_gpu_kernel_name_launches_total", pid)
            check(got == {("other",): 5},
                  f"/metrics answered while the report waits, the launches unnamed: {got}")
            check(asker.is_alive() and not answer,
                  "the gpu report still waits on the file system")
        # The FUSE server is gone: the open fails, the report goes on.
        asker.join(120)
        check(not asker.is_alive() and answer and isinstance(answer[0], dict) and
              answer[0].get("ok"), "the gpu report answered once its open failed: "
              f"{[a if not isinstance(a, dict) else a.get('error', 'ok') for a in answer]}")
        check(not [p for p in answer[0]["processes"] if p["pid"] == pid2],
              f"the report, read again after the sweep, does not list the exited {pid2}")
        rows = [p for p in answer[0]["processes"] if p["pid"] == pid]
        check(rows and nonzero(rows[0]["calls"]) == EXPECTED_CALLS,
              f"the pattern's calls counted exactly: {rows and nonzero(rows[0]['calls'])}")
        check(all(not k["name"] for k in rows[0]["kernels"]) and
              sum(k["launches"] for k in rows[0]["kernels"]) == 5,
              f"its 5 launches listed, unnamed: "
              f"{[(k['name'], k['launches']) for k in rows[0]['kernels']]}")
        check(wait_for(lambda: gpu_row(agent, pid), 30, "a later report") is not None,
              "a later report is answered")
        pat.stdin.close()
        pat.wait(timeout=30)
        check(agent.stop() == 0, "the agent stops cleanly")
    finally:
        for p in (pat, pat2):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(main)
