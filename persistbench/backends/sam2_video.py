"""SAM 2.1's video predictor from the ``sam2`` package (extra ``[sam2]``), run as the public toolkit runs it.

The published paper-v3 scores come from this package (``sam2`` 1.1.0, the code the public toolkit
pins), not from ``transformers``' port, whose masks differ by tens of pixels a frame on the same
weights and frames (it resizes to 1024 px bilinearly where the package uses PIL's bicubic filter,
fills no holes and does not autocast; docs/metrics.md). Here, as in the public toolkit's model
server: frames are read from an image folder by the package's own loader, the prompt is a mask on
frame 0, logits above 0 are the object, and on CUDA the predictor runs under bf16 autocast with
TF32 matmuls (restored afterwards, so other backends in the process are not affected). Holes of up
to 8 px in the low-resolution logits are filled only when the package's CUDA extension
(``sam2._C``) is built, as in the package; :meth:`provenance` records whether it was.

The checkpoint is the package's ``.pt`` file (a torch zip of tensors), read with
``torch.load(weights_only=True)``, torch's restricted unpickler that builds tensors and plain
containers only and runs no code from the file.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, BackendUnavailable, weights_and_device

# (width of the trunk's first stage, number of blocks) -> the package's configuration of that checkpoint
CONFIGS = {
    (96, 12): "configs/sam2.1/sam2.1_hiera_t.yaml",
    (96, 16): "configs/sam2.1/sam2.1_hiera_s.yaml",
    (112, 24): "configs/sam2.1/sam2.1_hiera_b+.yaml",
    (144, 48): "configs/sam2.1/sam2.1_hiera_l.yaml",
}


def read_checkpoint(path: Path) -> tuple[dict, str]:
    """The state dict of a ``sam2`` checkpoint file (``{"model": state_dict}``) and the package configuration
    its shapes belong to; :class:`BackendUnavailable` (one line naming ``path``) for anything else."""
    import torch

    if not zipfile.is_zipfile(path):
        raise BackendUnavailable(f"{path}: not a SAM 2 checkpoint (a torch zip file, as sam2.1_hiera_large.pt)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # the restricted unpickler refuses anything but tensors and plain containers
        raise BackendUnavailable(f"{path}: not loadable as tensors only ({str(e).splitlines()[0]})") from None
    sd = state.get("model") if isinstance(state, dict) else None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise BackendUnavailable(f"{path}: not a SAM 2 checkpoint (no 'model' state dict of tensors)")
    width = sd.get("image_encoder.trunk.patch_embed.proj.weight")
    blocks = {k.split(".")[3] for k in sd if k.startswith("image_encoder.trunk.blocks.")}
    config = CONFIGS.get((int(width.shape[0]) if width is not None else 0, len(blocks)))
    if config is None:
        raise BackendUnavailable(f"{path}: not a SAM 2.1 Hiera checkpoint (tiny, small, base+ or large)")
    return sd, config


class Sam2PackageTracker:
    """Follows an object, given by a mask on the first frame, through a video with the ``sam2`` package."""

    def __init__(self, weights, device: str):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` whose single file is the checkpoint."""
        import torch
        from sam2.build_sam import build_sam2_video_predictor

        self.torch, self.device, self.weights = torch, device, weights
        sd, self.config = read_checkpoint(weights.files[0])
        self.predictor = build_sam2_video_predictor(self.config, None, device=device)
        missing, unexpected = self.predictor.load_state_dict(sd, strict=False)
        if missing or unexpected:
            raise BackendUnavailable(
                f"{weights.files[0]}: does not fit {self.config} "
                f"({len(missing)} missing, {len(unexpected)} unexpected tensors)"
            )
        self.fill_holes = _has_extension()

    def provenance(self) -> dict:
        """What produced the masks: weights, device, the package's configuration, hole filling, precision."""
        return {
            **self.weights.provenance(),
            "device": self.device,
            "sam2_config": self.config,
            "fill_holes": self.fill_holes,
            "precision": "bf16-autocast" if self._cuda else "float32",
        }

    @property
    def _cuda(self) -> bool:
        return str(self.device).startswith("cuda")

    def track(self, frames: list[np.ndarray], mask: np.ndarray) -> list[np.ndarray]:
        """One ``(H, W)`` bool mask per frame of ``frames`` (``(H, W, 3)`` uint8 RGB), the first prompted
        with ``mask`` (``(H, W)``, nonzero = object); a frame the predictor returns nothing for is empty."""
        from PIL import Image

        h, w = frames[0].shape[:2]
        out = [np.zeros((h, w), bool) for _ in frames]
        with tempfile.TemporaryDirectory(prefix="persistbench-sam2-") as folder:
            # The package reads only *.jpg names from a folder and PIL opens files by their content: PNG data
            # under those names hands it exactly these pixels (a JPEG would be one more lossy pass).
            for i, frame in enumerate(frames):
                Image.fromarray(frame).save(Path(folder) / f"{i}.jpg", format="PNG", compress_level=1)
            with self._precision(), self.torch.inference_mode(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="(?s).*Skipping the post-processing step")
                state = self.predictor.init_state(video_path=folder)
                self.predictor.add_new_mask(state, frame_idx=0, obj_id=1, mask=np.asarray(mask).astype(bool))
                for i, ids, logits in self.predictor.propagate_in_video(state):
                    if 1 in list(ids):
                        out[i] = (logits[list(ids).index(1)] > 0.0)[0].cpu().numpy()
        return out

    @contextlib.contextmanager
    def _precision(self):
        """bf16 autocast and TF32 matmuls on CUDA (Ampere and newer), as the public model server sets them."""
        torch = self.torch
        if not self._cuda:
            yield
            return
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        if torch.cuda.get_device_properties(torch.device(self.device)).major >= 8:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _has_extension() -> bool:
    """Whether the package's CUDA extension (connected components, for hole filling) is built."""
    try:
        from sam2 import _C  # noqa: F401
    except ImportError:
        return False
    return True


def load(spec: BackendSpec, opts: BackendOptions) -> Sam2PackageTracker:
    """The backend ``spec`` as :class:`Sam2PackageTracker` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return Sam2PackageTracker(*weights_and_device(spec, opts))
