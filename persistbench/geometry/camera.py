"""A pinhole camera that crops and resizes itself: intrinsics, image size and camera-to-world poses.

Conventions (docs/data-format.md, "Geometry conventions"): OpenCV axes (x right, y down, z forward), poses are
camera-to-world ``(T, 4, 4)``, pixel centres at +0.5 (a continuous coordinate ``x`` of the
original image is ``(x - x0) * w' / w`` after cropping to ``x0..x0+w`` and resizing to ``w'``).
Sizes are ``(height, width)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Camera:
    k: np.ndarray  # (3, 3) intrinsics, pixels
    height: int
    width: int
    poses: np.ndarray  # (T, 4, 4) camera-to-world

    def crop(self, x0: int, y0: int, width: int, height: int) -> Camera:
        """The camera of the window ``[x0, x0 + width) x [y0, y0 + height)``."""
        k = np.array(self.k, np.float64)
        k[0, 2], k[1, 2] = self.k[0, 2] - x0, self.k[1, 2] - y0
        return Camera(k, height, width, self.poses)

    def resize(self, height: int, width: int) -> Camera:
        """The camera of the image scaled to ``(height, width)`` (each axis on its own)."""
        sx, sy = width / self.width, height / self.height
        k = np.array(self.k, np.float64)
        k[0, 0], k[0, 2] = self.k[0, 0] * sx, self.k[0, 2] * sx
        k[1, 1], k[1, 2] = self.k[1, 1] * sy, self.k[1, 2] * sy
        return Camera(k, height, width, self.poses)

    def at(self, indices: np.ndarray) -> Camera:
        """The same camera at the poses ``indices`` only."""
        return Camera(self.k, self.height, self.width, np.asarray(self.poses)[indices])

    def as_model_input(self) -> dict:
        """The model interface's form: ``{"cam_poses": (T, 4, 4), "cam_intrinsic": (3, 3)}`` float64."""
        return {"cam_poses": np.asarray(self.poses, np.float64), "cam_intrinsic": np.asarray(self.k, np.float64)}
