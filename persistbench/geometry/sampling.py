"""Which frames a model gets and how they are cropped and resized; the ground truth the same way.

One module for ``infer`` (what the model gets) and ``score`` (the ground truth it is compared
with), so both follow one rule: frames ``np.linspace(0, T-1, n).round()``; a centre crop to the
model's aspect ratio (the public toolkit's rule: the crop keeps one side and truncates the other,
``int()``); PIL bilinear resizing for RGB where the public toolkit prepares frames (model inputs,
the PersistBench ground truth at the model's resolution), area resizing elsewhere (linear when
enlarging; a protocol may choose another), and centre-aligned nearest for masks; cameras cropped and resized to match
(:class:`persistbench.geometry.camera.Camera`). Sizes are ``(height, width)``; a crop box is OpenCV's
``(x0, y0, w, h)``. ``resolution`` is the model interface's ``(height, width)``, -1 keeping the
dataset's size.
"""

from __future__ import annotations

import numpy as np

from persistbench.geometry.camera import Camera
from persistbench.io.images import resize_images

RGB_RESIZE = ("area", "linear", "cubic", "pil-bilinear")  # "area": area when shrinking, linear when enlarging
MODEL_INPUT_RESIZE = "pil-bilinear"  # how the public toolkit resizes a model's input frames

# What run.json records of a request's sampling, in words made from the rules below (never written by hand).
SAMPLE_RULE = "np.linspace(0, T-1, num_frames).round()"
CROP_RULE = "centre crop to the aspect ratio (the cropped side truncated with int())"
_RESIZE_WORDS = {
    "area": "area resize (linear when enlarging)",
    "linear": "bilinear resize (OpenCV)",
    "cubic": "bicubic resize (OpenCV)",
    "pil-bilinear": "bilinear resize (PIL, antialiased)",
}


def describe_resize(rgb: str) -> str:
    """How :func:`crop_resize` resizes RGB with ``rgb`` (one of :data:`RGB_RESIZE`), in words."""
    return _RESIZE_WORDS[rgb]


def sample_indices(n_frames: int, num_frames: int) -> np.ndarray:
    """Frame indices ``np.linspace(0, T-1, n).round()``; ``num_frames <= 0`` takes every frame."""
    n = n_frames if num_frames is None or num_frames <= 0 else num_frames
    return np.linspace(0, n_frames - 1, n).round().astype(np.int64)


def crop_box(size: tuple[int, int], resolution: tuple[int, int]) -> tuple[int, int, int, int]:
    """Centre crop ``(x0, y0, w, h)`` of an image of ``size`` = (h, w) to the aspect of ``resolution`` = (h, w).

    ``-1`` in ``resolution`` keeps the dataset's size (no crop). The public toolkit's rule
    (``_legacy/utils/data_utils.py``): with ``ratio = rw / rh``, an image narrower than ``ratio`` keeps
    its width and crops its height to ``int(w / ratio)``, any other keeps its height and crops its width
    to ``int(h * ratio)``; offsets ``(w - cw) // 2``, ``(h - ch) // 2``.
    """
    h, w = size
    rh, rw = resolution
    if rh <= 0 or rw <= 0:
        return 0, 0, w, h
    ratio = rw / rh
    cw, ch = (w, int(w / ratio)) if w / h < ratio else (int(h * ratio), h)
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def target_size(size: tuple[int, int], resolution: tuple[int, int]) -> tuple[int, int]:
    """Output ``(h, w)``: the model's resolution, or the dataset's ``size`` = (h, w) where it says -1."""
    rh, rw = resolution
    return (size[0], size[1]) if rh <= 0 or rw <= 0 else (rh, rw)


def fit_camera(camera: Camera, box: tuple[int, int, int, int], out: tuple[int, int]) -> Camera:
    """``camera`` after cropping to ``box`` = (x0, y0, w, h) and resizing to ``out`` = (h, w)."""
    return camera.crop(*box).resize(*out)


def crop_resize(
    image: np.ndarray, box: tuple[int, int, int, int], out: tuple[int, int], nearest: bool = False, rgb: str = "area"
) -> np.ndarray:
    """Crop ``image`` to ``box`` and resize to ``out`` = (h, w): masks (``nearest``) centre-aligned
    nearest, RGB by ``rgb`` (one of :data:`RGB_RESIZE`; ``"pil-bilinear"`` is PIL's antialiased bilinear)."""
    import cv2

    x0, y0, cw, ch = box
    crop = image[y0 : y0 + ch, x0 : x0 + cw]
    if (ch, cw) == tuple(out):
        return np.ascontiguousarray(crop)
    if rgb == "pil-bilinear" and not nearest:
        return resize_images(crop[None], out)[0]
    # Masks: centre-aligned nearest (source pixel floor((i + 0.5) * s), as PIL's NEAREST); cv2's
    # INTER_NEAREST takes floor(i * s) and shifts masks by up to half a pixel against the RGB.
    if nearest:
        interp = cv2.INTER_NEAREST_EXACT
    elif rgb == "area":
        interp = cv2.INTER_AREA if out[1] < cw else cv2.INTER_LINEAR
    else:
        interp = {"linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC}[rgb]
    return cv2.resize(crop, (out[1], out[0]), interpolation=interp)


def sampled_frames(view, idx: np.ndarray, box, out_size, rgb: str = MODEL_INPUT_RESIZE) -> np.ndarray:
    """The view's frames at ``idx``, cropped and resized to ``out_size`` = (h, w): ``[n, h, w, 3]`` uint8
    (one decode pass). PIL bilinear by default, as the public toolkit prepares a model's inputs and
    its ground truth."""
    wanted = set(idx.tolist())
    picked = {t: crop_resize(f, box, out_size, rgb=rgb) for t, f in enumerate(view.frames()) if t in wanted}
    return np.stack([picked[t] for t in idx.tolist()])


def sampled_masks(view, idx: np.ndarray, box, out_size) -> np.ndarray:
    """The view's masks at ``idx``, cropped and resized (nearest) to ``out_size`` = (h, w): ``[n, h, w]`` bool."""
    return np.stack([crop_resize(view.mask(t), box, out_size, nearest=True) > 0 for t in idx.tolist()])
