"""The study's store: one SQLite file in the study folder (``arena.sqlite``, WAL), append-only votes.

Tables: ``study`` (key -> JSON value: the runs, the suite, the dataset, whether it is closed), ``raters``
(name, token), ``shown`` (every pair a rater was shown: its random id, the case and the two runs in shown
order) and ``votes`` (one row per vote: the pair's id, rater, case, the two runs in shown order, answer,
time, the page's version). Triggers refuse any ``UPDATE`` or ``DELETE`` of a vote; a vote's id is the
pair's, so a vote sent twice (a retry, a reload after a restart) is stored once. Every request opens its
own connection; WAL lets several raters write while others read.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from persistbench.arena.ratings import ANSWERS
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STUDY_STORE
from persistbench.io.files import open_regular

STORE = STUDY_STORE
SCHEMA = """
CREATE TABLE IF NOT EXISTS study (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS raters (name TEXT PRIMARY KEY, token TEXT UNIQUE NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shown (
    pair TEXT PRIMARY KEY, rater TEXT NOT NULL, case_key TEXT NOT NULL,
    left_run TEXT NOT NULL, right_run TEXT NOT NULL, time TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS votes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, pair TEXT UNIQUE NOT NULL, study TEXT NOT NULL, rater TEXT NOT NULL,
    case_key TEXT NOT NULL, left_run TEXT NOT NULL, right_run TEXT NOT NULL, answer TEXT NOT NULL,
    time TEXT NOT NULL, page_version TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS votes_no_update BEFORE UPDATE ON votes BEGIN SELECT RAISE(ABORT, 'votes are append-only'); END;
CREATE TRIGGER IF NOT EXISTS votes_no_delete BEFORE DELETE ON votes BEGIN SELECT RAISE(ABORT, 'votes are append-only'); END;
"""
VOTE_FIELDS = ("pair", "study", "rater", "case_key", "left_run", "right_run", "answer", "time", "page_version")
JUDGE_PREFIX = "judge:"  # the judge's votes are stored under judge:<model> (arena/judge.py), never merged
MERGED_PREFIX = "merged:"  # a rater of another study, as its votes are merged here
SQLITE_HEADER = b"SQLite format 3\x00"
MAX_FIELD = 200  # characters of any text of a vote (names, ids, times)
MAX_MERGED_VOTES = 100_000
MAX_MERGE_BYTES = MAX_MERGED_VOTES * 2 * MAX_FIELD  # an exported vote is a few hundred bytes


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    """The study folder's database."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / STORE
        if not self.path.is_file():
            raise PersistbenchError(f"{folder}: no arena study (no {STORE}); create it with persistbench arena RUN...")
        with open_regular(self.path) as f:  # SQLite would write its header into an empty or foreign file
            if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise PersistbenchError(f"{self.path}: not an arena study (not an SQLite database)")
        try:
            self.study()
        except (sqlite3.DatabaseError, TypeError, ValueError) as e:  # a damaged or foreign file
            raise PersistbenchError(f"{self.path}: not an arena study ({str(e).splitlines()[0]})") from None

    @classmethod
    def create(cls, folder: Path, study: dict) -> Store:
        """A new store in ``folder`` holding ``study`` (refused when one is there with other runs)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / STORE
        schema = sqlite3.connect(path)
        try:
            schema.executescript(SCHEMA)
        finally:
            schema.close()
        with _connect(path) as db:
            old = db.execute("SELECT value FROM study WHERE key = 'study'").fetchone()
            if old is None:
                db.execute("INSERT INTO study VALUES ('study', ?)", (json.dumps(study, sort_keys=True),))
            elif {k: v for k, v in json.loads(old[0]).items() if k != "id"} != {
                k: v for k, v in study.items() if k != "id"
            }:
                raise PersistbenchError(
                    f"{path}: holds a study of other runs or another question; use another --output"
                )
        return cls(folder)

    @contextmanager
    def db(self) -> Iterator[sqlite3.Connection]:
        with _connect(self.path) as db:
            yield db

    def study(self) -> dict:
        with self.db() as db:
            return json.loads(db.execute("SELECT value FROM study WHERE key = 'study'").fetchone()[0])

    def closed(self) -> bool:
        with self.db() as db:
            return db.execute("SELECT 1 FROM study WHERE key = 'closed'").fetchone() is not None

    def close(self) -> None:
        with self.db() as db:
            db.execute("INSERT OR IGNORE INTO study VALUES ('closed', ?)", (json.dumps(now()),))

    def add_rater(self, name: str) -> str:
        """A new rater's token (the rater's name must be new, the study open)."""
        if self.closed():
            raise PersistbenchError(f"{self.path}: the study is closed; no rater can be added")
        token = secrets.token_urlsafe(24)
        with self.db() as db:
            try:
                db.execute("INSERT INTO raters VALUES (?, ?, ?)", (name, token, now()))
            except sqlite3.IntegrityError:
                raise PersistbenchError(f"{self.path}: a rater named {name!r} exists already") from None
        return token

    def token(self, name: str) -> str:
        """The token of the rater ``name`` (to print a lost link again)."""
        with self.db() as db:
            row = db.execute("SELECT token FROM raters WHERE name = ?", (name,)).fetchone()
            names = [r[0] for r in db.execute("SELECT name FROM raters ORDER BY name")] if row is None else []
        if row is None:
            raise PersistbenchError(
                f"{self.path}: no rater named {name!r}; the raters are {', '.join(names) or 'none'}"
            )
        return row[0]

    def rater(self, token: str | None) -> str | None:
        """The rater whose token this is, or None."""
        if not token:
            return None
        with self.db() as db:
            row = db.execute("SELECT name FROM raters WHERE token = ?", (token,)).fetchone()
        return row[0] if row else None

    def show(self, rater: str, case_key: str, left: str, right: str) -> str:
        """Record a pair shown to ``rater``; returns its id."""
        pair = secrets.token_urlsafe(12)
        with self.db() as db:
            db.execute("INSERT INTO shown VALUES (?, ?, ?, ?, ?, ?)", (pair, rater, case_key, left, right, now()))
        return pair

    def shown(self, pair: str) -> dict | None:
        with self.db() as db:
            row = db.execute(
                "SELECT rater, case_key, left_run, right_run FROM shown WHERE pair = ?", (pair,)
            ).fetchone()
        return dict(zip(("rater", "case_key", "left_run", "right_run"), row, strict=True)) if row else None

    def pending(self, rater: str) -> str | None:
        """The last pair shown to ``rater`` that has no vote yet (shown again after a reload or a restart)."""
        with self.db() as db:
            row = db.execute(
                "SELECT pair FROM shown WHERE rater = ? AND pair NOT IN (SELECT pair FROM votes) "
                "ORDER BY rowid DESC LIMIT 1",
                (rater,),
            ).fetchone()
        return row[0] if row else None

    def last_case(self, rater: str) -> str | None:
        with self.db() as db:
            row = db.execute(
                "SELECT case_key FROM shown WHERE rater = ? ORDER BY rowid DESC LIMIT 1", (rater,)
            ).fetchone()
        return row[0] if row else None

    def vote(self, pair: str, rater: str, answer: str, page_version: str) -> bool:
        """Append the vote on ``pair`` (shown to ``rater``); False when that pair has its vote already."""
        shown = self.shown(pair)
        if shown is None or shown["rater"] != rater:
            raise PersistbenchError("no such pair for this rater")
        row = (pair, self.study()["id"], rater, shown["case_key"], shown["left_run"], shown["right_run"], answer)
        return self.append([dict(zip(VOTE_FIELDS, (*row, now(), page_version), strict=True))]) == 1

    def append(self, votes: list[dict]) -> int:
        """Append ``votes`` (dicts of :data:`VOTE_FIELDS`); one whose pair has a vote already is skipped.
        Returns how many were added."""
        added = 0
        with self.db() as db:
            for v in votes:
                cur = db.execute(
                    f"INSERT OR IGNORE INTO votes ({', '.join(VOTE_FIELDS)}) VALUES ({', '.join('?' * len(VOTE_FIELDS))})",
                    tuple(v[k] for k in VOTE_FIELDS),
                )
                added += cur.rowcount
        return added

    def votes(self) -> list[dict]:
        """Every vote, in the order they were stored."""
        with self.db() as db:
            rows = db.execute(f"SELECT {', '.join(VOTE_FIELDS)} FROM votes ORDER BY id").fetchall()
        return [dict(zip(VOTE_FIELDS, r, strict=True)) for r in rows]

    def export(self, path: Path) -> int:
        """Every vote as JSON lines (the study's and other studies' merged into it); returns how many."""
        votes = self.votes()
        path.write_text("".join(json.dumps(v, sort_keys=True) + "\n" for v in votes))
        return len(votes)

    def raters(self) -> set[str]:
        with self.db() as db:
            return {r[0] for r in db.execute("SELECT name FROM raters")}

    def merge(self, path: Path, cases: set[str]) -> int:
        """Append the votes of an exported file, read as untrusted (a bounded regular file, strict JSON lines);
        a vote already here is skipped. Only votes that could have been cast in this study are taken: two
        different runs of it, one of its ``cases``, an answer of :data:`ANSWERS`, texts of at most
        :data:`MAX_FIELD` printable characters; a rater not of this study is stored as ``merged:<name>``, and a
        vote under the judge's name is refused (the judge's votes come from the judge). Returns how many were added."""
        from persistbench.io.files import parse_json, read_bounded

        runs, known = set(self.study()["runs"]), self.raters()
        lines = read_bounded(path, MAX_MERGE_BYTES).split(b"\n")
        if len(lines) > MAX_MERGED_VOTES + 1:
            raise PersistbenchError(f"{path}: more than {MAX_MERGED_VOTES} votes")
        votes = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            v = parse_json(line, f"{path}:{n}")
            if not isinstance(v, dict) or set(v) != set(VOTE_FIELDS) or not all(isinstance(x, str) for x in v.values()):
                raise PersistbenchError(f"{path}:{n}: not a vote ({', '.join(VOTE_FIELDS)}, all text)")
            long = [k for k, x in v.items() if len(x) > MAX_FIELD or not x.isprintable()]
            if long:
                raise PersistbenchError(
                    f"{path}:{n}: {long[0]}: must be printable text of at most {MAX_FIELD} characters"
                )
            if v["answer"] not in ANSWERS:
                raise PersistbenchError(f"{path}:{n}: answer: must be one of {', '.join(ANSWERS)}")
            if v["left_run"] == v["right_run"] or not {v["left_run"], v["right_run"]} <= runs:
                raise PersistbenchError(f"{path}:{n}: a vote of other runs (two different runs of this study)")
            if v["case_key"] not in cases:
                raise PersistbenchError(f"{path}:{n}: case {v['case_key']!r} is not one of this study's")
            if v["rater"].startswith(JUDGE_PREFIX):
                raise PersistbenchError(
                    f"{path}:{n}: a vote under the judge's name; the judge votes through --judge-url"
                )
            if v["rater"] not in known and not v["rater"].startswith(MERGED_PREFIX):
                v = {**v, "rater": MERGED_PREFIX + v["rater"]}
            votes.append(v)
        return self.append(votes)


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        db.close()
