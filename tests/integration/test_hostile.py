#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Hostile library files against the real agent: files an unprivileged user could craft
and name like libssl, which the agent must neither block on, nor follow out of the
process's root, nor parse without bounds.

  1. a FIFO renamed over a copy of libssl a process has loaded;
  2. inside a private mount namespace: a directory named libssl.so.3, opened; and a
     loaded copy of libssl replaced by a symlink to /dev/zero;
  3. a 4 GiB sparse file whose .dynsym claims 3 GiB, and a 900 MiB one whose .dynsym
     claims 800 MiB (under the file cap, over the table cap);
  4. a truncated ELF (the first 4 KiB of libssl);
  5. a process whose name holds a newline, loading libssl: probed;
  6. libssl on an overlayfs whose lower layer is a FUSE file system that never answers
     the agent, unmounted (lazily) so that no mount shows FUSE: refused as slow_fs within
     the open's deadline, and a library loaded after it is still probed (the watcher
     did not wait);
  7. the same FUSE, answering: refused as slow_fs, never probed;
  8. 16 such stalled files opened by one user's process: 4 threads wait on them, the
     other 12 are refused untried, and another user's library is still probed; and a
     user's FUSE symlink to a copy of libssl, whose walk stalls: the user's open is
     refused, root's load of the copy is probed;
  9. (an agent of its own, new_files_per_user = 2) one user's process opens 5 copies
     of libssl: 2 are probed, the others refused as over_budget without being parsed;
     another user's copy is still probed.

After each: `bpftel module restart usm` answers (within the CLI's deadline), `bpftel stats` answers,
the agent's peak RSS (VmHWM) stays within the bound, and `bpftel libs` shows why the
file was refused."""
import argparse
import contextlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (LIBSSL_PROBES, Agent, check, require_root, run, skip,  # noqa: E402
                      vm_hwm_kib, wait_for)

LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"
SHT_DYNSYM = 11


def sparse_elf(path, file_size, dynsym_claim):
    """libssl, its .dynsym header claiming dynsym_claim bytes, the file made sparse up to
    file_size bytes (nothing but the copy is written)."""
    shutil.copy(LIBSSL, path)
    with open(path, "r+b") as f:
        head = f.read(64)
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        for i in range(shnum):
            f.seek(shoff + i * shentsize)
            sh = f.read(shentsize)
            if struct.unpack_from("<I", sh, 4)[0] == SHT_DYNSYM:
                f.seek(shoff + i * shentsize + 32)  # sh_size
                f.write(struct.pack("<Q", dynsym_claim))
                break
        else:
            raise AssertionError("no .dynsym in libssl")
        f.truncate(file_size)


class Holder:
    """A python process that runs steps on stdin lines and says 'done <n>' after each."""

    def __init__(self, python, code, argv=(), wrap=None):
        cmd = [python, "-c", code, *argv]
        if wrap:
            cmd = wrap + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.expect("ready")

    def expect(self, word):
        line = self.proc.stdout.readline().strip()
        if line != word:
            raise AssertionError(f"holder said {line!r}, not {word!r}")

    def step(self, word):
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()
        self.expect(word)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


# The deadline of the agent's opens of other processes' files: ctest sets 60 s for a
# starved VM; the stalls made here are waited out at 10 s (the waits below allow 120).
HOSTILE_ENV = {"BPFTEL_PROCFILE_TIMEOUT_MS": "10000"}


def usm_rows(agent, path):
    return [r for r in agent.json("libs")["libs"] if r["path"] == path and r.get("module") == "usm"]


def refused(agent, path, reason):
    return [r for r in agent.json("libs")["recent_refusals"]
            if r["path"] == path and r["reason"] == reason]


def after_each(agent, what, hwm_bound_mib):
    """The agent stays responsive and bounded after a hostile file."""
    t0 = time.monotonic()
    res = agent.cli("module", "restart", "usm", check=False)
    took = time.monotonic() - t0
    check(res.returncode == 0,
          f"{what}: bpftel module restart usm answered (in {took:.2f} s), within the "
          f"CLI's own deadline")
    stats = agent.cli("stats", "--json", check=False)
    check(stats.returncode == 0, f"{what}: bpftel stats answers")
    hwm = vm_hwm_kib(agent.proc.pid)
    if hwm_bound_mib:
        check(hwm <= hwm_bound_mib * 1024,
              f"{what}: agent VmHWM {hwm} KiB <= {hwm_bound_mib} MiB")
    else:
        print(f"note: {what}: agent VmHWM {hwm} KiB (not checked: sanitizer build)")


LOAD_THEN_SWAP = r"""
import ctypes, os, sys
lib, kind = sys.argv[1], sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
ctypes.CDLL(lib)
print("loaded", flush=True)
sys.stdin.readline()
tmp = lib + ".new"
if kind.startswith("fifo"):
    os.mkfifo(tmp)
else:
    os.symlink("/dev/zero", tmp)
os.rename(tmp, lib)
print("swapped", flush=True)
sys.stdin.readline()
"""


def swapped_library(agent, python, path, kind, hwm, wrap=None):
    """A process loads its own copy of libssl, then replaces the path with kind."""
    h = Holder(python, LOAD_THEN_SWAP, (path, kind), wrap)
    try:
        h.step("loaded")
        row = wait_for(lambda: [r for r in usm_rows(agent, path)
                                 if r["attached"] >= LIBSSL_PROBES], 60,
                       f"usm attached to {path}")[0]
        check(row["state"] == "in_use", f"{kind}: usm attached to the copy ({row['links']} "
                                        f"{row['link_mode']} links)")
        h.step("swapped")
        # The restart re-attaches through the process's path, which now leads to a
        # FIFO or a device: refused (never opened for reading), then found again
        # through the process's own mapping of the file.
        after_each(agent, f"{kind} swapped in", hwm)
        reason = wait_for(lambda: refused(agent, path, "not_regular"), 60,
                          f"the refusal of the {kind} at {path}")[0]
        check(reason["pid"] > 0, f"{kind}: bpftel libs shows the refusal: "
                                 f"{reason['reason']} ({reason['detail']})")
        table = agent.cli("libs").stdout
        check("not_regular" in table, f"{kind}: the libs table shows not_regular")
        row = wait_for(lambda: [r for r in usm_rows(agent, path)
                                 if r["attached"] >= LIBSSL_PROBES], 60,
                       f"usm attached again to {path}")[0]
        check(True, f"{kind}: attached again through the process's mapping "
                    f"({row['attached']} probe points)")
    finally:
        h.stop()


OPEN_ONLY = r"""
import os, sys
print("ready", flush=True)
sys.stdin.readline()
fd = os.open(sys.argv[1], os.O_RDONLY)
print("opened", flush=True)
sys.stdin.readline()
"""


def opened_file(agent, python, path, reason, what, hwm, wrap=None):
    h = Holder(python, OPEN_ONLY, (path,), wrap)
    try:
        h.step("opened")
        r = wait_for(lambda: refused(agent, path, reason), 60,
                     f"the refusal of {path} ({reason})")[0]
        check(True, f"{what}: refused as {r['reason']}: {r['detail']}")
        after_each(agent, what, hwm)
    finally:
        h.stop()


LOAD = r"""
import ctypes, sys
print("ready", flush=True)
sys.stdin.readline()
ctypes.CDLL(sys.argv[1])
print("loaded", flush=True)
sys.stdin.readline()
"""


@contextlib.contextmanager
def fuse_beneath_overlay(python, tmp, tag, stall_pid, ino, names=("libssl.so.3",)):
    """libssl on an overlayfs whose lower layer is a FUSE file system (stall_fuse.py,
    stalling stall_pid, the file's inode number ino), the FUSE mount detached: yields the
    overlay's path to it (with several names, the list of their paths, inodes ino, ino +
    1, ...). Each case takes its own inos: the overlay's anonymous device is reused by the
    next one, and a refusal is remembered by (device, inode) for 10 s."""
    fuse, lower, ovl = (os.path.join(tmp, tag, d) for d in ("fuse", "empty", "ovl"))
    for d in (fuse, lower, ovl):
        os.makedirs(d)
    server = subprocess.Popen([python, os.path.join(os.path.dirname(__file__),
                                                    "stall_fuse.py"),
                               fuse, ",".join(names), LIBSSL, str(stall_pid), str(ino)],
                              stdout=subprocess.PIPE, text=True)
    mounted = False
    try:
        if server.stdout.readline().strip() != "ready":
            raise AssertionError("the FUSE server did not mount")
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={fuse}:{lower}", ovl], check=True, timeout=60)
        mounted = True
        subprocess.run(["umount", "-l", fuse], check=True, timeout=60)
        with open("/proc/self/mountinfo") as f:
            check(" - fuse" not in f.read(), f"{tag}: no mount shows the FUSE file system")
        paths = [f"{ovl}/{n}" for n in names]
        yield paths[0] if len(paths) == 1 else paths
    finally:
        # Its death fails the requests still waiting (the agent's threads end).
        server.kill()
        server.wait()
        if mounted:
            subprocess.run(["umount", "-l", ovl], check=False, timeout=60)


def stalled_again(agent, python, path):
    """More processes open the stalled file, until one is past the registry's refusal
    cache (10 s): each is refused at once while the first open still waits, and no
    thread more waits. Each new process used to leave one more walk of its path
    waiting, until 16 of them stopped every new open."""
    first = agent.json("libs")
    base = first["refused"]["slow_fs"] - first["refused_cached"]
    opened = 0

    def refused_past_the_cache():
        nonlocal opened
        h = Holder(python, OPEN_ONLY, (path,))
        try:
            h.step("opened")
            opened += 1
        finally:
            h.stop()
        libs = agent.json("libs")
        return libs["refused"]["slow_fs"] - libs["refused_cached"] > base
    wait_for(refused_past_the_cache, 120, "an open of the stalled file past the refusal cache")
    libs = agent.json("libs")
    check(libs["open_timeouts"] == first["open_timeouts"] and
          libs["open_timeouts_waiting"] == first["open_timeouts_waiting"] and
          libs["opens_not_tried"] == first["opens_not_tried"],
          f"{opened} more processes opened the stalled file: still "
          f"{libs['open_timeouts_waiting']} waiting, {libs['open_timeouts']} past the "
          f"deadline, {libs['opens_not_tried']} not tried")
    r = [x for x in agent.json("libs")["recent_refusals"]
         if x["path"] == path and x["reason"] == "slow_fs"]
    check(any(x["detail"] == "an earlier open of it still waits on its file system"
              for x in r), f"refused at once: {[x['detail'] for x in r]}")


def probed_copy(agent, python, tmp, tag, when):
    """A copy of libssl in tmp/tag, loaded by a process of root's: its usm row once
    attached."""
    path = os.path.join(tmp, tag, "libssl.so.3")
    os.makedirs(os.path.dirname(path))
    shutil.copy(LIBSSL, path)
    h = Holder(python, LOAD, (path,))
    try:
        h.step("loaded")
        return wait_for(lambda: [r for r in usm_rows(agent, path)
                                 if r["attached"] >= LIBSSL_PROBES], 60,
                        f"usm attached to {path}, {when}")[0]
    finally:
        h.stop()


OPEN_MANY = r"""
import os, sys
print("ready", flush=True)
sys.stdin.readline()
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]
print("opened", flush=True)
sys.stdin.readline()
"""

# Runs argv[1:] in a user namespace that uid 65534 made, as host uid 0 (the test, root,
# maps it): the agent counts its stalled opens against their owner, 65534, as it would
# a rootless container's, whose processes run as many uids of a subordinate range;
# and host root reads the overlay's files, which reach FUSE, where other users may not.
USERNS_OF_NOBODY = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
up_r, up_w = os.pipe()
down_r, down_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(up_r)
    os.close(down_w)
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    if libc.unshare(0x10000000):  # CLONE_NEWUSER
        os._exit(3)
    os.write(up_w, b"u")
    os.read(down_r, 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: ends with this process
    os.execv(sys.argv[1], sys.argv[1:])
os.close(up_w)
os.close(down_r)
if os.read(up_r, 1) != b"u":
    sys.exit("no user namespace")
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 0 1\n")
os.write(down_w, b"m")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def stalled_by_one_user(agent, python, tmp):
    """One user's process (in a user namespace uid 65534 made) opens many files that
    stall: at most opens_waiting_per_user_max threads wait on that user's files, the
    user's further opens are refused untried, and other users' libraries (nobody's
    outside that namespace is the same user's: root's here) are still probed. Once 16
    of one user's files stalled, every new open used to be refused, whoever's it was."""
    n = 16
    names = [f"libssl.so.{10 + i}" for i in range(n)]
    with fuse_beneath_overlay(python, tmp, "one_user", agent.proc.pid, 100, names) as paths:
        first = agent.json("libs")
        cap = first["opens_waiting_per_user_max"]
        h = Holder(python, OPEN_MANY, paths, [python, "-c", USERNS_OF_NOBODY])
        try:
            h.step("opened")

            def all_refused():
                r = [x for x in agent.json("libs")["recent_refusals"]
                     if x["path"] in paths and x["reason"] == "slow_fs"]
                return r if len({x["path"] for x in r}) == n else None
            r = wait_for(all_refused, 30 + 3 * n, f"the refusals of {n} stalled files")
            untried = [x for x in r if "for processes of its user" in x["detail"]]
            untried_paths = {x["path"] for x in untried}
            check(len(untried_paths) == n - cap,
                  f"{n} stalled files of 65534's namespace: {len(untried_paths)} refused "
                  f"untried "
                  f"({untried[0]['detail'] if untried else '-'})")
            # Another user's library is probed.
            row = probed_copy(agent, python, tmp, "after_user", "loaded by root while "
                              "65534's files stall")
            check(True, f"root's library is probed ({row['attached']} probe points)")
            libs = agent.json("libs")
            check(libs["open_timeouts_waiting"] == cap,
                  f"threads waiting on 65534's files: {libs['open_timeouts_waiting']} "
                  f"({cap} at most per user, {libs['opens_waiting_max']} in all)")
            check(libs["opens_not_tried_per_user"] - first["opens_not_tried_per_user"] >=
                  n - cap, f"opens not tried for their user counted: "
                           f"{libs['opens_not_tried_per_user']}")
            out = agent.cli("libs").stdout
            check("of the process's user did" in out,
                  "bpftel libs shows the opens not tried for their user")
        finally:
            h.stop()
    wait_for(lambda: agent.json("libs")["open_timeouts_waiting"] == 0, 120,
             "the threads left waiting on the FUSE server to end once it died")
    check(True, "no open is left waiting once the FUSE server is gone")


NAMED_LOAD = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
libc.prctl(15, sys.argv[2].encode(), 0, 0, 0)  # PR_SET_NAME
print("ready", flush=True)
sys.stdin.readline()
ctypes.CDLL(sys.argv[1])
print("loaded", flush=True)
sys.stdin.readline()
"""


def newline_in_name(agent, python, tmp):
    """A process whose name holds a newline (its own choice: prctl, or its executable's
    name) loads libssl: it is probed like any other. Its /proc/<pid>/stat line then
    holds that newline: read by line, its start time was not found, the process taken
    as gone, and its library never probed: a way to hide its HTTPS."""
    path = os.path.join(tmp, "newline", "libssl.so.3")
    os.makedirs(os.path.dirname(path))
    shutil.copy(LIBSSL, path)
    h = Holder(python, NAMED_LOAD, (path, "hide\nme"))
    try:
        h.step("loaded")
        row = wait_for(lambda: [r for r in usm_rows(agent, path)
                                if r["attached"] >= LIBSSL_PROBES and
                                h.proc.pid in r["pids"]], 60,
                       f"usm attached to {path}, loaded by a process named 'hide\\nme'")[0]
        check(True, f"a process named with a newline is probed ({row['attached']} probe "
                    f"points, pids {row['pids']})")
    finally:
        h.stop()


def control_byte_path(agent, python, tmp):
    """A library ~4000 bytes down directories named with control bytes: `bpftel stats`
    shows its path escaped, its start and end around "..." in at most 1024 columns.
    Whole, each such path was ~20 KB of the answer: 1024 detections of them made it
    over the CLI's 16 MiB, and `bpftel stats` failed until the agent restarted."""
    comp = "\x01" * 250
    path = os.path.join(tmp, "ctl")
    while len(path) + 1 + len(comp) + len("/libssl.so.3") < 4000:
        path = os.path.join(path, comp)
    os.makedirs(path)
    lib = os.path.join(path, "libssl.so.3")
    shutil.copy(LIBSSL, lib)
    h = Holder(python, NAMED_LOAD, (lib, "ctlpath"))
    try:
        h.step("loaded")
        row = wait_for(lambda: [d for d in (agent.json("stats") or {}).get("libraries", [])
                                if d["pid"] == h.proc.pid], 60,
                       "the watcher's detection of a library under control-byte names")[0]
        shown = row["path"]
        check(len(shown) <= 1024 and shown.startswith(tmp + "/ctl/\\x01\\x01") and
              "..." in shown and shown.endswith("\\x01/libssl.so.3"),
              f"a {len(lib)}-byte path of control bytes shown escaped in {len(shown)} "
              f"characters, its start and end: {shown[:40]}...{shown[-30:]}")
        res = agent.cli("stats")
        check(res.returncode == 0 and
              max(len(ln) for ln in res.stdout.splitlines()) < 1024,
              "bpftel stats prints it in a table cell of its own width, not the path's")
    finally:
        h.stop()


def stalled_fuse(agent, python, tmp, hwm):
    """FUSE beneath an overlay that never answers the agent: refused at the deadline,
    and the watcher goes on meanwhile."""
    with fuse_beneath_overlay(python, tmp, "stalled", agent.proc.pid, 2) as path:
        before = agent.json("libs").get("open_timeouts", 0)
        h = Holder(python, OPEN_ONLY, (path,))
        try:
            h.step("opened")
            # The watcher goes on: a library loaded after it is probed.
            row = probed_copy(agent, python, tmp, "after", "loaded after the stalled file "
                              "was opened")
            check(True, f"a library loaded after the stalled file is probed "
                        f"({row['attached']} probe points)")
            r = wait_for(lambda: refused(agent, path, "slow_fs"), 120,
                         f"the refusal of {path} (slow_fs)")[0]
            check(True, f"FUSE beneath overlayfs, stalled: refused as {r['reason']}: "
                        f"{r['detail']}")
            libs = agent.json("libs")
            check(libs["open_timeouts"] > before,
                  f"opens past their deadline counted: {libs['open_timeouts']}")
            check(libs["open_timeouts_waiting"] > 0,
                  f"an open still waits on the stalled file system "
                  f"({libs['open_timeouts_waiting']})")
            after_each(agent, "FUSE beneath overlayfs, stalled", hwm)
            # The restart did not wait for it: it still waits (until the server dies).
            libs = agent.json("libs")
            check(libs["open_timeouts_waiting"] > 0,
                  f"the restart answered while the stalled open still waits "
                  f"({libs['open_timeouts_waiting']} waiting)")
            stalled_again(agent, python, path)
        finally:
            h.stop()
    wait_for(lambda: agent.json("libs")["open_timeouts_waiting"] == 0, 120,
             "the threads left waiting on the FUSE server to end once it died")
    check(True, "no open is left waiting once the FUSE server is gone")


def answering_fuse(agent, python, tmp, hwm):
    """FUSE beneath an overlay that answers: the library opens (the overlay's layers
    lie on two file systems, so its identity is checked as the kernel has it, not
    refused as identity_changed), but what it maps lies on FUSE: refused as slow_fs,
    never parsed or probed, and no open waits for a deadline."""
    with fuse_beneath_overlay(python, tmp, "answering", 0, 3) as path:
        before = agent.json("libs").get("open_timeouts", 0)
        h = Holder(python, LOAD, (path,))
        try:
            h.step("loaded")
            r = wait_for(lambda: refused(agent, path, "slow_fs"), 120,
                         f"the refusal of {path} (slow_fs)")[0]
            check(r["detail"] == "on or through a FUSE file system",
                  f"FUSE beneath overlayfs, answering: refused as {r['reason']}: "
                  f"{r['detail']}")
            check(not refused(agent, path, "identity_changed"),
                  "FUSE beneath overlayfs, answering: not refused as identity_changed")
            check(not usm_rows(agent, path) or
                  all(row["attached"] == 0 for row in usm_rows(agent, path)),
                  "FUSE beneath overlayfs, answering: no probe attached to it")
            check(agent.json("libs")["open_timeouts"] == before,
                  f"FUSE beneath overlayfs, answering: no open past its deadline "
                  f"({before} before and after)")
            after_each(agent, "FUSE beneath overlayfs, answering", hwm)
        finally:
            h.stop()


def over_budget(args, tmp):
    """Each library file new to the agent costs it an ELF parse and the attach of its
    probes; any user can make copies of libssl and open them in a loop. One user's new
    files are budgeted a minute (new_files_per_user, 2 here: one more every 30 s):
    4241's process opens 5 copies, 2 are probed and the others refused as
    over_budget, never parsed; another user's copy, loaded next, has a budget of its
    own. (Users of their own: root's budget is the host's own processes', and a host
    daemon may run as 65534, nobody.)"""
    conf = os.path.join(tmp, "budget.conf")
    with open(conf, "w") as f:
        f.write("modules = usm\nnew_files_per_user = 2\nmetrics_addr = 127.0.0.1:0\n")
    paths = []
    for i in range(5):
        paths.append(os.path.join(tmp, "budget", str(i), "libssl.so.3"))
        os.makedirs(os.path.dirname(paths[-1]))
        shutil.copy(LIBSSL, paths[-1])
    agent = Agent(args.agent, args.cli, ["-c", conf], env=HOSTILE_ENV)
    t0 = time.monotonic()
    try:
        libs = agent.json("libs")
        check(libs["new_files_per_user"] == 2, "new_files_per_user = 2 applied")
        h = Holder(args.python, OPEN_MANY, paths,
                   ["setpriv", "--reuid=4241", "--regid=4241", "--clear-groups",
                    "--pdeathsig", "KILL"])
        try:
            h.step("opened")

            def handled():
                rows = {r["path"] for r in agent.json("libs")["libs"]
                        if r["path"] in paths and r["attached"] >= LIBSSL_PROBES}
                over = {r["path"] for r in agent.json("libs")["recent_refusals"]
                        if r["path"] in paths and r["reason"] == "over_budget"}
                return (rows, over) if len(rows | over) == len(paths) else None
            rows, over = wait_for(handled, 60, "4241's 5 copies probed or refused")
            refill = int((time.monotonic() - t0) // 30)
            check(2 <= len(rows) <= 2 + refill and len(over) >= 3 - refill,
                  f"4241's copies: {len(rows)} probed, {len(over)} refused as over_budget "
                  f"({refill} refilled in {time.monotonic() - t0:.0f} s)")
            detail = next(r["detail"] for r in agent.json("libs")["recent_refusals"]
                          if r["reason"] == "over_budget" and r["path"] in paths)
            check("user 4241's processes brought 2 new library files within a minute"
                  in detail, f"the reason names the user and the budget: {detail}")
            out = agent.cli("libs").stdout
            check("over_budget" in out and "new_files_per_user" in out,
                  "bpftel libs shows the refusals over budget")
            # Another user (4242) loads a copy of its own: probed.
            other = os.path.join(tmp, "budget", "other", "libssl.so.3")
            os.makedirs(os.path.dirname(other))
            shutil.copy(LIBSSL, other)
            h2 = Holder(args.python, LOAD, (other,),
                        ["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups",
                         "--pdeathsig", "KILL"])
            try:
                h2.step("loaded")
                row = wait_for(lambda: [r for r in usm_rows(agent, other)
                                        if r["attached"] >= LIBSSL_PROBES], 60,
                               "user 4242's copy probed while 4241 is over budget")[0]
                check(True, f"another user's copy is probed ({row['attached']} probe "
                            f"points)")
            finally:
                h2.stop()
            addr = agent.json("stats")["agent"]["metrics_addr"]
            with urllib.request.urlopen(f"http://{addr}/metrics", timeout=120) as r:
                metrics = r.read().decode()
            line = [ln for ln in metrics.splitlines() if ln.startswith(
                'bpftel_uprobe_files_refused_total{reason="over_budget"}')]
            check(line and float(line[0].split()[-1]) >= 3 - refill,
                  f"metrics: {line[0] if line else 'no over_budget series'}")
        finally:
            h.stop()
        check(agent.stop() == 0, "the agent stops cleanly")
    finally:
        agent.cleanup()


OPEN_AT = r"""
import os, sys
d = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
fd = os.open(sys.argv[2], os.O_RDONLY, dir_fd=d)
print("opened", flush=True)
sys.stdin.readline()
"""


def stalled_link(agent, python, tmp):
    """One user's FUSE mount (detached) serves libssl.so.3, a symbolic link to a copy of
    libssl: the user's process (uid 4244, which no other case stalls: its opens are not
    refused untried for earlier stalls) opens the copy through it, the agent's walk of
    that path stalls, and the open is refused (slow_fs). Root's process then loads the
    copy itself: probed. The stall was the path's, not the file's; remembered for every
    user, it refused the copy to all of them."""
    fuse, lib = (os.path.join(tmp, "linked", n) for n in ("fuse", "lib"))
    victim = os.path.join(lib, "libssl.so.3")
    os.makedirs(fuse)
    os.makedirs(lib)
    # On a tmpfs of its own: an identity (device, inode) no file of the earlier cases
    # had, which the registry may still hold a row of.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "none", lib], check=True,
                   timeout=60)
    shutil.copy(LIBSSL, victim)
    server = subprocess.Popen([python, os.path.join(os.path.dirname(__file__),
                                                    "stall_fuse.py"),
                               fuse, "libssl.so.3", LIBSSL, str(agent.proc.pid), "300"],
                              env={**os.environ, "STALL_FUSE_LINK": victim},
                              stdout=subprocess.PIPE, text=True)
    h = None
    try:
        if server.stdout.readline().strip() != "ready":
            raise AssertionError("the FUSE server did not mount")
        h = Holder(python, OPEN_AT, (fuse, "libssl.so.3"),
                   ["setpriv", "--reuid=4244", "--regid=4244", "--clear-groups"])
        subprocess.run(["umount", "-l", fuse], check=True, timeout=60)
        h.step("opened")
        wait_for(lambda: [x for x in agent.json("libs")["recent_refusals"]
                          if x["reason"] == "slow_fs" and x["path"] == "libssl.so.3"], 120,
                 "the open through the stalled link to be refused (slow_fs)")
        check(True, "4244's open of a copy of libssl through its stalled FUSE link: "
                    "refused as slow_fs")
        root = Holder(python, LOAD, (victim,))
        try:
            root.step("loaded")
            row = wait_for(lambda: [r for r in usm_rows(agent, victim)
                                    if r["attached"] >= LIBSSL_PROBES], 60,
                           f"usm attached to {victim}, loaded by root")[0]
        finally:
            root.stop()
        # Not refused first (from the cache), then found by a later /proc scan.
        check(not [x for x in agent.json("libs")["recent_refusals"] if x["path"] == victim],
              f"root's load of the same copy is probed ({row['attached']} probe points), "
              f"never refused: the stall is remembered for 4244 only")
    finally:
        if h:
            h.stop()
        server.kill()
        server.wait()
        subprocess.run(["umount", "-l", lib], check=False, timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--hwm-bound-mib", type=int, default=64,
                    help="bound on the agent's VmHWM; 0: not checked (sanitizer builds)")
    args = ap.parse_args()
    require_root()
    if not os.path.exists(LIBSSL) or not shutil.which("unshare"):
        skip("needs the system libssl and unshare")

    tmp = tempfile.mkdtemp(prefix="bpftel-hostile-")
    os.chmod(tmp, 0o755)
    agent = Agent(args.agent, args.cli, env=HOSTILE_ENV)
    try:
        hwm = args.hwm_bound_mib
        # 1. A FIFO renamed over a loaded library: the old agent blocked in open().
        fifo = os.path.join(tmp, "fifo", "libssl.so.3")
        os.makedirs(os.path.dirname(fifo))
        shutil.copy(LIBSSL, fifo)
        swapped_library(agent, args.python, fifo, "fifo", hwm)

        # 2. A private mount namespace: only the process sees these files.
        priv = os.path.join(tmp, "private")
        os.makedirs(priv)
        ns = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              f"mount -t tmpfs none {priv} && mkdir {priv}/libssl.so.3 && "
              f"cp {LIBSSL} {priv}/libssl.so.4 && exec \"$@\"", "sh"]
        opened_file(agent, args.python, f"{priv}/libssl.so.3", "not_regular",
                    "a directory named libssl.so.3 (private mount namespace)", hwm, ns)
        swapped_library(agent, args.python, f"{priv}/libssl.so.4", "symlink to /dev/zero",
                        hwm, ns)
        check(not os.path.exists(f"{priv}/libssl.so.4"),
              "those files were only in the process's namespace")
        # The same in an overlay (a container's): the mapping that reaches the file once
        # its path is swapped shows the overlay's file, not the layer's it is keyed by.
        ovl = os.path.join(tmp, "overlay")
        os.makedirs(ovl)
        ns = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              f"mount -t tmpfs none {ovl} && mkdir {ovl}/lower {ovl}/upper {ovl}/work "
              f"{ovl}/merged && cp {LIBSSL} {ovl}/lower/libssl.so.3 && mount -t overlay "
              f"overlay -o lowerdir={ovl}/lower,upperdir={ovl}/upper,workdir={ovl}/work "
              f"{ovl}/merged && exec \"$@\"", "sh"]
        swapped_library(agent, args.python, f"{ovl}/merged/libssl.so.3", "fifo in an overlay",
                        hwm, ns)

        # 3. Sparse files that claim huge symbol tables.
        huge = os.path.join(tmp, "huge", "libssl.so.3")
        os.makedirs(os.path.dirname(huge))
        sparse_elf(huge, 4 << 30, 3 << 30)
        opened_file(agent, args.python, huge, "too_large",
                    "a 4 GiB sparse file claiming a 3 GiB .dynsym", hwm)
        big = os.path.join(tmp, "big", "libssl.so.3")
        os.makedirs(os.path.dirname(big))
        sparse_elf(big, 900 << 20, 800 << 20)
        opened_file(agent, args.python, big, "tables_too_large",
                    "a 900 MiB sparse file claiming an 800 MiB .dynsym", hwm)

        # 4. A truncated ELF.
        cut = os.path.join(tmp, "cut", "libssl.so.3")
        os.makedirs(os.path.dirname(cut))
        with open(LIBSSL, "rb") as src, open(cut, "wb") as dst:
            dst.write(src.read(4096))
        opened_file(agent, args.python, cut, "not_elf", "a truncated ELF", hwm)

        # 5. A process whose name holds a newline.
        newline_in_name(agent, args.python, tmp)
        # 5b. A path of control bytes, as long as the kernel takes.
        control_byte_path(agent, args.python, tmp)

        # 6. FUSE hidden beneath an overlay mount.
        if os.path.exists("/dev/fuse"):
            stalled_fuse(agent, args.python, tmp, hwm)
            # 7. The same FUSE, answering.
            answering_fuse(agent, args.python, tmp, hwm)
            # 8. One user's process stalls many files.
            if subprocess.run([args.python, "-c", USERNS_OF_NOBODY, "/bin/true"],
                              timeout=60).returncode == 0:
                stalled_by_one_user(agent, args.python, tmp)
            else:
                print("note: no unprivileged user namespaces: case 8 is not run")
            # 8b. One user's stalled link to a library: the others' opens of it.
            stalled_link(agent, args.python, tmp)
        else:
            print("note: no /dev/fuse: the FUSE cases are not run")

        counts = agent.json("libs")["refused"]
        check(counts["not_regular"] >= 3 and counts["too_large"] >= 1 and
              counts["tables_too_large"] >= 1 and counts["not_elf"] >= 1 and
              counts["over_budget"] == 0,
              f"refusals counted by reason: { {k: v for k, v in counts.items() if v} }")
        check(agent.stop() == 0, "the agent stops cleanly")
        # 9. One user's new files over budget (an agent with its own configuration).
        over_budget(args, tmp)
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(main)
