"""Object localisation in predicted frames, for models that give no masks of their own.

A :class:`Segmenter` follows the object through a model's predicted frames,
starting from the ground-truth reference frame and mask (the first visible
frame), and says "lost" instead of guessing when its match is weak. The
default, :class:`TemplateTracker`, needs no weights, runs on the CPU and is
deterministic; learned backends (SAM2-class) can implement the same protocol.
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
    to fine: the whole frame at ``1/f`` resolution (``f`` keeps the template at
    least 8 px), then the exact correlation at full resolution in a window of
    ``±2f`` px around the coarse match, which decides. Fits views that keep the
    object at a similar size, as the target (``center``) views of this benchmark do.
    """

    name = "template-ncc-v1"

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold

    def track(self, frames: np.ndarray, ref_frame: np.ndarray, ref_mask: np.ndarray) -> list[np.ndarray | None]:
        ref_mask = np.asarray(ref_mask, bool)
        ys, xs = np.nonzero(ref_mask)
        if xs.size == 0:
            raise ValueError("the reference mask is empty")
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        template = np.ascontiguousarray(ref_frame[y0:y1, x0:x1]).astype(np.float32)
        weight = ref_mask[y0:y1, x0:x1].astype(np.float32)
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
            frame = frame.astype(np.float32)
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


def _shrink(image: np.ndarray, f: int) -> np.ndarray:
    """``image`` at ``1/f`` resolution (area average; the ragged edge is dropped)."""
    import cv2

    if f == 1:
        return image
    h, w = image.shape[:2]
    return cv2.resize(image[: h - h % f, : w - w % f], (w // f, h // f), interpolation=cv2.INTER_AREA)


def _best(image: np.ndarray, template: np.ndarray, weight: np.ndarray) -> tuple[float, tuple[int, int]]:
    """The highest masked TM_CCOEFF_NORMED score over ``image`` and its ``(x, y)``."""
    import cv2

    score = cv2.matchTemplate(image, template, cv2.TM_CCOEFF_NORMED, mask=weight)
    score = np.nan_to_num(score, nan=-1.0, posinf=-1.0, neginf=-1.0)  # flat patches give 0/0
    _, best, _, loc = cv2.minMaxLoc(score)
    return best, loc
