"""Reading a tar archive in place: an index of its members from their headers alone, members read by offset.

A corpus shipped as large tars (WROP: 150 archives of 50,000 members) is used without extracting
it: :func:`build_index` reads only the 512-byte headers (and the extended headers that carry
long names), jumping over every member's data, and records each member's data offset and size;
:meth:`TarIndex.read` then reads one member's bytes, and :meth:`ByteSource.ffmpeg_input` names a
member as a byte range that ffmpeg decodes in place. The bytes come from a :class:`ByteSource`: a
local file, or an ``http(s)`` URL read through Range requests, so that a few samples of a remote
tar cost a few requests, never the whole archive.

An archive is untrusted input: every header's checksum is verified; PAX records that change a
member are honoured as Python's tarfile and GNU tar honour them (``path``, ``size``) or refused
(``linkpath``, sparse files, a global header that would change members), so the index holds the
members the standard tools read; links, devices and FIFOs are refused; every member name is checked by the caller's rule (``check(name)`` returns the problem
or None) before the index exists, so nothing outside the expected layout is ever read. The index
can be cached as JSON next to the archive, keyed by the archive's size and sha256.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io import web
from persistbench.io.files import check_regular, read_json, write_json

BLOCK = 512
# Bytes the indexer reads at a time: the headers of small members share one read, and what a read takes
# past a header is mostly data the index does not need (a video), so reads stay small.
CHUNK = 16 << 10  # a local file
REMOTE_CHUNK = 8 << 10  # over a network, where each read is a request
MAX_EXTENDED = 1 << 20  # a pax or GNU long-name header larger than this is refused
INDEX_VERSION = 2  # 2: member sizes from PAX records (caches of version 1 may not have them)
MAX_SIZE_DIGITS = 20
_REGULAR, _DIRECTORY = (b"0", b"\0", b"7"), b"5"
_PAX, _PAX_GLOBAL, _GNU_LONGNAME = b"x", b"g", b"L"
_KINDS = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a FIFO",
}


class ByteSource:
    """Random access to the bytes of one archive (``size`` bytes); ``name`` is how messages call it."""

    name: str
    size: int
    read_ahead: int = CHUNK  # bytes the indexer reads at a time

    def read(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def ffmpeg_input(self, offset: int, size: int) -> str:
        """An ffmpeg input URL for ``size`` bytes at ``offset`` (its ``subfile`` protocol: no copy is made)."""
        return f"subfile,,start,{offset},end,{offset + size},,:{self.location}"

    @property
    def location(self) -> str:
        raise NotImplementedError


class LocalFile(ByteSource):
    """A local file, opened once and read with ``pread`` (no shared file position: safe across forks)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.name = str(self.path)
        self._fd: int | None = None
        check_regular(self.path, "archive")  # a FIFO would block every read, a device would never end
        self.size = self.path.stat().st_size

    def read(self, offset: int, n: int) -> bytes:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        out = bytearray()
        while len(out) < n:  # pread may return less than asked, and b"" at the end
            chunk = os.pread(self._fd, n - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def __getstate__(self) -> dict:  # a copy in another process opens the file anew
        return {**self.__dict__, "_fd": None}

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)

    @property
    def location(self) -> str:
        return f"file:{self.path.resolve()}"


class HttpRange(ByteSource):
    """An ``http(s)`` URL read through ``Range: bytes=a-b`` requests (the server must honour them)."""

    read_ahead = REMOTE_CHUNK

    def __init__(self, url: str, timeout: float | None = None):
        self.url, self.name, self.timeout = url, url, timeout
        head = web.request(url, 0, method="HEAD", timeout=timeout)
        try:
            self.size = int(head.headers["content-length"])
        except (KeyError, ValueError):
            raise PersistbenchError(f"{url}: cannot read the archive's size: no Content-Length") from None
        if head.headers.get("accept-ranges", "") != "bytes":
            raise PersistbenchError(f"{url}: the server does not take Range requests; fetch the archive instead")

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0 or offset >= self.size:
            return b""
        end = min(offset + n, self.size) - 1
        try:
            r = web.request(
                self.url, end - offset + 1, headers={"Range": f"bytes={offset}-{end}"}, timeout=self.timeout
            )
        except PersistbenchError as e:
            raise PersistbenchError(f"{e} (bytes {offset}-{end})") from None
        if r.status != 206:
            raise PersistbenchError(f"{self.url}: asked for bytes {offset}-{end}, got the whole file")
        data = r.body
        if len(data) != end - offset + 1:
            raise PersistbenchError(f"{self.url}: bytes {offset}-{end}: got {len(data)} bytes")
        return data

    @property
    def location(self) -> str:
        return self.url


@dataclass(frozen=True)
class Member:
    """A regular file of the archive: its data's offset and size in bytes."""

    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class TarIndex:
    """The regular files of an archive by name (directories are checked, not kept)."""

    source: ByteSource
    members: dict[str, Member]

    def read(self, name: str, limit: int | None = None) -> bytes:
        """The bytes of member ``name``; refused when it is larger than ``limit``."""
        m = self.member(name)
        if limit is not None and m.size > limit:
            raise PersistbenchError(f"{self.source.name}: {name}: {m.size} bytes, more than the {limit} allowed")
        data = self.source.read(m.offset, m.size)
        if len(data) != m.size:
            raise PersistbenchError(f"{self.source.name}: {name}: truncated ({len(data)} of {m.size} bytes)")
        return data

    def member(self, name: str) -> Member:
        try:
            return self.members[name]
        except KeyError:
            raise PersistbenchError(f"{self.source.name}: no member {name!r}") from None

    def ffmpeg_input(self, name: str) -> str:
        """An ffmpeg input URL for member ``name``, read in place."""
        m = self.member(name)
        return self.source.ffmpeg_input(m.offset, m.size)


def _octal(field: bytes, what: str, where: str) -> int:
    text = field.rstrip(b"\0 ").lstrip(b" ")
    if field[:1] in (b"\x80", b"\xff"):  # GNU base-256 for sizes over 8 GiB
        value = int.from_bytes(field[1:], "big")
        return -value if field[:1] == b"\xff" else value
    try:
        return int(text or b"0", 8)
    except ValueError:
        raise PersistbenchError(f"{where}: bad {what} field {field!r}") from None


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156]
    total = sum(header[:148]) + 8 * 32 + sum(header[156:])
    try:
        return int(stored.rstrip(b"\0 ").lstrip(b" ") or b"-1", 8) == total
    except ValueError:
        return False


def _pax_records(data: bytes, where: str) -> dict[str, str]:
    """The records of a pax extended header, ``"<length> <key>=<value>\\n"`` each (the later of a key twice wins,
    as in tarfile); anything else is refused."""
    records, pos = {}, 0
    while pos < len(data):
        space = data.find(b" ", pos)
        digits = data[pos:space] if space > pos else b""
        if not (digits.isdigit() and len(digits) <= 7):
            raise PersistbenchError(f"{where}: malformed pax header")
        end = pos + int(digits)
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if end > len(data) or data[end - 1 : end] != b"\n" or not eq or not key:
            raise PersistbenchError(f"{where}: malformed pax header")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        pos = end
    return records


def _pax_changes(records: dict[str, str], where: str) -> tuple[str | None, int | None]:
    """``(path, size)`` a local pax header gives its member (None where it gives none); records that would make
    the member a link or a sparse file are refused."""
    if "linkpath" in records:
        raise PersistbenchError(f"{where}: pax linkpath record (a link target); refused")
    if any(key.startswith("GNU.sparse.") for key in records):
        raise PersistbenchError(f"{where}: pax records of a sparse file; refused")
    size = records.get("size")
    if size is not None and not (size.isascii() and size.isdigit() and len(size) <= MAX_SIZE_DIGITS):
        raise PersistbenchError(f"{where}: pax size record {size[:40]!r} is not a byte count")
    return records.get("path"), None if size is None else int(size)


class _Reader:
    """Sequential reads through a chunk buffer, so that the headers of small members cost one read."""

    def __init__(self, source: ByteSource):
        self.source, self.start, self.buf = source, 0, b""

    def read(self, offset: int, n: int) -> bytes:
        if not (self.start <= offset and offset + n <= self.start + len(self.buf)):
            self.start, self.buf = offset, self.source.read(offset, max(n, self.source.read_ahead))
        return self.buf[offset - self.start : offset - self.start + n]


def build_index(source: ByteSource, check: Callable[[str], str | None]) -> TarIndex:
    """Index the archive from its headers; every name is checked with ``check`` (the problem, or None).

    Raises:
        PersistbenchError: naming the archive and the member, on a bad header, a link or device, a
        name ``check`` refuses, a member twice, or data beyond the end of the archive.
    """
    reader, pos, members = _Reader(source), 0, {}
    long_name: str | None = None
    pax_size: int | None = None  # from the pax header before the member, which overrides the header's field
    while True:
        header = reader.read(pos, BLOCK)
        if len(header) < BLOCK:
            raise PersistbenchError(f"{source.name}: ends inside a header at byte {pos} (truncated?)")
        if header == b"\0" * BLOCK:
            break
        where = f"{source.name}: header at byte {pos}"
        if not _checksum_ok(header):
            raise PersistbenchError(f"{where}: checksum mismatch (not a tar, or damaged)")
        kind = header[156:157]
        size = _octal(header[124:136], "size", where)
        if pax_size is not None and kind not in (_PAX, _GNU_LONGNAME, _PAX_GLOBAL):
            size, pax_size = pax_size, None
        data_at = pos + BLOCK
        next_pos = data_at + (size + BLOCK - 1) // BLOCK * BLOCK
        if size < 0 or next_pos > source.size:
            raise PersistbenchError(f"{where}: member data beyond the end of the archive")
        if kind in (_PAX, _GNU_LONGNAME, _PAX_GLOBAL):
            if size > MAX_EXTENDED:
                raise PersistbenchError(f"{where}: extended header of {size} bytes refused")
            data = reader.read(data_at, size)
            if kind == _GNU_LONGNAME:
                long_name = data.rstrip(b"\0").decode("utf-8", "replace")
            elif kind == _PAX:
                path, pax_size = _pax_changes(_pax_records(data, where), where)
                long_name = path or long_name
            elif {"path", "linkpath", "size"} & set(_pax_records(data, where)):  # tools differ in applying these
                raise PersistbenchError(f"{where}: a global pax header that changes members; refused")
            pos = next_pos
            continue
        name = long_name
        if name is None:
            base = header[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
            prefix = (
                header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace") if header[257:262] == b"ustar" else ""
            )
            name = f"{prefix}/{base}" if prefix else base
        long_name = None
        if kind in _KINDS:
            raise PersistbenchError(f"{source.name}: member {name!r} is {_KINDS[kind]}; refused")
        if kind not in _REGULAR and kind != _DIRECTORY:
            raise PersistbenchError(f"{source.name}: member {name!r} has type {kind!r}; refused")
        if kind == _DIRECTORY and size:  # tarfile skips no data after a directory, GNU tar does
            raise PersistbenchError(f"{source.name}: directory {name!r} with {size} bytes of data; refused")
        problem = check(name.rstrip("/") if kind == _DIRECTORY else name)
        if problem:
            raise PersistbenchError(f"{source.name}: member {name!r}: {problem}; refused")
        if kind != _DIRECTORY:
            if name in members:
                raise PersistbenchError(f"{source.name}: member {name!r} appears twice; refused")
            members[name] = Member(name, data_at, size)
        pos = next_pos
    return TarIndex(source, members)


def index_path(archive: Path) -> Path:
    """Where an archive's index is cached: beside it, ``.<name>.index.json``."""
    return archive.with_name(f".{archive.name}.index.json")


def cached_index(
    source: ByteSource, sha256: str, check: Callable[[str], str | None], path: Path | None = None
) -> TarIndex:
    """The index of an archive, read from its cache file ``path`` (default: beside a local archive,
    :func:`index_path`) when the cache was made for this archive (same size and sha256, ``sha256``
    being what the corpus's checksums say), else built and cached.

    Names are checked again on every load: a cache is a file anyone may have edited.
    """
    path = path or index_path(source.path)
    try:
        data = read_json(path)
        ok = (
            isinstance(data, dict)
            and data.get("version") == INDEX_VERSION
            and data.get("size") == source.size
            and data.get("sha256") == sha256
            and isinstance(data.get("members"), list)
        )
    except PersistbenchError:  # a missing or damaged cache is rebuilt
        ok = False
    if ok:
        members = {}
        for row in data["members"]:
            if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
                break
            name, offset, size = row
            valid = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, size))
            if not valid or offset + size > source.size or check(name):
                break
            members[name] = Member(name, offset, size)
        else:
            return TarIndex(source, members)
    index = build_index(source, check)
    rows = [[m.name, m.offset, m.size] for m in index.members.values()]
    try:
        write_json(path, {"version": INDEX_VERSION, "size": source.size, "sha256": sha256, "members": rows})
    except OSError:  # a cache that cannot be written is built again next time
        pass
    return index
