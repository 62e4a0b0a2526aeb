#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A TLS client whose request write fails with SSL_ERROR_WANT_WRITE and is retried
(python's ssl, the system OpenSSL, a non-blocking socket), and the server it talks to,
in one process, on one CPU: tls_retry_app.py CERT KEY [stop]. The server reads nothing until
the client has seen its write fail; small socket buffers make sure it does. Prints one JSON line:
{"pid": ..., "retries": the client's retried writes, "status": the response's}. With stop,
the client never retries its first failed write: it prints its line (status null, and
"before": time.monotonic() taken before that write began, no later than the kernel's
mark of it) and waits to be killed, the mark left for the sweep."""
import json
import os
import select
import socket
import ssl
import sys
import threading
import time

BUF = 64 * 1024


def stopped(before):
    """Say so and wait to be killed, the failed write never retried."""
    print(json.dumps({"pid": os.getpid(), "retries": 0, "status": None, "before": before}),
          flush=True)
    sys.stdin.read()
    os._exit(0)


def main():
    cert, key = sys.argv[1], sys.argv[2]
    stop = sys.argv[3:] == ["stop"]
    # On one CPU: the kernel side knows a failed write by its CPU's last write, and a
    # thread moved to another CPU between the write and SSL_get_error would see its
    # retry counted as a second request (bpf/lib/usm_tls_retry.h).
    os.sched_setaffinity(0, {os.sched_getaffinity(0).pop()})
    body = b"x" * (4 << 20)
    req = (b"POST /upload/1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n"
           % len(body)) + body
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    failed = threading.Event()

    def serve():
        c, _ = ls.accept()
        with sctx.wrap_socket(c, server_side=True) as s:
            failed.wait()
            got = b""
            while len(got) < len(req):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            s.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")

    server = threading.Thread(target=serve)
    server.start()
    cctx = ssl.create_default_context()
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF)
    raw.connect(ls.getsockname())
    retries = 0
    with cctx.wrap_socket(raw) as s:
        s.setblocking(False)
        while True:
            before = time.monotonic()  # CLOCK_MONOTONIC, the kernel's bpf_ktime_get_ns
            try:
                s.send(req)  # one SSL_write_ex of the whole request, retried whole
                break
            except ssl.SSLWantWriteError:
                if stop:
                    stopped(before)
                retries += 1
                failed.set()
                select.select([], [s], [])
            except ssl.SSLWantReadError:
                if stop:
                    stopped(before)
                retries += 1
                failed.set()
                select.select([s], [], [])
        s.setblocking(True)
        status = s.recv(64).split(b" ")[1].decode()
    server.join()
    print(json.dumps({"pid": os.getpid(), "retries": retries, "status": status}), flush=True)


if __name__ == "__main__":
    main()
