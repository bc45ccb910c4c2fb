"""A loopback static file server that honours HTTP Range requests, as real video hosts do.

Used by the demo and the tests to serve synthetic clips to yt-dlp. Binds to
127.0.0.1 only and serves only the files under its root.
"""

from __future__ import annotations

import os
import re
import threading
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single-range ``Range: bytes=a-b`` support; no directory listings."""

    def log_message(self, format, *args):
        pass

    def list_directory(self, path):
        self.send_error(HTTPStatus.NOT_FOUND, "no listings")
        return None

    requests: list[tuple[str, str | None]] = []  # (path, Range header) of each request, for tests

    def send_head(self):
        self.requests.append((self.path, self.headers.get("Range")))
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(HTTPStatus.NOT_FOUND, "file not found")
            return None
        size = path.stat().st_size
        start, end = 0, size - 1
        header = self.headers.get("Range")
        match = _RANGE_RE.match(header.strip()) if header else None
        if header and not match:
            self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            return None
        if match:
            a, b = match.groups()
            if a:
                start, end = int(a), min(int(b), size - 1) if b else size - 1
            elif b:
                start = max(0, size - int(b))
            if start > end or start >= size:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return None
        f = open(path, "rb")
        f.seek(start)
        self.send_response(HTTPStatus.PARTIAL_CONTENT if match else HTTPStatus.OK)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if match:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        remaining = self._remaining
        try:
            while remaining > 0:
                chunk = source.read(min(1 << 16, remaining))
                if not chunk:
                    break
                outputfile.write(chunk)
                remaining -= len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client seeks elsewhere and drops the connection, as ffmpeg does


class FileServer:
    """Serve ``root`` on ``http://127.0.0.1:<port>/`` in a background thread.

    Use as a context manager; ``url`` is the base URL. Port 0 picks a free port.
    """

    def __init__(self, root: str | os.PathLike, port: int = 0):
        root = str(Path(root).resolve())

        class Handler(_RangeHandler):
            requests: list[tuple[str, str | None]] = []

            def __init__(self, *a, **kw):
                super().__init__(*a, directory=root, **kw)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.requests = Handler.requests
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
