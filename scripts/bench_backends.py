"""Frames per second of the model backends, batched and one at a time, against the bare model call.

Each backend is the real architecture at its published size (DINOv2 ViT-B/14, DINOv2-reg ViT-L/14,
DINOv3 ViT-L/16, SuperPoint + LightGlue; SAM 2 at transformers' default Hiera configuration, the
smallest: the large one is several times slower) with random weights, saved to a temporary folder
and loaded through ``persistbench.backends`` as ``score`` loads it: speed does not depend on the
weights' values. Per backend: our path with ``--batch-size`` 1 and ``--batch`` (frames/s), and the
model's own forward on the same preprocessed batch (the peer: what is left is our overhead). Medians
of ``--repeat`` runs; ratios printed. CPU unless ``--device cuda``. The large ViTs take about ten
seconds a frame on two cores: they run only with ``--large``.

Run: ``python scripts/bench_backends.py [--frames 4] [--batch 4] [--repeat 3] [--device cpu] [--large]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from persistbench.backends import BACKENDS, BackendOptions, load
from persistbench.backends.features import IMAGENET_MEAN, IMAGENET_STD
from persistbench.metrics.pair import point_grid


def _vit(kind: str, folder: Path) -> Path:
    from transformers import (
        Dinov2Config,
        Dinov2Model,
        Dinov2WithRegistersConfig,
        Dinov2WithRegistersModel,
        DINOv3ViTConfig,
        DINOv3ViTModel,
    )

    large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
    if kind == "dinov2-base":
        Dinov2Model(Dinov2Config()).save_pretrained(folder)  # the defaults are ViT-B/14
    elif kind == "dinov2-reg-large":
        Dinov2WithRegistersModel(Dinov2WithRegistersConfig(**large)).save_pretrained(folder)
    else:
        DINOv3ViTModel(DINOv3ViTConfig(**large, patch_size=16)).save_pretrained(folder)
    return folder


def _lightglue(folder: Path) -> Path:
    from transformers import LightGlueConfig, LightGlueForKeypointMatching

    # random SuperPoint scores pass any threshold: cap the keypoints at 2048, as real images about give
    detector = {"model_type": "superpoint", "max_keypoints": 2048}
    LightGlueForKeypointMatching(LightGlueConfig(keypoint_detector_config=detector)).save_pretrained(folder)
    return folder


def _sam2(folder: Path) -> Path:
    from transformers import (
        Sam2ImageProcessor,
        Sam2VideoConfig,
        Sam2VideoModel,
        Sam2VideoProcessor,
        Sam2VideoVideoProcessor,
    )

    Sam2VideoModel(Sam2VideoConfig()).save_pretrained(folder)
    Sam2VideoProcessor(image_processor=Sam2ImageProcessor(), video_processor=Sam2VideoVideoProcessor()).save_pretrained(
        folder
    )
    return folder


def _frames(n: int, h: int, w: int) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(0)
    return np.stack([cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 2) for _ in range(n)])


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _opts(name: str, folder: Path, device: str, batch: int) -> BackendOptions:
    return BackendOptions(device, ((name, str(folder)),), False, batch)


def bench_vit(name: str, folder: Path, frames: np.ndarray, args) -> list[str]:
    unit = frames.astype(np.float32) / 255.0
    one, many = (load(name, _opts(name, folder, args.device, b)) for b in (1, args.batch))
    call = "embed" if name == "dinov2-base" else "__call__"
    t1 = _median(lambda: getattr(one, call)(unit), args.repeat)
    tb = _median(lambda: getattr(many, call)(unit), args.repeat)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    h, w = (-(-s // many.patch) * many.patch for s in unit.shape[1:3])
    x = torch.nn.functional.interpolate(torch.from_numpy(unit).permute(0, 3, 1, 2), size=(h, w), mode="bilinear")
    x = ((x - mean) / std).to(many.device)

    def raw():
        with torch.no_grad():
            for s in range(0, len(x), args.batch):
                many.model(pixel_values=x[s : s + args.batch])

    tr = _median(raw, args.repeat)
    return _row(name, f"{unit.shape[1]}x{unit.shape[2]}", len(unit), t1, tb, tr)


def bench_lightglue(folder: Path, frames: np.ndarray, args) -> list[str]:
    name = "superpoint-lightglue"
    pairs = [(frames[i], frames[(i + 1) % len(frames)]) for i in range(len(frames))]
    one, many = (load(name, _opts(name, folder, args.device, b)) for b in (1, args.batch))
    size = (480, 640)
    t1 = _median(lambda: one(pairs, size, 0.0), args.repeat)
    tb = _median(lambda: many(pairs, size, 0.0), args.repeat)
    gray = np.stack([f for p in pairs for f in p]).astype(np.float32).mean(axis=3) / 255.0
    x = torch.from_numpy(np.repeat(gray[:, None], 3, axis=1)).reshape(len(pairs), 2, 3, *gray.shape[1:])

    def raw():
        with torch.no_grad():
            for s in range(0, len(x), args.batch):
                many.model(pixel_values=x[s : s + args.batch].to(many.device))

    tr = _median(raw, args.repeat)
    return _row(name + " (pairs)", "480x640", len(pairs), t1, tb, tr)


def bench_sam2(folder: Path, frames: np.ndarray, args) -> list[str]:
    tracker = load("sam2", _opts("sam2", folder, args.device, 1))
    h, w = frames.shape[1:3]
    pts = point_grid(h, w, 4)
    t = _median(lambda: tracker.follow_points([frames[0], frames[1]], pts), args.repeat)
    tt = _median(lambda: tracker.track(list(frames), np.pad(np.ones((h // 4, w // 4), bool), h // 3)[:h, :w]), 1)
    return [
        f"| sam2 (R2M object: 2 frames, 16 objects) | {h}x{w} | 2 | {2 / t:.2f} | | | |",
        f"| sam2 (paper-v3 tracking: 1 object) | {h}x{w} | {len(frames)} | {len(frames) / tt:.2f} | | | |",
    ]


def _row(name: str, size: str, n: int, t1: float, tb: float, tr: float) -> list[str]:
    return [
        f"| {name} | {size} | {n} | {n / t1:.2f} | {n / tb:.2f} | {n / tr:.2f} | "
        f"batched {t1 / tb:.2f}x faster; time ours / bare {tb / tr:.2f} |"
    ]


def _print(rows: list[str]) -> None:
    print("\n".join(rows), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--large", action="store_true", help="also the ViT-L backends (slow on a CPU)")
    args = ap.parse_args()
    torch.manual_seed(0)
    _print(
        [
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.device}; medians of {args.repeat}",
            "",
            f"| backend | input | frames | frames/s (batch 1) | frames/s (batch {args.batch}) | bare model frames/s | |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vits = ["dinov2-base"] + (["dinov2-reg-large", "dinov3-large"] if args.large else [])
        sizes = {"dinov2-base": (224, 298), "dinov2-reg-large": (384, 512), "dinov3-large": (384, 512)}
        for name in vits:
            _print(bench_vit(name, _vit(name, root / name), _frames(args.frames, *sizes[name]), args))
        _print(bench_lightglue(_lightglue(root / "lightglue"), _frames(args.frames, 480, 640), args))
        _print(bench_sam2(_sam2(root / "sam2"), _frames(args.frames, 270, 480), args))
    print(f"\nbackends: {', '.join(BACKENDS)}")


if __name__ == "__main__":
    main()
