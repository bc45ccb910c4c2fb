"""Every path, file name and on-disk format of persistbench (DESIGN.md sections 4 and 7).

Three layouts live here and nowhere else:

* the dataset (written by ``download``): ``<root>/<subset>/<case_id>/{view_0,center}/...``,
  ``data.db`` and ``cases.jsonl``; the sharded distribution's nested form
  ``<subset>/<case_id>/<obj_id>/`` with ``video.mp4`` instead of ``frames/`` is read too;
* predictions (``runs/<name>/<subset>/<case_id>/...``);
* results (``runs/<name>/scores/<protocol>/...``).

It also owns the safe loader for the pickled ``.npy`` dictionaries of the
public format and atomic writes (temporary name + rename) for every file.
It computes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from . import contracts
from .errors import PersistbenchError
from .names import NAME_PATTERN, check_name, child, name_problem
from .safeload import load_npy

# ---------------------------------------------------------------- names

SUBSETS = ("dynamic", "static")
VIEWS = ("view_0", "center")
DB_NAME = "data.db"
CASES_JSONL = "cases.jsonl"
STATE_DIR = ".state"
RECIPES_PROVENANCE = "recipes_source.json"  # which recipes built the dataset (spec, revision, sha256)
FRAMES_DIR = "frames"
MASKS_DIR = "masks"
VIDEO_NAME = "video.mp4"
CAMERA_NAME = "camera_params.npy"
VISIBILITY_NAME = "visibility_dict.npy"
THETA_PHI_NAME = "theta_phi_values.npy"
FRAME_FORMATS = ("png", "jpg")

# Public `data` table columns first (DESIGN section 4), then ours.
DATA_COLUMNS: dict[str, str] = {
    "success": "INTEGER",
    "uid": "TEXT PRIMARY KEY",
    "obj_id": "TEXT",
    "output_dir": "TEXT",
    "visibility_dict_path": "TEXT",
    "fov": "REAL",
    "use_stationary": "INTEGER",
    "overlap_mode": "TEXT",
    "window_ratio": "REAL",
    "window_move_ratio": "REAL",
    "object_dir": "TEXT",
    "subset": "TEXT",
    "n_frames": "INTEGER",
    "width": "INTEGER",
    "height": "INTEGER",
    "source_id": "TEXT",
    "toolkit_version": "TEXT",
    "recipe_sha256": "TEXT",
}

_IMAGE_RE = re.compile(r"^(?:frame_|mask_)?(\d{4,5})\.(?:png|jpg|jpeg)$", re.IGNORECASE)


def frame_name(index: int, fmt: str = "png") -> str:
    """File name of frame ``index`` as this toolkit writes it: ``frame_0000.png``."""
    return f"frame_{index:04d}.{fmt}"


def mask_name(index: int) -> str:
    """File name of mask ``index`` as this toolkit writes it: ``mask_0000.png``."""
    return f"mask_{index:04d}.png"


@dataclass(frozen=True)
class CaseId:
    """``<Category>_<source id>_<clip index>_obj_<object id>``, parsed from the right.

    A YouTube id may itself hold ``_`` and ``-``, so only the category (left
    of the first ``_``) and the two trailing fields are split off.
    """

    category: str
    source_id: str
    clip: int
    obj_id: str

    @classmethod
    def parse(cls, case_id: str) -> CaseId:
        try:
            head, obj_id = case_id.rsplit("_obj_", 1)
            head, clip = head.rsplit("_", 1)
            category, source_id = head.split("_", 1)
            if not (category and source_id and obj_id) or not clip.isdigit():
                raise ValueError
        except ValueError:
            raise PersistbenchError(
                f"{case_id!r}: not a case id of the form <Category>_<source id>_<clip>_obj_<object id>"
            ) from None
        return cls(category, source_id, int(clip), obj_id)

    def __str__(self) -> str:
        return f"{self.category}_{self.source_id}_{self.clip}_obj_{self.obj_id}"


# ---------------------------------------------------------------- atomic writes

UMASK = os.umask(0)
os.umask(UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    Parent directories are created. The temporary name holds the writer's pid
    (``.<name>.<pid>.<random>.tmp``), so what a killed writer left behind is
    recognised and removed by the next write of the same file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp makes 0600; give the file the usual permissions
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporaries of ``path`` (and SQLite's journals of them) whose writing process is gone."""
    prefix = f".{path.name}."
    with os.scandir(path.parent) as entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(prefix) and name.endswith((".tmp", ".tmp-journal"))):
                continue
            pid = name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and not _process_alive(int(pid)):
                Path(entry.path).unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie (killed, not yet reaped by its new parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (not Linux): kill() said it exists
        return True


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); released on exit or process death."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def check_writable(*directories: str | os.PathLike | tuple[str | os.PathLike, str]) -> None:
    """Create each directory if needed and prove a file can be written in it; else one line naming it.

    Each item is a directory or ``(directory, what)`` (``what`` names it in the message, default
    ``output``). When one fails, the directories this call created are removed again, so a refused
    command leaves nothing behind.
    """
    created: list[Path] = []
    try:
        for item in directories:
            directory, what = (Path(item[0]), item[1]) if isinstance(item, tuple) else (Path(item), "output")
            missing = [p for p in (directory, *directory.parents) if not p.exists()]
            try:
                directory.mkdir(parents=True, exist_ok=True)
                created += missing
                with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-"):
                    pass
            except OSError as e:
                raise PersistbenchError(f"{directory}: {what} directory is not writable ({e.strerror})") from None
    except PersistbenchError:
        for path in sorted(created, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()
        raise


def copy_bounded(src: BinaryIO, dst: BinaryIO, limit: int, name: str) -> int:
    """Copy a stream in 1 MiB chunks, refusing it once more than ``limit`` bytes came; return the bytes copied."""
    total = 0
    while chunk := src.read(1 << 20):
        total += len(chunk)
        if total > limit:
            raise PersistbenchError(f"{name}: larger than the {limit >> 20} MiB allowed; refused")
        dst.write(chunk)
    return total


def write_bytes(path: str | os.PathLike, data: bytes) -> str:
    """Write ``data`` atomically; return its sha256 hex digest."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def write_text(path: str | os.PathLike, text: str) -> str:
    return write_bytes(path, text.encode("utf-8"))


def dump_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> str:
    return write_text(path, dump_json(obj))


def read_json(path: str | os.PathLike) -> Any:
    """Parse a JSON file; a bad file raises a one-line error naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PersistbenchError(f"{path}: cannot read JSON: {e}") from None


def sha256_file(path: str | os.PathLike, progress: Callable[[int], object] | None = None) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks; ``progress(n)`` is called with each chunk's size."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return h.hexdigest()


# ---------------------------------------------------------------- images


def encode_image(image: np.ndarray, fmt: str = "png") -> bytes:
    """Encode an RGB ``(H, W, 3)`` or gray ``(H, W)`` uint8 image; deterministic bytes."""
    import cv2

    if image.dtype != np.uint8:
        raise ValueError(f"images are written as uint8, got {image.dtype}")
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    params = [cv2.IMWRITE_PNG_COMPRESSION, 3] if fmt == "png" else [cv2.IMWRITE_JPEG_QUALITY, 95]
    ok, buf = cv2.imencode(f".{fmt}", image, params)
    if not ok:
        raise ValueError(f"cannot encode image as {fmt}")
    return buf.tobytes()


def write_image(path: str | os.PathLike, image: np.ndarray) -> str:
    """Write an image atomically in the format its suffix names; return the sha256."""
    fmt = Path(path).suffix.lower().lstrip(".").replace("jpeg", "jpg")
    return write_bytes(path, encode_image(image, fmt))


def read_image(path: str | os.PathLike, gray: bool = False) -> np.ndarray:
    """Read an 8-bit image as RGB ``(H, W, 3)`` or, with ``gray``, ``(H, W)`` uint8.

    An RGB read refuses a file that is not 8-bit three-channel colour (a grayscale or
    16-bit frame is a broken frame, not one to convert silently).
    """
    import cv2

    data = np.fromfile(path, np.uint8)
    image = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_UNCHANGED) if data.size else None
    if image is None:
        raise PersistbenchError(f"{path}: not a readable image")
    if gray:
        return image
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        channels = 1 if image.ndim == 2 else image.shape[2]
        raise PersistbenchError(f"{path}: expected an 8-bit RGB image, found {channels} channel(s) of {image.dtype}")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """``(w, h)`` of an image from its header alone (nothing decoded), to bound untrusted files before reading."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.size
    except Image.DecompressionBombError:
        raise PersistbenchError(
            f"{path}: larger than the decompression-bomb limit (2 x {Image.MAX_IMAGE_PIXELS} pixels); refused unread"
        ) from None
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise PersistbenchError(f"{path}: not a readable image ({e})") from None


def list_images(directory: str | os.PathLike) -> list[Path]:
    """Frame or mask files of a directory in lexicographic order.

    Accepts 4- or 5-digit numbering, with or without the ``frame_``/``mask_``
    prefix, PNG or JPG. A missing directory gives an empty list.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _IMAGE_RE.match(p.name))


# ---------------------------------------------------------------- public-format dictionaries


def save_npy_dict(path: str | os.PathLike, data: dict) -> str:
    """Write a dictionary in the public format: a pickled 0-d object array, as the public
    toolkit's ``np.load(..., allow_pickle=...).item()`` reads it.

    Returns the sha256 of the bytes written.
    """
    buf = io.BytesIO()
    np.save(buf, np.array(data, dtype=object), allow_pickle=True)  # safe: writing our own data; reads use load_npy
    return write_bytes(path, buf.getvalue())


# ---------------------------------------------------------------- dataset reading


class View:
    """One view (``view_0`` or ``center``) of a case; everything is read lazily and checked as it is read.

    ``size`` = (w, h) every frame and mask must have (from the case's record), or None: the
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
        got = (image.shape[1], image.shape[0])
        if self.size is None:
            self.size = got
        elif got != self.size:
            raise PersistbenchError(f"{where}: {got[0]}x{got[1]}, expected {self.size[0]}x{self.size[1]}")
        return image

    def frames(self) -> Iterator[np.ndarray]:
        """RGB uint8 ``(H, W, 3)`` frames in order, decoded one at a time."""
        if self.video_path is not None:
            from .video import read_frames

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


def load_dict(path: str | os.PathLike) -> dict:
    """A public-format pickled dictionary through the safe loader; anything else is refused naming the file."""
    data = load_npy(path)
    if not isinstance(data, dict):
        raise PersistbenchError(f"{path}: expected a pickled dictionary, found {type(data).__name__}")
    return data


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
        """(w, h) of every frame and mask, as recorded."""
        size = (self.record or {}).get("size")
        return (int(size[0]), int(size[1])) if size else None

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

    def visibility(self) -> dict:
        """``{view_0_visibility: (T,) float, view_1_visibility: (T,) bool, mode, window_ratio, ...}``, checked."""
        return _load_dict(self.visibility_path, contracts.visibility_problems, self.n_frames)

    def theta_phi(self) -> dict:
        """Per-frame yaw/pitch in degrees of both views, checked."""
        return _load_dict(self.theta_phi_path, contracts.theta_phi_problems, self.n_frames)

    @property
    def n_frames(self) -> int:
        """Frames of the case: as recorded, else as counted in ``view_0``."""
        if self.record is not None and isinstance(self.record.get("n_frames"), int):
            return self.record["n_frames"]
        return self.view("view_0").n_frames

    @property
    def nested(self) -> bool:
        """True for the sharded distribution's ``<subset>/<case_id>/<obj_id>/`` form."""
        return self.path.parent.name == self.case_id


def case_dir(root: str | os.PathLike, subset: str, case_id: str) -> Path:
    """``<root>/<subset>/<case_id>``: where ``download`` writes a case (both names checked)."""
    return child(root, subset, case_id)


def _case_path(directory: Path) -> Path | None:
    """The directory holding the views: the case directory itself or its one ``<obj_id>/`` child."""
    if (directory / VIEWS[0]).is_dir():
        return directory
    if not directory.is_dir():
        return None
    children = [c for c in sorted(directory.iterdir()) if c.is_dir() and (c / VIEWS[0]).is_dir()]
    return children[0] if len(children) == 1 else None


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
        """``(subset, folder name, views directory)`` of every case folder on disk, names unchecked."""
        out = []
        for sub in sorted(self.root.iterdir()):
            if sub.name not in SUBSETS or not sub.is_dir():
                continue
            for d in sorted(sub.iterdir()):
                path = _case_path(d)
                if path is not None:
                    out.append((sub.name, d.name, path))
        return out

    def cases(self, subset: str | None = None) -> list[Case]:
        if self.indexed:
            found = [self._case(s, c) for s, c in sorted(self._records)]
        else:
            found = [Case(self.root, s, c, p) for s, c, p in self.scan() if name_problem(c) is None]
        return [c for c in found if subset is None or c.subset == subset]

    def _case(self, subset: str, case_id: str) -> Case:
        directory = case_dir(self.root, subset, case_id)
        return Case(
            self.root, subset, case_id, _case_path(directory) or directory, self._records.get((subset, case_id))
        )

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
        return self.root / STATE_DIR

    def fingerprint(self) -> str:
        """sha256 of ``cases.jsonl`` (file checksums of every case), or of every case's cameras when absent."""
        if self.cases_jsonl.is_file():
            return sha256_file(self.cases_jsonl)
        h = hashlib.sha256()
        for case in self.cases():
            h.update(f"{case.subset}/{case.case_id}\n".encode())
            for view in VIEWS:
                h.update(case.view(view).camera_path.read_bytes())
        return h.hexdigest()

    def index_rows(self) -> list[dict]:
        return read_index(self.root)

    def records(self) -> list[dict]:
        return read_case_records(self.root)


# ---------------------------------------------------------------- dataset writing


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


def read_index(root: str | os.PathLike) -> list[dict]:
    """Rows of ``data.db`` ordered by (subset, uid); empty when there is no index."""
    path = Path(root) / DB_NAME
    if not path.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        with contextlib.closing(con):
            rows = con.execute("SELECT * FROM data ORDER BY subset, uid").fetchall()
    except sqlite3.Error as e:
        raise PersistbenchError(f"{path}: cannot read the index: {e}") from None
    return [dict(r) for r in rows]


def read_case_records(root: str | os.PathLike) -> list[dict]:
    """Records of ``cases.jsonl``; a malformed line raises an error with its number."""
    path = Path(root) / CASES_JSONL
    if not path.exists():
        return []
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise PersistbenchError(f"{path}:{n}: not JSON: {e.msg}") from None
        if not isinstance(rec, dict) or "uid" not in rec or "subset" not in rec:
            raise PersistbenchError(f"{path}:{n}: a case record needs 'uid' and 'subset'")
        if rec["subset"] not in SUBSETS:
            raise PersistbenchError(f"{path}:{n}: subset: must be one of {', '.join(SUBSETS)}")
        check_name(rec["uid"], f"{path}:{n}: uid")
        records.append(rec)
    return records


def mark_complete(root: str | os.PathLike, row: dict, record: dict) -> None:
    """Mark a case complete: its ``cases.jsonl`` record, then its ``data.db`` row.

    ``row`` holds ``data`` columns (missing ones are NULL); ``record`` must hold
    ``uid`` and ``subset``. Both files are written whole, in (subset, uid) order,
    to a temporary name and renamed into place, so their bytes are a function of
    the complete cases, whatever the completion order, and a row in ``data.db``
    implies its record. Safe to call from several processes: an exclusive file
    lock serialises it.
    """
    root = Path(root)
    unknown = set(row) - set(DATA_COLUMNS)
    if unknown:
        raise ValueError(f"unknown data.db columns: {sorted(unknown)}")
    key = (record["subset"], record["uid"])
    with file_lock(root / STATE_DIR / "index.lock"):
        records = {(r["subset"], r["uid"]): r for r in read_case_records(root)}
        records[key] = record
        lines = [json.dumps(records[k], sort_keys=True, separators=(",", ":")) for k in sorted(records)]
        write_text(root / CASES_JSONL, "".join(line + "\n" for line in lines))
        rows = {(r["subset"], r["uid"]): r for r in read_index(root)}
        rows[key] = row
        _write_index(root / DB_NAME, [rows[k] for k in sorted(rows)])


def _write_index(path: Path, rows: list[dict]) -> None:
    names = list(DATA_COLUMNS)
    with atomic_path(path) as tmp, contextlib.closing(sqlite3.connect(tmp)) as con:
        con.execute(f"CREATE TABLE data ({', '.join(f'{k} {v}' for k, v in DATA_COLUMNS.items())})")
        con.executemany(
            f"INSERT INTO data ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [[r.get(k) for k in names] for r in rows],
        )
        con.commit()


def recorded_sha256(root: str | os.PathLike, subset: str, uid: str) -> str | None:
    """The recipe sha256 of a complete case (its ``data.db`` row), or None; one indexed lookup."""
    path = Path(root) / DB_NAME
    if not path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
            found = con.execute("SELECT recipe_sha256 FROM data WHERE subset = ? AND uid = ?", (subset, uid)).fetchone()
    except sqlite3.Error as e:
        raise PersistbenchError(f"{path}: cannot read the index: {e}") from None
    return found[0] if found else None


# ---------------------------------------------------------------- predictions and results


@dataclass(frozen=True)
class RunLayout:
    """Paths of a prediction run ``runs/<name>/`` and its scores (DESIGN section 7)."""

    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    def case_dir(self, subset: str, case_id: str) -> Path:
        return child(self.root, subset, case_id)

    def frames_dir(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / FRAMES_DIR

    def masks_dir(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / MASKS_DIR

    def frame_path(self, subset: str, case_id: str, index: int) -> Path:
        return self.frames_dir(subset, case_id) / frame_name(index)

    def mask_path(self, subset: str, case_id: str, index: int) -> Path:
        return self.masks_dir(subset, case_id) / mask_name(index)

    def case_json(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / "case.json"

    def case_record(self, subset: str, case_id: str) -> dict | None:
        """The case's ``case.json`` when the case is complete (it is written last), else None."""
        try:
            info = read_json(self.case_json(subset, case_id))
        except PersistbenchError:
            return None
        return info if isinstance(info, dict) and info.get("uid") == case_id else None

    @property
    def log_dir(self) -> Path:
        """Per-case logs of external (``cmd:``) models: ``logs/<case_id>.log``."""
        return self.root / "logs"

    def scores_dir(self, protocol: str) -> Path:
        return child(self.root, "scores", protocol)

    def case_scores(self, protocol: str, subset: str, case_id: str) -> Path:
        return child(self.scores_dir(protocol), subset, f"{case_id}.json")

    def results_json(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "results.json"

    def summary_json(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "summary.json"

    def leaderboard_csv(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "leaderboard.csv"

    def summary_md(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "summary.md"

    def public_prediction_dir(self, uid: str) -> Path:
        """The public toolkit's inference output: ``<uid>/prediction/00000.png``."""
        return child(self.root, uid, "prediction")


# ---------------------------------------------------------------- the sharded distribution


SHARD_RE = re.compile(r"^shard-\d{4}\.tar$")
_PAIR_FILE_RE = (
    r"(?:(?:view_0|center)/(?:video\.mp4|camera_params\.npy|masks/mask_\d{4,5}\.png)"
    r"|visibility_dict\.npy|theta_phi_values\.npy|estimate_input_coverage\.json)"
)
_NAME = NAME_PATTERN
# A member of a shard or a sample file: <subset>/<case_id>/<obj_id>/<pair file>, or one of its directories.
PAIR_MEMBER_RE = re.compile(
    rf"^(?:dynamic|static)(?:/{_NAME}(?:/{_NAME}(?:/(?:view_0|center)(?:/masks)?|/{_PAIR_FILE_RE})?)?)?$"
)
PAIR_FILE_RE = re.compile(rf"^(?:dynamic|static)/{_NAME}/{_NAME}/{_PAIR_FILE_RE}$")


@dataclass(frozen=True)
class DistributionLayout:
    """Paths of the sharded distribution (``pack`` writes it, ``fetch`` reads it)::

    shards/shard-0000.tar ...  each expands to <subset>/<case_id>/<obj_id>/...
    shards/checksums.json      {name: {sha256, bytes}} of every shard and sample file
    index.json                 pair_id -> {shard, subset, n_frames}
    pairs.csv                  the same, one row per pair
    samples/                   a few pairs, unarchived
    croissant.json             Croissant 1.0 metadata with the RAI fields
    pack.json                  encoder settings and provenance
    """

    root: Path

    @property
    def shards_dir(self) -> Path:
        return self.root / "shards"

    def shard(self, index: int) -> Path:
        return self.shards_dir / f"shard-{index:04d}.tar"

    @property
    def checksums_json(self) -> Path:
        return self.shards_dir / "checksums.json"

    @property
    def index_json(self) -> Path:
        return self.root / "index.json"

    @property
    def pairs_csv(self) -> Path:
        return self.root / "pairs.csv"

    @property
    def samples_dir(self) -> Path:
        return self.root / "samples"

    @property
    def croissant_json(self) -> Path:
        return self.root / "croissant.json"

    @property
    def pack_json(self) -> Path:
        return self.root / "pack.json"


def pair_dir(subset: str, case_id: str) -> str:
    """A pair's directory in the distribution, ``<subset>/<case_id>/<obj_id>`` (relative, ``/``)."""
    check_name(subset, "subset")
    check_name(case_id, "case id")
    return f"{subset}/{case_id}/{check_name(CaseId.parse(case_id).obj_id, f'{case_id}: object id')}"
