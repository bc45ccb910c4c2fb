"""A sharded PersistBench distribution written from its dataset card's text alone, not from ``pack``.

The card: ``shards/shard-####.tar``, ``shards/checksums.json`` ("sha256 + byte size"), ``index.json``,
``pairs.csv``, ``samples/``, ``croissant.json``; every shard expands to ``<subset>/<case_id>/<obj_id>/``
with ``center/`` and ``view_0/`` each holding ``video.mp4`` (H.264), ``camera_params.npy`` and
``masks/*.png``, plus ``visibility_dict.npy``, ``theta_phi_values.npy`` ("per-frame camera yaw/pitch,
degrees") and an optional ``estimate_input_coverage.json``. Evaluation is on the frames where
``view_0_visibility == 0``.

What the card leaves open is written the way a reader of it might: checksum entries as
``{"sha256", "size"}``, masks ``00000.png``, ``index.json`` keys in both the card's path form
(``dynamic/<case_id>/<obj_id>``) and the project page's ``<case_id>_<obj_id>``, theta/phi a ``(T, 2)`` array,
samples not listed in ``checksums.json``. Videos are written with imageio-ffmpeg directly.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image


@dataclass(frozen=True)
class Pair:
    subset: str
    case_id: str  # <Category>_<source id>_<clip>
    obj_id: str  # obj_NNNN
    n_frames: int = 12
    size: tuple[int, int] = (64, 48)  # (w, h)
    coverage: bool = True
    shard: int = 0
    seed: int = 0

    @property
    def path(self) -> str:
        return f"{self.subset}/{self.case_id}/{self.obj_id}"

    @property
    def uid(self) -> str:
        return f"{self.case_id}_{self.obj_id}"


PAIRS = (
    Pair("dynamic", "Synth_cardAAAAAAA_0", "obj_0001", shard=0, seed=1),
    Pair("dynamic", "Synth_cardAAAAAAA_0", "obj_0002", shard=0, seed=2, coverage=False),  # a second object
    Pair("static", "Synth_cardBBBBBBB_3", "obj_0001", shard=1, seed=3),
    Pair("dynamic", "Synth_cardCCCCCCC_1", "obj_0001", shard=1, seed=4, n_frames=208, size=(1024, 768)),
)
SAMPLE = Pair("static", "Synth_cardDDDDDDD_2", "obj_0001", seed=5)


def _video(frames: np.ndarray) -> bytes:
    """H.264 MP4 of ``(T, H, W, 3)`` uint8 frames, through imageio-ffmpeg."""
    import tempfile

    import imageio_ffmpeg

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "video.mp4"
        h, w = frames.shape[1:3]
        writer = imageio_ffmpeg.write_frames(
            str(out), (w, h), fps=10, codec="libx264", quality=None, output_params=["-crf", "12"], macro_block_size=1
        )
        writer.send(None)
        for frame in frames:
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        return out.read_bytes()


def _npy(obj) -> bytes:
    buf = io.BytesIO()
    np.save(buf, obj, allow_pickle=True)
    return buf.getvalue()


def _png(mask: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(mask).save(buf, format="PNG")
    return buf.getvalue()


def pair_files(pair: Pair) -> dict[str, bytes]:
    """The pair's files, relative to its folder: a square that moves right and leaves view_0 for the middle
    third of the clip (``view_0_visibility`` 0 there), fully visible in ``center``."""
    rng = np.random.default_rng(pair.seed)
    w, h = pair.size
    t = pair.n_frames
    side = max(4, h // 4)
    background = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
    files: dict[str, bytes] = {}
    gone = range(t // 3, 2 * t // 3)
    for view in ("view_0", "center"):
        frames, masks = [], []
        for i in range(t):
            frame, mask = background.copy(), np.zeros((h, w), np.uint8)
            if view == "center" or i not in gone:
                x = (i * (w - side)) // max(t - 1, 1)
                y = (h - side) // 2
                frame[y : y + side, x : x + side] = (255, 40, 40)
                mask[y : y + side, x : x + side] = 255
            frames.append(frame)
            masks.append(mask)
        files[f"{view}/video.mp4"] = _video(np.stack(frames))
        for i, mask in enumerate(masks):
            files[f"{view}/masks/{i:05d}.png"] = _png(mask)
        poses = np.tile(np.eye(4), (t, 1, 1))
        k = np.array([[w / 2, 0, w / 2], [0, w / 2, h / 2], [0, 0, 1]], float)
        files[f"{view}/camera_params.npy"] = _npy({"cam_poses": poses, "cam_intrinsic": k})
    visibility = np.array([0.0 if i in gone else 1.0 for i in range(t)])
    files["visibility_dict.npy"] = _npy(
        {"view_0_visibility": visibility, "view_1_visibility": np.ones(t, bool), "mode": "linear", "window_ratio": 1.0}
    )
    yaw = np.linspace(0.0, 90.0, t)
    files["theta_phi_values.npy"] = _npy(np.stack([yaw, np.zeros(t)], axis=1))  # (T, 2): yaw, pitch in degrees
    if pair.coverage:
        files["estimate_input_coverage.json"] = json.dumps({"coverage": 0.5}).encode()
    return files


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def write(root: Path, pairs: tuple[Pair, ...] = PAIRS, sample: Pair | None = SAMPLE) -> Path:
    """The card's distribution at ``root``; ``index.json`` names the first pair of each shard by its path
    and the others by ``<case_id>_<obj_id>``."""
    shards: dict[int, dict[str, bytes]] = {}
    index = {}
    for i, pair in enumerate(pairs):
        members = {f"{pair.path}/{name}": data for name, data in pair_files(pair).items()}
        shards.setdefault(pair.shard, {}).update(members)
        key = pair.path if i % 2 == 0 else pair.uid
        index[key] = {"shard": f"shard-{pair.shard:04d}.tar", "subset": pair.subset, "n_frames": pair.n_frames}
    (root / "shards").mkdir(parents=True)
    checksums = {}
    for n, members in sorted(shards.items()):
        name = f"shard-{n:04d}.tar"
        _tar(root / "shards" / name, members)
        data = (root / "shards" / name).read_bytes()
        checksums[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (root / "shards" / "checksums.json").write_text(json.dumps(checksums, indent=2))
    (root / "index.json").write_text(json.dumps(index, indent=2))
    with open(root / "pairs.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["pair_id", "shard", "subset", "n_frames"])
        for key, row in index.items():
            out.writerow([key, row["shard"], row["subset"], row["n_frames"]])
    if sample is not None:
        for name, data in pair_files(sample).items():
            target = root / "samples" / sample.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    (root / "croissant.json").write_text(json.dumps({"@type": "sc:Dataset", "name": "PersistBench"}))
    return root
