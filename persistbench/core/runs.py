"""A run's records: ``run.json`` (:class:`RunRecord`) and each case's ``case.json``, read as untrusted input."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.io.files import read_json, sha256_file
from persistbench.io.names import name_problem

if TYPE_CHECKING:
    from persistbench.core.suite import Suite

MAX_RECORD_FILES = 200_000  # files one case.json may name (100,000 frames and their masks)
MAX_RECORD_INT = 10**9
MAX_RECORD_TEXT = 200
MAX_RECORD_LIST = 100_000
MAX_SIDE = 1 << 16
MAX_SEED = 2**32 - 1  # infer --seed
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMON = ("uid", "subset", "projection", "has_masks", "files", "size")


@dataclass
class RunRecord:
    """``run.json`` of a run ``infer`` made; its JSON form is :meth:`to_json` (keys sorted when written).

    ``sampling`` is what the model was given (``num_frames``, ``resolution``, ``rule``: the suite's words for how
    it samples; runs before 0.6 call it ``protocol``, its rule ``sampling``, and are read as the same);
    ``dataset`` the root it ran on and its fingerprint, which ``score`` checks.
    """

    model: str
    config: dict
    device: str
    oracle: bool
    sampling: dict
    dataset: dict
    toolkit_version: str
    model_class: str
    started: str | None = field(default=None, compare=False)
    seed: int | None = None  # infer --seed: runs of one model with different seeds form a group

    def to_json(self) -> dict:
        out = asdict(self)
        for key in ("started", "seed"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def differs(self, other: RunRecord, by_case: bool = False) -> str | None:
        """What makes ``other`` (a run already on disk) a different run than this one, or None. With ``by_case``
        the dataset's fingerprint may differ: its cases are then compared one by one (:func:`stale_cases`)."""
        for key in ("model", "config", "sampling", "seed"):
            if getattr(other, key) != getattr(self, key):
                return f"a different {key} ({getattr(other, key)!r} there)"
        if not by_case and (other.dataset or {}).get("fingerprint") != self.dataset["fingerprint"]:
            return "a different dataset (fingerprint differs)"
        return None


def _count(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _plain(value: object) -> bool:
    """A suite's own field of ``case.json``: an integer, a short text, or a list of integers (bounded)."""
    if isinstance(value, str):
        return len(value) <= MAX_RECORD_TEXT
    if isinstance(value, list):
        return len(value) <= MAX_RECORD_LIST and all(_count(v, 0, MAX_RECORD_INT) for v in value)
    return _count(value, 0, MAX_RECORD_INT)


def _record_problem(info: dict, subset: str, case_id: str) -> str | None:
    """What is wrong with the fields of a case's ``case.json`` (``info["uid"]`` is ``case_id``), or None."""
    if info.get("subset") != subset:
        return f"subset: must be {subset!r}"
    if info.get("projection") not in ("perspective", "equirect"):
        return "projection: must be 'perspective' or 'equirect'"
    if not isinstance(info.get("has_masks"), bool):
        return "has_masks: must be true or false"
    files = info.get("files")
    if not isinstance(files, dict) or not 0 < len(files) <= MAX_RECORD_FILES:
        return f"files: must name 1 to {MAX_RECORD_FILES} files"
    for rel, digest in files.items():
        parts = rel.split("/")
        if parts[:2] != [subset, case_id] or len(parts) < 3 or any(name_problem(p) for p in parts):
            return f"files: {rel[:MAX_RECORD_TEXT]!r} is not a file of {subset}/{case_id}/"
        if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
            return f"files: {rel}: must be a sha256 (64 hex digits)"
    size = info.get("size")
    if size is not None and not (
        isinstance(size, list) and len(size) == 2 and all(_count(v, 1, MAX_SIDE) for v in size)
    ):
        return f"size: must be [w, h], integers in [1, {MAX_SIDE}]"
    for key, value in info.items():
        if key not in _COMMON and not _plain(value):
            return (
                f"{key[:MAX_RECORD_TEXT]}: must be an integer in [0, {MAX_RECORD_INT}], text of at most "
                f"{MAX_RECORD_TEXT} characters, or a list of at most {MAX_RECORD_LIST} such integers"
            )
    return None


def case_record(run: RunLayout, subset: str, case_id: str) -> dict | None:
    """The case's ``case.json`` (written last, by rename) when there is one, else None.

    It is read as untrusted input: a file that is there but cannot be read (not a regular file, too large,
    not strict JSON), that names another case, or whose fields are out of bounds (``files``: names inside
    the case's folder, each with a sha256; ``size``: ``[w, h]``; a suite's own fields: bounded integers,
    short texts, lists of integers) is refused naming the file and the problem.
    """
    path = run.case_json(subset, case_id)
    if not os.path.lexists(path):
        return None
    info = read_json(path)
    if not isinstance(info, dict):
        raise PersistbenchError(f"{path}: must hold a JSON object")
    if info.get("uid") != case_id:
        raise PersistbenchError(
            f"{path}: uid {str(info.get('uid'))[:MAX_RECORD_TEXT]!r} is not this case's ({case_id})"
        )
    problem = _record_problem(info, subset, case_id)
    if problem:
        raise PersistbenchError(f"{path}: {problem}")
    return info


def stale_cases(suite: Suite, run: RunLayout, cases: list) -> list[str] | None:
    """Keys of the predicted ``cases`` whose content in the dataset changed since they were predicted (the
    ``case_sha256`` their ``case.json`` recorded against :meth:`Suite.case_digest` now); None when a predicted
    case cannot be checked that way (a run made before case digests, a suite without them)."""
    stale = []
    for c in cases:
        try:
            info = case_record(run, c.subset, c.case_id)
        except PersistbenchError:
            continue  # unreadable: not a prediction, counted as missing by its reader
        if info is None:
            continue
        now = suite.case_digest(c)
        if now is None or not isinstance(info.get("case_sha256"), str):
            return None
        if info["case_sha256"] != now:
            stale.append(suite.key(c))
    return stale


def complete_record(run: RunLayout, subset: str, case_id: str) -> dict | None:
    """A case's ``case.json`` when its prediction is complete (a sound record and every file it names there, a
    regular file (not a link) with the sha256 recorded), else None. What ``infer`` (``--resume``,
    ``--aggregate-only``) counts as done."""
    try:
        info = case_record(run, subset, case_id)
    except PersistbenchError:
        return None
    if info is None:
        return None
    for rel, digest in info["files"].items():
        path = run.root / rel
        if path.is_symlink() or not path.is_file() or sha256_file(path) != digest:
            return None
    return info


MAX_MODEL_TEXT = 4096  # a model's name as given to --model (a path, a module, a cmd: line)


def read_run_info(run: RunLayout) -> dict | None:
    """``run.json`` as a dictionary (None when the folder has none: predictions made by another toolkit);
    anything else is refused naming the file. ``model`` (copied into every score) must be printable text of at
    most :data:`MAX_MODEL_TEXT` characters, ``oracle`` a boolean and ``seed`` an integer, where present."""
    if not run.run_json.exists():
        return None
    info = read_json(run.run_json)
    if not isinstance(info, dict):
        raise PersistbenchError(f"{run.run_json}: must hold a JSON object")
    model = info.get("model", "")
    if not (isinstance(model, str) and len(model) <= MAX_MODEL_TEXT and model.isprintable()):
        raise PersistbenchError(f"{run.run_json}: model: must be printable text of at most {MAX_MODEL_TEXT} characters")
    if not isinstance(info.get("oracle", False), bool):
        raise PersistbenchError(f"{run.run_json}: oracle: must be true or false")
    if "seed" in info and not _count(info["seed"], 0, MAX_SEED):
        raise PersistbenchError(f"{run.run_json}: seed: must be an integer from 0 to {MAX_SEED}")
    if "sampling" not in info and isinstance(info.get("protocol"), dict):  # a run of an earlier version
        old = info.pop("protocol")
        info["sampling"] = {**{k: v for k, v in old.items() if k != "sampling"}, "rule": old.get("sampling", "")}
    sampling = info.get("sampling", {})
    frames, size = (sampling.get(k) for k in ("num_frames", "resolution")) if isinstance(sampling, dict) else (0, 0)
    if not (
        isinstance(sampling, dict)
        and (frames is None or (_count(frames, 1, MAX_RECORD_INT) or frames == -1) and not isinstance(frames, bool))
        and (size is None or (isinstance(size, list) and len(size) == 2 and all(_signed(v) for v in size)))
    ):
        raise PersistbenchError(
            f"{run.run_json}: sampling: must be {{num_frames: -1 or a positive integer, resolution: [h, w]}}"
        )
    return info


def _signed(value: object) -> bool:
    """An integer side of ``resolution``: -1 (the dataset's own) or 1 to :data:`MAX_SIDE`."""
    return isinstance(value, int) and not isinstance(value, bool) and (value == -1 or 1 <= value <= MAX_SIDE)
