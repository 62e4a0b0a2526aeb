#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A FUSE file system that never answers one process: what an unprivileged user can
mount (in a user namespace) to make anyone who reads its files wait for ever.

It serves one read-only file, NAME, a copy of SOURCE, through the raw /dev/fuse protocol
(no libfuse), with no attribute or entry caching, so that every lookup, stat, open and read
reaches it; NAME may be several names, comma-separated: as many files, each a copy. Requests from STALL_PID (the agent; 0: none) are read and never answered;
everything else is (the kernel names a request's thread: it is matched by its thread
group). It prints "ready" once mounted at MOUNTPOINT (and, with STALL_FUSE_SAY=1 in its
environment, "stalled OPCODE" for each request it leaves waiting), and runs until killed: its
death fails the waiting requests (the kernel aborts the connection). INO (default 2)
is the file's inode number (the next names' INO + 1, ...): two instances mounted one after
the other may get the same anonymous device, and should not serve the same (device,
inode). With STALL_FUSE_LINK=TARGET in its environment, NAME is a symbolic link to
TARGET instead (SOURCE unread): what an unprivileged user's mount can point at the
system's own libraries.

    stall_fuse.py MOUNTPOINT NAME SOURCE STALL_PID [INO]
"""
import ctypes
import os
import struct
import sys

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_READLINK = 1, 2, 3, 5
FUSE_OPEN, FUSE_READ, FUSE_STATFS, FUSE_RELEASE = 14, 15, 17, 18
FUSE_FLUSH, FUSE_INIT, FUSE_OPENDIR, FUSE_RELEASEDIR = 25, 26, 27, 29
FUSE_INTERRUPT, FUSE_BATCH_FORGET = 36, 42
NO_REPLY = (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT)
ROOT, FILE = 1, 2
ENOENT, ENOSYS = 2, 38
IN_HDR = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HDR = struct.Struct("<IiQ")


def attr(ino, size, mode):
    # ino size blocks atime mtime ctime (ns x3) mode nlink uid gid rdev blksize flags
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, 0, 0, 0,
                       0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


def tgid(tid):
    try:
        with open(f"/proc/{tid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    mnt, names, source, stall_pid = sys.argv[1], sys.argv[2].encode().split(b","), \
        sys.argv[3], int(sys.argv[4])
    ino = int(sys.argv[5]) if len(sys.argv) > 5 else FILE
    say = os.environ.get("STALL_FUSE_SAY") == "1"
    link = os.environ.get("STALL_FUSE_LINK", "").encode()
    if link:
        data, mode = link, 0o120777
    else:
        with open(source, "rb") as f:
            data = f.read()
        mode = 0o100444
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"stall_fuse", mnt.encode(), b"fuse", 0, opts):
        raise OSError(ctypes.get_errno(), "mount fuse")
    print("ready", flush=True)

    def reply(unique, err=0, body=b""):
        os.write(fd, OUT_HDR.pack(OUT_HDR.size + len(body), -err, unique) + body)

    while True:
        try:
            req = os.read(fd, 1 << 20 | 4096)
        except OSError:
            return  # unmounted
        _, op, unique, node, _, _, pid, _, _ = IN_HDR.unpack_from(req)
        arg = req[IN_HDR.size:]
        if op in NO_REPLY:
            continue
        if stall_pid and tgid(pid) == stall_pid:
            if say:
                print(f"stalled {op}", flush=True)
            continue  # the agent's requests wait for ever
        if op == FUSE_INIT:
            major, minor = struct.unpack_from("<II", arg)
            # major minor readahead flags max_bg congestion max_write time_gran
            # max_pages map_alignment flags2 max_stack_depth unused[6]
            reply(unique, body=struct.pack("<IIIIHHIIHHII24x", 7, 31, 0, 0, 16, 12,
                                           1 << 16, 1, 0, 0, 0, 0))
        elif op == FUSE_LOOKUP:
            if node == ROOT and arg.rstrip(b"\0") in names:
                # nodeid generation entry_valid attr_valid (ns x2), attr: no caching
                i = names.index(arg.rstrip(b"\0"))
                reply(unique, body=struct.pack("<QQQQII", FILE + i, 1, 0, 0, 0, 0) +
                      attr(ino + i, len(data), mode))
            else:
                reply(unique, ENOENT)
        elif op == FUSE_GETATTR:
            a = attr(ROOT, 0, 0o40555) if node == ROOT else \
                attr(ino + node - FILE, len(data), mode)
            reply(unique, body=struct.pack("<QII", 0, 0, 0) + a)
        elif op == FUSE_READLINK and link:
            reply(unique, body=link)
        elif op in (FUSE_OPEN, FUSE_OPENDIR):
            reply(unique, body=struct.pack("<QIi", 0, 0, 0))
        elif op == FUSE_READ:
            _, off, size = struct.unpack_from("<QQI", arg)
            reply(unique, body=data[off:off + size])
        elif op == FUSE_STATFS:
            reply(unique, body=struct.pack("<QQQQQIIII24x", 0, 0, 0, 0, 0, 4096, 255,
                                           4096, 0))
        elif op in (FUSE_RELEASE, FUSE_RELEASEDIR, FUSE_FLUSH):
            reply(unique)
        else:
            reply(unique, ENOSYS)


if __name__ == "__main__":
    main()
