"""Per-frame metrics as pure functions on arrays (docs/metrics.md). Nothing here reads files.

Conventions: images are ``(H, W, 3)`` float in [0, 1] (uint8 is divided by
255); masks are ``(H, W)`` bool. Masked scores of a frame whose reference
mask is empty are NaN.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

PSNR_CAP = 100.0
SSIM_SIGMA = 1.5
SSIM_K1, SSIM_K2 = 0.01, 0.03


def _float(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    return image.astype(np.float64) / 255.0 if image.dtype == np.uint8 else image.astype(np.float64, copy=False)


def _box(mask: np.ndarray, margin: int = 0) -> tuple[slice, slice] | None:
    """Slices of the mask's bounding box grown by ``margin`` and clipped to the image; None if empty."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    h, w = mask.shape
    return (
        slice(max(rows[0] - margin, 0), min(rows[-1] + margin + 1, h)),
        slice(max(cols[0] - margin, 0), min(cols[-1] + margin + 1, w)),
    )


def masked_psnr(pred: np.ndarray, ref: np.ndarray, mask: np.ndarray, cap: float = PSNR_CAP) -> float:
    """PSNR (dB, data range 1) of the squared error averaged over the mask's pixels and channels.

    Capped at ``cap`` (also for a zero error); NaN for an empty mask.
    """
    mask = np.asarray(mask, bool)
    box = _box(mask)
    if box is None:
        return float("nan")
    m = mask[box]
    mse = float(np.mean((_float(np.asarray(pred)[box][m]) - _float(np.asarray(ref)[box][m])) ** 2))
    return cap if mse <= 10 ** (-cap / 10) else min(cap, 10 * np.log10(1.0 / mse))


@lru_cache(maxsize=4)
def _gaussian_kernel(sigma: float, radius: int) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian of ``2 * radius + 1`` taps, normalised to sum 1."""
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * x**2 / sigma**2)
    return k / k.sum()


def ssim_map(
    pred: np.ndarray,
    ref: np.ndarray,
    sigma: float = SSIM_SIGMA,
    window: int = 11,
    k1: float = SSIM_K1,
    k2: float = SSIM_K2,
    sample_covariance: bool = False,
) -> np.ndarray:
    """SSIM map ``(H, W, C)`` of Wang et al. as scikit-image computes it with ``gaussian_weights=True``
    and ``data_range=1`` (Gaussian filtering with reflected borders), in float64.

    ``window`` is the odd side of the Gaussian window (scikit-image: ``2 * int(3.5 * sigma + 0.5) + 1``,
    11 at sigma 1.5); ``sample_covariance`` scales the variances by ``N / (N - 1)``, ``N = window**2``.
    """
    import cv2

    x, y = _float(pred), _float(ref)
    k = _gaussian_kernel(sigma, window // 2)

    def blur(a: np.ndarray) -> np.ndarray:
        return cv2.sepFilter2D(a, cv2.CV_64F, k, k, borderType=cv2.BORDER_REFLECT)

    ux, uy = blur(x), blur(y)
    norm = window * window / (window * window - 1) if sample_covariance else 1.0
    vx = norm * (blur(x * x) - ux * ux)
    vy = norm * (blur(y * y) - uy * uy)
    vxy = norm * (blur(x * y) - ux * uy)
    c1, c2 = k1**2, k2**2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return s.reshape(x.shape)


def masked_ssim(pred: np.ndarray, ref: np.ndarray, mask: np.ndarray, **params) -> float:
    """The full-image SSIM map (:func:`ssim_map` with ``params``) averaged over the mask and channels;
    NaN for an empty mask.

    Only the mask's bounding box grown by the window radius is filtered: a
    pixel's SSIM depends on pixels within the radius only, and where the box
    meets the image border the reflection is the image's own, so the values
    equal the full map's exactly.
    """
    mask = np.asarray(mask, bool)
    box = _box(mask, params.get("window", 11) // 2)
    if box is None:
        return float("nan")
    s = ssim_map(np.asarray(pred)[box], np.asarray(ref)[box], **params)
    return float(s[mask[box]].mean())


def iou(pred_mask: np.ndarray, ref_mask: np.ndarray) -> float:
    """Intersection over union of two masks; 1.0 when both are empty."""
    a, b = np.asarray(pred_mask, bool), np.asarray(ref_mask, bool)
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def presence(pred_mask: np.ndarray) -> float:
    """1.0 when the predicted mask holds any pixel, else 0.0."""
    return float(np.asarray(pred_mask, bool).any())


def centroid(mask: np.ndarray) -> tuple[float, float] | None:
    """``(x, y)`` of a mask's pixel centres (pixel (u, v) at (u + 0.5, v + 0.5)); None when empty."""
    import cv2

    m = cv2.moments(np.ascontiguousarray(mask, dtype=bool).view(np.uint8), binaryImage=True)
    if m["m00"] == 0:
        return None
    return m["m10"] / m["m00"] + 0.5, m["m01"] / m["m00"] + 0.5


def continuity(pred_mask: np.ndarray, ref_mask: np.ndarray, scale: float) -> float:
    """Motion continuity ``exp(-|c_ref - c_pred| / scale)``, NaN when either mask is empty.

    ``scale`` is ``sqrt`` of the mean reference mask area of the case (pixels).
    """
    a, b = centroid(pred_mask), centroid(ref_mask)
    if a is None or b is None or not scale > 0:
        return float("nan")
    return float(np.exp(-np.hypot(a[0] - b[0], a[1] - b[1]) / scale))
