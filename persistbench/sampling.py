"""How a case's frames are sampled, cropped and resized for a model, and the ground truth the same way.

One module for ``infer`` (what the model gets) and ``score`` (the ground truth it is compared
with), so both follow one rule: frames ``np.linspace(0, T-1, n).round()``; a centre crop to the
model's aspect ratio; area resizing for RGB (linear when enlarging) and centre-aligned nearest for
masks; intrinsics adjusted to match. Sizes here are ``(w, h)`` unless a name says otherwise;
``resolution`` is the model interface's ``(height, width)``.
"""

from __future__ import annotations

import numpy as np


def sample_indices(n_frames: int, num_frames: int) -> np.ndarray:
    """Frame indices ``np.linspace(0, T-1, n).round()``; ``num_frames <= 0`` takes every frame."""
    n = n_frames if num_frames is None or num_frames <= 0 else num_frames
    return np.linspace(0, n_frames - 1, n).round().astype(np.int64)


def crop_box(size: tuple[int, int], resolution: tuple[int, int]) -> tuple[int, int, int, int]:
    """Centre crop ``(x0, y0, w, h)`` of an image of ``size`` = (w, h) to the aspect of ``resolution`` = (h, w).

    ``-1`` in ``resolution`` keeps the dataset's size (no crop).
    """
    w, h = size
    rh, rw = resolution
    if rh <= 0 or rw <= 0:
        return 0, 0, w, h
    if w * rh > h * rw:  # too wide: crop the width
        cw, ch = round(h * rw / rh), h
    else:
        cw, ch = w, round(w * rh / rw)
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def target_size(size: tuple[int, int], resolution: tuple[int, int]) -> tuple[int, int]:
    """Output ``(w, h)``: the model's resolution, or the dataset's where it says -1."""
    rh, rw = resolution
    return (size[0], size[1]) if rh <= 0 or rw <= 0 else (rw, rh)


def adjust_intrinsics(k: np.ndarray, box: tuple[int, int, int, int], out: tuple[int, int]) -> np.ndarray:
    """Intrinsics after cropping to ``box`` = (x0, y0, w, h) and resizing to ``out`` = (w, h).

    Pixel centres at +0.5: a continuous coordinate x maps to ``(x - x0) * out_w / w``.
    """
    x0, y0, cw, ch = box
    sx, sy = out[0] / cw, out[1] / ch
    k2 = np.array(k, np.float64)
    k2[0, 0], k2[0, 2] = k[0, 0] * sx, (k[0, 2] - x0) * sx
    k2[1, 1], k2[1, 2] = k[1, 1] * sy, (k[1, 2] - y0) * sy
    return k2


def crop_resize(
    image: np.ndarray, box: tuple[int, int, int, int], out: tuple[int, int], nearest: bool = False
) -> np.ndarray:
    """Crop ``image`` to ``box`` and resize to ``out`` (area when shrinking, linear when enlarging)."""
    import cv2

    x0, y0, cw, ch = box
    crop = image[y0 : y0 + ch, x0 : x0 + cw]
    if (cw, ch) == tuple(out):
        return np.ascontiguousarray(crop)
    # Masks: centre-aligned nearest (source pixel floor((i + 0.5) * s), as PIL's NEAREST); cv2's
    # INTER_NEAREST takes floor(i * s) and shifts masks by up to half a pixel against the RGB.
    interp = cv2.INTER_NEAREST_EXACT if nearest else cv2.INTER_AREA if out[0] < cw else cv2.INTER_LINEAR
    return cv2.resize(crop, tuple(out), interpolation=interp)


def sampled_frames(view, idx: np.ndarray, box, out_size) -> np.ndarray:
    """The view's frames at ``idx``, cropped and resized: ``[n, h, w, 3]`` uint8 (one decode pass)."""
    wanted = set(idx.tolist())
    picked = {t: crop_resize(f, box, out_size) for t, f in enumerate(view.frames()) if t in wanted}
    return np.stack([picked[t] for t in idx.tolist()])


def sampled_masks(view, idx: np.ndarray, box, out_size) -> np.ndarray:
    """The view's masks at ``idx``, cropped and resized (nearest): ``[n, h, w]`` bool."""
    return np.stack([crop_resize(view.mask(t), box, out_size, nearest=True) > 0 for t in idx.tolist()])
