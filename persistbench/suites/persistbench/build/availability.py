"""Which cases of the recipes still exist: ``availability.json`` beside a rebuilt dataset.

PersistBench is rebuilt from YouTube, so every user's dataset lacks the cases whose videos were removed,
made private, blocked... ``download`` writes, for every case of its recipes, whether it was built, refused
by its source (and the refusal's kind, :mod:`.source_errors`), failed otherwise or was not attempted
(another shard's, or left out by ``--limit``/``--subset``), with the date and the fingerprint of the
built set. ``verify``, ``score``, ``report`` and ``package`` say "N of M cases available" from it;
``compare --cases A B`` lists how two datasets' sets differ. The file is read as untrusted input.
"""

from __future__ import annotations

import os
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.stats import fingerprint
from persistbench.core.timing import today
from persistbench.executors import read_records
from persistbench.io.files import read_json, write_json
from persistbench.suites.persistbench.build.recipes import Recipe
from persistbench.suites.persistbench.build.source_errors import KINDS
from persistbench.suites.persistbench.layout import AVAILABILITY

STATUSES = ("built", "refused", "failed", "not attempted")
REFUSALS = tuple(problem.kind for _, problem in KINDS)


def refusal_kind(reason: str) -> str | None:
    """The kind of a source's refusal named in a failed case's reason (``... unavailable: <kind>: ...``)."""
    for kind in REFUSALS:
        if f"unavailable: {kind.replace('_', ' ')}: " in reason:
            return kind
    return None


def build(recipes: list[Recipe], built: set[tuple[str, str]], records: list[dict], recipes_sha256: str) -> dict:
    """The manifest of ``recipes`` (every case of the recipes file, in its order): ``built`` (subset, uid) of
    the complete cases, ``records`` the reconstruct stage's executor records (the failures' reasons)."""
    failed = {r["key"]: str(r.get("reason", "")) for r in records if r.get("status") == "failed"}
    cases: dict[str, dict] = {}
    for r in recipes:
        key = f"{r.subset}.{r.case_id}"
        if (r.subset, r.case_id) in built:
            cases[key] = {"status": "built"}
        elif r.case_id in failed:
            kind = refusal_kind(failed[r.case_id])
            entry = {"status": "refused" if kind else "failed", "kind": kind or "failed"}
            cases[key] = entry | {"reason": failed[r.case_id].splitlines()[0][:300] if failed[r.case_id] else ""}
        else:
            cases[key] = {"status": "not attempted"}
    have = [k for k, v in cases.items() if v["status"] == "built"]
    return {
        "schema": 1,
        "date": today(),
        "recipes_sha256": recipes_sha256,
        "total": len(cases),
        "built": len(have),
        "fingerprint": fingerprint(have),
        "cases": cases,
    }


def write(root: Path, recipes: list[Recipe], built: set[tuple[str, str]], state: Path, recipes_sha256: str) -> dict:
    manifest = build(recipes, built, read_records(state), recipes_sha256)
    write_json(root / AVAILABILITY, manifest)
    return manifest


def read(root: Path) -> dict | None:
    """A dataset's manifest, checked (None when it has none); one line naming the file when it is not one."""
    path = Path(root) / AVAILABILITY
    if not os.path.lexists(path):
        return None
    data = read_json(path)
    try:
        cases = data["cases"]
        ok = (
            isinstance(cases, dict)
            and all(
                isinstance(k, str) and isinstance(v, dict) and v.get("status") in STATUSES for k, v in cases.items()
            )
            and data["total"] == len(cases)
            and data["built"] == sum(v["status"] == "built" for v in cases.values())
            and isinstance(data["date"], str)
        )
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise PersistbenchError(f"{path}: not an availability manifest (its counts and cases must agree)")
    return data
