#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""tls_loop.py CERT KEY N [write]: a TLS client and server in one process over memory
BIOs (no sockets), exchanging N request/response pairs: per pair 2 SSL_write_ex and 2
SSL_read_ex calls with data. With `write`, the client only writes: N SSL_write_ex of a
request, its records drained and dropped (the write loop of bench_tls_write.py).
Prints "loaded PID", waits for a line on stdin (so that an agent can attach first),
then prints ns per pair (per write). A workload of bench_tls.py."""
import ssl
import sys
import time


def pump(src, dst):
    data = src.read()
    if data:
        dst.write(data)


def main():
    cert, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = cctx.wrap_bio(c_in, c_out)
    server = sctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        pump(c_out, s_in)
        pump(s_out, c_in)
    req = b"GET /items/42 HTTP/1.1\r\nHost: bench\r\n\r\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    print("loaded", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter_ns()
    if len(sys.argv) > 4 and sys.argv[4] == "write":
        for _ in range(n):
            client.write(req)
            c_out.read()
        print(f"{(time.perf_counter_ns() - t0) / n:.1f}", flush=True)
        return
    for _ in range(n):
        client.write(req)
        pump(c_out, s_in)
        server.read(4096)
        server.write(resp)
        pump(s_out, c_in)
        client.read(4096)
    print(f"{(time.perf_counter_ns() - t0) / n:.1f}", flush=True)


if __name__ == "__main__":
    main()
