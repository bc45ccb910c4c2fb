"""A small R2M-Bench tree in the real schema, and generated videos whose scores are known in advance.

``make(out)`` writes::

    meta_data/data_single_<T>_100.json    two specs per trajectory, images named ./generated_imgs/<id>.png
    trajectories/trajectory_<T>_30s.json  string keys out of numeric order, a static tail, yaw through +-180
    test_imgs/<id>.png                    the conditioning images (the Hub's folder name: the alias is used)
    videos/<kind>/<T>/<id>.mp4            upstream's prediction layout, lossless, one folder per kind
    synth.json                            the configuration and what each kind must score

The scene is a procedural panorama seen by a pinhole camera with a planar parallax for
translation, so a frame is a function of the pose alone. Kinds: ``pose`` (rendered from each
pose: revisits match, NMR near 1), ``time`` (rendered from a yaw that drifts with time only:
NMR near 0), ``static`` (the conditioning image held: DR = 0, excluded; identical frames take the
capped-PSNR path) and ``short`` (``pose`` cut to 60 % of the poses: the pairs beyond are dropped
and counted).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from persistbench.core.synth import render_background
from persistbench.geometry import sphere
from persistbench.io.files import dump_json, write_text
from persistbench.io.images import write_image
from persistbench.io.video import LOSSLESS_SETTINGS, encode_video
from persistbench.suites.r2m import layout
from persistbench.suites.r2m.data import fps_of

TEMPLATES = ("DDDAAA", "WSLRRLL", "revisit_loop")
KINDS = ("pose", "time", "static", "short")
# Each command moves (m, camera axes) or turns (degrees of yaw) over an equal share of the moving frames.
STEPS = {
    "D": ((1.0, 0.0, 0.0), 0.0),
    "A": ((-1.0, 0.0, 0.0), 0.0),
    "W": ((0.0, 0.0, 1.0), 0.0),
    "S": ((0.0, 0.0, -1.0), 0.0),
    "L": ((0.0, 0.0, 0.0), -45.0),
    "R": ((0.0, 0.0, 0.0), 45.0),
    "Q": ((0.0, 0.0, 0.0), 90.0),
}
COMMANDS = {"DDDAAA": "DDDAAA", "WSLRRLL": "WSLRRLL", "revisit_loop": "QQQQQQQQ"}  # the loop: two full turns


@dataclass(frozen=True)
class R2MSynthConfig:
    cases: int = 2  # specs (images) per trajectory
    n_poses: int = 481  # poses per trajectory, as upstream's (30 s at 16 fps)
    size: tuple[int, int] = (96, 128)  # (h, w) of the images and videos
    intrinsics_size: tuple[int, int] = (1080, 1920)  # (h, w) the trajectories' K is written for, as upstream's
    hfov_deg: float = 70.0
    start_yaw_deg: float = 160.0  # the first turns cross +-180
    static_tail: int = 24
    blur_px: float = 5.0  # of the panorama: a smooth scene, whose frames differ in proportion to the view change
    drift_deg: float = 0.6  # per frame, of the time-driven video (never returns: 288 degrees over 481 frames)
    depth_m: float = 4.0  # distance of the parallax plane
    pano_size: tuple[int, int] = (512, 1024)  # (h, w) of the scene's panorama
    seed: int = 5


def _rotation_y(yaw_deg: float) -> np.ndarray:
    a = np.deg2rad(yaw_deg)
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def trajectory(template: str, cfg: R2MSynthConfig) -> np.ndarray:
    """Camera-to-world poses ``(n_poses, 4, 4)`` of a template: its commands at constant speed, then a static tail."""
    commands = COMMANDS[template]
    states = [(np.zeros(3), cfg.start_yaw_deg)]  # (position, yaw) after each whole command
    for c in commands:
        move, turn = STEPS[c]
        pos, yaw = states[-1]
        states.append((pos + _rotation_y(yaw) @ np.array(move), yaw + turn))
    moving = cfg.n_poses - cfg.static_tail
    poses = []
    for t in range(cfg.n_poses):
        x = min(t, moving - 1) / (moving - 1) * len(commands)
        k = min(int(x), len(commands) - 1)
        (pos, yaw), (move, turn) = states[k], STEPS[commands[k]]
        pose = np.eye(4)
        pose[:3, :3] = _rotation_y(yaw + turn * (x - k))
        pose[:3, 3] = pos + _rotation_y(yaw) @ np.array(move) * (x - k)
        poses.append(pose)
    return np.stack(poses)


def intrinsics(cfg: R2MSynthConfig, size: tuple[int, int]) -> np.ndarray:
    """``K`` of an image of ``size`` = (h, w) with the configured horizontal field of view."""
    return sphere.intrinsics_from_fov(np.deg2rad(cfg.hfov_deg), size[1], size[0])


class Scene:
    """A panorama seen through a pinhole with a planar parallax: a frame is a function of the pose alone."""

    def __init__(self, cfg: R2MSynthConfig, index: int):
        self.cfg = cfg
        import cv2

        pano = render_background(cfg.pano_size, np.random.default_rng([cfg.seed, index]))
        self.pano = cv2.GaussianBlur(pano, (0, 0), cfg.blur_px)
        self.k = intrinsics(cfg, cfg.size)
        self.mapper = sphere.PerspectiveMapper(self.k, cfg.size, self.pano.shape[:2])

    def render(self, pose: np.ndarray) -> np.ndarray:
        """``(h, w, 3)`` uint8: the panorama in the pose's direction, shifted and scaled by its translation
        as a plane ``depth_m`` away would be."""
        import cv2

        view = sphere.remap_bilinear(self.pano, self.mapper.maps(pose[:3, :3]))
        t = pose[:3, :3].T @ pose[:3, 3]  # the position in the camera's axes
        d = self.cfg.depth_m
        scale = d / max(d - t[2], 0.25 * d)
        h, w = self.cfg.size
        cx, cy = self.k[0, 2], self.k[1, 2]
        m = np.array(
            [
                [scale, 0, cx - scale * cx - self.k[0, 0] * t[0] / d],
                [0, scale, cy - scale * cy - self.k[1, 1] * t[1] / d],
            ]
        )
        return cv2.warpAffine(view, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)


def _trajectory_json(poses: np.ndarray, k: np.ndarray, rng: np.random.Generator) -> str:
    """Upstream's form, keys in a shuffled order (readers must sort them as numbers)."""
    order = rng.permutation(len(poses))
    data = {str(int(i)): {"extrinsic": poses[i].tolist(), "K": k.tolist()} for i in order}
    return json.dumps(data)


def make(out: str | Path, cfg: R2MSynthConfig = R2MSynthConfig()) -> Path:
    """Write the tree under ``out`` (see the module docstring); returns ``out``. Same config, same bytes."""
    out = Path(out)
    rng = np.random.default_rng(cfg.seed)
    k_file = intrinsics(cfg, cfg.intrinsics_size)
    scenes = [Scene(cfg, i) for i in range(cfg.cases)]
    ids = [f"{i + 1:04d}" for i in range(cfg.cases)]
    fps = fps_of(cfg.n_poses)
    for i, scene in enumerate(scenes):
        write_image(out / layout.HUB_IMAGES / f"{ids[i]}.png", scene.render(trajectory(TEMPLATES[0], cfg)[0]))
    for template in TEMPLATES:
        poses = trajectory(template, cfg)
        write_text(layout.trajectory_path(out, template), _trajectory_json(poses, k_file, rng))
        specs = [
            {
                "image": f"./generated_imgs/{case_id}.png",
                "prompt": f"a walk through procedural scene {case_id}",
                "pose_json_path": f"{layout.TRAJECTORY_DIR}/trajectory_{template}_30s.json",
            }
            for case_id in ids
        ]
        write_text(layout.meta_path(out, template), json.dumps(specs, indent=1))
        for case_id, scene in zip(ids, scenes):
            pose_frames = [scene.render(p) for p in poses]
            drift = poses[0].copy()
            time_frames = []
            for t in range(cfg.n_poses):
                drift[:3, :3] = _rotation_y(cfg.start_yaw_deg + cfg.drift_deg * t)
                time_frames.append(scene.render(drift))
            videos = {
                "pose": pose_frames,
                "time": time_frames,
                "static": [scene.render(trajectory(TEMPLATES[0], cfg)[0])] * cfg.n_poses,
                "short": pose_frames[: int(0.6 * cfg.n_poses)],
            }
            for kind, frames in videos.items():
                encode_video(layout.synth_video(out, kind, template, case_id), frames, fps, LOSSLESS_SETTINGS)
    config = {**asdict(cfg), "kinds": list(KINDS), "templates": list(TEMPLATES)}
    write_text(layout.synth_json(out), dump_json(config))
    return out
