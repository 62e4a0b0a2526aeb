#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A process that loads libssl, then forks and exits, leaving a child that uses the
library it never opened (daemon(3), a pre-fork server whose parent goes).
forked_tls_client.py: prints "loaded PID" once libssl is in; on the line "fork" on
stdin, forks, prints "child PID" and exits; the child then answers each line "get URL"
with an HTTPS GET (certificate not checked): "status N"."""
import os
import ssl
import sys
import urllib.request


def child():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["get"]:
            with urllib.request.urlopen(cmd[1], context=ctx, timeout=60) as r:
                r.read()
                print(f"status {r.status}", flush=True)


def main():
    print(f"loaded {os.getpid()}", flush=True)
    if sys.stdin.readline().strip() != "fork":
        sys.exit(1)
    pid = os.fork()
    if pid:
        print(f"child {pid}", flush=True)
        os._exit(0)
    child()


if __name__ == "__main__":
    main()
