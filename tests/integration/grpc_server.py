#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A gRPC server for the tests, over the system OpenSSL (python's ssl) and python's h2
(Debian python3-h2): HTTP/2 with ALPN h2, gRPC framing (a 5-byte length prefix per
message), the status in trailers. Method Ok answers grpc-status 0, Missing 5
(NOT_FOUND), anything else 12 (UNIMPLEMENTED). Prints "ready PORT", serves until killed.

  grpc_server.py CERT KEY
"""
import socket
import ssl
import struct
import sys
import threading

import h2.config
import h2.connection
import h2.events

CODES = {"Ok": "0", "Missing": "5"}


def answer(conn, stream, path):
    code = CODES.get(path.rsplit("/", 1)[-1], "12")
    reply = b"pong"
    conn.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    conn.send_data(stream, struct.pack(">BI", 0, len(reply)) + reply)
    conn.send_headers(stream, [("grpc-status", code), ("grpc-message", "test")],
                      end_stream=True)


def serve(sock):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    paths[ev.stream_id] = dict(ev.headers).get(":path", "")
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    answer(conn, ev.stream_id, paths.pop(ev.stream_id, ""))
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    sock.sendall(conn.data_to_send())
                    return
            sock.sendall(conn.data_to_send())
    except (OSError, ssl.SSLError):
        pass
    finally:
        sock.close()


def main():
    cert, key = sys.argv[1], sys.argv[2]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    print(f"ready {lsock.getsockname()[1]}", flush=True)
    while True:
        raw, _ = lsock.accept()
        try:
            tls = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(tls,), daemon=True).start()


if __name__ == "__main__":
    main()
