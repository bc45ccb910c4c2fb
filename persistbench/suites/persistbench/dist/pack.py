"""``persistbench pack``: a reconstructed dataset as the sharded distribution.

Each case becomes a pair ``<subset>/<case_id>/<obj_id>/`` with both views'
frames as H.264 MP4 (:data:`persistbench.io.video.H264_SETTINGS`), masks as PNG
and the pickled dictionaries copied byte for byte. Pairs are packed whole into
tar shards of about ``shard_size`` bytes, in dataset order, with fixed member
metadata (mtime 0, uid/gid 0, modes 644/755, sorted names), so the same input
gives byte-identical shards.

Encoding the pairs is the costly part and runs on an executor, one case per
call, each pair staged under ``.<out>.pack/`` (beside ``out``) and renamed into
place whole: a rerun keeps the pairs staged before, and ``--shard K/N`` on N
machines stages one part each. Assembling (the tars, checksums, index and
metadata) happens once every pair is staged, in a temporary sibling of
``out`` renamed into place at the end; the staging folder goes with it.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from persistbench import __version__
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import MASKS_DIR
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor, Shard, check_sharding
from persistbench.io.files import UMASK, sha256_file, write_bytes, write_json, write_text
from persistbench.io.names import remove_tree
from persistbench.io.video import H264_SETTINGS, encode_video, ffmpeg_exe
from persistbench.suites.persistbench.dataset import Case, Dataset
from persistbench.suites.persistbench.dist import croissant
from persistbench.suites.persistbench.index import read_case_records
from persistbench.suites.persistbench.layout import (
    CAMERA_NAME,
    COVERAGE_NAME,
    THETA_PHI_NAME,
    VIDEO_NAME,
    VIEWS,
    VISIBILITY_NAME,
    DistributionLayout,
    pair_dir,
)

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


def _stage_pair(case: Case, fps: float, staging: Path) -> None:
    """Write one case's pair files under ``staging/<pair dir>/``: into a temporary folder, renamed whole."""
    rel = pair_dir(case.subset, case.case_id)
    base = Path(tempfile.mkdtemp(prefix=f".{case.case_id}.", dir=staging))
    try:
        for name in VIEWS:
            view = case.view(name)
            (base / name / MASKS_DIR).mkdir(parents=True, exist_ok=True)
            with phase("encode"):
                if view.video_path is not None:
                    shutil.copyfile(view.video_path, base / name / VIDEO_NAME)
                else:
                    encode_video(base / name / VIDEO_NAME, view.frames(), fps, PACK_H264)
            with phase("copy"):
                for i, path in enumerate(view.mask_paths):
                    if path.suffix.lower() != ".png":
                        raise PersistbenchError(f"{path}: masks must be PNG to be packed")
                    shutil.copyfile(path, base / name / MASKS_DIR / f"{i:05d}.png")
                shutil.copyfile(view.camera_path, base / name / CAMERA_NAME)
        for name in (VISIBILITY_NAME, COVERAGE_NAME):
            if (case.path / name).is_file():
                shutil.copyfile(case.path / name, base / name)
        write_bytes(base / THETA_PHI_NAME, _yaw_pitch(case))
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        remove_tree(staging, staging / rel)  # a pair staged from an older dataset
        base.chmod(0o777 & ~UMASK)  # mkdtemp makes it private
        os.rename(base, staging / rel)
    finally:
        remove_tree(staging, base)


def _yaw_pitch(case: Case) -> bytes:
    """``theta_phi_values.npy`` as the card describes it: the input view's per-frame yaw and pitch in degrees,
    a ``(T, 2)`` float64 array (no pickle)."""
    angles = case.theta_phi()
    if "view_0_theta" not in angles or "view_0_phi" not in angles:
        raise PersistbenchError(f"{case.theta_phi_path}: no view_0_theta and view_0_phi to pack")
    buf = io.BytesIO()
    np.save(buf, np.stack([angles["view_0_theta"], angles["view_0_phi"]], axis=1).astype("<f8"), allow_pickle=False)
    return buf.getvalue()


def _staged(key: tuple[str, str], staging: Path) -> bool:
    """Whether the pair of case ``(subset, case_id)`` is staged (its folder is renamed in whole)."""
    return (staging / pair_dir(*key)).is_dir()


def _pair(case: Case, staging: Path) -> Pair:
    base = staging / pair_dir(case.subset, case.case_id)
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


def staging_dir(out: str | os.PathLike) -> Path:
    """Where the pairs of ``out`` are staged until it is assembled: ``.<name>.pack/`` beside it."""
    out = Path(out).absolute()
    return out.parent / f".{out.name}.pack"


def pack(
    root: str | Path,
    out: str | Path,
    shard_size: int = 1_200_000_000,
    samples: int = 4,
    date: str | None = None,
    executor: Executor | None = None,
    shard: Shard | None = None,
    aggregate_only: bool = False,
    progress: bool = False,
) -> RunResult:
    """Pack the dataset at ``root`` into the distribution at ``out`` (which must not exist or be empty).

    ``date`` (``YYYY-MM-DD``) is the publication date written to ``croissant.json``. The pairs are
    encoded on ``executor`` (default: serial); with ``shard`` only that part is staged and nothing is
    assembled; ``aggregate_only`` assembles what the shards staged. The result's ``value`` is the
    :class:`DistributionLayout` once assembled.
    """
    check_sharding(shard, aggregate_only)
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
    staging = staging_dir(out)
    new = not staging.exists()
    staging.mkdir(parents=True, exist_ok=True)
    result = RunResult("pack", [])
    if not aggregate_only:
        keys = [(c.subset, c.case_id) for c in Selection(shard=shard).apply(cases)]
        is_done = functools.partial(_staged, staging=staging)
        job = Job("pack", functools.partial(_stage_case, root=ds.root, fps=fps, staging=staging), staging, is_done)
        result = (executor or SerialExecutor()).run(
            job, keys, key_of=lambda k: k[1], is_done=is_done, progress=progress
        )
    if shard is not None:
        return result
    if not result.ok:
        if new:  # bad input: nothing left behind (an interrupted pack keeps its staged pairs for the rerun)
            shutil.rmtree(staging)
        return result
    missing = [c.case_id for c in cases if not _staged((c.subset, c.case_id), staging)]
    if missing:
        raise PersistbenchError(
            f"{staging}: {len(missing)} pair(s) not staged yet (first: {missing[0]}); run every --shard first"
        )
    result.value = _assemble([_pair(c, staging) for c in cases], out, shard_size, samples, date)
    shutil.rmtree(staging)
    return result


def _stage_case(key: tuple[str, str], root: Path, fps: dict[str, float], staging: Path) -> None:
    _stage_pair(Dataset(root).case(*key), fps.get(key[1], DEFAULT_FPS), staging)


def _assemble(pairs: list[Pair], out: Path, shard_size: int, samples: int, date: str | None) -> DistributionLayout:
    """The distribution from the staged pairs: written in a temporary sibling of ``out``, renamed at the end."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~UMASK)  # mkdtemp makes it private
        dist = DistributionLayout(tmp)
        checksums, index = {}, {}
        dist.shards_dir.mkdir()
        for k, group in enumerate(assign_shards(pairs, shard_size)):
            path = dist.shard(k)
            write_shard(path, group)
            checksums[path.name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
            for pair in group:
                index[pair.pair_id] = {"shard": path.name, "subset": pair.subset, "n_frames": pair.n_frames}
        sample_sums = {}
        for pair in pick_samples(pairs, samples):
            for name, file in pair.files:
                target = dist.samples_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)
                sample_sums[name] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
        write_json(dist.checksums_json, checksums)  # shards only, as the card's checksum loop expects
        if sample_sums:
            write_json(dist.samples_checksums_json, sample_sums)
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
                "format": "persistbench-shards-v2",
                "encoder": {**PACK_H264, "ffmpeg": Path(ffmpeg_exe()).name},
                "masks": "PNG, uint8 0/255",
                "shard_size": shard_size,
                "pairs": len(pairs),
                "shards": sorted(checksums),
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
