#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""https_proxy.py CERT KEY: an HTTPS proxy (TLS to the proxy, then CONNECT and the
tunnel's bytes both ways), on a free port of 127.0.0.1, which it prints ("ready PORT").
A client through it (curl -x https://...) runs TLS inside TLS: its reads of the
end-to-end session read the proxy's session from inside them, on one thread."""
import socket
import ssl
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def handle(conn):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            conn.close()
            return
        head += chunk
    method, target = head.split(b"\r\n")[0].split()[:2]
    host, _, port = target.rpartition(b":")
    if method != b"CONNECT" or not port.isdigit():
        conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        conn.close()
        return
    up = socket.create_connection((host.decode(), int(port)))
    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
    pipe(conn, up)


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    srv = socket.create_server(("127.0.0.1", 0))
    print("ready", srv.getsockname()[1], flush=True)
    while True:
        raw, _ = srv.accept()
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
