#!/usr/bin/env python3
"""A stand-in for `hourglass serve`, to test the harness that starts it: it
prints `http ADDR` (and `beanstalk ADDR` with --beanstalk) and answers HTTP
on that address; with --fail it writes to stderr and exits 3 instead."""

import http.server
import sys

if "--fail" in sys.argv:
    print("cannot open the store: a fake failure", file=sys.stderr, flush=True)
    sys.exit(3)


class Health(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Health)
print(f"http 127.0.0.1:{server.server_port}", flush=True)
if "--beanstalk" in sys.argv:
    print("beanstalk 127.0.0.1:11300", flush=True)
server.serve_forever()
