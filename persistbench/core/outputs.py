"""Where a command may write: never into, around or inside what it reads, never over data of another kind.

Every command that writes checks its output here before it creates anything: a folder output that is,
contains or lies inside one of its inputs (a dataset, a run, a corpus, a checkout, a distribution) is
refused in one line, and so is a non-empty folder that holds something other than what the command
writes (a run into a dataset, a dataset into a run, synth over a dataset). A file output may not replace
a file of another kind (``report -o runs/a/run.json``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STUDY_STORE, SYNTH_RECORD

RUN = "a run"
STUDY = "an arena study"
SYNTHETIC = "synthetic data"


def dataset_of(suite: str) -> str:
    """How :func:`recognise` names a dataset of ``suite``."""
    return f"a {suite} dataset"


def recognise(folder: str | Path) -> str | None:
    """What ``folder`` holds, in words (:data:`RUN`, :data:`STUDY`, :data:`SYNTHETIC`, ``a <suite> dataset``);
    None when it is missing, empty or holds nothing this toolkit recognises."""
    from persistbench.core.suites import SUITES

    folder = Path(folder)
    if not folder.is_dir() or not any(folder.iterdir()):
        return None
    # Named, whatever is there: a run.json that is a FIFO or a link still marks a run, whose reader refuses it.
    if os.path.lexists(folder / "run.json"):
        return RUN
    if os.path.lexists(folder / STUDY_STORE):
        return STUDY
    if os.path.lexists(folder / SYNTH_RECORD):
        return SYNTHETIC
    for name in SUITES:
        if SUITES[name].detect(folder):
            return dataset_of(name)
    return None


def _local(path: str | Path | None) -> Path | None:
    if path is None or "://" in str(path):
        return None
    return Path(path).resolve()


def check_output(
    output: str | Path,
    *,
    inputs: Iterable[tuple[str, str | Path | None]] = (),
    accepts: Collection[str] | None = (),
    option: str = "--output",
) -> None:
    """Refuse, before anything is written, a folder ``output`` that is, contains or lies inside one of
    ``inputs`` (``(what, path)``; URLs and None are skipped), or that is not empty and holds something
    recognised (:func:`recognise`) other than ``accepts`` (None: a folder the command owns, not checked).
    One line naming both folders."""
    out = Path(output).resolve()
    for what, path in inputs:
        src = _local(path)
        if src is None:
            continue
        if out == src:
            relation = "is"
        elif out.is_relative_to(src):
            relation = "lies inside"
        elif src.is_relative_to(out):
            relation = "contains"
        else:
            continue
        raise PersistbenchError(
            f"{output}: {option} {relation} the {what} it reads ({path}); writing there would destroy it: "
            "choose another folder"
        )
    held = None if accepts is None else recognise(out)
    if held is not None and held not in accepts:
        wanted = " or ".join(accepts) if accepts else "nothing of this toolkit's"
        raise PersistbenchError(f"{output}: {option} holds {held}, not {wanted}; choose an empty or new folder")


def check_output_file(output: str | Path, suffix: str, *, option: str = "--output") -> None:
    """Refuse a file ``output`` that is a folder or would replace an existing file not ending in ``suffix``."""
    path = Path(output)
    if path.is_dir():
        raise PersistbenchError(f"{output}: {option} is a folder; name a {suffix} file")
    if path.exists() and path.suffix.lower() != suffix:
        raise PersistbenchError(
            f"{output}: {option} would replace a file that is not a {suffix} file; name a new {suffix} file"
        )
