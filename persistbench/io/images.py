"""The image codec: 8-bit RGB and mask files, read strictly and written deterministically."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import MAX_IMAGE_BYTES, open_regular, read_bounded, write_bytes

_IMAGE_RE = re.compile(r"^(?:frame_|mask_)?(\d{4,5})\.(?:png|jpg|jpeg)$", re.IGNORECASE)


def encode_image(image: np.ndarray, fmt: str = "png") -> bytes:
    """Encode an RGB ``(H, W, 3)`` or gray ``(H, W)`` uint8 image; deterministic bytes."""
    import cv2

    if image.dtype != np.uint8:
        raise ValueError(f"images are written as uint8, got {image.dtype}")
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    params = [cv2.IMWRITE_PNG_COMPRESSION, 3] if fmt == "png" else [cv2.IMWRITE_JPEG_QUALITY, 95]
    ok, buf = cv2.imencode(f".{fmt}", image, params)
    if not ok:
        raise ValueError(f"cannot encode image as {fmt}")
    return buf.tobytes()


def outline(image: np.ndarray, mask: np.ndarray, colour: tuple[int, int, int], width: int = 2) -> np.ndarray:
    """``image`` (``(h, w, 3)`` uint8) with the outer contours of ``mask`` (``(h, w)`` bool) drawn in ``colour``."""
    import cv2

    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    return cv2.drawContours(np.ascontiguousarray(image).copy(), contours, -1, colour, width)


def write_image(path: str | os.PathLike, image: np.ndarray) -> str:
    """Write an image atomically in the format its suffix names; return the sha256."""
    fmt = Path(path).suffix.lower().lstrip(".").replace("jpeg", "jpg")
    return write_bytes(path, encode_image(image, fmt))


def read_image(path: str | os.PathLike, gray: bool = False) -> np.ndarray:
    """Read an 8-bit image as RGB ``(H, W, 3)`` or, with ``gray``, ``(H, W)`` uint8.

    An RGB read refuses a file that is not 8-bit three-channel colour (a grayscale or
    16-bit frame is a broken frame, not one to convert silently).
    """
    import cv2

    data = np.frombuffer(read_bounded(path, MAX_IMAGE_BYTES), np.uint8)
    image = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_UNCHANGED) if data.size else None
    if image is None:
        raise PersistbenchError(f"{path}: not a readable image")
    if gray:
        return image
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        channels = 1 if image.ndim == 2 else image.shape[2]
        raise PersistbenchError(f"{path}: expected an 8-bit RGB image, found {channels} channel(s) of {image.dtype}")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """``(h, w)`` of an image from its header alone (nothing decoded), to bound untrusted files before reading."""
    from PIL import Image, UnidentifiedImageError

    try:
        with open_regular(path) as f, Image.open(f) as image:
            return image.height, image.width
    except Image.DecompressionBombError:
        raise PersistbenchError(
            f"{path}: larger than the decompression-bomb limit (2 x {Image.MAX_IMAGE_PIXELS} pixels); refused unread"
        ) from None
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise PersistbenchError(f"{path}: not a readable image ({e})") from None


def list_images(directory: str | os.PathLike) -> list[Path]:
    """Frame or mask files of a directory in the order of their numbers.

    Accepts 4- or 5-digit numbering, with or without the ``frame_``/``mask_``
    prefix, PNG or JPG; two files of one number are refused. A missing directory gives an empty list.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    numbered = sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _IMAGE_RE.match(p.name)))
    for (a, p), (b, q) in zip(numbered, numbered[1:]):
        if a == b:
            raise PersistbenchError(f"{directory}: {p.name} and {q.name} are both image {a}")
    return [p for _, p in numbered]


def resize_images(
    images: np.ndarray, size: tuple[int, int], nearest: bool = False, bicubic: bool = False
) -> np.ndarray:
    """``(N, h, w, ...)`` uint8 images resized to ``size`` = ``(h, w)`` with PIL (bilinear with its
    antialiasing, bicubic, or nearest); returned unchanged when already that size."""
    from PIL import Image

    if images.shape[1:3] == tuple(size):
        return images
    mode = Image.NEAREST if nearest else Image.BICUBIC if bicubic else Image.BILINEAR
    return np.stack([np.asarray(Image.fromarray(i).resize((size[1], size[0]), mode)) for i in images])


def short_side_size(height: int, width: int, short: int) -> tuple[int, int]:
    """``(h, w)`` with the shorter side ``short`` pixels and the aspect kept (rounded)."""
    scale = short / min(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def torchvision_short_side(height: int, width: int, short: int) -> tuple[int, int]:
    """``(h, w)`` that torchvision's ``Resize(short)`` gives a PIL image: the shorter side ``short``, the longer
    ``int(short * longer / shorter)`` (truncated)."""
    if width <= height:
        return int(short * height / width), short
    return short, int(short * width / height)


def centre_crop(images: np.ndarray, size: int) -> np.ndarray:
    """``(N, size, size, ...)``: torchvision's ``CenterCrop(size)`` of ``(N, h, w, ...)`` images (offsets
    ``int(round((h - size) / 2))``; never larger than the image)."""
    h, w = images.shape[1:3]
    top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
    return images[:, top : top + size, left : left + size]


def transformed(images: np.ndarray, size, preprocess: str = "pil-bilinear", crop: int | None = None) -> np.ndarray:
    """``(N, h, w, 3)`` float32 [0, 1]: ``(N, H, W, 3)`` uint8 images resized to a shorter side of ``size`` pixels
    (an int) or to ``size`` = ``[h, w]``. ``preprocess`` ``pil-bilinear``: PIL bilinear, the shorter side's partner
    rounded; ``torchvision-bicubic``: torchvision's ``Resize(size, BICUBIC)`` on PIL images (the partner
    truncated), then ``CenterCrop(crop)`` when ``crop`` is given (upstream's DINOv2, BoQ and MutualVPR
    transforms, and OpenAI's CLIP preprocessing)."""
    tv = preprocess == "torchvision-bicubic"
    if isinstance(size, int):
        hw = (torchvision_short_side if tv else short_side_size)(*images.shape[1:3], size)
    else:
        hw = tuple(size)
    out = resize_images(images, hw, bicubic=tv)
    if crop is not None:
        out = centre_crop(out, crop)
    return out.astype(np.float32) / 255.0
