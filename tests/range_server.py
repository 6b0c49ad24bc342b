"""A local HTTP file server for the download tests, with what http.server lacks: Range requests.

``RangeServer({"/path": b"bytes"})`` serves each payload at its path on 127.0.0.1 in a thread.
It answers ``Range: bytes=N-`` with 206 and ``Content-Range`` (unless ``ranges`` is False: then
it sends the whole file with 200, as many servers do), and can cut a body short: ``cut_next``
bytes into the next answer it closes the connection, having promised the full length (with
``cut_path`` set, the next answer for that path only). Every request's path and Range header are
kept in ``requests``, their If-Range headers in ``if_ranges``. Each answer carries a strong
``ETag`` (a digest of the payload; ``validators=False`` leaves it out), and a Range request whose
``If-Range`` is not the current ETag gets the whole file with 200, as RFC 9110 says: replacing a
payload in ``files`` between two requests is a file changed on the server. ``if_range=False``
ignores ``If-Range`` (a Range request gets 206 of whatever the file is now, as some servers and
proxies do); ``lengths=False`` leaves ``Content-Length`` out (the body ends when the connection
closes); ``announce`` maps a path to the length its answers claim whatever the body (a server
promising terabytes). Not a test module (no ``test_``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RangeServer:
    def __init__(self, files: dict[str, bytes], *, ranges: bool = True, validators: bool = True,
                 if_range: bool = True, lengths: bool = True, announce: dict[str, int] | None = None) -> None:
        self.files = dict(files)
        self.announce = dict(announce or {})
        self.if_range, self.lengths = if_range, lengths
        self.ranges = ranges
        self.validators = validators
        self.if_ranges: list[str | None] = []
        self.cut_next: int | None = None
        self.cut_path: str | None = None
        self.requests: list[tuple[str, str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                owner.requests.append((self.path, self.headers.get("Range")))
                payload = owner.files.get(self.path)
                if payload is None:
                    self.send_error(404)
                    return
                owner.if_ranges.append(self.headers.get("If-Range"))
                etag = '"' + hashlib.sha256(payload).hexdigest()[:16] + '"'
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if_range = self.headers.get("If-Range")
                if match and owner.if_range and if_range is not None and if_range != etag:
                    match = None  # the file changed since the validator was given: all of it, with 200
                if match and owner.ranges:
                    start = int(match.group(1))
                    if start >= len(payload):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(payload)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
                else:
                    self.send_response(200)
                body = payload[start:]
                if owner.lengths:
                    self.send_header("Content-Length", str(owner.announce.get(self.path, len(body))))
                self.send_header("Accept-Ranges", "bytes" if owner.ranges else "none")
                if owner.validators:
                    self.send_header("ETag", etag)
                self.end_headers()
                cut = None
                if owner.cut_path in (None, self.path):
                    cut, owner.cut_next = owner.cut_next, None
                self.wfile.write(body if cut is None else body[:cut])
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True

            def log_message(self, *args) -> None:  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> "RangeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
