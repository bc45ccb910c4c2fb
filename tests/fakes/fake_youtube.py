"""YouTube's refusals, played on loopback for yt-dlp's own YouTube extractor.

yt-dlp sends its requests through ``--proxy``: this proxy answers ``CONNECT www.youtube.com:443`` with TLS from
a test certificate authority made here (OpenSSL's CLI) and plays the pages and InnerTube answers the extractor
reads: the watch page with ``ytInitialPlayerResponse``, ``/youtubei/v1/player``, and the embed page's
``ytcfg`` (age-gated videos are retried with the embedded client). Each video id answers the playability status
YouTube gives for one refusal (:data:`REFUSALS`), in YouTube's own shape (``errorScreen.playerErrorMessageRenderer``).

yt-dlp verifies TLS against ``certifi.where()``; a process that should trust the test CA runs with
:attr:`FakeYouTube.pythonpath` first on ``PYTHONPATH``, where a ``certifi`` module names the test CA. YouTube
extraction also needs a JavaScript runtime: :func:`deno` takes the real one from the ``deno`` wheel .ci/run
downloads.
"""

from __future__ import annotations

import json
import ssl
import stat
import subprocess
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from fakes.loopback import LoopbackServer


def _screen(reason: str, subreason: str, status: str) -> dict:
    renderer = {"reason": {"simpleText": reason}, "subreason": {"simpleText": subreason}}
    return {"status": status, "reason": reason, "errorScreen": {"playerErrorMessageRenderer": renderer}}


# video id (11 characters, as YouTube's) -> the playability status YouTube answers
REFUSALS = {
    "botcheck000": {"status": "LOGIN_REQUIRED", "reason": "Sign in to confirm you\u2019re not a bot"},
    "agegated000": _screen(
        "Sign in to confirm your age", "This video may be inappropriate for some users.", "LOGIN_REQUIRED"
    ),
    "private0000": _screen("Private video", "Sign in if you've been granted access to this video", "LOGIN_REQUIRED"),
    "removed0000": _screen("Video unavailable", "This video has been removed by the uploader", "ERROR"),
    "geoblocked0": _screen(
        "Video unavailable", "The uploader has not made this video available in your country", "UNPLAYABLE"
    ),
}


def _test_ca(folder: Path) -> None:
    """A CA and a certificate for YouTube's hosts signed by it, and a ``certifi`` module that names the CA."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    key, ca = str(folder / "ca.key"), str(folder / "ca.pem")
    new_key = ["req", "-newkey", "rsa:2048", "-nodes"]
    openssl(*new_key, "-x509", "-keyout", key, "-out", ca, "-days", "2", "-subj", "/CN=persistbench test CA")
    openssl(
        *new_key, "-keyout", str(folder / "host.key"), "-out", str(folder / "host.csr"), "-subj", "/CN=www.youtube.com"
    )
    (folder / "ext").write_text(
        "subjectAltName=DNS:www.youtube.com,DNS:youtube.com,DNS:m.youtube.com\n"
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    sign = ["x509", "-req", "-in", str(folder / "host.csr"), "-CA", ca, "-CAkey", key, "-CAcreateserial"]
    openssl(*sign, "-out", str(folder / "host.pem"), "-days", "2", "-extfile", str(folder / "ext"))
    (folder / "path" / "certifi").mkdir(parents=True)
    (folder / "path" / "certifi" / "__init__.py").write_text(f"def where():\n    return {ca!r}\n")


class FakeYouTube(LoopbackServer):
    """The proxy; ``url`` is what ``--proxy`` takes, ``requests`` the (method, path) YouTube was asked."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "host.pem").exists():
            _test_ca(folder)
        self.pythonpath = folder / "path"
        self.requests: list[tuple[str, str]] = []
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(folder / "host.pem", folder / "host.key")
        owner = self

        class YouTube(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                owner.requests.append((self.command, self.path))

            def _send(self, body: str, kind: str, code: int = 200) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _player(self, video_id: str) -> dict:
                status = REFUSALS.get(video_id, _screen("Video unavailable", "This video is unavailable", "ERROR"))
                return {"playabilityStatus": status, "videoDetails": {"videoId": video_id}}

            def do_GET(self):
                if self.path.startswith("/watch?v="):
                    player = json.dumps(self._player(self.path[9:20]))
                    return self._send(f"<html><script>var ytInitialPlayerResponse = {player};</script>", "text/html")
                if self.path.startswith("/embed/"):
                    client = {"clientName": "WEB_EMBEDDED_PLAYER", "clientVersion": "1.20261201.01.00"}
                    cfg = json.dumps({"INNERTUBE_CONTEXT": {"client": client}, "INNERTUBE_API_KEY": "key"})
                    return self._send(f"<html><script>ytcfg.set({cfg});</script>", "text/html")
                self._send("not found", "text/plain", 404)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.startswith("/youtubei/v1/player"):
                    return self._send(json.dumps(self._player(str(body.get("videoId")))), "application/json")
                self._send("{}", "application/json")

        class Proxy(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_CONNECT(self):
                if self.path.split(":")[0] not in ("www.youtube.com", "youtube.com", "m.youtube.com"):
                    self.send_error(403)
                    return
                self.send_response(200)
                self.end_headers()
                YouTube(tls.wrap_socket(self.connection, server_side=True), self.client_address, self.server)
                self.close_connection = True

        super().__init__(Proxy)


def deno(wheels: Path, folder: Path) -> Path | None:
    """The ``deno`` binary of the wheel in ``wheels`` (PyPI's ``deno``), unpacked into ``folder``; None without it."""
    found = sorted(wheels.glob("deno-*-manylinux*.whl"))
    if not found:
        return None
    with zipfile.ZipFile(found[-1]) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".data/scripts/deno"))
        target = folder / "deno"
        folder.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read(member))
    target.chmod(target.stat().st_mode | stat.S_IXUSR)
    return target
