"""A generative stand-in: the hold baseline plus noise drawn from the case's seed (``ModelInput.seed``), so that
runs with different ``infer --seed`` differ and runs with the same seed are identical."""

import numpy as np

from persistbench.models.base import ModelOutput
from persistbench.models.builtin import HoldModel


class NoisyHold(HoldModel):
    def predict(self, sample):
        frames = super().predict(sample).frames.astype(np.int16)
        rng = np.random.default_rng(sample.seed)
        noise = rng.integers(-40, 41, size=frames.shape, dtype=np.int16)
        return ModelOutput(frames=np.clip(frames + noise, 0, 255).astype(np.uint8))
