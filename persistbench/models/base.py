"""The model interface: the public PersistBench names and fields, plus two extensions.

A model file written for the public toolkit runs here unchanged::

    class MyModel(BaseModel):
        num_frames = 16             # frames the model wants (-1: all)
        resolution = (-1, -1)       # (height, width); -1 keeps the dataset's
        def __init__(self, device="cuda"): ...
        def predict(self, sample: ModelInput) -> ModelOutput: ...

Extensions: ``ModelOutput.masks`` (the model's own localisation of the
object) and ``ModelOutput.projection = "equirect"`` for models that output
360-degree frames, which the toolkit reprojects into the target cameras.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ModelInput:
    """What a model sees of one case.

    Attributes:
        uid: the case id.
        input_frames: ``[T, H, W, 3]`` float32 RGB in [0, 1], the ``view_0`` frames.
        input_cameras: ``{"cam_poses": (T, 4, 4) camera-to-world, "cam_intrinsic": (3, 3)}`` of ``view_0``.
        target_cameras: the same for the ``center`` view the model must render.
        prompt: a text prompt (R2M-Bench), or None (PersistBench).
    Both camera sets share one world frame (OpenCV axes: x right, y down, z forward). An extension
    of the public interface: ``prompt`` is new and optional, so models written for it run unchanged.
    R2M-Bench gives one input frame (the conditioning image, at pose 0) and every trajectory pose
    as target cameras.
    """

    uid: str
    input_frames: np.ndarray
    input_cameras: dict
    target_cameras: dict
    prompt: str | None = None


@dataclass
class ModelOutput:
    """A model's prediction of the ``center`` view.

    Attributes:
        frames: ``[T, H, W, 3]`` uint8, or float in [0, 1]; with
            ``projection="equirect"``, ``[T, H', 2H', 3]`` panoramas.
        masks: optional ``[T, H, W]`` bool, the model's own mask of the object
            (equirectangular too with ``projection="equirect"``).
        projection: ``"perspective"`` (the target cameras' views) or ``"equirect"``.
    """

    frames: np.ndarray
    masks: np.ndarray | None = None
    projection: str = "perspective"


class BaseModel:
    """Base class of models. Subclasses set ``num_frames`` and ``resolution`` and implement ``predict``."""

    num_frames: int = -1
    resolution: tuple[int, int] = (-1, -1)

    def __init__(self, device: str = "cpu", **kwargs) -> None:
        self.device = device

    def predict(self, sample: ModelInput) -> ModelOutput:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (optional)."""
