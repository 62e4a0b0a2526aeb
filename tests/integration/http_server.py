#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A threading HTTP/1.0 file server on 127.0.0.1, with TLS when given a certificate:
  http_server.py PORT DIR [CERT KEY]
Prints "ready PID" once listening. Used by the USM tests and tools/bench."""
import functools
import http.server
import os
import ssl
import sys


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    port, root = int(sys.argv[1]), sys.argv[2]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port),
                                            functools.partial(Quiet, directory=root))
    if len(sys.argv) > 4:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    print(f"ready {os.getpid()}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
