"""R2M-Bench's judge calibration battery (:mod:`persistbench.core.calibration`) for ``persistent_state``, built
from the checkout at hand.

For each of the first ``count`` cases (by key): the case's conditioning image against itself (nothing
changed: the state is kept, a score of 4 or 5) and against a copy whose central third has its colours
inverted (a region changed: a score of 3 or less). Each pair is asked again with its two frames
exchanged. The frames are sized and sent as the scorer sends a pair (``max_side``, the protocol's question).
"""

from __future__ import annotations

import numpy as np

from persistbench.core.calibration import Item
from persistbench.io.images import resize_images
from persistbench.suites.r2m.pair_video import StateQuestion

KEPT, CHANGED = 4.0, 3.0  # the scores that count as "kept" (at least) and "changed" (at most)


def changed(image: np.ndarray) -> np.ndarray:
    """``image`` with its central third (both ways) in inverted colours: a region plainly changed."""
    out = image.copy()
    h, w = image.shape[:2]
    ys, xs = slice(h // 3, 2 * h // 3), slice(w // 3, 2 * w // 3)
    out[ys, xs] = 255 - image[ys, xs]
    return out


def items(images: dict[str, np.ndarray], question: StateQuestion, p: dict, count: int = 4) -> list[Item]:
    """The battery of the first ``count`` images (case key -> conditioning image, ``(h, w, 3)`` uint8)."""
    out: list[Item] = []
    for key in sorted(images)[:count]:
        image = images[key]
        h, w = image.shape[:2]
        scale = min(1.0, p["max_side"] / max(h, w)) if p["max_side"] else 1.0
        if scale != 1.0:
            image = resize_images(image[None], (max(1, round(h * scale)), max(1, round(w * scale))))[0]
        for kind, other, accepts, expected in (
            ("kept", image, lambda v: v is not None and v >= KEPT, f">= {KEPT:g}"),
            ("changed", changed(image), lambda v: v is not None and v <= CHANGED, f"<= {CHANGED:g}"),
        ):
            for swapped in (False, True):
                pair = (other, image) if swapped else (image, other)
                out.append(Item(f"{key}/{kind}", question.request(pair, p), question.parse, expected, swapped, accepts))
    return out
