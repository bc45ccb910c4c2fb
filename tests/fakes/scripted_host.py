"""A loopback host that refuses or rate-limits downloads as video hosts do, for the download backends' tests."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from fakes.loopback import LoopbackServer


class Scripted(LoopbackServer):
    """A loopback host: ``/status/<code>/<file>`` answers ``code``; ``/flaky/<n>/<file>`` answers 429 to the
    first ``n`` requests for it; ``/signed/<token>/<file>`` answers 403 unless the request carries the cookie
    ``session=<token>``. Otherwise they redirect to the real file on ``real`` (a Range-honouring server)."""

    def __init__(self, real: str):
        counts: dict[str, int] = {}
        self.requests: list[tuple[str, int]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                m = re.fullmatch(r"/(status|flaky|signed)/(\w+)/(.+)", self.path)
                if not m:
                    return self._send(404)
                if m.group(1) == "status":
                    return self._send(int(m.group(2)))
                if m.group(1) == "signed":
                    if f"session={m.group(2)}" not in (self.headers.get("Cookie") or ""):
                        return self._send(403)
                else:
                    counts[self.path] = counts.get(self.path, 0) + 1
                    if counts[self.path] <= int(m.group(2)):
                        return self._send(429, {"Retry-After": "0"})
                owner.requests.append((self.path, 302))
                self.send_response(302)
                self.send_header("Location", f"{real}/{m.group(3)}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _send(self, code: int, headers: dict | None = None):
                owner.requests.append((self.path, code))
                body = f"status {code}".encode()
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        super().__init__(Handler)


def with_urls(root: Path, tmp_path: Path, urls: list[str]) -> Path:
    """``root``'s synthetic recipes, the first ``len(urls)`` of them with their source at ``url.format(file=...)``."""
    lines = (root / "http" / "recipes.jsonl").read_text().splitlines()
    out = []
    for line, url in zip(lines, urls, strict=False):
        obj = json.loads(line)
        obj["source"]["url"] = url.format(file=obj["source"]["id"] + ".mp4")
        out.append(json.dumps(obj))
    path = tmp_path / "recipes.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path
