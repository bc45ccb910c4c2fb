"""A continuation model from a file: the first input frame, repeated (tests load it as file.py:Class)."""

import numpy as np

from persistbench.models import BaseModel, ModelInput, ModelOutput


class FirstFrame(BaseModel):
    resolution = (-1, -1)

    def predict(self, sample: ModelInput) -> ModelOutput:
        first = np.clip(sample.input_frames[0] * 255 + 0.5, 0, 255).astype(np.uint8)
        return ModelOutput(frames=np.repeat(first[None], sample.num_targets(), 0))
