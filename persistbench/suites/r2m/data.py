"""Reading an R2M-Bench checkout (untrusted): its cases, prompts, images and trajectories, checked as read.

Links: every file and folder the reader uses is followed through links only to a target inside the
checkout (:meth:`Checkout.confined`), so upstream's advice of making ``generated_imgs`` a link to the
images works when they are in the checkout, and a link to anywhere else is refused naming it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import parse_json, read_bounded, read_json
from persistbench.io.names import check_inside, check_name, child
from persistbench.suites.r2m import layout

MAX_FILE_BYTES = 64 << 20  # a 10,000-pose trajectory is ~4 MB of JSON
# Upstream's trajectories have 481 poses (30 s at 16 fps); revisit detection is quadratic in the poses.
MAX_POSES = 10_000
# |R R^T - I| per entry: upstream's own trajectory_WSLRRLL_30s.json drifts to 6.1e-4 (determinant 0.99973 at
# frame 139, rounding its writer accumulated); three times that is still a rotation to a tenth of a degree.
ROTATION_TOLERANCE = 2e-3
MAX_TRANSLATION = 1e6  # metres from the origin: far beyond any scene, far below where distances overflow
MAX_CASES = 10_000
MAX_PROMPT = 10_000
MAX_PRINCIPAL = 8192.0  # pixels: a frame of at most 16384 a side
MIN_PRINCIPAL = 1.0  # a frame of at least 2 x 2 pixels, which cropping and scaling can divide by
_FRAME_KEY = re.compile(r"[0-9]{1,6}")  # ASCII digits: str.isdigit() also takes superscripts and other scripts


def _read_json(path: Path) -> object:
    return read_json(path, MAX_FILE_BYTES)


@dataclass(frozen=True)
class Trajectory:
    """Camera-to-world poses ``(T, 4, 4)`` (OpenCV axes) and intrinsics ``(3, 3)`` for a ``2 cx x 2 cy`` image."""

    poses: np.ndarray
    k: np.ndarray
    sha256: str  # of the file's bytes: what pair files are keyed by

    @property
    def rigid_poses(self) -> np.ndarray:
        """``(T, 4, 4)`` poses whose rotations, where they drift from orthonormal by more than 1e-12, are replaced
        by the nearest rotation (SVD): what the cameras handed to models use. Pair sampling reads the file's
        numbers as they are, as upstream does."""
        r = self.poses[:, :3, :3]
        drift = np.abs(r @ np.swapaxes(r, 1, 2) - np.eye(3)).max(axis=(1, 2)) > 1e-12
        out = self.poses.copy()
        if drift.any():
            u, _, vt = np.linalg.svd(r[drift])
            out[drift, :3, :3] = u @ vt
        return out

    @property
    def size(self) -> tuple[int, int]:
        """``(h, w)`` the intrinsics are for: twice the principal point (1080 x 1920 upstream)."""
        return round(2 * self.k[1, 2]), round(2 * self.k[0, 2])


def _matrix(value: object, n: int, where: str) -> np.ndarray:
    arr = np.asarray(value, dtype=object)
    if arr.shape != (n, n) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in arr.flat):
        raise PersistbenchError(f"{where}: must be a {n}x{n} matrix of numbers")
    out = arr.astype(np.float64)
    if not np.isfinite(out).all():
        raise PersistbenchError(f"{where}: holds NaN or infinite values")
    return out


def _check_k(k: np.ndarray, where: str) -> None:
    """A pinhole ``K`` without skew, positive focal lengths, and a principal point that makes a usable frame."""
    if not (k[0, 1] == 0 and k[1, 0] == 0 and np.array_equal(k[2], [0, 0, 1])):
        raise PersistbenchError(f"{where}: K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], found {k.tolist()}")
    if not (k[0, 0] > 0 and k[1, 1] > 0):
        raise PersistbenchError(f"{where}: K needs positive focal lengths")
    cx, cy = k[0, 2], k[1, 2]
    if not (MIN_PRINCIPAL <= cx <= MAX_PRINCIPAL and MIN_PRINCIPAL <= cy <= MAX_PRINCIPAL):
        raise PersistbenchError(
            f"{where}: K's principal point ({cx:g}, {cy:g}) must lie in [{MIN_PRINCIPAL:g}, {MAX_PRINCIPAL:g}] "
            "pixels (the frame K is for is 2cx x 2cy)"
        )


def read_trajectory(path: Path) -> Trajectory:
    """Poses in the order of their integer keys (the file's key order does not matter); every frame checked."""
    raw = read_bounded(path, MAX_FILE_BYTES)  # parsed and hashed from the same bytes
    data = parse_json(raw, path)
    if not isinstance(data, dict) or not data:
        raise PersistbenchError(f"{path}: must be an object of frame number -> {{extrinsic, K}}")
    if len(data) > MAX_POSES:
        raise PersistbenchError(f"{path}: {len(data)} poses, at most {MAX_POSES} allowed")
    if not all(_FRAME_KEY.fullmatch(key) for key in data):
        raise PersistbenchError(f"{path}: keys must be frame numbers (ASCII digits)")
    keys = sorted(data, key=int)
    if [int(key) for key in keys] != list(range(len(keys))):
        raise PersistbenchError(f"{path}: frame numbers must be 0 to {len(keys) - 1} without gaps")
    poses, k = [], None
    for key in keys:
        entry = data[key]
        if not isinstance(entry, dict) or "extrinsic" not in entry or "K" not in entry:
            raise PersistbenchError(f"{path}: frame {key}: needs 'extrinsic' and 'K'")
        pose = _matrix(entry["extrinsic"], 4, f"{path}: frame {key}: extrinsic")
        r = pose[:3, :3]
        if not np.allclose(r @ r.T, np.eye(3), atol=ROTATION_TOLERANCE) or not np.allclose(pose[3], [0, 0, 0, 1]):
            raise PersistbenchError(f"{path}: frame {key}: extrinsic is not a rigid camera-to-world transform")
        if not np.all(np.abs(pose[:3, 3]) <= MAX_TRANSLATION):
            raise PersistbenchError(f"{path}: frame {key}: extrinsic: a position beyond {MAX_TRANSLATION:g} m")
        if np.linalg.det(r) < 0:
            raise PersistbenchError(f"{path}: frame {key}: extrinsic is a reflection (determinant -1), not a rotation")
        kk = _matrix(entry["K"], 3, f"{path}: frame {key}: K")
        if k is None:
            k = kk
            _check_k(k, f"{path}: frame {key}")
        elif not np.array_equal(kk, k):
            raise PersistbenchError(f"{path}: frame {key}: K differs from frame 0's (one camera per trajectory)")
        poses.append(pose)
    return Trajectory(np.stack(poses), k, hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class R2MCase:
    """One spec of a metadata file: (trajectory, image id)."""

    subset: str  # the trajectory, e.g. DDDAAA
    case_id: str  # the image's stem, e.g. 0001
    image: Path
    prompt: str
    trajectory: Path


class Checkout:
    """An R2M-Bench checkout at ``root``: the metadata files found and their cases."""

    def __init__(self, root: Path):
        self.root = Path(root)

    @classmethod
    def detect(cls, root: Path) -> bool:
        meta = root / layout.META_DIR
        return meta.is_dir() and any(layout.META_RE.match(p.name) for p in meta.iterdir())

    @cached_property
    def trajectories(self) -> tuple[str, ...]:
        meta = self.root / layout.META_DIR
        if not meta.is_dir():
            raise PersistbenchError(f"{meta}: missing (not an R2M-Bench checkout)")
        return tuple(sorted(m.group(1) for p in meta.iterdir() if (m := layout.META_RE.match(p.name))))

    def confined(self, path: Path) -> Path:
        """``path`` when, links followed, it lies inside the root (missing is fine: reported when read); else one
        line naming it and where it leads. Every file and folder of the checkout is used through this."""
        check_inside(self.root, path)
        return path

    def meta_file(self, trajectory: str) -> Path:
        return self.confined(layout.meta_path(self.root, trajectory))

    def trajectory_file(self, trajectory: str) -> Path:
        return self.confined(layout.trajectory_path(self.root, trajectory))

    def _image(self, value: object, where: str) -> Path:
        """The image a metadata entry names, inside the root; ``generated_imgs/`` also found as ``test_imgs/``."""
        if not isinstance(value, str):
            raise PersistbenchError(f"{where}: image: must be a path")
        parts = [p for p in PurePosixPath(value).parts if p != "."]
        if len(parts) != 2 or parts[0] not in layout.IMAGE_DIRS:
            raise PersistbenchError(f"{where}: image: {value!r} must be ./generated_imgs/<name> or ./test_imgs/<name>")
        name = check_name(parts[1], f"{where}: image")
        for folder in (parts[0], *layout.IMAGE_DIRS):
            path = self.confined(child(self.root, folder, name))
            if path.is_file():
                return path
        return child(self.root, layout.HUB_IMAGES, name)  # missing: reported when read, with the fetch command

    def cases(self) -> list[R2MCase]:
        out: list[R2MCase] = []
        for t in self.trajectories:
            path = self.meta_file(t)
            trajectory = self.trajectory_file(t)
            entries = _read_json(path)
            if not isinstance(entries, list) or not 0 < len(entries) <= MAX_CASES:
                raise PersistbenchError(f"{path}: must be a list of 1 to {MAX_CASES} specs")
            seen: set[str] = set()
            for n, e in enumerate(entries):
                where = f"{path}: entry {n}"
                if not isinstance(e, dict):
                    raise PersistbenchError(f"{where}: must be an object")
                image = self._image(e.get("image"), where)
                prompt = e.get("prompt", "")
                if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT:
                    raise PersistbenchError(f"{where}: prompt: must be text of at most {MAX_PROMPT} characters")
                pose = e.get("pose_json_path")
                expected = f"{layout.TRAJECTORY_DIR}/trajectory_{t}_30s.json"
                if not isinstance(pose, str) or "/".join(PurePosixPath(pose).parts) != expected:  # "./" dropped
                    raise PersistbenchError(f"{where}: pose_json_path: must be {expected} (or ./{expected})")
                case_id = check_name(Path(image.name).stem, f"{where}: image")
                if case_id in seen:
                    raise PersistbenchError(f"{where}: image {case_id} listed twice")
                seen.add(case_id)
                out.append(R2MCase(t, case_id, image, prompt, trajectory))
        return sorted(out, key=lambda c: (c.subset, c.case_id))

    def fingerprint(self) -> str:
        """sha256 over the metadata and trajectory files (the images are checked by their own reads)."""
        h = hashlib.sha256()
        for t in self.trajectories:
            for path in (self.meta_file(t), self.trajectory_file(t)):
                h.update(f"{path.relative_to(self.root).as_posix()}\n".encode())
                present = os.path.lexists(path)
                h.update(hashlib.sha256(read_bounded(path, MAX_FILE_BYTES)).digest() if present else b"missing")
        return h.hexdigest()


def yaw_degrees(poses: np.ndarray) -> np.ndarray:
    """Per-frame yaw ``atan2(R02, R00)`` in degrees, unwrapped across +-180 (a turn through 180 is continuous)."""
    return np.degrees(np.unwrap(np.arctan2(poses[:, 0, 2], poses[:, 0, 0])))


def fps_of(n_poses: int, seconds: float = 30.0) -> float:
    """Frame rate of a trajectory of ``n_poses`` poses over ``seconds`` (481 over 30 s: 16 fps)."""
    return max(n_poses - 1, 1) / seconds if n_poses > 1 else 1.0
