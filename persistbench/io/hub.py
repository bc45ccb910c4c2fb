"""Where published files come from: a local folder, or a Hugging Face repository pinned to a commit.

Every exchange with the Hub is bounded as a whole, like :func:`persistbench.io.web.request`: inside
:func:`deadline`, each socket operation of huggingface_hub's client waits at most until the deadline
(``$PERSISTBENCH_HTTP_TIMEOUT``, 60 s by default), so a server that answers one byte a second cannot
hold a run, and a passed deadline is not retried. The library's telemetry is off, and so is its Xet
transfer (a separate network stack no deadline reaches); the Hub serves the same files over HTTP.

:class:`Source` is picklable, so workers on other machines read from the same place; ``hub_source``
resolves a branch or tag to its commit first. Used by every suite's ``fetch`` and by Hub recipes and
corpora.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from persistbench.core.errors import PersistbenchError
from persistbench.io import web

MIN_RATE = 1 << 20  # bytes/s a whole-file download is allowed at the least, beyond the deadline itself


class DeadlinePassed(PersistbenchError):
    """An exchange with the Hub that took longer than its deadline (never retried)."""


class _Deadline(threading.local):
    at: float | None = None
    what: str = ""
    seconds: float = 0.0


_current = _Deadline()


@contextlib.contextmanager
def deadline(what: str, seconds: float | None = None) -> Iterator[None]:
    """Bound every exchange with the Hub made in this thread inside the block by ``seconds`` in all
    (default ``$PERSISTBENCH_HTTP_TIMEOUT``). ``what`` names the request in the error.

    Raises:
        DeadlinePassed: ``<what>: no complete answer within N s (PERSISTBENCH_HTTP_TIMEOUT)``.
    """
    configure()
    seconds = web.default_timeout() if seconds is None else seconds
    saved = (_current.at, _current.what, _current.seconds)
    _current.at, _current.what, _current.seconds = time.monotonic() + seconds, what, seconds
    try:
        yield
    finally:
        _current.at, _current.what, _current.seconds = saved


def _left(timeout: float | None) -> float | None:
    """The socket timeout for the next operation: the library's own, cut to what the deadline leaves."""
    if _current.at is None:
        return timeout
    left = _current.at - time.monotonic()
    if left <= 0:
        raise DeadlinePassed(
            f"{_current.what}: no complete answer within {_current.seconds:g} s (PERSISTBENCH_HTTP_TIMEOUT)"
        )
    return left if timeout is None else min(timeout, left)


def _bounded(call, timeout: float | None) -> Any:
    """``call(timeout)`` within the deadline; a timeout caused by the deadline is reported as passed."""
    import httpcore2

    try:
        return call(_left(timeout))
    except (httpcore2.ReadTimeout, httpcore2.WriteTimeout, httpcore2.ConnectTimeout):
        _left(None)  # raises when the deadline, not the library's own timeout, cut the operation
        raise


def _backend():
    """httpcore's network backend with every operation cut to the current deadline."""
    import httpcore2

    class Stream(httpcore2.NetworkStream):
        def __init__(self, inner: httpcore2.NetworkStream):
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return _bounded(lambda t: self.inner.read(max_bytes, t), timeout)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            _bounded(lambda t: self.inner.write(buffer, t), timeout)

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore2.NetworkStream:
            return Stream(_bounded(lambda t: self.inner.start_tls(ssl_context, server_hostname, t), timeout))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore2.NetworkBackend):
        def __init__(self, inner: httpcore2.NetworkBackend):
            self.inner = inner

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            return Stream(
                _bounded(lambda t: self.inner.connect_tcp(host, port, t, local_address, socket_options), timeout)
            )

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return Stream(_bounded(lambda t: self.inner.connect_unix_socket(path, t, socket_options), timeout))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return Backend


def _client():
    """huggingface_hub's default client, over a transport whose every socket operation obeys :func:`deadline`."""
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    transport = httpx2.HTTPTransport()
    pool = transport._pool  # the pinned httpx2 has no public hook for httpcore's network backend
    pool._network_backend = _backend()(pool._network_backend)
    return httpx2.Client(
        event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None, transport=transport
    )


@functools.cache
def configure() -> None:
    """Once per process: telemetry and Xet off, huggingface_hub's client bounded by :func:`deadline`."""
    from huggingface_hub import constants, set_client_factory

    constants.HF_HUB_DISABLE_TELEMETRY = True
    constants.HF_HUB_DISABLE_XET = True
    set_client_factory(_client)


@dataclass(frozen=True)
class Source:
    """Where the distribution's files come from: a local folder (``root``), or a Hub dataset repository at a
    commit. Picklable, so workers on other machines fetch from the same place."""

    description: dict
    root: Path | None = None
    repo: str | None = None
    commit: str | None = None

    def get(self, name: str) -> Path:
        """A local path to the distribution file ``name`` (downloaded into the Hub cache first, within
        the deadline plus one second per MiB it declares)."""
        if self.root is not None:
            path = self.root / name
            if not path.is_file():
                raise PersistbenchError(f"{path}: missing from the distribution")
            return path
        from huggingface_hub import hf_hub_download

        where = f"hf://{self.repo}/{name}@{self.commit[:12]}"
        size = file_metadata(self.repo, name, self.commit).size
        with asking(where, web.default_timeout() + size / MIN_RATE):
            return Path(hf_hub_download(self.repo, name, repo_type="dataset", revision=self.commit))


@contextlib.contextmanager
def asking(where: str, seconds: float | None = None) -> Iterator[None]:
    """One exchange with the Hub, read as untrusted: within the deadline, and whatever huggingface_hub
    raises for an unreachable server, a refusal, or an answer it cannot parse (a list where an object
    should be, a missing field, a broken HTTP message) becomes one line starting with ``where``."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        with deadline(where, seconds):
            yield
    except PersistbenchError:
        raise
    except httpx2.TransportError as e:  # no connection, or a broken HTTP message
        try:
            host = f"{e.request.url.host}:{e.request.url.port or 443}"
        except RuntimeError:
            host = "the Hub"
        raise PersistbenchError(f"{where}: {host}: network unreachable ({e})".splitlines()[0]) from None
    except (HfHubHTTPError, LocalEntryNotFoundError, httpx2.HTTPError, OSError, ValueError) as e:
        raise PersistbenchError(f"{where}: {e}".splitlines()[0]) from None  # offline mode raises an OSError
    except (TypeError, KeyError, AttributeError, IndexError) as e:
        raise PersistbenchError(
            f"{where}: a malformed answer from the Hub ({type(e).__name__}: {e})".splitlines()[0]
        ) from None


def list_files(source: Source, prefix: str) -> list[str]:
    """The distribution's files below ``prefix`` (a folder name ending in ``/``), as relative names; links and
    anything but regular files in a local folder are left out."""
    if source.root is not None:
        base = source.root / prefix
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(source.root).as_posix() for p in base.rglob("*") if p.is_file() and not p.is_symlink()
        )
    info = dataset_info(source.repo, source.commit)
    return sorted(s.rfilename for s in info.siblings or [] if s.rfilename.startswith(prefix))


def dataset_info(repo: str, revision: str | None) -> Any:
    """The Hub's description of dataset ``repo`` at ``revision`` (its ``sha`` is the commit, its
    ``siblings`` the files), asked within the deadline."""
    from huggingface_hub import HfApi

    with asking(f"hf://{repo}@{revision or 'main'}: cannot resolve the revision"):
        info = HfApi().dataset_info(repo, revision=revision)
        if not isinstance(info.sha, str):
            raise TypeError(f"sha is {info.sha!r}")
        return info


def hub_source(repo: str, revision: str | None) -> Source:
    """A Hugging Face dataset repository; ``revision`` (branch, tag or commit) is resolved to a commit first."""
    sha = dataset_info(repo, revision).sha
    return Source({"repo": repo, "revision": revision or "main", "commit": sha}, repo=repo, commit=sha)


@dataclass(frozen=True)
class HubFile:
    """What the Hub declares of one file before a byte of it is fetched."""

    commit: str
    size: int
    location: str  # where its bytes are served (the Hub itself, or its storage after a redirect)


def file_metadata(repo: str, path: str, revision: str | None, where: str | None = None) -> HubFile:
    """The commit, declared size and location of a dataset file (one HEAD request, within the deadline);
    errors start with ``where`` (default ``hf://<repo>/<path>@<revision>``)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    where = where or f"hf://{repo}/{path}@{revision or 'main'}"
    with asking(where):
        meta = get_hf_file_metadata(hf_hub_url(repo, path, repo_type="dataset", revision=revision))
    if meta.size is None or meta.commit_hash is None:
        raise PersistbenchError(f"{where}: the Hub declared no size or commit for the file")
    return HubFile(meta.commit_hash, meta.size, meta.location)


def download(repo: str, path: str, revision: str | None, target: Path, limit: int, where: str | None = None) -> HubFile:
    """Fetch a dataset file to ``target`` (atomically): refused before a byte is fetched when it declares
    more than ``limit`` bytes, and stopped at the size it declared; nothing is left behind on failure.
    The whole transfer is bounded by the deadline plus one second per MiB. Errors start with ``where``."""
    from urllib.parse import urlsplit

    from huggingface_hub import get_token
    from huggingface_hub.constants import ENDPOINT

    from persistbench.io.files import atomic_path

    meta = file_metadata(repo, path, revision, where)
    where = where or f"hf://{repo}/{path}@{meta.commit[:12]}"
    if meta.size > limit:
        raise PersistbenchError(f"{where}: the Hub declares {meta.size} bytes, more than the {limit} allowed")
    headers = {"Accept-Encoding": "identity"}
    token = get_token()
    if token and urlsplit(meta.location).netloc == urlsplit(ENDPOINT).netloc:  # never sent to the storage
        headers["Authorization"] = f"Bearer {token}"
    timeout = web.default_timeout() + meta.size / MIN_RATE
    with atomic_path(target) as tmp, open(tmp, "wb") as sink:
        try:
            web.request(meta.location, meta.size, headers=headers, timeout=timeout, sink=sink)
        except PersistbenchError as e:
            raise PersistbenchError(f"{where}: {e}") from None
        if sink.tell() != meta.size:
            raise PersistbenchError(f"{where}: {sink.tell()} bytes received, {meta.size} declared")
    return meta
