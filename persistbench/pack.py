"""``persistbench pack``: a reconstructed dataset as the sharded distribution.

Each case becomes a pair ``<subset>/<case_id>/<obj_id>/`` with both views'
frames as H.264 MP4 (:data:`persistbench.video.H264_SETTINGS`), masks as PNG
and the pickled dictionaries copied byte for byte. Pairs are packed whole into
tar shards of about ``shard_size`` bytes, in dataset order, with fixed member
metadata (mtime 0, uid/gid 0, modes 644/755, sorted names), so the same input
gives byte-identical shards. Everything is written into a temporary sibling
of ``out`` and renamed into place at the end: an interrupted pack leaves nothing.
"""

from __future__ import annotations

import contextlib
import csv
import io
import multiprocessing
import os
import re
import shutil
import tarfile
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import __version__, croissant
from .dataset import Case, Dataset
from .errors import PersistbenchError
from .files import UMASK, sha256_file, write_json, write_text
from .index import read_case_records
from .layout import (
    CAMERA_NAME,
    COVERAGE_NAME,
    MASKS_DIR,
    THETA_PHI_NAME,
    VIDEO_NAME,
    VIEWS,
    VISIBILITY_NAME,
    DistributionLayout,
    mask_name,
    pair_dir,
)
from .runner import die_with_parent
from .video import H264_SETTINGS, encode_video, ffmpeg_exe

# Full-resolution chroma: 4:2:0 costs textured frames up to 5 dB of PSNR (worst frame of the sample:
# 32.9 dB against 38.4 dB at about the same size). Decoders: ffmpeg, OpenCV, PyAV; not all browsers.
PACK_H264 = {**H264_SETTINGS, "pix_fmt": "yuv444p"}
DEFAULT_FPS = 30.0  # for datasets without cases.jsonl (its records carry the source frame rate)


def parse_size(text: str) -> int:
    """``"1.2GB"``, ``"500MB"``, ``"64KiB"`` or a number of bytes -> bytes."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    t = text.strip().upper()
    number = t.rstrip("KMGIB")
    try:
        value = float(number) * units[t[len(number) :]]
    except (ValueError, KeyError):
        raise PersistbenchError(f"--shard-size {text!r}: expected a size such as 1.2GB, 500MB or 1048576") from None
    if value < 1:
        raise PersistbenchError(f"--shard-size {text!r}: must be positive")
    return int(value)


@dataclass(frozen=True)
class Pair:
    pair_id: str  # the case id
    subset: str
    n_frames: int
    files: list[tuple[str, Path]]  # (member name, staged file), sorted by name

    @property
    def tar_bytes(self) -> int:
        """Bytes the pair takes in a tar: a 512-byte header per member plus its data in 512-byte blocks."""
        return sum(512 + -(-path.stat().st_size // 512) * 512 for _, path in self.files)


def _stage_pair(case: Case, fps: float, staging: Path) -> Pair:
    """Write one case's pair files under ``staging/<pair dir>/``."""
    rel = pair_dir(case.subset, case.case_id)
    base = staging / rel
    for name in VIEWS:
        view = case.view(name)
        (base / name / MASKS_DIR).mkdir(parents=True, exist_ok=True)
        if view.video_path is not None:
            shutil.copyfile(view.video_path, base / name / VIDEO_NAME)
        else:
            encode_video(base / name / VIDEO_NAME, view.frames(), fps, PACK_H264)
        for i, path in enumerate(view.mask_paths):
            if path.suffix.lower() != ".png":
                raise PersistbenchError(f"{path}: masks must be PNG to be packed")
            shutil.copyfile(path, base / name / MASKS_DIR / mask_name(i))
        shutil.copyfile(view.camera_path, base / name / CAMERA_NAME)
    for name in (VISIBILITY_NAME, THETA_PHI_NAME, COVERAGE_NAME):
        if (case.path / name).is_file():
            shutil.copyfile(case.path / name, base / name)
    files = sorted((p.relative_to(staging).as_posix(), p) for p in base.rglob("*") if p.is_file())
    return Pair(case.case_id, case.subset, case.n_frames, files)


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_shard(path: Path, pairs: list[Pair]) -> None:
    """A tar of the pairs' files, regular files only, with fixed metadata (byte-reproducible)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for pair in pairs:
            for name, file in pair.files:
                with open(file, "rb") as f:
                    tar.addfile(_member(name, file.stat().st_size), f)


def assign_shards(pairs: list[Pair], shard_size: int) -> list[list[Pair]]:
    """Pairs in order, a new shard whenever the next pair would push the current one past ``shard_size``."""
    shards: list[list[Pair]] = [[]]
    used = 0
    for pair in pairs:
        size = pair.tar_bytes
        if shards[-1] and used + size > shard_size:
            shards.append([])
            used = 0
        shards[-1].append(pair)
        used += size
    return shards


def pick_samples(pairs: list[Pair], n: int) -> list[Pair]:
    """``n`` pairs taking the subsets in turn (first of each, then second of each, ...)."""
    rank: dict[str, int] = {}
    keyed = []
    for i, pair in enumerate(pairs):
        rank[pair.subset] = rank.get(pair.subset, -1) + 1
        keyed.append((rank[pair.subset], pair.subset, i))
    return [pairs[i] for _, _, i in sorted(keyed)[:n]]


def _stage_all(cases: list[Case], fps: dict[str, float], staging: Path, workers: int, progress: bool) -> list[Pair]:
    """Every case's pair, in order; ``workers`` processes encode in parallel (each pair on its own, so the bytes
    do not depend on the number of workers)."""
    from tqdm import tqdm

    args = list(zip(*[(c, fps.get(c.case_id, DEFAULT_FPS), staging) for c in cases]))
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=len(cases), desc="pack", unit="pair", disable=not progress))
        if workers > 1:
            ctx = multiprocessing.get_context("spawn")
            pool = stack.enter_context(
                ProcessPoolExecutor(workers, ctx, initializer=die_with_parent, initargs=(os.getpid(),))
            )
        pairs = []
        for pair in pool.map(_stage_pair, *args) if workers > 1 else map(_stage_pair, *args):
            pairs.append(pair)
            bar.update(1)
        return pairs


def pack(
    root: str | Path,
    out: str | Path,
    shard_size: int = 1_200_000_000,
    samples: int = 4,
    date: str | None = None,
    workers: int = 1,
    progress: bool = False,
) -> DistributionLayout:
    """Pack the dataset at ``root`` into the distribution at ``out`` (which must not exist or be empty).

    ``date`` (``YYYY-MM-DD``) is the publication date written to ``croissant.json``; ``workers``
    encode pairs in parallel processes.
    """
    ds = Dataset(root)
    out = Path(out)
    if date is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise PersistbenchError(f"--date {date!r}: expected YYYY-MM-DD")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PersistbenchError(f"{out}: exists and is not empty; pack writes a new distribution")
    cases = ds.cases()
    if not cases:
        raise PersistbenchError(f"{ds.root}: no cases to pack")
    fps = {r["uid"]: float(r.get("source", {}).get("fps") or DEFAULT_FPS) for r in read_case_records(ds.root)}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~UMASK)  # mkdtemp makes it private
        dist = DistributionLayout(tmp)
        staging = tmp / ".staging"
        pairs = _stage_all(cases, fps, staging, workers, progress)
        checksums, index = {}, {}
        dist.shards_dir.mkdir()
        for k, group in enumerate(assign_shards(pairs, shard_size)):
            path = dist.shard(k)
            write_shard(path, group)
            checksums[path.name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
            for pair in group:
                index[pair.pair_id] = {"shard": path.name, "subset": pair.subset, "n_frames": pair.n_frames}
        for pair in pick_samples(pairs, samples):
            for name, file in pair.files:
                target = dist.samples_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)
                checksums[target.relative_to(tmp).as_posix()] = {
                    "sha256": sha256_file(target),
                    "bytes": target.stat().st_size,
                }
        shutil.rmtree(staging)
        write_json(dist.checksums_json, checksums)
        write_json(dist.index_json, index)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["pair_id", "shard", "subset", "n_frames"])
        for pair_id, row in index.items():
            writer.writerow([pair_id, row["shard"], row["subset"], row["n_frames"]])
        write_text(dist.pairs_csv, buf.getvalue())
        write_json(
            dist.pack_json,
            {
                "toolkit_version": __version__,
                "format": "persistbench-shards-v1",
                "encoder": {**PACK_H264, "ffmpeg": Path(ffmpeg_exe()).name},
                "masks": "PNG, uint8 0/255",
                "shard_size": shard_size,
                "pairs": len(pairs),
                "shards": sorted(k for k in checksums if "/" not in k),
            },
        )
        write_json(dist.croissant_json, croissant.describe(dist, checksums, index, date))
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return DistributionLayout(out)
