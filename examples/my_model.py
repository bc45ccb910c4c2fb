"""A model in the public PersistBench interface style: copy this file and fill in predict().

Run it with:
    persistbench infer --model examples/my_model.py:MyModel --dataset reconstructed --output runs/mine
"""

import numpy as np

from persistbench import BaseModel, ModelInput, ModelOutput


class MyModel(BaseModel):
    # Frames the model wants per case (sampled uniformly) and its (height, width); -1 keeps the dataset's.
    num_frames = 16
    resolution = (96, 128)

    def __init__(self, device="cuda"):
        self.device = device
        # Load weights here, from a path you control; the toolkit never downloads them.

    def predict(self, sample: ModelInput) -> ModelOutput:
        # sample.input_frames: [T, H, W, 3] float32 in [0, 1] from the input view (view_0)
        # sample.input_cameras / sample.target_cameras: {"cam_poses": [T, 4, 4], "cam_intrinsic": [3, 3]}
        # Return the target (center) view: [T, H, W, 3], uint8 or float in [0, 1].
        # This placeholder shows the input view's mean colour: replace it with your model.
        mean = sample.input_frames.mean(axis=(1, 2), keepdims=True)
        return ModelOutput(frames=np.broadcast_to(mean, sample.input_frames.shape).astype(np.float32))
