"""Writing and reading files safely: atomic writes (temporary name + rename), locks, JSON, checksums.

Every file persistbench writes goes through :func:`atomic_path`, so a killed process never leaves
a half-written file under its real name. Paths themselves come from :mod:`persistbench.core.layout`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from persistbench.core.errors import PersistbenchError

UMASK = os.umask(0)
os.umask(UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    Parent directories are created. The temporary name holds the writer's pid
    (``.<name>.<pid>.<random>.tmp``), so what a killed writer left behind is
    recognised and removed by the next write of the same file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp makes 0600; give the file the usual permissions
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporaries of ``path`` (and SQLite's journals of them) whose writing process is gone."""
    prefix = f".{path.name}."
    with os.scandir(path.parent) as entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(prefix) and name.endswith((".tmp", ".tmp-journal"))):
                continue
            pid = name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and not _process_alive(int(pid)):
                Path(entry.path).unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie (killed, not yet reaped by its new parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (not Linux): kill() said it exists
        return True


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, best_effort: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); released on exit or process death.

    ``best_effort``: where the file system has no locks (some network file systems), go on unlocked;
    for locks that only save duplicate work, never ones that correctness depends on.
    """
    import errno
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError as e:
            if not (best_effort and e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)):
                raise
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def check_writable(*directories: str | os.PathLike | tuple[str | os.PathLike, str]) -> None:
    """Create each directory if needed and prove a file can be written in it; else one line naming it.

    Each item is a directory or ``(directory, what)`` (``what`` names it in the message, default
    ``output``). When one fails, the directories this call created are removed again, so a refused
    command leaves nothing behind.
    """
    created: list[Path] = []
    try:
        for item in directories:
            directory, what = (Path(item[0]), item[1]) if isinstance(item, tuple) else (Path(item), "output")
            missing = [p for p in (directory, *directory.parents) if not p.exists()]
            try:
                directory.mkdir(parents=True, exist_ok=True)
                created += missing
                with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-"):
                    pass
            except OSError as e:
                raise PersistbenchError(f"{directory}: {what} directory is not writable ({e.strerror})") from None
    except PersistbenchError:
        for path in sorted(created, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()
        raise


def copy_bounded(src: BinaryIO, dst: BinaryIO, limit: int, name: str) -> int:
    """Copy a stream in 1 MiB chunks, refusing it once more than ``limit`` bytes came; return the bytes copied."""
    total = 0
    while chunk := src.read(1 << 20):
        total += len(chunk)
        if total > limit:
            raise PersistbenchError(f"{name}: larger than the {limit >> 20} MiB allowed; refused")
        dst.write(chunk)
    return total


def write_bytes(path: str | os.PathLike, data: bytes) -> str:
    """Write ``data`` atomically; return its sha256 hex digest."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def write_text(path: str | os.PathLike, text: str) -> str:
    return write_bytes(path, text.encode("utf-8"))


def dump_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> str:
    return write_text(path, dump_json(obj))


# The largest JSON file read (a 100,000-pose R2M trajectory is ~40 MB) and the largest image file.
MAX_JSON_BYTES = 64 << 20
MAX_IMAGE_BYTES = 256 << 20
_INT_LIMIT = 1 << 63
MAX_JSON_DEPTH = 64  # our own files nest 6 deep at most


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file (links followed).

    The file is opened without blocking and checked before anything is read,
    so a FIFO, a socket or a device (``/dev/zero`` behind a link) is refused
    with one line naming it instead of hanging or filling memory.
    """
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise PersistbenchError(f"{path}: cannot read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PersistbenchError(f"{path}: not a regular file")
    return os.fdopen(fd, "rb")


def check_regular(path: str | os.PathLike, what: str = "file") -> None:
    """Refuse ``path`` unless it is a regular file (links followed), for paths handed to another program.

    Raises:
        PersistbenchError: ``<path>: no such <what>`` or ``<path>: not a regular file``.
    """
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise PersistbenchError(f"{path}: no such {what}") from None
    if not stat.S_ISREG(mode):
        raise PersistbenchError(f"{path}: not a regular file")


def read_bounded(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit`` of them.

    Reading stops at ``limit + 1`` bytes, whatever the file's size claims.

    Raises:
        PersistbenchError: one line naming the file, for a file that is
            missing, unreadable, not regular, or larger than ``limit``.
    """
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise too_large(path, limit)
    return data


def too_large(where: object, limit: int) -> PersistbenchError:
    """The one-line error for input beyond a byte limit (in MiB from 1 MiB up)."""
    amount = f"the {limit >> 20} MiB" if limit >= 1 << 20 else f"the {limit} bytes"
    return PersistbenchError(f"{where}: larger than {amount} allowed")


def _unique_keys(source: object, pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise PersistbenchError(f"{source}: key {key!r} appears twice in one object")
        out[key] = value
    return out


def _bounded_int(source: object, text: str) -> int:
    value = int(text)
    if not -_INT_LIMIT <= value < _INT_LIMIT:
        raise PersistbenchError(f"{source}: integer {text[:20]}{'...' if len(text) > 20 else ''} is out of range")
    return value


def _finite_float(source: object, text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise PersistbenchError(f"{source}: number {text[:20]} is out of range")
    return value


def _no_constant(source: object, text: str) -> None:
    raise PersistbenchError(f"{source}: {text} is not JSON")


@dataclass(frozen=True)
class JsonBudget:
    """What one JSON document may cost before any object is built: its bytes, its lists and objects
    (``[`` and ``{``), and its elements (``,``). Counted on the raw bytes (brackets and commas inside
    strings count too, so a count only errs on the safe side): the memory a parse can take is then
    bounded (an empty list is 56 bytes in Python, a float 24), not only the file's size."""

    bytes: int
    containers: int
    elements: int

    def check(self, data: bytes | str, source: object) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._over(len(raw), raw.count(b"[") + raw.count(b"{"), raw.count(b","), source)

    def read(self, stream: BinaryIO, source: object) -> bytes:
        """Read a JSON document from ``stream`` (an inflating ZIP member), refused as soon as a running count
        passes the budget: a bomb costs the bytes read until then, not its inflated size."""
        chunks, size, containers, elements = [], 0, 0, 0
        while chunk := stream.read(1 << 20):
            size += len(chunk)
            containers += chunk.count(b"[") + chunk.count(b"{")
            elements += chunk.count(b",")
            self._over(size, containers, elements, source)
            chunks.append(chunk)
        return b"".join(chunks)

    def _over(self, size: int, containers: int, elements: int, source: object) -> None:
        if size > self.bytes:
            raise PersistbenchError(f"{source}: over {self.bytes} bytes of JSON")
        if containers > self.containers:
            raise PersistbenchError(f"{source}: over {self.containers} JSON lists and objects")
        if elements > self.elements:
            raise PersistbenchError(f"{source}: over {self.elements} JSON elements")


def parse_json(data: bytes | str, source: object, budget: JsonBudget | None = None) -> Any:
    """Strict JSON from untrusted bytes: a one-line error naming ``source``, never another exception.

    Refused: invalid UTF-8 or JSON, a key twice in one object (the last
    would silently win), ``NaN``/``Infinity``, numbers outside float64 or
    integers outside int64, nesting deeper than :data:`MAX_JSON_DEPTH`, and,
    before anything is parsed, a document over ``budget``.
    """
    if budget is not None:
        budget.check(data, source)
    try:
        value = json.loads(
            data,
            object_pairs_hook=functools.partial(_unique_keys, source),
            parse_int=functools.partial(_bounded_int, source),
            parse_float=functools.partial(_finite_float, source),
            parse_constant=functools.partial(_no_constant, source),
        )
    except RecursionError:
        raise PersistbenchError(f"{source}: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError, and int() of over 4300 digits
        raise PersistbenchError(f"{source}: not JSON: {str(e).splitlines()[0]}") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise PersistbenchError(f"{source}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)")
    return value


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def read_json(path: str | os.PathLike, limit: int = MAX_JSON_BYTES) -> Any:
    """Parse a JSON file read through :func:`read_bounded` with :func:`parse_json`'s rules."""
    return parse_json(read_bounded(path, limit), path)


def sha256_file(path: str | os.PathLike, progress: Callable[[int], object] | None = None) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks; ``progress(n)`` is called with each chunk's size."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return h.hexdigest()
