"""A reconstructed dataset's index: ``cases.jsonl`` (one record per complete case) and ``data.db``.

``data.db`` holds the public toolkit's ``data`` table; both files are rewritten whole, in
(subset, uid) order, so their bytes depend only on which cases are complete. What marks a case
complete is its own completion record (``.state/complete/<subset>/<uid>.json``, written by rename),
not the index: the index is updated as cases complete on one machine and rebuilt from the records
at the end of a run (:func:`rebuild_index`), so workers on machines that share no lock lose nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR
from persistbench.io.files import atomic_path, file_lock, parse_json, read_bounded, read_json, write_json, write_text
from persistbench.io.names import check_name, confined
from persistbench.suites.persistbench.layout import (
    CASES_JSONL,
    DB_NAME,
    SUBSETS,
    completion_record,
    completion_records_dir,
)

# Public `data` table columns first (docs/data-format.md, "Dataset"), then ours.
DATA_COLUMNS: dict[str, str] = {
    "success": "INTEGER",
    "uid": "TEXT PRIMARY KEY",
    "obj_id": "TEXT",
    "output_dir": "TEXT",
    "visibility_dict_path": "TEXT",
    "fov": "REAL",
    "use_stationary": "INTEGER",
    "overlap_mode": "TEXT",
    "window_ratio": "REAL",
    "window_move_ratio": "REAL",
    "object_dir": "TEXT",
    "subset": "TEXT",
    "n_frames": "INTEGER",
    "width": "INTEGER",
    "height": "INTEGER",
    "source_id": "TEXT",
    "toolkit_version": "TEXT",
    "recipe_sha256": "TEXT",
}


def read_index(root: str | os.PathLike) -> list[dict]:
    """Rows of ``data.db`` ordered by (subset, uid); empty when there is no index."""
    path = Path(root) / DB_NAME
    if not path.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        with contextlib.closing(con):
            rows = con.execute("SELECT * FROM data ORDER BY subset, uid").fetchall()
    except sqlite3.Error as e:
        raise PersistbenchError(f"{path}: cannot read the index: {e}") from None
    return [dict(r) for r in rows]


# cases.jsonl of the largest dataset (10,000 cases at ~4 KB each) with room to spare.
MAX_CASES_BYTES = 256 << 20


def read_case_records(root: str | os.PathLike) -> list[dict]:
    """Records of ``cases.jsonl``; a malformed line raises an error with its number."""
    path = Path(root) / CASES_JSONL
    if not path.exists():
        return []
    records = []
    for n, line in enumerate(read_bounded(path, MAX_CASES_BYTES).decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        rec = parse_json(line, f"{path}:{n}")
        if not isinstance(rec, dict) or "uid" not in rec or "subset" not in rec:
            raise PersistbenchError(f"{path}:{n}: a case record needs 'uid' and 'subset'")
        if rec["subset"] not in SUBSETS:
            raise PersistbenchError(f"{path}:{n}: subset: must be one of {', '.join(SUBSETS)}")
        check_name(rec["uid"], f"{path}:{n}: uid")
        records.append(rec)
    return records


def mark_complete(root: str | os.PathLike, row: dict, record: dict) -> None:
    """Mark a case complete: its ``cases.jsonl`` record, then its ``data.db`` row.

    ``row`` holds ``data`` columns (missing ones are NULL); ``record`` must hold
    ``uid`` and ``subset``. Both files are written whole, in (subset, uid) order,
    to a temporary name and renamed into place, so their bytes are a function of
    the complete cases, whatever the completion order, and a row in ``data.db``
    implies its record. The case's completion record comes first; the index
    update is serialised by a file lock among the processes of one machine.
    """
    root = Path(root)
    unknown = set(row) - set(DATA_COLUMNS)
    if unknown:
        raise ValueError(f"unknown data.db columns: {sorted(unknown)}")
    write_json(completion_record(root, record["subset"], record["uid"]), {"row": row, "record": record})
    with file_lock(confined(root, STATE_DIR, "index.lock")):
        _write_both(root, {(record["subset"], record["uid"]): (row, record)})


def _write_both(root: Path, new: dict[tuple[str, str], tuple[dict, dict]]) -> None:
    """The index as it is, with ``new`` (key -> (row, record)) added or replaced."""
    records = {(r["subset"], r["uid"]): r for r in read_case_records(root)}
    rows = {(r["subset"], r["uid"]): r for r in read_index(root)}
    for key, (row, record) in new.items():
        rows[key], records[key] = row, record
    lines = [json.dumps(records[k], sort_keys=True, separators=(",", ":")) for k in sorted(records)]
    write_text(root / CASES_JSONL, "".join(line + "\n" for line in lines))
    _write_index(root / DB_NAME, [rows[k] for k in sorted(rows)])


def completion_records(root: str | os.PathLike) -> dict[tuple[str, str], tuple[dict, dict]]:
    """(subset, uid) -> (row, record) of every case's completion record, checked on read: a file that is not
    a record of the case its name says is left out (the case counts as not complete)."""
    base = completion_records_dir(root)
    out = {}
    for path in sorted(base.glob("*/*.json")) if base.is_dir() else ():
        try:
            data = read_json(path)
        except PersistbenchError:
            continue
        row, record = (data.get("row"), data.get("record")) if isinstance(data, dict) else (None, None)
        key = (path.parent.name, path.stem)
        if isinstance(row, dict) and isinstance(record, dict) and (record.get("subset"), record.get("uid")) == key:
            out[key] = (row, record)
    return out


def rebuild_index(root: str | os.PathLike) -> int:
    """Bring ``cases.jsonl`` and ``data.db`` in line with the completion records (cases indexed before records
    existed are kept); returns the number of cases indexed."""
    root = Path(root)
    records = completion_records(root)
    if records:  # nothing completed: nothing written
        with file_lock(confined(root, STATE_DIR, "index.lock")):
            _write_both(root, records)
    return len(read_case_records(root))


def _write_index(path: Path, rows: list[dict]) -> None:
    names = list(DATA_COLUMNS)
    with atomic_path(path) as tmp, contextlib.closing(sqlite3.connect(tmp)) as con:
        con.execute(f"CREATE TABLE data ({', '.join(f'{k} {v}' for k, v in DATA_COLUMNS.items())})")
        con.executemany(
            f"INSERT INTO data ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [[r.get(k) for k in names] for r in rows],
        )
        con.commit()


def files_present(root: str | os.PathLike, record: dict) -> bool:
    """Whether every file a case's record names (``files``: path under ``root`` -> sha256) is on disk: one
    stat each, so a completed case whose folder was deleted or replaced is redone (``verify`` checks content)."""
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return False
    try:
        return all(isinstance(name, str) and confined(root, *name.split("/")).is_file() for name in files)
    except PersistbenchError:
        return False


def recorded_sha256(root: str | os.PathLike, subset: str, uid: str) -> str | None:
    """The recipe sha256 of a complete case (its completion record, else its ``data.db`` row), or None."""
    try:
        record = read_json(completion_record(root, subset, uid))
    except PersistbenchError:
        record = None
    if isinstance(record, dict) and isinstance(record.get("record"), dict):
        inner = record["record"]
        if (inner.get("subset"), inner.get("uid")) == (subset, uid):
            return inner.get("recipe_sha256") if files_present(root, inner) else None  # no fall-back to data.db
    path = Path(root) / DB_NAME
    if not path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
            found = con.execute("SELECT recipe_sha256 FROM data WHERE subset = ? AND uid = ?", (subset, uid)).fetchone()
    except sqlite3.Error as e:
        raise PersistbenchError(f"{path}: cannot read the index: {e}") from None
    return found[0] if found else None
