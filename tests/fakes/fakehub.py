"""A loopback stand-in for the Hugging Face Hub's HTTP API, serving one dataset repository from a folder.

Enough of the API for ``HfApi.dataset_info``, ``HfFileSystem`` (tree listing, paths-info) and range reads
of ``resolve/`` URLs, so that code reading the Hub runs unchanged with ``HF_ENDPOINT`` pointed here.
Every request is recorded with its Range header. Two hostile modes: ``slow`` answers requests whose path
contains it one byte every 0.2 s (status line and headers included), and ``declared`` makes a HEAD of a
file declare the size given while a GET of it sends zeros without end.
"""

from __future__ import annotations

import re
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

from fakes.loopback import send_json

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, repo: str, root: Path):
        self.repo, self.root = repo, Path(root)
        self.requests: list[tuple[str, str, str | None]] = []
        self.slow: str | None = None
        self.declared: dict[str, int] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                hub.handle(self, "GET")

            def do_HEAD(self):
                hub.handle(self, "HEAD")

            def do_POST(self):
                hub.handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _entry(self, path: Path) -> dict:
        rel = path.relative_to(self.root).as_posix()
        if path.is_dir():
            return {"type": "directory", "oid": "0" * 40, "path": rel}
        return {"type": "file", "oid": "1" * 40, "size": path.stat().st_size, "path": rel}

    def _json(self, h, data, status=HTTPStatus.OK) -> None:
        send_json(h, status, data)

    def handle(self, h, method: str) -> None:
        path = unquote(urlparse(h.path).path)
        self.requests.append((method, path, h.headers.get("Range")))
        if self.slow and self.slow in path:
            return self._drip(h)
        api = f"/api/datasets/{self.repo}"
        if path == api or path.startswith(f"{api}/revision/"):
            files = [self._entry(p) for p in sorted(self.root.rglob("*")) if p.is_file()]
            siblings = [{"rfilename": f["path"], "size": f["size"]} for f in files]
            return self._json(h, {"id": self.repo, "sha": COMMIT, "siblings": siblings, "private": False})
        m = re.fullmatch(rf"{re.escape(api)}/tree/[^/]+/?(.*)", path)
        if m:
            folder = self.root / m.group(1)
            return self._json(h, [self._entry(p) for p in sorted(folder.iterdir())] if folder.is_dir() else [])
        if path.startswith(f"{api}/paths-info/"):
            length = int(h.headers.get("Content-Length", 0))
            form = h.rfile.read(length).decode()
            wanted = [unquote(v.replace("+", " ")) for k, v in re.findall(r"(\w+)=([^&]*)", form) if k == "paths"]
            return self._json(h, [self._entry(self.root / p) for p in wanted if (self.root / p).exists()])
        m = re.fullmatch(rf"/datasets/{re.escape(self.repo)}/resolve/[^/]+/(.+)", path)
        if m and m.group(1) in self.declared:
            return self._endless(h, method, self.declared[m.group(1)])
        if not m or not (self.root / m.group(1)).is_file():
            return self._json(h, {"error": "not found"}, HTTPStatus.NOT_FOUND)
        data = (self.root / m.group(1)).read_bytes()
        start, end = 0, len(data) - 1
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", h.headers.get("Range") or "")
        if rng:
            start, end = int(rng.group(1)), min(int(rng.group(2) or end), end)
        h.send_response(HTTPStatus.PARTIAL_CONTENT if rng else HTTPStatus.OK)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(end - start + 1))
        h.send_header("ETag", '"1111"')
        h.send_header("X-Repo-Commit", COMMIT)
        if rng:
            h.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        h.end_headers()
        if method != "HEAD":
            try:
                h.wfile.write(data[start : end + 1])
            except (BrokenPipeError, ConnectionResetError):  # ffmpeg closes once it has what it needs
                pass

    def _drip(self, h, seconds: float = 20.0) -> None:
        """A well-formed answer, one byte every 0.2 s, for at most ``seconds``."""
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b" " * 1000
        end = time.monotonic() + seconds
        try:
            for i in range(len(answer)):
                if time.monotonic() > end:
                    break
                h.wfile.write(answer[i : i + 1])
                h.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass
        h.close_connection = True

    def _endless(self, h, method: str, declared: int, cap: int = 256 << 20) -> None:
        """HEAD declares ``declared`` bytes; GET sends zeros with no length until ``cap`` or a closed socket."""
        h.send_response(HTTPStatus.OK)
        h.send_header("ETag", '"2222"')
        h.send_header("X-Repo-Commit", COMMIT)
        if method == "HEAD":
            h.send_header("Content-Length", str(declared))
            h.end_headers()
            return
        h.end_headers()
        h.close_connection = True
        chunk, sent = bytes(1 << 16), 0
        try:
            while sent < cap:
                h.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            pass
