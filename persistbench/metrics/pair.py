"""Metrics on pairs of frames of one generated video (R2M-Bench's families), as pure functions on arrays.

A video's frames are decoded once; what a metric needs of a single frame (SIFT keypoints and
descriptors) is computed once per frame and shared by every pair that uses the frame. Frames are
``(H, W, 3)`` uint8 RGB.

Definitions (docs/metrics.md, "R2M-Bench"):

* :func:`psnr` — data range 255 over all pixels and channels, capped at ``cap`` dB (identical frames
  give ``cap``, never inf);
* :func:`ssim` — scikit-image's ``structural_similarity`` defaults: 7 x 7 uniform window, sample
  covariance, data range 255, the border of half a window cropped, mean over channels;
* :func:`sift_ratios` — SIFT, Lowe's ratio test and a RANSAC fundamental matrix; *not* upstream's
  SuperPoint + LightGlue numbers (:func:`keypoint_ratios` gives those from LightGlue's matches);
* :func:`cosine`, :func:`detected`, :func:`object_score` — the arithmetic of the model-based
  families on descriptors and masks the backends produce (R2M-Bench's ``pair_video.py``);
* :func:`mask_grid`, :func:`pooled` — patch features pooled inside a mask (R2M-Bench's object family and
  PersistBench's paper-v3 appearance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def psnr(a: np.ndarray, b: np.ndarray, cap: float = 100.0) -> float:
    """PSNR in dB of two uint8 frames (data range 255), capped at ``cap``."""
    import cv2

    d = cv2.absdiff(a, b).astype(np.uint16)
    np.multiply(d, d, out=d)  # at most 255 ** 2: exact in uint16, and the int64 sum is exact
    mse = int(d.sum(dtype=np.int64)) / d.size
    return cap if mse <= 255.0**2 * 10 ** (-cap / 10) else min(cap, 10 * np.log10(255.0**2 / mse))


def _box(a: np.ndarray, window: int, out: np.ndarray | None = None) -> np.ndarray:
    import cv2

    return cv2.boxFilter(a, cv2.CV_64F, (window, window), dst=out, normalize=True, borderType=cv2.BORDER_REFLECT)


@dataclass
class SsimFrame:
    """What SSIM needs of one frame, whatever it is paired with (``(H, W, C)`` float64 each): the frame, its local
    means ``mean``, their squares ``mean_sq`` and its local sample variances ``var`` (uniform ``window``)."""

    x: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)
    mean_sq: np.ndarray = field(repr=False)
    var: np.ndarray = field(repr=False)

    @property
    def nbytes(self) -> int:
        return 4 * self.x.nbytes


def ssim_frame(a: np.ndarray, window: int = 7) -> SsimFrame:
    """:class:`SsimFrame` of a frame (uniform ``window`` x ``window`` means, reflected borders)."""
    x = a.astype(np.float64)
    n = window * window
    mean = _box(x, window)
    mean_sq = mean * mean
    var = _box(x * x, window)
    var -= mean_sq
    var *= n / (n - 1)  # sample covariance
    return SsimFrame(x, mean, mean_sq, var)


def ssim_of(
    fa: SsimFrame,
    fb: SsimFrame,
    window: int = 7,
    data_range: float = 255.0,
    k1: float = 0.01,
    k2: float = 0.03,
    work: list[np.ndarray] | None = None,
) -> float:
    """SSIM of two frames' :class:`SsimFrame` (see :func:`ssim`); ``work``: three float64 arrays of the frames'
    shape that the computation may overwrite (new ones when None; reused between pairs, they spare the page
    faults of fresh 3 MB arrays)."""
    u, p, v = work if work is not None else [np.empty_like(fa.x) for _ in range(3)]
    n = window * window
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    uxy = np.multiply(fa.mean, fb.mean, out=u)
    vxy = _box(np.multiply(fa.x, fb.x, out=p), window, out=v)
    vxy -= uxy
    vxy *= n / (n - 1)
    num = uxy
    num *= 2
    num += c1
    vxy *= 2
    vxy += c2
    num *= vxy
    den = np.add(fa.mean_sq, fb.mean_sq, out=p)
    den += c1
    var = np.add(fa.var, fb.var, out=v)
    var += c2
    den *= var
    num /= den
    pad = (window - 1) // 2
    return float(num[pad : num.shape[0] - pad, pad : num.shape[1] - pad].mean())


def ssim(a: np.ndarray, b: np.ndarray, window: int = 7, data_range: float = 255.0, k1=0.01, k2=0.03) -> float:
    """scikit-image's default ``structural_similarity(a, b, channel_axis=-1, data_range=255)`` of two frames:
    uniform ``window`` x ``window`` means (reflected borders), sample covariance, the border of half a
    window cropped, the mean over pixels and channels."""
    return ssim_of(ssim_frame(a, window), ssim_frame(b, window), window, data_range, k1, k2)


@dataclass
class SiftFrame:
    """SIFT keypoint positions ``(N, 2)`` and descriptors ``(N, 128)`` float32 of one frame."""

    points: np.ndarray
    descriptors: np.ndarray = field(repr=False)


def sift_frame(frame: np.ndarray, max_features: int = 0) -> SiftFrame:
    """SIFT on the frame's luma (OpenCV's defaults; ``max_features`` 0: all)."""
    import cv2

    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    keypoints, desc = cv2.SIFT_create(nfeatures=max_features).detectAndCompute(gray, None)
    points = np.array([k.pt for k in keypoints], np.float32).reshape(-1, 2)
    return SiftFrame(points, desc if desc is not None else np.zeros((0, 128), np.float32))


def sift_ratios(a: SiftFrame, b: SiftFrame, ratio: float = 0.75, ransac_px: float = 3.0, confidence: float = 0.99):
    """``(match ratio, inlier ratio)`` of two frames' SIFT features.

    Matches pass Lowe's ratio test (nearest / second nearest distance < ``ratio``); match ratio =
    matches / min(keypoints of a, keypoints of b); inlier ratio = inliers of a RANSAC fundamental
    matrix (``ransac_px`` pixels, ``confidence``) / matches. Both are 0 below 8 matches (no
    fundamental matrix can be fitted); the inlier ratio is 0 when RANSAC finds no matrix.
    """
    import cv2

    if len(a.points) < 2 or len(b.points) < 2:
        return 0.0, 0.0
    pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(a.descriptors, b.descriptors, k=2)
    good = [m for m, n in (p for p in pairs if len(p) == 2) if m.distance < ratio * n.distance]
    if len(good) < 8:
        return 0.0, 0.0
    pa = a.points[[m.queryIdx for m in good]]
    pb = b.points[[m.trainIdx for m in good]]
    return match_ratios(len(a.points), len(b.points), pa, pb, ransac_px, confidence)


def match_ratios(
    keypoints_a: int, keypoints_b: int, pa: np.ndarray, pb: np.ndarray, ransac_px: float, confidence: float
) -> tuple[float, float]:
    """``(match ratio, inlier ratio)`` of ``M`` matches ``pa[i] <-> pb[i]`` (``(M, 2)`` pixels) between frames
    with ``keypoints_a`` and ``keypoints_b`` keypoints: matches / min(keypoints), and the inliers of a RANSAC
    fundamental matrix (``ransac_px``, ``confidence``) / matches. Both 0 below 8 matches; the inlier
    ratio 0 when RANSAC finds no matrix."""
    import cv2

    if len(pa) < 8 or min(keypoints_a, keypoints_b) == 0:
        return 0.0, 0.0
    pa, pb = np.asarray(pa, np.float32), np.asarray(pb, np.float32)
    f, inliers = cv2.findFundamentalMat(pa, pb, cv2.FM_RANSAC, ransac_px, confidence)
    # No model (degenerate points, e.g. SIFT's duplicated keypoints): no inliers. OpenCV then leaves
    # the mask uninitialised, so it must not be read.
    n_in = int(np.count_nonzero(inliers)) if f is not None and inliers is not None else 0
    return len(pa) / min(keypoints_a, keypoints_b), n_in / len(pa)


def keypoint_ratios(
    keypoints_a: int, keypoints_b: int, pa: np.ndarray, pb: np.ndarray, ransac_px: float, confidence: float
) -> tuple[float, float]:
    """``(match ratio, inlier ratio)`` of ``M`` keypoint matches as upstream's ``KeypointMatcher`` and
    ``compute_two_view_geometry`` give them: matches / max(min(keypoints), 1) at any ``M``; the inliers of a
    RANSAC fundamental matrix on the float64 points (``ransac_px``, ``confidence``) / matches, 0 below 8
    matches or when RANSAC finds no matrix."""
    import cv2

    match = len(pa) / max(min(keypoints_a, keypoints_b), 1)
    if len(pa) < 8:
        return match, 0.0
    f, mask = cv2.findFundamentalMat(
        np.asarray(pa, np.float64), np.asarray(pb, np.float64), cv2.FM_RANSAC, ransac_px, confidence
    )
    if f is None or mask is None:
        return match, 0.0
    return match, int(mask.ravel().astype(bool).sum()) / len(pa)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine similarity of two descriptors (float64; 0 when either is zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norm) if norm > 0 else 0.0


def point_grid(height: int, width: int, n: int) -> np.ndarray:
    """``(n * n, 2)`` ``(x, y)`` pixel centres of an ``n`` x ``n`` grid of cells over a frame, row by row."""
    centres = (np.arange(n) + 0.5) / n
    return np.array([(x * width, y * height) for y in centres for x in centres], np.float64)


def detected(masks: np.ndarray, min_area: float, max_area: float, overlap: float) -> list[int]:
    """Which of ``K`` candidate masks ``(K, H, W)`` are objects: covering ``[min_area, max_area]`` of the
    frame, and overlapping no earlier kept one by an IoU above ``overlap`` (in candidate order)."""
    kept: list[int] = []
    area = masks.reshape(len(masks), -1).mean(axis=1)
    for k in range(len(masks)):
        if not min_area <= area[k] <= max_area:
            continue
        if all(
            np.logical_and(masks[k], masks[j]).sum() <= overlap * np.logical_or(masks[k], masks[j]).sum() for j in kept
        ):
            kept.append(k)
    return kept


def object_score(
    features_a: np.ndarray, features_b: np.ndarray, masks_a: np.ndarray, masks_b: np.ndarray
) -> float | None:
    """The mean over objects of the cosine of their pooled patch features in the two frames (0 for an object
    not found in ``b``): ``features_*`` ``(gh, gw, C)``, ``masks_*`` ``(K, H, W)`` bool. None without objects."""
    if not len(masks_a):
        return None
    scores = [
        float(pooled(features_a, ma) @ pooled(features_b, mb)) if mb.any() else 0.0 for ma, mb in zip(masks_a, masks_b)
    ]
    return float(np.mean(scores))


def mask_grid(mask: np.ndarray, gh: int, gw: int) -> np.ndarray:
    """Which cells of a ``gh`` x ``gw`` patch grid over ``mask`` hold any of it: torch's ``area`` interpolation
    (adaptive average pooling, cells ``[floor(i H / gh), ceil((i + 1) H / gh))``) of the mask, > 0."""
    h, w = mask.shape
    m = np.asarray(mask, bool)
    rows = [(i * h // gh, -(-(i + 1) * h // gh)) for i in range(gh)]
    cols = [(j * w // gw, -(-(j + 1) * w // gw)) for j in range(gw)]
    return np.array([[m[r0:r1, c0:c1].any() for c0, c1 in cols] for r0, r1 in rows])


def pooled(features: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The L2-normalised (+1e-8) mean of the ``(gh, gw, C)`` patch features in the cells ``mask`` touches
    (every cell when it touches none)."""
    cells = mask_grid(mask, *features.shape[:2])
    if not cells.any():
        cells[:] = True
    v = features[cells].astype(np.float64).mean(axis=0)
    return v / (np.linalg.norm(v) + 1e-8)
