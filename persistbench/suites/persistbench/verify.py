"""Check a dataset against the layout contract (docs/data-format.md, "Dataset").

:func:`verify_dataset` returns one ``path: problem`` line per problem; an
empty list means the dataset is sound.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import sha256_file
from persistbench.io.names import name_problem
from persistbench.io.safeload import load_dict
from persistbench.io.video import count_frames
from persistbench.suites.persistbench import contracts
from persistbench.suites.persistbench.dataset import Case, Dataset, View
from persistbench.suites.persistbench.layout import PAIRS_JSON, VIEWS


def _structure(case: Case) -> Iterator[str]:
    """Problems visible without decoding anything: folders, file counts, listed files."""
    if not (case.path / VIEWS[0]).is_dir():
        yield f"{case.path}: case folder missing on disk"
        return
    n = case.n_frames
    if n == 0:
        yield f"{case.path}: view_0 has no frames"
    for name in VIEWS:
        view = case.view(name)
        if not view.path.is_dir():
            yield f"{view.path}: missing view directory"
            continue
        if not view.frame_paths and view.video_path is None:
            yield f"{view.path}: no frames (frames/*.png|jpg or video.mp4)"
        elif view.frame_paths and len(view.frame_paths) != n:
            yield f"{view.path / 'frames'}: {len(view.frame_paths)} frames, the case has {n}"
        elif view.video_path is not None:
            try:
                count = count_frames(view.video_path)  # its packets, nothing decoded
            except PersistbenchError as e:
                yield str(e)
            else:
                if count != n:
                    yield f"{view.video_path}: {count} frames, the case has {n}{_told(case)}"
        if len(view.mask_paths) != n:
            yield f"{view.path / 'masks'}: {len(view.mask_paths)} masks, the case has {n}{_told(case)}"
        if not view.camera_path.is_file():
            yield f"{view.camera_path}: missing"
    for path in (case.visibility_path, case.theta_phi_path):
        if not path.is_file():
            yield f"{path}: missing"
    for rel in sorted((case.record or {}).get("files", {})):
        if not (case.root / rel).is_file():
            yield f"{case.root / rel}: listed in cases.jsonl but missing"


def _told(case: Case) -> str:
    """Where the case's frame count comes from, when a record gives it."""
    if not case.nested or case.record is None:
        return ""
    return f" (n_frames in the distribution's index.json, kept as {case.root / PAIRS_JSON})"


def require_usable(case: Case) -> Case:
    """Refuse, naming the file, a case whose folders, frame and mask counts or listed files do not match
    its record; what is in the files is checked as they are read (:mod:`persistbench.suites.persistbench.dataset`)."""
    problem = next(_structure(case), None)
    if problem:
        raise PersistbenchError(problem)
    return case


def _images(view: View, gray: bool) -> Iterator[str]:
    paths = view.mask_paths if gray else view.frame_paths
    for i in range(len(paths)):
        try:
            view.mask(i) if gray else view.frame(i)
        except PersistbenchError as e:
            yield str(e)


def _dictionary(path: Path, problems: Callable[[dict, int], Iterator[str]], n: int) -> Iterator[str]:
    """Problems of one pickled dictionary file: unloadable, or every one ``problems`` finds."""
    if not path.is_file():
        return
    try:
        data = load_dict(path)
    except PersistbenchError as e:
        yield str(e)
        return
    yield from (f"{path}: {msg}" for msg in problems(data, n))


def _check_case(case: Case) -> Iterator[str]:
    problems = list(_structure(case))
    yield from problems
    if problems and not (case.path / VIEWS[0]).is_dir():
        return
    n = case.n_frames
    for name in VIEWS:
        view = case.view(name)
        yield from _images(view, gray=False)
        yield from _images(view, gray=True)
        yield from _dictionary(view.camera_path, contracts.camera_problems, n)
    yield from _dictionary(case.visibility_path, contracts.visibility_problems, n)
    if case.theta_phi_path.is_file():
        try:
            case.theta_phi()
        except PersistbenchError as e:
            yield str(e)


def _folder_problems(ds: Dataset) -> Iterator[str]:
    """Case and pair folders on disk that are not usable as they are named or nested."""
    for subset, name, path in ds.scan():
        problem = name_problem(name)
        flat = path.parent == ds.root / subset
        if problem and not flat:
            yield f"{path}: a pair folder outside the layout <subset>/<case>/obj_<N>/ (pair id {name!r}: {problem})"
        elif problem:
            yield f"{path}: case folder name {problem}"
        elif flat and any(c.is_dir() and (c / VIEWS[0]).is_dir() for c in path.iterdir()):
            yield f"{path}: holds a case and a nested <obj_id>/ copy of one (fetched into a reconstructed dataset?)"


def verify_dataset(root: str | os.PathLike, progress: bool = False) -> tuple[list[str], int]:
    """Check every case under ``root`` and list every problem found, not just the first.

    Returns:
        ``(problems, n_cases)``: one ``path: problem`` line per problem.
    """
    from tqdm import tqdm

    ds = Dataset(root)
    problems: list[str] = list(_folder_problems(ds))
    try:
        cases = ds.cases()
        rows = {(r["subset"], r["uid"]) for r in ds.index_rows()}
    except PersistbenchError as e:
        return [*problems, str(e)], 0
    if not cases:
        problems.append(f"{ds.root}: no cases found")
    for case in tqdm(cases, desc="verify", unit="case", disable=not progress):
        problems.extend(_check_case(case))
        for rel, digest in sorted((case.record or {}).get("files", {}).items()):
            path = ds.root / rel
            if path.is_file() and sha256_file(path) != digest:
                problems.append(f"{path}: checksum differs from {ds.cases_jsonl.name}")
    if not ds.indexed:
        if ds.db_path.exists():
            problems.append(f"{ds.db_path}: present, but {ds.cases_jsonl.name} is missing")
        elif not all(c.nested for c in cases):
            problems.append(f"{ds.root}: no {ds.db_path.name} or {ds.cases_jsonl.name}: no case is marked complete")
        return problems, len(cases)
    listed = {(c.subset, c.case_id) for c in cases}
    for subset, name, _ in ds.scan():
        if (subset, name) not in listed and name_problem(name) is None:
            problems.append(f"{ds.root / subset / name}: not in {ds.cases_jsonl.name} (incomplete case)")
    for key in sorted(listed - rows):
        problems.append(f"{ds.root / key[0] / key[1]}: not in {ds.db_path.name} (incomplete case)")
    for key in sorted(rows - listed):
        problems.append(f"{ds.root / key[0] / key[1]}: in {ds.db_path.name} but not in {ds.cases_jsonl.name}")
    return problems, len(cases)
