"""An origin for the scanning tests: GET /NAME serves $ROOT/NAME with a
Content-Length, GET /chunked/NAME serves it chunked (in pieces of at most
1000 bytes, then 64 KiB), POST/PUT reads the body (Content-Length or
chunked) and appends "PATH LENGTH SHA256" to the log only once the body
is complete, then answers 200. With --log-cut, a body cut before its end
(the connection closed or reset) is logged too, as "PATH LENGTH SHA256
cut" with what came of it, and not answered.
  scan_origin.py PORT ROOT LOG [--log-cut]
(tests start it with start_scan_origin, http_lib.sh)"""
import hashlib
import http.server
import os
import sys


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        chunked = self.path.startswith("/chunked/")
        name = self.path[len("/chunked/"):] if chunked else self.path[1:]
        p = os.path.join(ROOT, os.path.basename(name))
        if not os.path.isfile(p):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(p, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if not chunked:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        off, step = 0, 1000
        while off < len(data):
            piece = data[off:off + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            off += len(piece)
            step = 65536
        self.wfile.write(b"0\r\n\r\n")

    def read_body(self, got):
        """The body into got (a bytearray); ConnectionError if cut."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                line = self.rfile.readline()
                if not line:
                    raise ConnectionError("body cut at %d" % len(got))
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                piece = self.rfile.read(size)
                got += piece
                if len(piece) < size:
                    raise ConnectionError("body cut at %d" % len(got))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0"))
        while len(got) < n:
            d = self.rfile.read1(n - len(got))
            if not d:
                raise ConnectionError("body cut at %d of %d" % (len(got), n))
            got += d

    def do_POST(self):
        body = bytearray()
        try:
            self.read_body(body)
        except (OSError, ValueError):
            if not LOG_CUT:
                raise
            with open(LOG, "a") as f:
                f.write("%s %d %s cut\n" % (self.path, len(body),
                                            hashlib.sha256(body).hexdigest()))
            self.close_connection = True
            return
        with open(LOG, "a") as f:
            f.write("%s %d %s\n" % (self.path, len(body),
                                    hashlib.sha256(body).hexdigest()))
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    do_PUT = do_POST


PORT, ROOT, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]
LOG_CUT = sys.argv[4:] == ["--log-cut"]
http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
