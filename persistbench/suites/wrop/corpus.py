"""The WROP corpus where it lies: a local folder, an ``http(s)`` URL or a Hub dataset, read in place.

A corpus root holds ``train/checksums.txt`` and one tar per task (:mod:`.layout`). Nothing is
extracted: each archive is indexed from its headers once (:mod:`persistbench.io.tarindex`; the index
is cached beside a local archive, or in the index cache for a remote one, keyed by the archive's
size and its sha256 from ``checksums.txt``) and its members are read by offset; videos of a local
archive are decoded in place by ffmpeg, those of a remote one fetched by one exact range read.
Reading N samples of a remote archive costs the header walk (once) and those samples' bytes,
never the archive.

In-place reading checks every member name, header checksum and the member count that
``checksums.txt`` gives; an archive's sha256 needs all its bytes, so ``persistbench verify``
and ``persistbench fetch`` check it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.io import hub, web
from persistbench.io.files import open_regular, parse_json
from persistbench.io.safeload import load_npy_bytes
from persistbench.io.tarindex import REMOTE_CHUNK, ByteSource, HttpRange, LocalFile, TarIndex, build_index, cached_index
from persistbench.suites.wrop import layout
from persistbench.suites.wrop.taxonomy import taxonomy

MAX_CHECKSUMS = 1 << 20
MAX_TEXT = 64 << 10  # prompt.txt
MAX_METADATA = 1 << 20
MAX_TRAJECTORY = 64 << 20  # decompressed, all arrays together
MAX_VIDEO = 1 << 30
MAX_ARCHIVE_MEMBERS = 10_000_000
_SHA256_RE = re.compile(r"[0-9a-f]{64}")

CATEGORIES = tuple(taxonomy().family_names)  # the six families, in the generator's order


def category_id(value: object) -> str | None:
    """A category named as in :data:`CATEGORIES`, in any case, with spaces or hyphens for ``_``; else None."""
    if not isinstance(value, str):
        return None
    slug = re.sub(r"[\s-]+", "_", value.strip().lower())
    return slug if slug in CATEGORIES else None


# ---------------------------------------------------------------- where the corpus lies


class Location:
    """A corpus root: ``read(path)`` small files, ``source(path)`` an archive's bytes; ``id`` names it."""

    id: str
    local: bool = False

    def read(self, path: str, limit: int) -> bytes:
        raise NotImplementedError

    def source(self, path: str) -> ByteSource:
        raise NotImplementedError


class LocalCorpus(Location):
    local = True

    def __init__(self, root: Path):
        self.root = root
        self.id = str(root.resolve())

    def read(self, path: str, limit: int) -> bytes:
        file = self.root / path
        try:
            with open_regular(file) as f:  # a FIFO or a device in the generator's output is refused, not read
                data = f.read(limit + 1)
        except OSError as e:
            raise PersistbenchError(f"{file}: cannot read ({e.strerror})") from None
        if len(data) > limit:
            raise PersistbenchError(f"{file}: larger than {limit} bytes")
        return data

    def source(self, path: str) -> LocalFile:
        return LocalFile(self.root / path)


class HttpCorpus(Location):
    """A corpus served over ``http(s)``: archives read through Range requests."""

    def __init__(self, url: str):
        self.base = url.rstrip("/") + "/"
        self.id = self.base

    def read(self, path: str, limit: int) -> bytes:
        return web.request(self.base + path, limit).body

    def source(self, path: str) -> HttpRange:
        return HttpRange(self.base + path)


class HubFile(ByteSource):
    """A file of a Hub dataset at a fixed commit, read through huggingface_hub's file system (range reads)."""

    read_ahead = REMOTE_CHUNK

    def __init__(self, fs, repo: str, commit: str, path: str):
        self.fs, self.repo, self.commit, self.file = fs, repo, commit, path
        self.path = f"datasets/{repo}@{commit}/{path}"
        self.name = f"hf://{self.path}"
        self._file = None
        with hub.asking(f"{self.name}: cannot read"):
            self.size = int(fs.info(self.path)["size"])

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0 or offset >= self.size:
            return b""
        with hub.asking(f"{self.name}: bytes {offset}-{offset + n - 1}"):
            if self._file is None:  # no read-ahead cache: each read is one Range request of exactly its bytes
                self._file = self.fs.open(self.path, "rb", cache_type="none")
            self._file.seek(offset)
            return self._file.read(min(n, self.size - offset))

    @property
    def location(self) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, self.file, repo_type="dataset", revision=self.commit)


class HubCorpus(Location):
    """``hf://datasets/<owner>/<name>[@revision]``: the revision is resolved to a commit once, so that every
    read of a run sees the same files."""

    def __init__(self, url: str):
        from huggingface_hub import HfFileSystem

        m = re.fullmatch(r"hf://datasets/([\w.-]+/[\w.-]+)(?:@([\w./-]+))?/?", url)
        if not m:
            raise UsageError(f"{url}: a Hub corpus is hf://datasets/<owner>/<name>[@revision]")
        self.repo, revision = m.group(1), m.group(2)
        self.commit = hub.dataset_info(self.repo, revision).sha
        self.fs = HfFileSystem()
        self.id = f"hf://datasets/{self.repo}@{self.commit}"

    def read(self, path: str, limit: int) -> bytes:
        src = self.source(path)
        if src.size > limit:
            raise PersistbenchError(f"{src.name}: larger than {limit} bytes")
        return src.read(0, src.size)

    def source(self, path: str) -> HubFile:
        return HubFile(self.fs, self.repo, self.commit, path)


def open_location(root: str | os.PathLike) -> Location:
    """The corpus at ``root``: a folder, an ``http(s)://`` URL or ``hf://datasets/<repo>[@revision]``."""
    text = str(root)
    if text.startswith(("http://", "https://")):
        return HttpCorpus(text)
    if text.startswith("hf://"):
        return HubCorpus(text)
    if "://" in text:
        raise UsageError(f"{text}: a corpus is a folder, an http(s):// URL or hf://datasets/<repo>[@revision]")
    return LocalCorpus(Path(root))


# ---------------------------------------------------------------- checksums.txt


@dataclass(frozen=True)
class ArchiveEntry:
    """One line of ``checksums.txt``."""

    task: str
    sha256: str
    members: int


def parse_checksums(data: bytes, where: str) -> dict[str, ArchiveEntry]:
    """``checksums.txt``: ``<sha256> <file name> <member count>`` per line (blank lines and ``#`` comments
    skipped); task -> entry, every line checked."""
    out: dict[str, ArchiveEntry] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PersistbenchError(f"{where}: not UTF-8 text") from None
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 3:
            raise PersistbenchError(f"{where}:{n}: expected '<sha256> <file name> <member count>'")
        digest, name, count = fields
        task = layout.task_of_archive(name)
        if task is None:
            raise PersistbenchError(f"{where}:{n}: {name!r} is not an archive name (<task>_task.tar)")
        if not _SHA256_RE.fullmatch(digest):
            raise PersistbenchError(f"{where}:{n}: {digest!r} is not a sha256")
        if not count.isdigit() or not 0 < int(count) <= MAX_ARCHIVE_MEMBERS:
            raise PersistbenchError(f"{where}:{n}: member count {count!r} is not in [1, {MAX_ARCHIVE_MEMBERS}]")
        if task in out:
            raise PersistbenchError(f"{where}:{n}: {name} listed twice")
        out[task] = ArchiveEntry(task, digest, int(count))
    if not out:
        raise PersistbenchError(f"{where}: lists no archive")
    return out


# ---------------------------------------------------------------- samples


SPLIT_METHODS = ("midpoint", "deepest_occlusion", "midpoint_fallback", "manifest_event_boundary")
BOUNDARY_METHODS = ("before_event", "overlap_event")  # a manifest_event_boundary split's boundary_method
INDEX_KEYS = ("input_start_index", "input_end_index", "target_start_index", "target_end_index")
PAD_KEYS = ("input_pad_start_frames", "target_pad_end_frames")


@dataclass(frozen=True)
class VideoSplit:
    """``metadata.json``'s ``video_split`` as the generator writes it: which of the 120 rendered frames (0-based,
    ends exclusive) became the input and the target clip, and how each was padded to its fixed length (the
    first input frame repeated in front, the last target frame repeated behind). Under ``overlap_event`` the
    contact frame ends the input and starts the target (``seam_overlap_frames``, 1)."""

    method: str
    boundary_method: str | None  # before_event or overlap_event under manifest_event_boundary, else None
    input_start_index: int
    input_end_index: int
    target_start_index: int
    target_end_index: int
    input_pad_start_frames: int
    target_pad_end_frames: int
    seam_overlap_frames: int

    @property
    def policy(self) -> str:
        """The split's rule in one word: the boundary method of a manifest split, else the method."""
        return self.boundary_method or self.method

    @property
    def target_frames(self) -> int:
        """The target clip's length: its source frames and the end padding."""
        return self.target_end_index - self.target_start_index + self.target_pad_end_frames

    def scored(self, n_target: int) -> range:
        """Target frames that are predictions proper: neither the seam overlap nor the end padding."""
        return range(min(self.seam_overlap_frames, n_target), max(0, n_target - self.target_pad_end_frames))


def video_split(meta: dict, where: str) -> VideoSplit:
    """``meta["video_split"]`` read and checked (:class:`VideoSplit`); extra keys ignored, a missing or
    inconsistent one refused naming ``where``."""
    split = meta.get("video_split")
    if not isinstance(split, dict):
        raise PersistbenchError(f"{where}: no video_split object")
    method = split.get("method")
    if method not in SPLIT_METHODS:
        raise PersistbenchError(f"{where}: video_split.method {method!r} is not one of {list(SPLIT_METHODS)}")
    boundary = None
    if method == "manifest_event_boundary":
        boundary = split.get("boundary_method")
        if boundary not in BOUNDARY_METHODS:
            raise PersistbenchError(
                f"{where}: video_split.boundary_method {boundary!r} is not one of {list(BOUNDARY_METHODS)}"
            )
    values = {}
    for key in (*INDEX_KEYS, *PAD_KEYS, "seam_overlap_frames"):
        if key not in split and key != "seam_overlap_frames":  # the generator writes a seam only where there is one
            raise PersistbenchError(f"{where}: video_split.{key} is missing")
        v = split.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10_000:
            raise PersistbenchError(f"{where}: video_split.{key} must be an integer in [0, 10000]")
        values[key] = v
    if values["input_start_index"] >= values["input_end_index"]:
        raise PersistbenchError(f"{where}: video_split's input [input_start_index, input_end_index) is empty")
    if values["target_start_index"] >= values["target_end_index"]:
        raise PersistbenchError(f"{where}: video_split's target [target_start_index, target_end_index) is empty")
    overlap = max(0, values["input_end_index"] - values["target_start_index"])
    if values["seam_overlap_frames"] != overlap:
        raise PersistbenchError(
            f"{where}: video_split.seam_overlap_frames is {values['seam_overlap_frames']}, but the input ends at "
            f"{values['input_end_index']} and the target starts at {values['target_start_index']}"
        )
    return VideoSplit(method, boundary, **values)


# trajectory.npz as the generator writes it (np.savez_compressed, strings as fixed-width unicode): name -> (dtype
# kinds, shape with "T" frames and "N" bodies; "7N"/"6N": N*7, N*6 per frame)
TRAJECTORY_KEYS = {
    "xpos": ("f", ("T", "N", 3)),
    "xquat": ("f", ("T", "N", 4)),  # (w, x, y, z)
    "qpos": ("f", ("T", "7N")),
    "qvel": ("f", ("T", "6N")),
    "body_names": ("U", ("N",)),
    "body_roles": ("U", ("N",)),
    "body_shapes": ("U", ("N",)),
    "body_colors": ("U", ("N",)),
    "is_target": ("b", ("N",)),
    "fps": ("fiu", ()),
    "frame_start": ("iu", ()),
    "frame_end": ("iu", ()),
}


def check_trajectory(arrays: dict[str, np.ndarray], where: str) -> None:
    """Every key of :data:`TRAJECTORY_KEYS` present with its kind and a shape that agrees with the others
    (extra keys ignored); one line naming ``where`` and the key otherwise."""
    missing = [k for k in TRAJECTORY_KEYS if k not in arrays]
    if missing:
        raise PersistbenchError(f"{where}: lacks {', '.join(missing)}")
    xpos = arrays["xpos"]
    if xpos.ndim != 3:
        raise PersistbenchError(f"{where}: xpos must be [T, N, 3], not {list(xpos.shape)}")
    t, n = xpos.shape[:2]
    sizes = {"T": t, "N": n, "7N": 7 * n, "6N": 6 * n}
    for key, (kinds, shape) in TRAJECTORY_KEYS.items():
        a = arrays[key]
        want = [sizes.get(d, d) for d in shape]
        if a.dtype.kind not in kinds or list(a.shape) != want:
            raise PersistbenchError(
                f"{where}: {key} is {a.dtype} {list(a.shape)}, the generator writes kind {kinds!r} {want}"
            )


class TaskSamples:
    """One task's samples, wherever they lie: :meth:`read` a member's bytes, :meth:`video` an ffmpeg input.
    Subclasses say where (:class:`Archive`: a tar; :class:`TaskFolder`: the generator's folders)."""

    name: str  # how messages name the task's container
    task: str
    samples: tuple[str, ...]  # sample names, <task>_<NNNN>, sorted

    def __init__(self):
        self._metadata: dict[str, dict] = {}  # sample -> its metadata.json, parsed once

    def read(self, sample: str, file: str, limit: int) -> bytes:
        raise NotImplementedError

    def where(self, sample: str, file: str) -> str:
        raise NotImplementedError

    def video(self, sample: str, file: str) -> contextlib.AbstractContextManager[str]:
        raise NotImplementedError

    def text(self, sample: str, file: str = layout.PROMPT) -> str:
        try:
            return self.read(sample, file, MAX_TEXT).decode("utf-8")
        except UnicodeDecodeError:
            raise PersistbenchError(f"{self.where(sample, file)}: not UTF-8 text") from None

    def metadata(self, sample: str) -> dict:
        if sample in self._metadata:
            return self._metadata[sample]
        data = parse_json(self.read(sample, layout.METADATA, MAX_METADATA), self.where(sample, layout.METADATA))
        if not isinstance(data, dict):
            raise PersistbenchError(f"{self.where(sample, layout.METADATA)}: must hold a JSON object")
        self._metadata[sample] = data
        return data

    def video_split(self, sample: str) -> VideoSplit:
        return video_split(self.metadata(sample), self.where(sample, layout.METADATA))

    def trajectory(self, sample: str) -> dict[str, np.ndarray]:
        """``trajectory.npz`` loaded with ``allow_pickle=False``, its decompressed size bounded, its keys and
        shapes checked (:func:`check_trajectory`)."""
        where = self.where(sample, layout.TRAJECTORY)
        data = self.read(sample, layout.TRAJECTORY, MAX_TRAJECTORY)
        out, left = {}, MAX_TRAJECTORY
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for info in z.infolist():
                    name = info.filename.removesuffix(".npy")
                    if info.flag_bits & 0x1:
                        raise PersistbenchError(f"{where}: {name}: an encrypted member")
                    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                        raise PersistbenchError(f"{where}: {name}: compression method {info.compress_type} refused")
                    if name in out:  # numpy would keep the last silently
                        raise PersistbenchError(f"{where}: {name}: a member twice")
                    with z.open(info) as member:  # read bounded: the declared sizes may lie
                        raw = member.read(left + 1)
                    left -= len(raw)
                    if left < 0:
                        raise PersistbenchError(f"{where}: decompresses to more than {MAX_TRAJECTORY >> 20} MiB")
                    out[name] = load_npy_bytes(raw, f"{where}: {name}", objects=False)
                    if out[name].dtype.kind in "fc" and not np.isfinite(out[name]).all():
                        raise PersistbenchError(f"{where}: {name}: holds NaN or infinite values")
        except (ValueError, OSError, zipfile.BadZipFile, EOFError, NotImplementedError, zlib.error) as e:
            raise PersistbenchError(f"{where}: unsafe or malformed .npz: {e}".splitlines()[0]) from None
        check_trajectory(out, where)
        return out


class Archive(TaskSamples):
    """One task's archive, indexed."""

    def __init__(self, index: TarIndex, task: str):
        super().__init__()
        self.index, self.task = index, task
        self.name = index.source.name
        rule = layout.MemberRule(task)
        folders: dict[str, dict[str, str]] = {}
        shards: dict[str, int] = {}
        for member in index.members:
            shard, sample, file = rule.split(member)
            if shards.setdefault(sample, shard) != shard:
                raise PersistbenchError(f"{self.name}: sample {sample} is in two shards; refused")
            folders.setdefault(sample, {})[file] = member
        for sample, files in folders.items():
            for file in layout.MEMBERS:
                if file not in files:
                    missing = layout.member_path(shards[sample], task, sample, file)
                    raise PersistbenchError(f"{self.name}: member {missing} is missing")
        self.members = folders
        self.samples = tuple(sorted(folders))

    def member(self, sample: str, file: str) -> str:
        return self.members[sample][file]

    def read(self, sample: str, file: str, limit: int) -> bytes:
        return self.index.read(self.member(sample, file), limit)

    def where(self, sample: str, file: str) -> str:
        """How messages name a member: ``<archive>: <member>``."""
        return f"{self.name}: {self.member(sample, file)}"

    @contextlib.contextmanager
    def video(self, sample: str, file: str) -> Iterator[str]:
        """An ffmpeg input for a video member: in place (``subfile``) in a local archive; from a remote one,
        its bytes fetched in one exact range read into a temporary file (removed on exit), so that
        nothing else of the archive is requested and the source's own authentication is used."""
        if isinstance(self.index.source, LocalFile):
            yield self.index.ffmpeg_input(self.member(sample, file))
            return
        data = self.read(sample, file, MAX_VIDEO)
        with tempfile.TemporaryDirectory(prefix="persistbench-wrop-") as tmp:
            path = Path(tmp) / file
            path.write_bytes(data)
            yield str(path)


class TaskFolder(TaskSamples):
    """One task of the generator's loose output (``object-permanence generate --out OUT``), read in place:
    ``OUT/<task>_task/<task>_<NNNN>/`` with the five files of :data:`layout.MEMBERS`. A sample with an
    ``ERROR.txt`` (its render failed) or without one of the five files is skipped, with the reason kept in
    :attr:`skipped`; a name outside the layout, a link or anything but a folder or a regular file is refused."""

    def __init__(self, root: Path, task: str):
        super().__init__()
        self.task, self.folder = task, root / layout.task_folder(task)
        self.name = str(self.folder)
        rule = layout.FolderRule(task)
        samples, self.skipped = [], {}
        for entry in _listing(self.folder):
            if entry.name.startswith("."):
                continue
            if rule.problem(entry.name) or not _plain(entry, dir=True):
                raise PersistbenchError(f"{entry}: {rule.problem(entry.name) or 'not a folder (links are refused)'}")
            names = set()
            for f in _listing(entry):
                if f.name.startswith(".") or f.name == layout.ERROR:  # the generator's hidden leftovers, its errors
                    names.add(f.name)
                    continue
                if f.name not in layout.MEMBERS or not _plain(f, dir=False):
                    why = "not a regular file (links are refused)" if f.name in layout.MEMBERS else "not a WROP file"
                    raise PersistbenchError(f"{f}: {why} ({', '.join(layout.MEMBERS)}, {layout.ERROR})")
                names.add(f.name)
            if layout.ERROR in names:
                self.skipped[entry.name] = f"{layout.ERROR} (the generator failed to render it)"
            elif missing := [m for m in layout.MEMBERS if m not in names]:
                self.skipped[entry.name] = f"no {', '.join(missing)}"
            else:
                samples.append(entry.name)
        self.samples = tuple(sorted(samples))

    def path(self, sample: str, file: str) -> Path:
        return self.folder / sample / file

    def read(self, sample: str, file: str, limit: int) -> bytes:
        return LocalCorpus(self.folder).read(f"{sample}/{file}", limit)

    def where(self, sample: str, file: str) -> str:
        return str(self.path(sample, file))

    @contextlib.contextmanager
    def video(self, sample: str, file: str) -> Iterator[str]:
        yield str(self.path(sample, file))


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as e:
        raise PersistbenchError(f"{folder}: cannot list ({e.strerror})") from None


def _plain(path: Path, dir: bool) -> bool:
    """A real folder (``dir``) or regular file, not a link to one."""
    return not path.is_symlink() and (path.is_dir() if dir else path.is_file())


def loose_tasks(root: Path) -> list[str]:
    """The tasks of the generator's loose output at ``root``: its ``<task>_task`` folders (other entries
    ignored); one named so that is a link or not a folder is refused, not skipped."""
    if not root.is_dir():
        return []
    tasks = []
    for entry in _listing(root):
        if task := layout.task_of_folder(entry.name):
            if not _plain(entry, dir=True):
                raise PersistbenchError(f"{entry}: a task folder that is not a folder (links are refused)")
            tasks.append(task)
    return sorted(tasks)


def open_archive(location: Location, entry: ArchiveEntry) -> Archive:
    """The task's archive, indexed (from the cache when it was made for this archive), its member count checked."""
    path = layout.archive_path(entry.task)
    source = location.source(path)
    index = cached_index(
        source, entry.sha256, layout.MemberRule(entry.task).problem, layout.index_cache_path(entry.sha256)
    )
    if len(index.members) != entry.members:
        raise PersistbenchError(f"{source.name}: {len(index.members)} members, {layout.CHECKSUMS} says {entry.members}")
    return Archive(index, entry.task)


def build_archive(source: ByteSource, task: str) -> Archive:
    """An archive indexed from its headers now (no cache), for checks of a whole archive."""
    return Archive(build_index(source, layout.MemberRule(task).problem), task)


def pick(task: str, samples: list[str], per_task: int | None) -> list[str]:
    """``per_task`` samples of a task (all when None), sorted: those with the smallest
    ``sha256("<task>/<sample>")``, so the choice depends on the task and its samples only, and a
    larger ``per_task`` keeps every sample a smaller one picked."""
    if per_task is None or per_task >= len(samples):
        return sorted(samples)
    ranked = sorted(samples, key=lambda s: hashlib.sha256(f"{task}/{s}".encode()).hexdigest())
    return sorted(ranked[:per_task])


def match_tasks(tasks: list[str], patterns: tuple[str, ...] | None, where: str) -> list[str]:
    """The tasks named by ``patterns`` (names or globs; all when None); a pattern that names none is an error."""
    if not patterns:
        return sorted(tasks)
    chosen = set()
    for p in patterns:
        hits = fnmatch.filter(tasks, p)
        if not hits:
            raise UsageError(f"--tasks {p}: no such task in {where}")
        chosen.update(hits)
    return sorted(chosen)


def checksums(location: Location) -> dict[str, ArchiveEntry]:
    """The corpus's ``checksums.txt``, read and checked."""
    return parse_checksums(location.read(layout.CHECKSUMS, MAX_CHECKSUMS), f"{location.id}/{layout.CHECKSUMS}")


def sha256_of(source: ByteSource, chunk: int = 8 << 20) -> str:
    """The sha256 of every byte of an archive, read in ``chunk``-byte pieces."""
    h = hashlib.sha256()
    for offset in range(0, source.size, chunk):
        data = source.read(offset, min(chunk, source.size - offset))
        if not data:
            raise PersistbenchError(f"{source.name}: truncated at byte {offset}")
        h.update(data)
    return h.hexdigest()
