"""Reading and writing the dataset layout: a case's views, frames, masks, cameras and visibility.

Everything read is checked as it is read (sizes, binary masks, the camera and visibility contracts
of :mod:`persistbench.suites.persistbench.contracts`); everything written goes through atomic writes. The paths are
:mod:`persistbench.core.layout`'s; the index files are :mod:`persistbench.suites.persistbench.index`'s.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import FRAMES_DIR, MASKS_DIR, STATE_DIR, frame_name, mask_name
from persistbench.io.files import read_bounded, sha256_file
from persistbench.io.images import list_images, read_image, write_image
from persistbench.io.names import confined, name_problem
from persistbench.io.safeload import MAX_BYTES as MAX_NPY_BYTES
from persistbench.io.safeload import load_dict, load_npy, save_npy_dict
from persistbench.suites.persistbench import contracts
from persistbench.suites.persistbench.index import read_case_records, read_index
from persistbench.suites.persistbench.layout import (
    CAMERA_NAME,
    CASES_JSONL,
    DB_NAME,
    FRAME_FORMATS,
    PAIRS_JSON,
    SUBSETS,
    THETA_PHI_NAME,
    VIDEO_NAME,
    VIEWS,
    VISIBILITY_NAME,
    CaseId,
    case_dir,
    pair_id,
)


class View:
    """One view (``view_0`` or ``center``) of a case; everything is read lazily and checked as it is read.

    ``size`` = (h, w) every frame and mask must have (from the case's record), or None: the
    size of the first one read.
    """

    def __init__(self, path: Path, size: tuple[int, int] | None = None):
        self.path = path
        self.name = path.name
        self.size = tuple(size) if size is not None else None

    @cached_property
    def frame_paths(self) -> list[Path]:
        return list_images(self.path / FRAMES_DIR)

    @cached_property
    def mask_paths(self) -> list[Path]:
        return list_images(self.path / MASKS_DIR)

    @property
    def video_path(self) -> Path | None:
        """``video.mp4`` of the sharded distribution, when frames are not files."""
        video = self.path / VIDEO_NAME
        return video if not self.frame_paths and video.is_file() else None

    @property
    def camera_path(self) -> Path:
        return self.path / CAMERA_NAME

    @property
    def n_frames(self) -> int:
        """Number of frames: frame files, or the masks beside a ``video.mp4``."""
        return len(self.frame_paths) if self.frame_paths else len(self.mask_paths)

    def _sized(self, image: np.ndarray, where: object) -> np.ndarray:
        got = image.shape[:2]
        if self.size is None:
            self.size = got
        elif got != self.size:
            raise PersistbenchError(f"{where}: {got[1]}x{got[0]}, expected {self.size[1]}x{self.size[0]}")
        return image

    def frames(self) -> Iterator[np.ndarray]:
        """RGB uint8 ``(H, W, 3)`` frames in order, decoded one at a time."""
        if self.video_path is not None:
            from persistbench.io.video import read_frames

            for i, frame in enumerate(read_frames(self.video_path)):
                yield self._sized(frame, f"{self.video_path} frame {i}")
        else:
            for p in self.frame_paths:
                yield self._sized(read_image(p), p)

    def frame(self, index: int) -> np.ndarray:
        if self.video_path is not None:
            for i, frame in enumerate(self.frames()):
                if i == index:
                    return frame
            raise PersistbenchError(f"{self.video_path}: no frame {index}")
        return self._sized(read_image(self.frame_paths[index]), self.frame_paths[index])

    def mask(self, index: int) -> np.ndarray:
        """uint8 ``(H, W)`` mask ``index`` (0/255); anything else is refused naming the file."""
        path = self.mask_paths[index]
        mask = self._sized(read_image(path, gray=True), path)
        if ((mask != 0) & (mask != 255)).any():
            raise PersistbenchError(f"{path}: mask is not binary 0/255")
        return mask

    def masks(self) -> Iterator[np.ndarray]:
        """uint8 ``(H, W)`` masks (0/255) in order."""
        for i in range(len(self.mask_paths)):
            yield self.mask(i)

    def camera(self, n_frames: int | None = None) -> dict:
        """``{cam_poses: (T, 4, 4) camera-to-world, cam_intrinsic: (3, 3)}`` via the safe loader, checked."""
        return _load_dict(
            self.camera_path, contracts.camera_problems, n_frames if n_frames is not None else self.n_frames
        )


def _load_dict(path: Path, problems: Callable[[dict, int], Iterator[str]], n: int) -> dict:
    """:func:`load_dict`, then the first of ``problems(data, n)`` is raised."""
    data = load_dict(path)
    problem = next(iter(problems(data, n)), None)
    if problem:
        raise PersistbenchError(f"{path}: {problem}")
    return data


@dataclass(frozen=True)
class Case:
    """One case of a dataset. ``path`` is the directory holding ``view_0/`` and ``center/``.

    ``record`` is the case's line of ``cases.jsonl`` (None for the sharded distribution's
    nested form, which has none): the frame count and size every reader checks against.
    """

    root: Path
    subset: str
    case_id: str
    path: Path
    record: dict | None = field(default=None, compare=False, repr=False)

    @property
    def size(self) -> tuple[int, int] | None:
        """(h, w) of every frame and mask, as recorded (the record's ``size`` is [w, h])."""
        size = (self.record or {}).get("size")
        return (int(size[1]), int(size[0])) if size else None

    def view(self, name: str) -> View:
        if name not in VIEWS:
            raise ValueError(f"unknown view {name!r}; views are {VIEWS}")
        return View(self.path / name, self.size)

    @property
    def visibility_path(self) -> Path:
        return self.path / VISIBILITY_NAME

    @property
    def theta_phi_path(self) -> Path:
        return self.path / THETA_PHI_NAME

    def theta_phi(self) -> dict:
        """The per-frame view angles in degrees, as :func:`~persistbench.suites.persistbench.contracts.
        theta_phi_dict` reads either form (through the safe loader), checked against the frame count."""
        data = contracts.theta_phi_dict(load_npy(self.theta_phi_path))
        problem = data if isinstance(data, str) else next(iter(contracts.theta_phi_problems(data, self.n_frames)), None)
        if problem:
            raise PersistbenchError(f"{self.theta_phi_path}: {problem}")
        return data

    def visibility(self) -> dict:
        """``{view_0_visibility: (T,) float, view_1_visibility: (T,) bool, mode, window_ratio, ...}``, checked."""
        return _load_dict(self.visibility_path, contracts.visibility_problems, self.n_frames)

    @property
    def n_frames(self) -> int:
        """Frames of the case: as recorded, else as counted in ``view_0``."""
        if self.record is not None and isinstance(self.record.get("n_frames"), int):
            return self.record["n_frames"]
        return self.view("view_0").n_frames

    @property
    def nested(self) -> bool:
        """True for the sharded distribution's ``<subset>/<case>/<obj_id>/`` form."""
        return self.path != self.root / self.subset / self.case_id


class Dataset:
    """A dataset root (reconstructed or fetched).

    A reconstructed dataset lists its cases from ``cases.jsonl`` (a case is complete only
    when recorded there): a recorded case whose folder is gone is still listed (and
    refused when read, naming the folder), and a folder without a record is not a case.
    The sharded distribution's nested form has no ``cases.jsonl``: its cases are found by
    scanning the tree. Order is deterministic: by subset name, then case id.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if not self.root.is_dir():
            raise PersistbenchError(f"{self.root}: dataset root does not exist")

    @property
    def indexed(self) -> bool:
        """Whether the cases are listed by ``cases.jsonl`` (a reconstructed dataset)."""
        return self.cases_jsonl.is_file()

    @cached_property
    def _records(self) -> dict[tuple[str, str], dict]:
        return {(r["subset"], r["uid"]): r for r in read_case_records(self.root)}

    def scan(self) -> list[tuple[str, str, Path]]:
        """``(subset, case id, views directory)`` of every case on disk, ids unchecked: a folder holding the
        views is a case named by the folder; below a folder without them, every ``<obj_id>/`` child holding
        them is a pair of the distribution's nested form (:func:`~persistbench.suites.persistbench.layout.
        pair_id`), so the objects of one case are as many pairs."""
        out = []
        for sub in sorted(self.root.iterdir()):
            if sub.name not in SUBSETS or not sub.is_dir():
                continue
            for d in sorted(sub.iterdir()):
                if (d / VIEWS[0]).is_dir():
                    out.append((sub.name, d.name, d))
                elif d.is_dir():
                    out += [
                        (sub.name, pair_id(d.name, c.name), c)
                        for c in sorted(d.iterdir())
                        if c.is_dir() and (c / VIEWS[0]).is_dir()
                    ]
        return out

    @cached_property
    def _scanned(self) -> dict[tuple[str, str], Path]:
        return {(s, c): p for s, c, p in self.scan()}

    @cached_property
    def _pairs(self) -> dict[tuple[str, str], dict]:
        """The fetched distribution's pair records (``index.json`` as ``fetch`` keeps it): ``n_frames``."""
        from persistbench.suites.persistbench.dist.manifest import read_pairs

        path = self.root / PAIRS_JSON
        if not path.is_file():
            return {}
        return {(r["subset"], uid): r for uid, r in read_pairs(path).items()}

    def cases(self, subset: str | None = None) -> list[Case]:
        """Every case (pair), in order; in the nested form a pair whose folders make no valid id is refused,
        naming them, rather than left out."""
        if self.indexed:
            found = [self._case(s, c) for s, c in sorted(self._records)]
        else:
            for (_, c), p in self._scanned.items():
                problem = name_problem(c)
                if problem:
                    raise PersistbenchError(f"{p}: not a case or pair folder ({c!r}: {problem})")
            found = [self._case(s, c) for s, c in sorted(self._scanned)]
        return [c for c in found if subset is None or c.subset == subset]

    def _case(self, subset: str, case_id: str) -> Case:
        if self.indexed:
            directory = case_dir(self.root, subset, case_id)
            return Case(self.root, subset, case_id, directory, self._records.get((subset, case_id)))
        path = self._scanned.get((subset, case_id)) or case_dir(self.root, subset, case_id)
        return Case(self.root, subset, case_id, path, self._pairs.get((subset, case_id)))

    def case(self, subset: str, case_id: str) -> Case:
        """The case ``(subset, case_id)``; refused when it is not recorded (indexed datasets) or not on disk."""
        case = self._case(subset, case_id)
        if self.indexed and case.record is None:
            raise PersistbenchError(f"{case.path}: not a complete case (not in {self.cases_jsonl.name})")
        if not (case.path / VIEWS[0]).is_dir():
            raise PersistbenchError(f"{case.path}: no such case")
        return case

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def cases_jsonl(self) -> Path:
        return self.root / CASES_JSONL

    @property
    def state_dir(self) -> Path:
        return confined(self.root, STATE_DIR)

    def fingerprint(self) -> str:
        """sha256 of ``cases.jsonl`` (file checksums of every case), or of every case's cameras when absent."""
        if self.cases_jsonl.is_file():
            return sha256_file(self.cases_jsonl)
        h = hashlib.sha256()
        for case in self.cases():
            h.update(f"{case.subset}/{case.case_id}\n".encode())
            for view in VIEWS:
                h.update(read_bounded(case.view(view).camera_path, MAX_NPY_BYTES))
        return h.hexdigest()

    def index_rows(self) -> list[dict]:
        return read_index(self.root)

    def records(self) -> list[dict]:
        return read_case_records(self.root)


class CaseWriter:
    """Writes one case of the dataset layout; every file atomically.

    ``files`` maps each written path (relative to the dataset root, with ``/``)
    to its sha256, for the ``cases.jsonl`` record.
    """

    def __init__(self, root: str | os.PathLike, subset: str, case_id: str, frame_format: str = "png"):
        if subset not in SUBSETS:
            raise ValueError(f"unknown subset {subset!r}; subsets are {SUBSETS}")
        if frame_format not in FRAME_FORMATS:
            raise ValueError(f"frame format must be one of {FRAME_FORMATS}")
        CaseId.parse(case_id)
        self.root = Path(root)
        self.dir = case_dir(root, subset, case_id)
        self.frame_format = frame_format
        self.files: dict[str, str] = {}

    def _record(self, path: Path, digest: str) -> None:
        self.files[path.relative_to(self.root).as_posix()] = digest

    def write_frame(self, view: str, index: int, rgb: np.ndarray) -> None:
        path = self.dir / view / FRAMES_DIR / frame_name(index, self.frame_format)
        self._record(path, write_image(path, rgb))

    def write_mask(self, view: str, index: int, mask: np.ndarray) -> None:
        """Write a mask; any nonzero value becomes 255."""
        path = self.dir / view / MASKS_DIR / mask_name(index)
        self._record(path, write_image(path, np.where(mask > 0, 255, 0).astype(np.uint8)))

    def write_camera(self, view: str, cam_poses: np.ndarray, cam_intrinsic: np.ndarray) -> None:
        path = self.dir / view / CAMERA_NAME
        data = {"cam_poses": np.asarray(cam_poses, np.float64), "cam_intrinsic": np.asarray(cam_intrinsic, np.float64)}
        self._record(path, save_npy_dict(path, data))

    def write_visibility(self, data: dict) -> None:
        path = self.dir / VISIBILITY_NAME
        self._record(path, save_npy_dict(path, data))

    def write_theta_phi(self, data: dict) -> None:
        path = self.dir / THETA_PHI_NAME
        self._record(path, save_npy_dict(path, data))
