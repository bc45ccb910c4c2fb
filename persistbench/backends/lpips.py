"""The ``lpips`` backend: LPIPS (AlexNet, v0.1, the lpips package's linear layers) on frames, batched.

Weights: torchvision's AlexNet file, from ``--weights lpips=FILE`` (alias ``--lpips-weights``) or the torch
hub cache; downloaded only with ``--allow-download`` (its sha256 prefix checked). Loaded through
:func:`persistbench.backends.load` like every backend; metrics that need it and cannot have it are
recorded unavailable with the reason.
"""

from __future__ import annotations

import warnings

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, BackendUnavailable, resolve_device

ALEXNET_FILE = "alexnet-owt-7be5be79.pth"  # torchvision's AlexNet weights, as the torch hub caches them


ALEXNET_URL = "https://download.pytorch.org/models/" + ALEXNET_FILE  # PERSISTBENCH_ALEXNET_URL overrides (a mirror)


LPIPS_FIX = (
    'pip install -e ".[lpips]" and put ' + ALEXNET_FILE + " in $TORCH_HOME/hub/checkpoints "
    "(or pass --weights lpips=FILE, or --allow-download to fetch it)"
)


def alexnet_path(weights: str | None = None) -> str:
    """Where the AlexNet weights are looked for: ``weights``, else ``$TORCH_HOME/hub/checkpoints/`` (needs torch)."""
    import os

    import torch

    return weights or os.path.join(torch.hub.get_dir(), "checkpoints", ALEXNET_FILE)


def check_weights(weights: str | None, allow_download: bool) -> None:
    """Raise :class:`LpipsUnavailable` unless the AlexNet file is there (or may be downloaded); loads nothing."""
    import os

    if not (os.path.isfile(alexnet_path(weights)) or (allow_download and not weights)):
        raise LpipsUnavailable(f"AlexNet weights not found at {alexnet_path(weights)}: {LPIPS_FIX}")


class LpipsUnavailable(BackendUnavailable):
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
        with warnings.catch_warnings():  # lpips builds AlexNet with torchvision's deprecated arguments
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torchvision\.")
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


def load(spec: BackendSpec, opts: BackendOptions) -> Lpips:
    """The ``lpips`` backend: AlexNet's weights from ``--weights lpips=FILE`` or torchvision's cache."""
    return Lpips(resolve_device(opts.device), opts.weights_for(spec.name), allow_download=opts.allow_download)
