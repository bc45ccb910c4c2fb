"""A global image descriptor from an exported program: the place-recognition models (BoQ, MutualVPR)
that no maintained package provides, exported by the user from their upstream code with ``torch.export``."""

from __future__ import annotations

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, BackendUnavailable, weights_and_device
from persistbench.backends.features import IMAGENET_MEAN, IMAGENET_STD
from persistbench.core.errors import PersistbenchError


class ExportedDescriptor:
    """``program(x) -> (B, D)`` for ImageNet-normalised ``x`` ``(B, 3, H, W)``: a ``torch.export`` archive
    (``.pt2``: the graph as JSON and the tensors; no pickled Python objects), loaded with
    ``torch.export.load``. Export it with a dynamic batch dimension and the protocol's ``size``."""

    def __init__(self, weights, device: str, batch_size: int = 8):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` whose single file is the archive."""
        import torch

        self.torch, self.device, self.batch_size, self.weights = torch, device, max(1, batch_size), weights
        self.model = torch.export.load(str(weights.files[0])).module().to(device)

    def embed(self, frames: np.ndarray) -> np.ndarray:
        """``(N, D)`` float32 descriptors of ``(N, H, W, 3)`` frames in [0, 1] (batches of ``batch_size``)."""
        torch = self.torch
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        out = []
        for start in range(0, len(frames), self.batch_size):
            x = torch.from_numpy(np.asarray(frames[start : start + self.batch_size], np.float32)).permute(0, 3, 1, 2)
            try:
                with torch.no_grad():
                    y = self.model(((x - mean) / std).to(self.device))
            except (AssertionError, RuntimeError) as e:  # the program's shape guards
                raise PersistbenchError(
                    f"{self.weights.source}: the exported program does not take {len(x)} x 3 x {x.shape[2]} x "
                    f"{x.shape[3]} input ({e}); export it with a dynamic batch for the protocol's size".splitlines()[0]
                ) from None
            if isinstance(y, (tuple, list)):  # some models return (descriptor, attention)
                y = y[0]
            out.append(y.reshape(len(x), -1).float().cpu().numpy())
        return np.concatenate(out)


def load(spec: BackendSpec, opts: BackendOptions) -> ExportedDescriptor:
    """The backend ``spec``, a ``torch.export`` archive, as :class:`ExportedDescriptor`."""
    weights, device = weights_and_device(spec, opts)
    try:
        return ExportedDescriptor(weights, device, opts.batch_size)
    except Exception as e:  # torch.export.load's errors for a zip that is not an exported program
        raise BackendUnavailable(f"{weights.source}: not a torch.export archive ({e})".splitlines()[0]) from None
