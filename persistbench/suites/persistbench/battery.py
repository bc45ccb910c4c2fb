"""paper-v3's judge calibration battery (:mod:`persistbench.core.calibration`), built from the dataset at hand.

For each of the first ``cases`` cases (by key) whose reference view shows the object on two frames or more:

- *same object*: the object's crop on its first frame (REF) against its crop on its last one: yes;
- *background*: the same REF against a crop of the last frame at a box of the object's size moved along
  the frame to where the object's mask is empty, padding included: no.

Each item is asked a second time with its two crops exchanged (the same answer holds). The crops go
through the judge exactly as paper-v3's questions do (:func:`question.permanence_request`).
"""

from __future__ import annotations

import numpy as np

from persistbench.core.calibration import Item
from persistbench.suites.persistbench.dataset import Case
from persistbench.suites.persistbench.question import parse_seen, permanence_request

TAG = "F0001"


def padded_box(mask: np.ndarray, padding: float) -> tuple[int, int, int, int]:
    """``(y0, y1, x0, x1)`` of what the judge's crop of ``mask`` shows (its box widened as ``padded_crop`` does)."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    px, py = int(round(max(1, x1 - x0) * padding)), int(round(max(1, y1 - y0) * padding))
    return max(0, y0 - py), min(h, y1 + py), max(0, x0 - px), min(w, x1 + px)


def background_mask(mask: np.ndarray, padding: float) -> np.ndarray | None:
    """A box of ``mask``'s size moved within the frame to a place whose padded crop shows none of the object;
    None when there is none (tried: half, a quarter and three quarters of the width along, then down)."""
    h, w = mask.shape
    y0, y1, x0, x1 = padded_box(mask, 0.0)
    for dy in (0, h // 2, -h // 2):
        for dx in (w // 2, -w // 2, w // 4, -w // 4, 3 * w // 4, -3 * w // 4, 0):
            if (dy, dx) == (0, 0) or not (0 <= y0 + dy and y1 + dy <= h and 0 <= x0 + dx and x1 + dx <= w):
                continue
            box = np.zeros_like(mask)
            box[y0 + dy : y1 + dy, x0 + dx : x1 + dx] = True
            c0, c1, d0, d1 = padded_box(box, padding)
            if not mask[c0:c1, d0:d1].any():
                return box
    return None


def items(cases: list[Case], cfg: dict, count: int = 4) -> list[Item]:
    """The battery of ``cases`` (in key order; the first ``count`` that show their object twice), as items."""
    padding = cfg["object_permanence"]["crop_padding"]
    out: list[Item] = []
    for case in sorted(cases, key=lambda c: (c.subset, c.case_id)):
        if len(out) >= 4 * count:
            break
        view = case.view("center")
        shown = [i for i, m in enumerate(view.masks()) if m.any()]
        if len(shown) < 2:
            continue
        first, last = shown[0], shown[-1]
        ref = (view.frame(first), view.mask(first) > 0)
        other_frame, other_mask = view.frame(last), view.mask(last) > 0
        empty = background_mask(other_mask, padding)
        if empty is None:
            continue
        key = f"{case.subset}.{case.case_id}"
        for kind, frame, expected in (
            ("same", (other_frame, other_mask), True),
            ("background", (other_frame, empty), False),
        ):
            for swapped in (False, True):
                a, b = (frame, ref) if swapped else (ref, frame)
                out.append(
                    Item(f"{key}/{kind}", permanence_request(a, b, TAG, cfg), parse_seen(TAG), expected, swapped)
                )
    return out
