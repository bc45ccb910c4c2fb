"""HTTP requests bounded as a whole: time from connecting to the last byte, and bytes.

urllib's ``timeout`` bounds each socket read, so a server that sends its
headers and then one byte a second holds a reader forever. :func:`request`
runs the exchange in a worker thread and gives up at the deadline, closing
the connection (the worker then ends at its next read). The deadline is
``timeout`` seconds, by default ``$PERSISTBENCH_HTTP_TIMEOUT`` (60).
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import BinaryIO

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import too_large

DEFAULT_TIMEOUT_S = 60.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes
    url: str = ""  # where the body came from, after redirects


class SameOrigin(urllib.request.HTTPRedirectHandler):
    """Redirects followed only within the asked URL's scheme and host (never to another server, nor to
    ``ftp://`` or ``file://``); urllib's own rules cap their number and refuse a loop."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        from urllib.parse import urljoin, urlsplit

        old, new = urlsplit(req.full_url), urlsplit(urljoin(req.full_url, newurl))
        if (new.scheme, new.netloc) != (old.scheme, old.netloc):
            raise PersistbenchError(
                f"{req.full_url}: redirected to {new.scheme}://{new.netloc}, another server; only redirects within "
                f"{old.scheme}://{old.netloc} are followed (pass the final URL yourself if you trust it)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def default_timeout() -> float:
    """``$PERSISTBENCH_HTTP_TIMEOUT`` in seconds (a positive number), else 60."""
    raw = os.environ.get("PERSISTBENCH_HTTP_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise PersistbenchError(f"PERSISTBENCH_HTTP_TIMEOUT={raw!r}: must be a positive number of seconds")
    return value


def request(
    url: str,
    limit: int,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
    sink: BinaryIO | None = None,
) -> Response:
    """One HTTP exchange, refused past ``timeout`` seconds in all or ``limit`` body bytes. With ``sink`` the
    body is written there as it comes (the response's ``body`` is then empty): memory stays one chunk.

    Raises:
        PersistbenchError: ``<url>: ...`` for an unreachable server, an HTTP error status, a body over
            ``limit`` bytes, or an exchange that took longer than the deadline.
    """
    deadline = default_timeout() if timeout is None else timeout
    box: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            req = urllib.request.Request(url, method=method, headers=headers or {})
            with urllib.request.build_opener(SameOrigin).open(req, timeout=deadline) as r:
                box["response"] = r
                chunks, size = [], 0
                while chunk := r.read1(_CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise too_large(url, limit)
                    if sink is not None:
                        sink.write(chunk)
                    else:
                        chunks.append(chunk)
                box["result"] = Response(
                    r.status, {k.lower(): v for k, v in r.headers.items()}, b"".join(chunks), r.geturl()
                )
        except BaseException as e:  # handed to the waiting thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="http-request", daemon=True).start()
    if not done.wait(deadline):
        response = box.get("response")
        if response is not None:
            response.close()
        raise PersistbenchError(f"{url}: no complete answer within {deadline:g} s (PERSISTBENCH_HTTP_TIMEOUT)")
    error = box.get("error")
    if isinstance(error, PersistbenchError):
        raise error
    if isinstance(error, urllib.error.HTTPError):
        raise PersistbenchError(f"{url}: HTTP {error.code} {error.reason}") from None
    if isinstance(error, (urllib.error.URLError, OSError, ValueError)):
        raise PersistbenchError(f"{url}: {getattr(error, 'reason', error)}") from None
    if error is not None:
        raise error
    return box["result"]
