"""Per-frame metrics as pure functions on arrays (DESIGN.md section 8). Nothing here reads files.

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


# ---------------------------------------------------------------- LPIPS (the `lpips` extra)

ALEXNET_FILE = "alexnet-owt-7be5be79.pth"  # torchvision's AlexNet weights, as the torch hub caches them
ALEXNET_URL = "https://download.pytorch.org/models/" + ALEXNET_FILE  # PERSISTBENCH_ALEXNET_URL overrides (a mirror)
LPIPS_FIX = (
    'pip install -e ".[lpips]" and put ' + ALEXNET_FILE + " in $TORCH_HOME/hub/checkpoints "
    "(or pass --lpips-weights FILE, or --allow-download to fetch it)"
)


def alexnet_path(weights: str | None = None) -> str:
    """Where the AlexNet weights are looked for: ``weights``, else ``$TORCH_HOME/hub/checkpoints/`` (needs torch)."""
    import os

    import torch

    return weights or os.path.join(torch.hub.get_dir(), "checkpoints", ALEXNET_FILE)


class LpipsUnavailable(RuntimeError):
    """LPIPS cannot be computed here; the message says why and what fixes it."""


class Lpips:
    """Masked LPIPS (AlexNet, v0.1, the lpips package's linear layers), batched over frames.

    The AlexNet backbone comes from ``weights`` or the torch hub cache
    (``$TORCH_HOME/hub/checkpoints/alexnet-owt-7be5be79.pth``); nothing is
    downloaded unless ``allow_download``, which fetches the file into that cache
    and checks its sha256 prefix (``7be5be79``). ``random_backbone`` skips it
    (tests only: the scores mean nothing).

    Raises:
        LpipsUnavailable: the extra is not installed or the weights are missing.
    """

    def __init__(
        self,
        device: str = "cpu",
        weights: str | None = None,
        random_backbone: bool = False,
        allow_download: bool = False,
    ):
        try:
            import lpips
            import torch
        except ImportError as e:
            raise LpipsUnavailable(f"LPIPS needs torch and lpips ({e.name} is missing): {LPIPS_FIX}") from None
        self.torch, self.device = torch, device
        self.model = lpips.LPIPS(
            net="alex", version="0.1", spatial=True, pretrained=True, pnet_rand=True, verbose=False
        )
        if not random_backbone:
            self._load_backbone(weights, allow_download)
        self.model = self.model.to(device).eval()

    def _load_backbone(self, weights: str | None, allow_download: bool) -> None:
        import os

        path = alexnet_path(weights)
        if not os.path.isfile(path) and allow_download and not weights:
            url = os.environ.get("PERSISTBENCH_ALEXNET_URL", ALEXNET_URL)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            try:  # torch writes a temporary file and renames it only when the hash prefix matches
                self.torch.hub.download_url_to_file(
                    url, path, hash_prefix=ALEXNET_FILE.split("-")[-1][:8], progress=False
                )
            except (OSError, RuntimeError, ValueError) as e:
                raise LpipsUnavailable(
                    f"AlexNet weights could not be downloaded from {url}: {e}".splitlines()[0]
                ) from None
        if not os.path.isfile(path):
            raise LpipsUnavailable(f"AlexNet weights not found at {path}: {LPIPS_FIX}")
        state = self.torch.load(path, map_location="cpu", weights_only=True)
        net = self.model.net
        for i in range(1, net.N_slices + 1):
            for name, layer in getattr(net, f"slice{i}").named_children():
                for param in ("weight", "bias"):
                    key = f"features.{name}.{param}"
                    if hasattr(layer, param) and getattr(layer, param) is not None:
                        if key not in state:
                            raise LpipsUnavailable(f"{path}: not torchvision AlexNet weights (no {key})")
                        getattr(layer, param).data.copy_(state[key])

    def _tensor(self, images: np.ndarray):
        images = np.asarray(images)
        x = images.astype(np.float32) / (255.0 if images.dtype == np.uint8 else 1.0)
        return (self.torch.from_numpy(x).permute(0, 3, 1, 2) * 2 - 1).to(self.device)  # [N, 3, H, W] in [-1, 1]

    def __call__(self, preds: np.ndarray, refs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """LPIPS per frame ``(N,)`` of ``[N, H, W, 3]`` batches: the spatial map averaged over each
        ``[N, H, W]`` mask (NaN where empty), or, without masks, the package's own spatial average."""
        if masks is None:
            x, y = self._tensor(preds), self._tensor(refs)
            self.model.spatial = False
            try:
                with self.torch.no_grad():
                    return self.model(x, y).reshape(-1).double().cpu().numpy()
            finally:
                self.model.spatial = True
        return self.reduce(self.maps(preds, refs), masks)

    def maps(self, preds: np.ndarray, refs: np.ndarray) -> np.ndarray:
        """The spatial LPIPS maps ``(N, H, W)`` float64 of ``[N, H, W, 3]`` batches."""
        x, y = self._tensor(preds), self._tensor(refs)
        with self.torch.no_grad():
            return self.model(x, y)[:, 0].double().cpu().numpy()

    @staticmethod
    def reduce(maps: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Each map's mean over its ``(H, W)`` mask; NaN where the mask is empty."""
        masks = np.asarray(masks, bool)
        return np.array([m[k].mean() if k.any() else np.nan for m, k in zip(maps, masks)])
