#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""An HTTP/2 client that keeps one connection (python's ssl, the system OpenSSL, and
python3-h2): it connects, makes one gRPC call, prints "connected", then for each line
"go N PATH" on stdin makes N calls of PATH on the same connection and prints "done";
exits at end of input. For the tests of a connection the agent joins mid-way.

  h2_client.py PORT
"""
import socket
import ssl
import struct
import sys

import h2.config
import h2.connection
import h2.events


def call(sock, conn, path):
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, [(":method", "POST"), (":scheme", "https"), (":path", path),
                               (":authority", "localhost"), ("content-type", "application/grpc"),
                               ("te", "trailers")])
    conn.send_data(stream, struct.pack(">BI", 0, 4) + b"ping", end_stream=True)
    sock.sendall(conn.data_to_send())
    while True:
        data = sock.recv(65536)
        if not data:
            raise SystemExit("h2_client: the server closed the connection")
        events = conn.receive_data(data)
        pending = conn.data_to_send()
        if pending:
            sock.sendall(pending)
        for ev in events:
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == stream:
                sock.sendall(conn.data_to_send())
                return


def main():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))),
                           server_hostname="localhost")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    call(sock, conn, "/bpftel.test.Echo/Early")
    print("connected", flush=True)
    for line in sys.stdin:
        _, n, path = line.split()
        for _ in range(int(n)):
            call(sock, conn, path)
        print("done", flush=True)
    sock.close()


if __name__ == "__main__":
    main()
