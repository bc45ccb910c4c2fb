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
        input_cameras: ``{"cam_poses": (T, 4, 4) camera-to-world, "cam_intrinsic": (3, 3)}`` of ``view_0``;
            None where the suite has no cameras (WROP).
        target_cameras: the same for the ``center`` view the model must render; None without cameras.
        prompt: a text prompt (R2M-Bench, WROP), or None (PersistBench).
        n_targets: frames to produce where there are no target cameras (WROP: the continuation's
            length); see :meth:`num_targets`.
        seed: this case's seed when the run has one (``infer --seed S``; derived from S and the case, the
            same in any worker), for a generative model's random draws; None otherwise.
    Both camera sets share one world frame (OpenCV axes: x right, y down, z forward). Extensions
    of the public interface: ``prompt`` and ``n_targets`` are new and optional, and the cameras may
    be None, so models written for it run unchanged on PersistBench. R2M-Bench gives one input
    frame (the conditioning image, at pose 0) and every trajectory pose as target cameras; WROP
    gives the 60 context frames, the prompt and ``n_targets`` (a video continuation).
    """

    uid: str
    input_frames: np.ndarray
    input_cameras: dict | None = None
    target_cameras: dict | None = None
    prompt: str | None = None
    n_targets: int | None = None
    seed: int | None = None

    def num_targets(self) -> int:
        """How many frames the model must return: one per target camera, or ``n_targets``."""
        if self.target_cameras is not None:
            return len(self.target_cameras["cam_poses"])
        return int(self.n_targets or 0)


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
    needs_cameras: bool = False  # True: refused at once on a suite whose requests hold no cameras (WROP)

    def __init__(self, device: str = "cpu", **kwargs) -> None:
        self.device = device

    def predict(self, sample: ModelInput) -> ModelOutput:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (optional)."""
