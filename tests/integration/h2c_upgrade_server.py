#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A cleartext HTTP/2 server that takes HTTP/1.1's Upgrade: h2c (RFC 7540 3.2), as
`curl --http2 http://...` asks for it (nghttpd does not): it answers 101, then the
request, stream 1, with 200 over HTTP/2, and any later stream the same. Python's h2
(Debian python3-h2). Prints "ready PORT", serves until killed.

  h2c_upgrade_server.py
"""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events


def answer(conn, stream):
    conn.send_headers(stream, [(":status", "200"), ("content-length", "2")])
    conn.send_data(stream, b"ok", end_stream=True)


def serve(sock):
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            data = sock.recv(4096)
            if not data:
                return
            head += data
        head, rest = head.split(b"\r\n\r\n", 1)
        fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        settings = {k.strip().lower(): v.strip() for k, v in fields.items()}.get(
            b"http2-settings", b"")
        sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                     b"Upgrade: h2c\r\n\r\n")
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_upgrade_connection(settings)
        answer(conn, 1)
        sock.sendall(conn.data_to_send())
        data = rest
        while True:
            for ev in conn.receive_data(data) if data else []:
                if isinstance(ev, h2.events.RequestReceived):
                    answer(conn, ev.stream_id)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            data = sock.recv(65536)
            if not data:
                return
    except Exception:  # a client gone mid-exchange: its connection only
        return
    finally:
        sock.close()


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print(f"ready {srv.getsockname()[1]}", flush=True)
    while True:
        s, _ = srv.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
