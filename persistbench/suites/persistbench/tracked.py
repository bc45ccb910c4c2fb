"""The arithmetic of PersistBench's published protocol (``default-three-paper-v3``), as functions on arrays, and
its three tracked metrics (registered in :data:`persistbench.metrics.registry.METRICS` when imported).

Frames are ``(H, W, 3)`` uint8 RGB at the evaluation size, masks ``(H, W)`` bool. Per-frame
series are lists with NaN where a frame has no value (before the tracking start, or not eligible).
Boxes follow the public toolkit: a mask's box widened by ``margin`` times its extent on each side,
clamped to ``[0, W-1] x [0, H-1]``, kept normalised by the frame size, and turned into pixels by
truncation (``int(clip(v * W, 0, W - 1))``). The networks are not here: features come in as arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from persistbench.metrics.registry import MetricSpec, register


@dataclass(frozen=True)
class Box:
    """A box in normalised coordinates of an ``height`` x ``width`` frame."""

    x0: float
    y0: float
    x1: float
    y1: float
    height: int
    width: int

    def pixels(self) -> tuple[int, int, int, int]:
        """``(x0, y0, x1, y1)`` in pixels, each truncated and clamped to the last row or column."""
        w, h = self.width, self.height
        return (
            int(np.clip(self.x0 * w, 0, w - 1)),
            int(np.clip(self.y0 * h, 0, h - 1)),
            int(np.clip(self.x1 * w, 0, w - 1)),
            int(np.clip(self.y1 * h, 0, h - 1)),
        )


def mask_box(mask: np.ndarray, margin: float) -> Box:
    """The box of ``mask`` widened by ``margin`` of its extent (the whole frame for an empty mask)."""
    h, w = mask.shape
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return Box(0.0, 0.0, 1.0, 1.0, h, w)
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    dx, dy = margin * (x1 - x0), margin * (y1 - y0)
    x0, x1 = max(0, x0 - dx), min(w - 1, x1 + dx)
    y0, y1 = max(0, y0 - dy), min(h - 1, y1 + dy)
    return Box(float(x0 / w), float(y0 / h), float(x1 / w), float(y1 / h), h, w)


def crop_features(features, box: Box):
    """The ``(crop_h, crop_w, C)`` features under ``box``, sampled bilinearly (``align_corners=True``) from
    a ``(C, h, w)`` torch feature map on a grid with one point per pixel of the box."""
    import torch

    px0, py0, px1, py1 = box.pixels()
    ch, cw = max(1, py1 - py0), max(1, px1 - px0)
    gy = torch.linspace(box.y0 * 2 - 1, box.y1 * 2 - 1, ch, dtype=features.dtype)
    gx = torch.linspace(box.x0 * 2 - 1, box.x1 * 2 - 1, cw, dtype=features.dtype)
    yy, xx = torch.meshgrid(gy, gx, indexing="ij")
    grid = torch.stack([xx, yy], dim=-1)[None].to(features.device)
    out = torch.nn.functional.grid_sample(features[None], grid, mode="bilinear", align_corners=True)
    return out[0].permute(1, 2, 0)


def upsample_features(features, height: int, width: int):
    """A ``(C, h, w)`` torch feature map resized bilinearly (``align_corners=True``) to ``(height, width, C)``."""
    import torch

    out = torch.nn.functional.interpolate(features[None], size=(height, width), mode="bilinear", align_corners=True)
    return out[0].permute(1, 2, 0)


def best_match(src, tar, chunk: int = 64) -> tuple[int, int, float]:
    """Where the ``(hs, ws, C)`` features ``src`` fit best in ``(H, W, C)`` ``tar``: ``(y, x, score)``.

    The score of a placement is 1 - the mean cosine similarity of the overlapping feature vectors
    (each L2-normalised with +1e-8), over every placement that fits whole; the lowest wins, the first
    in row-major order on ties. Correlations by FFT, summed over channels ``chunk`` at a time.
    """
    import torch

    hs, ws, c = src.shape
    ht, wt, _ = tar.shape
    if hs > ht or ws > wt:
        raise ValueError("the source features are larger than the target")
    s = src / (torch.linalg.vector_norm(src, dim=-1, keepdim=True) + 1e-8)
    t = tar / (torch.linalg.vector_norm(tar, dim=-1, keepdim=True) + 1e-8)
    fh, fw = ht + hs - 1, wt + ws - 1
    corr = torch.zeros((ht - hs + 1, wt - ws + 1), dtype=torch.float32, device=src.device)
    for k in range(0, c, chunk):
        a = t[..., k : k + chunk].permute(2, 0, 1)
        b = torch.flip(s[..., k : k + chunk].permute(2, 0, 1), dims=[1, 2])
        full = torch.fft.irfft2(torch.fft.rfft2(a, s=(fh, fw)) * torch.fft.rfft2(b, s=(fh, fw)), s=(fh, fw))
        corr += full.sum(dim=0)[hs - 1 : hs - 1 + corr.shape[0], ws - 1 : ws - 1 + corr.shape[1]]
    score = 1.0 - corr / (hs * ws)
    i = int(torch.argmin(score))
    y, x = divmod(i, score.shape[1])
    return y, x, float(score[y, x])


def placed_box(y: int, x: int, hs: int, ws: int, height: int, width: int) -> Box:
    """The normalised box of a match at ``(y, x)`` of size ``hs`` x ``ws`` in an ``height`` x ``width`` frame."""
    return Box(float(x / width), float(y / height), float((x + ws) / width), float((y + hs) / height), height, width)


def place_mask(mask: np.ndarray, src: Box, dst: Box) -> np.ndarray:
    """``mask`` cut to ``src`` (pixels, end exclusive), resized nearest (PIL) to ``dst`` and pasted into an
    empty ``dst.height`` x ``dst.width`` mask, clipped to the frame."""
    from PIL import Image

    sx0, sy0, sx1, sy1 = src.pixels()
    dx0, dy0, dx1, dy1 = dst.pixels()
    w, h = max(1, dx1 - dx0), max(1, dy1 - dy0)
    cut = Image.fromarray(mask[sy0:sy1, sx0:sx1].astype(np.uint8) * 255)
    resized = np.asarray(cut.resize((w, h), Image.NEAREST)) > 0
    out = np.zeros((dst.height, dst.width), bool)
    x1, y1 = min(dst.width, dx1), min(dst.height, dy1)
    out[dy0:y1, dx0:x1] = resized[: y1 - dy0, : x1 - dx0]
    return out


@dataclass
class Tracked:
    """What the three scores of one case are computed from: reference masks ``(N, H, W)``, the tracked
    prediction masks, the start frame, whether each frame is tracked, whether the judge sees the object
    (None: not asked for, or failed), the appearance cosine per frame (NaN: not eligible) and the motion
    distance per frame (:func:`motion_distances`)."""

    ref_masks: np.ndarray
    pred_masks: list[np.ndarray]
    start: int
    tracked: list[bool]
    seen: list[bool | None] | None = None
    similarity: list[float] | None = None
    distances: list[float] | None = None


def object_permanence(t: Tracked) -> list[float]:
    """Per frame from the start: 1 when the tracker keeps the object and the judge sees it, else 0 (NaN
    where the judge has no answer)."""
    out = [math.nan] * len(t.tracked)
    for i in range(t.start, len(out)):
        if t.seen is not None and t.seen[i] is not None:
            out[i] = float(t.tracked[i] and t.seen[i])
    return out


def center(mask: np.ndarray) -> tuple[float, float] | None:
    """The mean ``(x, y)`` of a mask's pixels, or None when it is empty."""
    ys, xs = np.nonzero(mask)
    return (float(xs.mean()), float(ys.mean())) if len(xs) else None


def motion_distances(refs: Sequence[np.ndarray], preds: Sequence[np.ndarray], start: int) -> list[float]:
    """``d = |centre(ref) - centre(pred)| / sqrt(mean reference area)`` per frame from ``start`` (pixels over
    pixels: unitless); the mean area is over every frame from ``start`` (empty ones count as 0); NaN where
    either mask is empty, and before ``start``."""
    n = len(refs)
    areas = [float(np.count_nonzero(refs[i])) for i in range(start, n)]
    mean_area = float(np.mean(areas)) if areas else math.nan
    scale = math.sqrt(mean_area) if mean_area > 0 else math.nan
    out = [math.nan] * n
    for i in range(start, n):
        a, b = center(refs[i]), center(preds[i])
        if a is None or b is None or math.isnan(scale):
            continue
        out[i] = math.hypot(a[0] - b[0], a[1] - b[1]) / scale
    return out


def motion_continuity(distances: Sequence[float]) -> list[float]:
    """``exp(-d)`` per frame of :func:`motion_distances` (NaN stays NaN): the public toolkit's frame score."""
    return [math.exp(-d) for d in distances]


def published_continuity(distances: Sequence[float], frames: np.ndarray, start: int) -> float | None:
    """The published leaderboard's motion continuity of one case and split: ``exp(-mean d)`` over the
    selected ``frames`` from ``start`` that have a distance (None when none has). ``exp(-d)`` is convex, so by
    Jensen's inequality this is never above the mean of the frame scores, the public toolkit 0.1.7's value."""
    mean = split_mean(distances, frames, start)
    return None if mean is None else math.exp(-mean)


def split_mean(values: Sequence[float], frames: np.ndarray, start: int) -> float | None:
    """The mean of the non-NaN ``values`` on the selected ``frames`` from ``start`` on; None when there are none."""
    sel = np.asarray(frames, bool).copy()
    sel[:start] = False
    picked = np.asarray(values, np.float64)[sel]
    picked = picked[~np.isnan(picked)]
    return float(picked.mean()) if len(picked) else None


# ---------------------------------------------------------------- the judge's frame sampling


def spread(candidates: Sequence[int], k: int) -> list[int]:
    """``k`` of ``candidates`` evenly spread, first and last included, no position twice (all when ``k`` is
    0 or at least their number; the middle one when ``k`` is 1)."""
    n = len(candidates)
    if k <= 0 or k >= n:
        return list(candidates)
    if k == 1:
        return [candidates[n // 2]]
    picked, last = [], -1
    for i in range(k):
        want = round(i * (n - 1) / (k - 1))
        pos = min(max(want, last + 1), n - 1 - (k - 1 - i))
        picked.append(candidates[pos])
        last = pos
    return picked


def judge_statuses(
    start: int, n: int, empty: set[int], k: int, ask: Callable[[list[int]], dict[int, bool]]
) -> tuple[list[bool | None], list[int]]:
    """Whether the judge sees the object, for every frame from ``start`` to ``n - 1``, asking as few frames as
    the public protocol does: frames whose tracked mask is empty are "not seen" without asking; ``k``
    frames spread over the rest plus the first and last are asked; a run of unknown frames between two
    equal answers takes that answer; between two different answers ``k`` more are asked, until every
    frame is known. Returns the statuses (None before ``start``) and the frames asked or preset, sorted.
    """
    status: list[bool | None] = [None] * n
    seen: set[int] = set()
    for i in sorted(empty):
        status[i] = False
        seen.add(i)

    def put(indices: list[int]) -> None:
        seen.update(indices)
        for i, v in ask(indices).items():
            status[i] = v

    first = sorted(set(spread(list(range(start, n)), k)) | {start, n - 1})
    put([i for i in first if status[i] is None])
    while any(s is None for s in status[start:]):
        known = [i for i in range(start, n) if status[i] is not None]
        for a, b in zip(known, known[1:]):
            if status[a] == status[b]:
                for i in range(a + 1, b):
                    status[i] = status[a]
        known = [i for i in range(start, n) if status[i] is not None]
        gaps = [
            (a, b)
            for a, b in zip(known, known[1:])
            if status[a] != status[b] and any(status[i] is None for i in range(a + 1, b))
        ]
        if not gaps:
            break
        asked = False
        for a, b in gaps:
            todo = [i for i in range(a + 1, b) if status[i] is None]
            if not todo:
                continue
            pick = [i for i in spread(todo, k) if i not in seen] or [todo[len(todo) // 2]]
            put(pick)
            asked = True
        if not asked:
            put([i for i in range(start, n) if status[i] is None])
            break
    return status, sorted(seen)


@dataclass(frozen=True, kw_only=True)
class TrackedMetric(MetricSpec):
    """``function(case: Tracked, params) -> list[float]``: one value per frame of a matched, tracked case."""

    kind: ClassVar[str] = "tracked"


def _permanence(t: Tracked, p: dict) -> list[float]:
    return object_permanence(t)


def _motion(t: Tracked, p: dict) -> list[float]:
    return motion_continuity(t.distances)


def _appearance(t: Tracked, p: dict) -> list[float]:
    return list(t.similarity)


TRACKED_METRICS: tuple[TrackedMetric, ...] = (
    TrackedMetric(
        name="object_permanence",
        family="paper",
        higher_is_better=True,
        value_range=(0.0, 1.0),
        function=_permanence,
        params="object_permanence",
        rate=True,
    ),
    TrackedMetric(
        name="motion_continuity",
        family="paper",
        higher_is_better=True,
        value_range=(0.0, 1.0),
        function=_motion,
    ),
    TrackedMetric(
        name="appearance_preservation",
        family="paper",
        higher_is_better=True,
        value_range=(-1.0, 1.0),
        function=_appearance,
        params="appearance_preservation",
    ),
)
register(*TRACKED_METRICS)
