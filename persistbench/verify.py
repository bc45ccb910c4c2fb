"""Check a dataset against the layout contract (DESIGN.md section 4).

:func:`verify_dataset` returns one ``path: problem`` line per problem; an
empty list means the dataset is sound.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from .errors import PersistbenchError
from .layout import VIEWS, Case, Dataset, sha256_file


def _check_camera(data: dict, n: int) -> Iterator[str]:
    poses, k = data.get("cam_poses"), data.get("cam_intrinsic")
    if not isinstance(poses, np.ndarray) or poses.shape != (n, 4, 4):
        yield f"cam_poses must be a ({n}, 4, 4) array, found {getattr(poses, 'shape', type(poses).__name__)}"
        return
    if not isinstance(k, np.ndarray) or k.shape != (3, 3):
        yield f"cam_intrinsic must be a (3, 3) array, found {getattr(k, 'shape', type(k).__name__)}"
        return
    if not (np.isfinite(poses).all() and np.isfinite(k).all()):
        yield "cameras hold non-finite values"
        return
    r = poses[:, :3, :3]
    err = np.abs(np.einsum("tji,tjk->tik", r, r) - np.eye(3)).max(axis=(1, 2))
    bad = np.flatnonzero((err > 1e-6) | (np.abs(np.linalg.det(r) - 1) > 1e-6))
    if bad.size:
        yield f"cam_poses[{bad[0]}] rotation is not orthonormal with determinant 1 ({bad.size} frames)"
    if np.abs(poses[:, 3] - [0, 0, 0, 1]).max() > 1e-12:
        yield "cam_poses bottom rows must be [0, 0, 0, 1]"
    if not (k[0, 0] > 0 and k[1, 1] > 0):
        yield f"focal lengths must be positive, found fx={k[0, 0]}, fy={k[1, 1]}"


def _check_visibility(data: dict, n: int) -> Iterator[str]:
    v0, v1 = data.get("view_0_visibility"), data.get("view_1_visibility")
    v0 = np.asarray(v0) if v0 is not None else None
    if v0 is None or v0.shape != (n,) or v0.dtype.kind not in "fiu":
        yield f"view_0_visibility must be ({n},) numbers, found {None if v0 is None else (v0.shape, v0.dtype.name)}"
    elif not (np.isfinite(v0).all() and (v0 >= 0).all() and (v0 <= 1).all()):
        yield "view_0_visibility must lie in [0, 1]"
    v1 = np.asarray(v1) if v1 is not None else None
    if v1 is None or v1.shape != (n,):
        yield f"view_1_visibility must have shape ({n},), found {None if v1 is None else v1.shape}"


def _check_theta_phi(data: dict, n: int) -> Iterator[str]:
    for key, value in sorted(data.items()):
        value = np.asarray(value)
        if value.dtype.kind == "f" and value.shape[:1] != (n,):
            yield f"{key} must have {n} values, found shape {value.shape}"


def _check_view(case: Case, name: str, n: int | None) -> Iterator[str]:
    view = case.view(name)
    if not view.path.is_dir():
        yield f"{view.path}: missing view directory"
        return
    if not view.frame_paths and view.video_path is None:
        yield f"{view.path}: no frames (frames/*.png|jpg or video.mp4)"
    if view.frame_paths and len(view.frame_paths) != len(view.mask_paths):
        yield f"{view.path}: {len(view.frame_paths)} frames but {len(view.mask_paths)} masks"
    if n is not None and view.n_frames != n:
        yield f"{view.path}: {view.n_frames} frames, but view_0 has {n}"
    shape = None
    if view.frame_paths:
        shape = view.frame(0).shape[:2]
    for p, m in zip(view.mask_paths, view.masks()):
        if shape is not None and m.shape != shape:
            yield f"{p}: mask size {m.shape} differs from frame size {shape}"
            break
        values = np.unique(m)
        if not np.isin(values, (0, 255)).all():
            yield f"{p}: mask is not binary 0/255 (values {values[:6].tolist()})"
            break
    yield from _check_file(view.camera_path, view.camera, _check_camera, view.n_frames)


def _check_file(path: Path, load: Callable[[], dict], check: Callable[[dict, int], Iterator[str]], n: int):
    """Problems of one pickled dictionary file: missing, unloadable, or what ``check`` finds."""
    if not path.is_file():
        yield f"{path}: missing"
        return
    try:
        data = load()
    except PersistbenchError as e:
        yield str(e)
        return
    yield from (f"{path}: {msg}" for msg in check(data, n))


def _check_case(case: Case) -> Iterator[str]:
    n = case.view(VIEWS[0]).n_frames if case.view(VIEWS[0]).path.is_dir() else None
    if n == 0:
        yield f"{case.path}: view_0 has no frames"
    for name in VIEWS:
        yield from _check_view(case, name, n if name != VIEWS[0] else None)
    if n:
        yield from _check_file(case.visibility_path, case.visibility, _check_visibility, n)
        yield from _check_file(case.theta_phi_path, case.theta_phi, _check_theta_phi, n)


def verify_dataset(root: str | os.PathLike) -> tuple[list[str], int]:
    """Check every case under ``root``.

    Returns:
        ``(problems, n_cases)``: one ``path: problem`` line per problem.
    """
    ds = Dataset(root)
    cases = ds.cases()
    problems: list[str] = []
    if not cases:
        problems.append(f"{ds.root}: no cases found")
    for case in cases:
        problems.extend(_check_case(case))

    indexed = ds.db_path.exists() or ds.cases_jsonl.exists()
    if not indexed:
        if not all(c.nested for c in cases):
            problems.append(f"{ds.root}: no {ds.db_path.name} or {ds.cases_jsonl.name}: no case is marked complete")
        return problems, len(cases)
    try:
        rows = {(r["subset"], r["uid"]) for r in ds.index_rows()}
        records = {(r["subset"], r["uid"]): r for r in ds.records()}
    except PersistbenchError as e:
        return [*problems, str(e)], len(cases)
    on_disk = {(c.subset, c.case_id) for c in cases}
    for key in sorted(on_disk - rows):
        problems.append(f"{ds.root / key[0] / key[1]}: not in {ds.db_path.name} (incomplete case)")
    for key in sorted(on_disk - set(records)):
        problems.append(f"{ds.root / key[0] / key[1]}: not in {ds.cases_jsonl.name} (incomplete case)")
    for key in sorted((rows | set(records)) - on_disk):
        problems.append(f"{ds.root / key[0] / key[1]}: listed in the index but missing on disk")
    for key in sorted(set(records) & on_disk):
        for rel, digest in sorted(records[key].get("files", {}).items()):
            path = ds.root / rel
            if not path.is_file():
                problems.append(f"{path}: listed in {ds.cases_jsonl.name} but missing")
            elif sha256_file(path) != digest:
                problems.append(f"{path}: checksum differs from {ds.cases_jsonl.name}")
    return problems, len(cases)
