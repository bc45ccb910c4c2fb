"""Object localisation in predicted frames, for models that give no masks of their own.

A :class:`Segmenter` follows the object through a model's predicted frames,
starting from the ground-truth reference frame and mask (the first visible
frame), and says "lost" instead of guessing when its match is weak. The
default, :class:`TemplateTracker`, needs no weights, runs on the CPU and is
deterministic; it is ``classic-v1``'s. (``paper-v3`` tracks with SAM 2.1 instead, through the
``sam2`` backend's own interface, :class:`persistbench.backends.tracker.VideoTracker`.)
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Segmenter(Protocol):
    """Finds the reference object in each frame."""

    name: str

    def track(self, frames: np.ndarray, ref_frame: np.ndarray, ref_mask: np.ndarray) -> list[np.ndarray | None]:
        """Masks of the object, one per frame of ``frames`` ``[T, H, W, 3]`` uint8.

        Args:
            ref_frame: ``(H, W, 3)`` uint8 frame in which the object is seen.
            ref_mask: ``(H, W)`` bool mask of the object in ``ref_frame``.
        Returns:
            One ``(H, W)`` bool mask per frame, or None where the object is lost.
        """
        ...


class TemplateTracker:
    """Zero-mean normalised cross-correlation of the object's appearance, masked to its shape.

    The object's pixels in the reference frame (its mask's bounding box, with
    the mask as the correlation weight) are matched over each frame at one
    scale; the best match with a correlation of at least ``threshold`` places
    the reference mask there, anything weaker is "lost". The search is coarse
    to fine: the whole frame in ``f x f`` blocks (``f`` keeps the template at
    least 8 blocks), then the exact correlation at full resolution in a window
    of ``±2f`` px around the coarse match, which decides. Fits views that keep
    the object at a similar size, as the target (``center``) views of this
    benchmark do.

    Every sum is an exact integer and the correlation one float64 expression
    of them, so the decisions (where, and lost or not) are the same on every
    CPU; ties go to the first position in row-major order.
    """

    name = "template-ncc-v2"

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold

    def track(self, frames: np.ndarray, ref_frame: np.ndarray, ref_mask: np.ndarray) -> list[np.ndarray | None]:
        ref_mask = np.asarray(ref_mask, bool)
        ys, xs = np.nonzero(ref_mask)
        if xs.size == 0:
            raise ValueError("the reference mask is empty")
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        template = _pixels(ref_frame[y0:y1, x0:x1])
        weight = ref_mask[y0:y1, x0:x1].astype(np.int64)
        th, tw = weight.shape
        f = 1
        while f < 4 and min(th, tw) >= 16 * f:
            f *= 2
        small = (_shrink(template, f), _shrink(weight, f))
        out: list[np.ndarray | None] = []
        for frame in frames:
            h, w = frame.shape[:2]
            if h < th or w < tw or weight.sum() < 4:
                out.append(None)
                continue
            frame = _pixels(frame)
            cx, cy = _best(_shrink(frame, f), *small)[1]
            r = 2 * f
            wx0, wy0 = max(0, cx * f - r), max(0, cy * f - r)
            wx1, wy1 = min(w, cx * f + r + tw), min(h, cy * f + r + th)
            best, (bx, by) = _best(frame[wy0:wy1, wx0:wx1], template, weight)
            if best < self.threshold:
                out.append(None)
                continue
            mask = np.zeros((h, w), bool)
            mask[wy0 + by : wy0 + by + th, wx0 + bx : wx0 + bx + tw] = ref_mask[y0:y1, x0:x1]
            out.append(mask)
        return out


def _pixels(image: np.ndarray) -> np.ndarray:
    """``image`` as int64 ``(H, W, C)`` (grey images get one channel)."""
    image = np.asarray(image).astype(np.int64)
    return image[..., None] if image.ndim == 2 else image


def _shrink(image: np.ndarray, f: int) -> np.ndarray:
    """Sums over ``f x f`` blocks of ``image`` ``(H, W[, C])`` (the ragged edge is dropped); exact integers."""
    if f == 1:
        return image
    h, w = image.shape[0] // f, image.shape[1] // f
    return image[: h * f, : w * f].reshape(h, f, w, f, *image.shape[2:]).sum(axis=(1, 3))


# Above this bound on |sum|, the float64 filter's rounding error could reach 1/2 (about 2^-47 relative):
# the exact, slower loop takes over.
_FILTER_EXACT_BELOW = 2.0**44


def _correlate(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``out[y, x, c] = sum_{i, j} kernel[i, j, c] image[y + i, x + j, c]`` for every placement (int64, exact).

    ``image`` is ``(H, W, C)``, ``kernel`` ``(h, w, C)`` or ``(h, w, 1)``, both
    integers; the result ``(H - h + 1, W - w + 1, C)``. OpenCV's float64 filter
    (direct or via the DFT, with whatever SIMD the CPU has) is off the integer
    sum by far less than 1/2 while every sum stays below 2^44, so rounding it
    gives the exact sum on every CPU.
    """
    import cv2

    kh, kw = kernel.shape[:2]
    oh, ow = image.shape[0] - kh + 1, image.shape[1] - kw + 1
    channels = image.shape[2]
    kernel = np.broadcast_to(kernel, (kh, kw, channels))
    out = np.empty((oh, ow, channels), np.int64)
    for c in range(channels):
        k, a = kernel[..., c], image[..., c]
        if float(np.abs(k).sum()) * float(np.abs(a).max(initial=0)) < _FILTER_EXACT_BELOW:
            full = cv2.filter2D(a.astype(np.float64), cv2.CV_64F, k.astype(np.float64), anchor=(0, 0))
            out[..., c] = np.rint(full[:oh, :ow])
        else:
            acc = np.zeros((oh, ow), np.int64)
            for i, j in np.argwhere(k):
                acc += k[i, j] * a[i : i + oh, j : j + ow]
            out[..., c] = acc
    return out


def _best(image: np.ndarray, template: np.ndarray, weight: np.ndarray) -> tuple[float, tuple[int, int]]:
    """The highest weighted zero-mean normalised correlation over ``image`` and its ``(x, y)``.

    ``image`` ``(H, W, C)`` and ``template`` ``(h, w, C)`` are int64 pixel
    sums, ``weight`` ``(h, w)`` int64 pixel counts. Per placement, with
    ``n = sum w``: ``sum_c (n S_it - S_i S_t) / sqrt(sum_c (n S_ii - S_i^2) sum_c (n S_tt - S_t^2))``
    (OpenCV's masked ``TM_CCOEFF_NORMED`` for a binary weight); flat patches score -1.
    """
    w = weight[..., None]
    n = float(weight.sum())
    s_t = (w * template).sum(axis=(0, 1)).astype(np.float64)
    var_t = float(sum(n * (w * template * template).sum(axis=(0, 1)) - s_t * s_t))
    s_i = _correlate(image, w).astype(np.float64)
    s_ii = _correlate(image * image, w).astype(np.float64)
    s_it = _correlate(image, w * template).astype(np.float64)
    num, var_i = (
        sum(terms[..., c] for c in range(image.shape[2])) for terms in (n * s_it - s_i * s_t, n * s_ii - s_i * s_i)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        score = num / np.sqrt(var_i * var_t)
    score = np.where((var_i > 0) & (var_t > 0) & np.isfinite(score), score, -1.0)
    y, x = np.unravel_index(int(np.argmax(score)), score.shape)
    return float(score[y, x]), (int(x), int(y))
