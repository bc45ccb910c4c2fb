"""Patch features and global descriptors of a ViT (DINOv2, DINOv2 with registers, DINOv3) through
``transformers``, batched."""

from __future__ import annotations

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class PatchFeatures:
    """The final-layer-normed patch tokens of a ViT checkpoint, as a grid per frame.

    Frames are ``(N, H, W, 3)`` float32 RGB in [0, 1], normalised with ImageNet's mean and std.
    ``fit="resize"`` resizes each frame (bilinear, no antialiasing, ``align_corners=False``) up to
    the next multiple of the patch size, as the public toolkit's appearance score does;
    ``fit="floor"`` drops the rows and columns past the last whole patch, as a strided patch
    embedding does (its DINOv3 matching). The class token and register tokens are dropped.
    """

    def __init__(self, weights, device: str, batch_size: int = 8):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import AutoModel

        self.torch, self.device, self.batch_size = torch, device, max(1, batch_size)
        self.weights = weights
        self.model = AutoModel.from_pretrained(weights.folder, use_safetensors=True, local_files_only=True)
        self.model = self.model.to(device).eval()
        cfg = self.model.config
        self.patch = int(cfg.patch_size)
        self.skip = 1 + int(getattr(cfg, "num_register_tokens", 0) or 0)
        self.dim = int(cfg.hidden_size)

    def grid(self, height: int, width: int, fit: str) -> tuple[int, int]:
        """``(h, w)`` of the patch grid of an ``height`` x ``width`` frame."""
        p = self.patch
        return (-(-height // p), -(-width // p)) if fit == "resize" else (height // p, width // p)

    def _hidden(self, frames: np.ndarray, fit: str):
        """``(start, hidden)`` per batch: the final-layer-normed tokens ``(B, 1 + registers + gh * gw, C)``."""
        torch = self.torch
        n, height, width = frames.shape[:3]
        gh, gw = self.grid(height, width, fit)
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        for start in range(0, n, self.batch_size):
            x = torch.from_numpy(frames[start : start + self.batch_size]).permute(0, 3, 1, 2)
            if fit == "resize" and (gh * self.patch, gw * self.patch) != (height, width):
                x = torch.nn.functional.interpolate(
                    x, size=(gh * self.patch, gw * self.patch), mode="bilinear", align_corners=False
                )
            elif fit == "floor":
                x = x[:, :, : gh * self.patch, : gw * self.patch]
            x = ((x - mean) / std).to(self.device)
            with torch.no_grad():
                hidden = self.model(pixel_values=x).last_hidden_state.float().cpu().numpy()
            yield start, hidden

    def __call__(self, frames: np.ndarray, fit: str = "resize") -> np.ndarray:
        """``(N, h, w, C)`` float32 patch features of ``(N, H, W, 3)`` frames in [0, 1] (batches of ``batch_size``)."""
        frames = np.asarray(frames, np.float32)
        gh, gw = self.grid(*frames.shape[1:3], fit)
        out = np.empty((len(frames), gh, gw, self.dim), np.float32)
        for start, hidden in self._hidden(frames, fit):
            out[start : start + len(hidden)] = hidden[:, self.skip :].reshape(len(hidden), gh, gw, self.dim)
        return out

    def embed(self, frames: np.ndarray, fit: str = "resize") -> np.ndarray:
        """``(N, C)`` float32 global descriptors of ``(N, H, W, 3)`` frames in [0, 1]: the final-layer-normed
        class token (the model's ``pooler_output``)."""
        frames = np.asarray(frames, np.float32)
        out = np.empty((len(frames), self.dim), np.float32)
        for start, hidden in self._hidden(frames, fit):
            out[start : start + len(hidden)] = hidden[:, 0]
        return out


def load(spec: BackendSpec, opts: BackendOptions) -> PatchFeatures:
    """The backend ``spec`` as :class:`PatchFeatures` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return PatchFeatures(*weights_and_device(spec, opts), opts.batch_size)
