"""Built-in models: ``hold`` (a floor), ``reproject`` (a memory panorama), ``warp`` (a rotation homography of
the first input frame), ``flow`` (motion extrapolated, for continuations) and ``oracle`` (checks the scorer)."""

from __future__ import annotations

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.geometry import portable, sphere
from persistbench.models.base import BaseModel, ModelInput, ModelOutput


def _uint8(frames: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(frames, np.float32) * 255.0 + 0.5, 0, 255).astype(np.uint8)


def _needs_cameras(sample: ModelInput, model: str) -> None:
    if sample.input_cameras is None or sample.target_cameras is None:
        raise PersistbenchError(f"{sample.uid}: the {model} model needs cameras, and this suite gives none")


def _size(k: np.ndarray) -> tuple[int, int]:
    """``(height, width)`` of a camera whose principal point is the image centre."""
    return int(round(2 * k[1, 2])), int(round(2 * k[0, 2]))


class HoldModel(BaseModel):
    """A floor: for each target frame, the last input frame available at that time
    (the input view at the same moment), ignoring the target camera and remembering
    nothing. Causal on purpose: the final input frame often looks at the object
    again, and holding it for every frame would copy the future. With fewer input
    frames than target cameras (R2M-Bench: one conditioning image) the last one is held; a
    continuation without cameras (WROP) holds the last input frame throughout."""

    def predict(self, sample: ModelInput) -> ModelOutput:
        frames = _uint8(sample.input_frames)
        n = sample.num_targets()
        if sample.target_cameras is None:  # a continuation (WROP): every target frame comes after the input
            return ModelOutput(frames=np.repeat(frames[-1:], n, 0))
        return ModelOutput(frames=frames[np.minimum(np.arange(n), len(frames) - 1)])


def region_velocity(last: np.ndarray, earlier: np.ndarray, ys: np.ndarray, xs: np.ndarray, d: int, radius: int):
    """``(vx, vy)`` in pixels per frame of the pixels ``(ys, xs)`` of ``last`` (H, W, 3), found in ``earlier``
    (the frame ``d`` frames before) by block matching: the integer shift within ``radius`` with the least
    mean squared difference, refined by a parabola through its neighbours unless it matches exactly,
    divided by ``d``."""
    h, w = last.shape[:2]
    ref = last[ys, xs].astype(np.float32)
    costs = {}
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            sy, sx = ys - dy, xs - dx
            ok = (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
            if 2 * ok.sum() >= len(ys):  # at least half the region still inside the frame
                costs[dy, dx] = float(((earlier[sy[ok], sx[ok]].astype(np.float32) - ref[ok]) ** 2).mean())
    if not costs:
        return 0.0, 0.0
    dy, dx = min(costs, key=lambda k: (costs[k], abs(k[0]) + abs(k[1]), k))
    c0 = costs[dy, dx]

    def vertex(minus: float | None, plus: float | None) -> float:
        if c0 == 0 or minus is None or plus is None or minus + plus - 2 * c0 <= 0:  # an exact match stays
            return 0.0
        return 0.5 * (minus - plus) / (minus + plus - 2 * c0)

    fx = vertex(costs.get((dy, dx - 1)), costs.get((dy, dx + 1)))
    fy = vertex(costs.get((dy - 1, dx)), costs.get((dy + 1, dx)))
    return (dx + fx) / d, (dy + fy) / d


class FlowModel(BaseModel):
    """A continuation baseline (WROP): the moving things of the last input frame carried forward.

    What moves is where the last two input frames differ (by more than ``min_change`` of 255 in a
    channel): each 8-connected region of at least ``min_area`` pixels is one moving thing. Its
    velocity is its optical flow over the last ``baseline`` frames, by block matching
    (:func:`region_velocity`; at most ``max_pixels`` of its pixels, evenly strided). The ``k``-th
    target frame is the last frame with each region's pixels pasted ``k`` velocities ahead (nearest
    pixel). Constant velocity, no occlusion reasoning and nothing behind what moved: what it gains
    over ``hold`` is what extrapolating motion alone is worth. (Farneback's dense flow between the
    last two frames was tried first: on the rolling-ball fixture it read 0.96 px/frame for a true
    1.43 next to the screen's edge; matching over 6 frames reads within 0.05.)
    """

    min_change = 12
    min_area = 4
    baseline = 6
    max_speed = 10  # pixels per frame searched
    max_pixels = 4096

    def predict(self, sample: ModelInput) -> ModelOutput:
        import cv2

        frames = _uint8(sample.input_frames)
        n, last = sample.num_targets(), frames[-1]
        out = np.repeat(last[None], n, 0)
        if len(frames) < 2:
            return ModelOutput(frames=out)
        d = min(self.baseline, len(frames) - 1)
        moving = np.abs(last.astype(np.int16) - frames[-2].astype(np.int16)).max(-1) > self.min_change
        count, labels = cv2.connectedComponents(moving.astype(np.uint8), connectivity=8)
        h, w = last.shape[:2]
        for label in range(1, count):
            ys, xs = np.nonzero(labels == label)
            if len(ys) < self.min_area:
                continue
            step = -(-len(ys) // self.max_pixels)
            vx, vy = region_velocity(last, frames[-1 - d], ys[::step], xs[::step], d, self.max_speed * d)
            for k in range(n):
                tx = np.rint(xs + (k + 1) * vx).astype(np.int64)
                ty = np.rint(ys + (k + 1) * vy).astype(np.int64)
                inside = (tx >= 0) & (tx < w) & (ty >= 0) & (ty < h)
                out[k, ty[inside], tx[inside]] = last[ys[inside], xs[inside]]
        return ModelOutput(frames=out)


class WarpModel(BaseModel):
    """The first input frame warped into each target camera by the rotation homography ``K_t R K_0^-1``.

    Assumes a distant scene (translation ignored): a target ray ``d`` of camera ``t`` is looked up
    at ``K_0 R_0^T R_t K_t^-1 d`` in the first input frame (bilinear); rays that fall outside it or
    behind its camera are black. A baseline for R2M-Bench that needs no weights.
    """

    needs_cameras = True

    def predict(self, sample: ModelInput) -> ModelOutput:
        _needs_cameras(sample, "warp")
        image = _uint8(sample.input_frames[:1])[0]
        k0 = np.asarray(sample.input_cameras["cam_intrinsic"], np.float64)
        r0 = np.asarray(sample.input_cameras["cam_poses"], np.float64)[0, :3, :3]
        kt = np.asarray(sample.target_cameras["cam_intrinsic"], np.float64)
        poses = np.asarray(sample.target_cameras["cam_poses"], np.float64)
        h, w = _size(kt)
        u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
        rays = portable.matmul(portable.inv3(kt), np.stack([u.ravel(), v.ravel(), np.ones(u.size)]))
        out = []
        for pose in poses:
            d = portable.matmul(portable.matmul(portable.matmul(k0, r0.T), pose[:3, :3]), rays)
            ahead = d[2] > 1e-9
            z = np.where(ahead, d[2], 1.0)
            # Rays behind the camera, or far outside it, sample the black border.
            mx = np.clip(np.where(ahead, d[0] / z - 0.5, -2.0), -2.0, image.shape[1] + 1.0).reshape(h, w)
            my = np.clip(np.where(ahead, d[1] / z - 0.5, -2.0), -2.0, image.shape[0] + 1.0).reshape(h, w)
            out.append(sphere.remap(image, mx, my, "constant"))
        return ModelOutput(frames=np.stack(out))


class ReprojectModel(BaseModel):
    """A memory panorama, causal in time.

    Input frame ``t`` is painted onto an equirectangular canvas with its
    camera (newer observations overwrite older ones); target frame ``t`` is
    rendered from the canvas with the target camera, and pixels never seen
    are filled by inpainting. It remembers where things were when last seen,
    so it does well on ``static`` cases and worse on ``dynamic`` ones.

    Args:
        pano_height: canvas height (width is twice it); default: matched to the
            input's angular resolution, ``round(pi * fx)``.
    """

    needs_cameras = True

    def __init__(self, device: str = "cpu", pano_height: int | None = None, **kwargs) -> None:
        super().__init__(device)
        self.pano_height = pano_height

    def predict(self, sample: ModelInput) -> ModelOutput:
        import cv2

        _needs_cameras(sample, "reproject")
        k_in = np.asarray(sample.input_cameras["cam_intrinsic"], np.float64)
        k_out = np.asarray(sample.target_cameras["cam_intrinsic"], np.float64)
        r_in = np.asarray(sample.input_cameras["cam_poses"], np.float64)[:, :3, :3]
        r_out = np.asarray(sample.target_cameras["cam_poses"], np.float64)[:, :3, :3]
        h = self.pano_height or int(round(np.pi * k_in[0, 0]))
        pano_size = (h, 2 * h)
        canvas = np.zeros((h, 2 * h, 3), np.uint8)
        seen = np.zeros((h, 2 * h), np.uint8)
        frames = _uint8(sample.input_frames)
        out_size = _size(k_out)
        mapper = sphere.PerspectiveMapper(k_out, out_size, pano_size)
        out = []
        for t in range(len(r_out)):
            if t < len(frames):
                painted, covered = sphere.perspective_to_equirect(frames[t], r_in[t], k_in, pano_size)
                canvas[covered] = painted[covered]
                seen[covered] = 1
            maps = mapper.maps(r_out[t])
            view = sphere.remap_bilinear(canvas, maps)
            holes = (sphere.remap_nearest(seen, maps) == 0).astype(np.uint8)
            if holes.any():
                view = cv2.inpaint(view, holes, 3, cv2.INPAINT_TELEA)
            out.append(view)
        return ModelOutput(frames=np.stack(out))


class OracleModel(BaseModel):
    """Copies the ground-truth target frames and masks. Only for checking the scorer:
    ``infer`` hands it the ground truth (``uses_ground_truth``) and marks its runs ``oracle``."""

    uses_ground_truth = True

    def __init__(self, device: str = "cpu", **kwargs) -> None:
        super().__init__(device)
        self.ground_truth: tuple[np.ndarray, np.ndarray] | None = None

    def predict(self, sample: ModelInput) -> ModelOutput:
        if self.ground_truth is None:
            raise RuntimeError("the oracle needs the ground truth, which only infer provides")
        frames, masks = self.ground_truth
        return ModelOutput(frames=frames, masks=masks)
