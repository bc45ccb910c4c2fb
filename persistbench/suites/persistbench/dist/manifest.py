"""The sharded distribution's listing files, read as untrusted: ``shards/checksums.json``,
``samples/checksums.json``, ``index.json``, and ``pairs.json`` (the index as ``fetch`` keeps it).

The card says ``checksums.json`` holds "sha256 + byte size" without naming the keys: an entry is
``{"sha256", "bytes"}`` (what ``pack`` writes) or ``{"sha256", "size"}``; any other shape is refused in one
line naming the file. ``index.json`` names a pair by its path ``<subset>/<case>/<obj_id>`` (the card's
example) or by ``<case>_<obj_id>`` (the project page); both resolve to the pair id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_json
from persistbench.io.names import name_problem
from persistbench.suites.persistbench.layout import SUBSETS, index_key

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Checksum:
    sha256: str
    size: int


def read_checksums(path: Path, where: str) -> dict[str, Checksum]:
    """``{file name: {"sha256", "bytes" or "size"}}``; ``where`` names the file in errors."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise PersistbenchError(f"{where}: not an object of file name -> {{sha256, size}}")
    out = {}
    for name, entry in data.items():
        size = entry.get("bytes", entry.get("size")) if isinstance(entry, dict) else None
        if (
            not isinstance(entry, dict)
            or len(entry) != 2
            or not isinstance(entry.get("sha256"), str)
            or not _SHA256.fullmatch(entry["sha256"])
            or isinstance(size, bool)
            or not isinstance(size, int)
            or size < 0
        ):
            raise PersistbenchError(
                f'{where}: {name}: expected {{"sha256": 64 hex digits, "bytes" or "size": a byte count}}'
            )
        out[name] = Checksum(entry["sha256"], size)
    return out


@dataclass(frozen=True)
class IndexRow:
    pair: str  # the pair id, <case>_<obj_id>
    subset: str
    shard: str
    n_frames: int


@dataclass(frozen=True)
class DistIndex:
    rows: dict[str, IndexRow]  # pair id -> row
    forms: tuple[str, ...]  # which key forms were found: "path", "id"


def read_index(path: Path, where: str) -> DistIndex:
    """``index.json``: ``{pair key: {"shard", "subset", "n_frames"}}``, keys in either form; a pair named
    twice, a bad id or a row of the wrong types is refused in one line naming the key."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise PersistbenchError(f"{where}: not an object of pair id -> {{shard, subset, n_frames}}")
    rows, forms = {}, set()
    for key, row in data.items():
        pair, form = index_key(key)
        forms.add(form)
        problem = name_problem(pair)
        if problem:
            raise PersistbenchError(f"{where}: {key}: not a pair id ({problem})")
        if (
            not isinstance(row, dict)
            or row.get("subset") not in SUBSETS
            or not isinstance(row.get("shard"), str)
            or isinstance(row.get("n_frames"), bool)
            or not isinstance(row.get("n_frames"), int)
            or row["n_frames"] < 1
        ):
            raise PersistbenchError(f"{where}: {key}: expected {{shard: text, subset: dynamic|static, n_frames: >= 1}}")
        if form == "path" and key.split("/")[0] != row["subset"]:
            raise PersistbenchError(f"{where}: {key}: its path says {key.split('/')[0]}, its row {row['subset']}")
        if pair in rows:
            raise PersistbenchError(f"{where}: {key}: the pair {pair} is listed twice")
        rows[pair] = IndexRow(pair, row["subset"], row["shard"], row["n_frames"])
    return DistIndex(rows, tuple(sorted(forms)))


def pairs_record(index: DistIndex) -> dict[str, dict]:
    """What ``fetch`` keeps of the index beside the pairs (``pairs.json``): pair id -> subset, shard, n_frames."""
    return {p: {"subset": r.subset, "shard": r.shard, "n_frames": r.n_frames} for p, r in sorted(index.rows.items())}


def read_pairs(path: Path) -> dict[str, dict]:
    """``pairs.json`` of a fetched tree (as :func:`pairs_record` wrote it), checked like ``index.json``."""
    return {p: {"subset": r.subset, "n_frames": r.n_frames} for p, r in read_index(path, str(path)).rows.items()}
