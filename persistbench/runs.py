"""Reading a run's records (``run.json`` and each case's ``case.json``), which are untrusted input."""

from __future__ import annotations

from .errors import PersistbenchError
from .files import read_json
from .layout import RunLayout


def case_record(run: RunLayout, subset: str, case_id: str) -> dict | None:
    """The case's ``case.json`` when the case is complete (it is written last), else None."""
    try:
        info = read_json(run.case_json(subset, case_id))
    except PersistbenchError:
        return None
    return info if isinstance(info, dict) and info.get("uid") == case_id else None


def run_info(run: RunLayout) -> dict:
    """``run.json`` as a dictionary; anything else is refused naming the file."""
    info = read_json(run.run_json)
    if not isinstance(info, dict):
        raise PersistbenchError(f"{run.run_json}: must hold a JSON object")
    return info
