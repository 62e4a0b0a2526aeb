#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""An HTTP/1.1 server on 127.0.0.1 (TLS when given a certificate) that answers any
method on /s/<code>/... with that status, and anything else with 200:
  status_server.py PORT [CERT KEY]
Prints "ready PID" once listening. Keep-alive, so that one client connection can carry
many requests. Used by the USM tests (sides, floods)."""
import http.server
import os
import re
import ssl
import sys

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "PURGE")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in separate writes: with Nagle's algorithm the
    # body waits for the client's delayed ACK, 40 ms a request on keep-alive.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        m = re.match(r"/s/(\d{3})(/|$)", self.path)
        code = int(m.group(1)) if m else 200
        # 1xx, 204 and 304 have no body (RFC 9110), nor has a HEAD's answer.
        body = b"" if code < 200 or code in (204, 304) else b"ok\n"
        self.send_response_only(code)
        if body:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


for _m in METHODS:
    setattr(Handler, "do_" + _m, Handler.answer)


def main():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    if len(sys.argv) > 3:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    print(f"ready {os.getpid()}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
