"""What each pickled dictionary of a case must hold (docs/data-format.md, "Dataset"): pure checks on loaded data.

Each function yields one problem per line (without the file name, which the
caller adds) and nothing when the data is sound. The readers in
:mod:`persistbench.suites.persistbench.dataset` raise the first problem; ``verify`` lists them all.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def camera_problems(data: dict, n: int) -> Iterator[str]:
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


def visibility_problems(data: dict, n: int) -> Iterator[str]:
    v0, v1 = data.get("view_0_visibility"), data.get("view_1_visibility")
    v0 = np.asarray(v0) if v0 is not None else None
    if v0 is None or v0.shape != (n,) or v0.dtype.kind not in "fiu":
        yield f"view_0_visibility must be ({n},) numbers, found {None if v0 is None else (v0.shape, v0.dtype.name)}"
    elif not (np.isfinite(v0).all() and (v0 >= 0).all() and (v0 <= 1).all()):
        yield "view_0_visibility must lie in [0, 1]"
    v1 = np.asarray(v1) if v1 is not None else None
    if v1 is None or v1.shape != (n,):
        yield f"view_1_visibility must have shape ({n},), found {None if v1 is None else v1.shape}"


def theta_phi_dict(data: object) -> dict | str:
    """``theta_phi_values.npy`` in one form: our dictionary of per-frame angles (``<view>_theta``,
    ``<view>_phi``, ``<view>_roll``, degrees) as it is, or the card's ``(T, 2)`` array of the input view's
    per-frame yaw and pitch in degrees as ``{view_0_theta, view_0_phi}``; else the problem, as text."""
    if isinstance(data, dict):
        return data
    if isinstance(data, np.ndarray) and data.ndim == 2 and data.shape[1] == 2 and data.dtype.kind in "fiu":
        return {"view_0_theta": data[:, 0].astype(np.float64), "view_0_phi": data[:, 1].astype(np.float64)}
    found = data.shape if isinstance(data, np.ndarray) else type(data).__name__
    return f"expected a dictionary of per-frame angles or a (T, 2) array of yaw and pitch, found {found}"


def theta_phi_problems(data: dict, n: int) -> Iterator[str]:
    for key, value in sorted(data.items()):
        value = np.asarray(value)
        if value.dtype.kind == "f" and value.shape[:1] != (n,):
            yield f"{key} must have {n} values, found shape {value.shape}"
