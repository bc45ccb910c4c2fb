"""Procedural 360-degree scenes with exact ground truth.

Each scene is an equirectangular clip of a textured background with
landmarks and one textured object, a spherical cap of angular radius
``radius``. Its equirectangular mask is exact by definition: the pixels
whose centre direction lies within ``radius`` of the object's centre. In
``dynamic`` scenes the centre moves along a great circle at a constant
angular speed, also while off-screen; in ``static`` scenes it stays put.

The recipe's camera schedule: ``center`` follows the object; ``view_0``
follows it, pans away (by ``pan_deg``, far enough that the object is fully
out of view), holds still for the off-screen window, then pans back onto
the object's current position.

Output of :func:`generate` (it does not write the dataset layout):
``sources/<source_id>.mp4``, ``recipes.jsonl`` and ``truth/<case_id>.json``
(object path and the analytic ``view_0`` visibility, for tests).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from persistbench.core.synth import dot3, render_background
from persistbench.geometry import sphere
from persistbench.io.files import dump_json, write_json, write_text
from persistbench.io.video import encode_video, read_frames
from persistbench.suites.persistbench.build.recipes import VERSION, encode_mask, make_fingerprint, recipe_line
from persistbench.suites.persistbench.layout import SynthLayout

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


@dataclass(frozen=True)
class SynthConfig:
    """Knobs of :func:`generate`; sizes are ``(width, height)``, angles degrees."""

    scenes: int = 4
    seed: int = 0
    pano_size: tuple[int, int] = (1024, 512)
    view_size: tuple[int, int] = (256, 192)
    hfov_deg: float = 90.0
    n_frames: int = 60
    fps: float = 10.0
    radius_deg: float = 12.0
    speed_deg_s: float = 15.0  # dynamic scenes
    window_ratio: float = 0.4  # fraction of frames with view_0 holding still, looking away
    window_move_ratio: float = 0.15  # fraction of frames spent on each pan
    pan_deg: float = 120.0

    def __post_init__(self) -> None:
        if self.pano_size[0] != 2 * self.pano_size[1] or self.pano_size[1] % 2:
            raise ValueError("pano size must be 2H x H with H even")
        if self.window_ratio + 2 * self.window_move_ratio > 1:
            raise ValueError("window_ratio + 2 * window_move_ratio must not exceed 1")
        if self.scenes < 1 or self.n_frames < 2:
            raise ValueError("need at least one scene of two frames")


@dataclass(frozen=True)
class Scene:
    subset: str
    source_id: str
    case_id: str
    centers: np.ndarray  # (T, 3) unit directions of the object centre
    radius: float  # radians
    texture_phase: float


def _tangent(c: np.ndarray, heading: float) -> np.ndarray:
    """Unit tangent at ``c`` pointing ``heading`` radians from east towards north."""
    east = np.cross([0.0, -1.0, 0.0], c)  # up x c
    east /= np.sqrt(np.sum(east * east))  # not linalg.norm: BLAS may round differently run to run
    north = np.cross(c, east)
    return np.cos(heading) * east + np.sin(heading) * north


def object_path(c0: np.ndarray, heading: float, speed: float, times: np.ndarray) -> np.ndarray:
    """``(T, 3)`` great-circle path from ``c0`` at ``speed`` rad/s along ``heading`` at ``times`` s."""
    t0 = _tangent(c0, heading)
    ang = speed * times
    return np.cos(ang)[:, None] * c0 + np.sin(ang)[:, None] * t0


def _unwrap_lonlat(centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lon, lat = sphere.lonlat_from_direction(centers)
    return np.unwrap(lon), lat


def camera_schedules(centers: np.ndarray, cfg: SynthConfig, direction: float) -> dict[str, dict[str, list]]:
    """Per-frame yaw/pitch (degrees) of ``center`` (tracks the object) and ``view_0``."""
    T = len(centers)
    lon, lat = _unwrap_lonlat(centers)
    move = max(1, round(cfg.window_move_ratio * T))
    hold = round(cfg.window_ratio * T)
    start = max(0, (T - hold - 2 * move) // 2)
    yaw = lon.copy()
    pitch = lat.copy()
    away_yaw = lon[start] + direction * np.deg2rad(cfg.pan_deg)
    for t in range(start, T):
        k = t - start
        if k < move:  # pan away, smoothstep
            s = (k + 1) / move
            s = s * s * (3 - 2 * s)
            yaw[t] = (1 - s) * lon[start] + s * away_yaw
            pitch[t] = lat[start]
        elif k < move + hold:
            yaw[t], pitch[t] = away_yaw, lat[start]
        elif k < 2 * move + hold:  # pan back onto where the object is now
            s = (k - move - hold + 1) / move
            s = s * s * (3 - 2 * s)
            yaw[t] = (1 - s) * away_yaw + s * lon[t]  # back the way it came (lon is unwrapped)
            pitch[t] = (1 - s) * lat[start] + s * lat[t]
    wrap = lambda a: ((np.rad2deg(a) + 180.0) % 360.0 - 180.0).round(6).tolist()  # noqa: E731
    return {
        "center": {"yaw_deg": wrap(lon), "pitch_deg": np.rad2deg(lat).round(6).tolist()},
        "view_0": {"yaw_deg": wrap(yaw), "pitch_deg": np.rad2deg(pitch).round(6).tolist()},
    }


def analytic_visibility(
    center: np.ndarray, radius: float, r: np.ndarray, k: np.ndarray, size: tuple[int, int], n: int = 256
) -> float:
    """Fraction of a spherical cap's solid angle inside a view, by quadrature on the cap.

    Midpoint rule in polar coordinates about the cap centre (``n`` radii x
    ``2n`` angles, weight ``sin rho``); independent of any rasterisation. ``size`` is the view's (h, w).
    """
    rho = (np.arange(n) + 0.5) / n * radius
    psi = (np.arange(2 * n) + 0.5) / (2 * n) * 2 * np.pi
    e1 = _tangent(center, 0.0)
    e2 = np.cross(center, e1)
    d = np.cos(rho)[:, None, None] * center + np.sin(rho)[:, None, None] * (
        np.cos(psi)[None, :, None] * e1 + np.sin(psi)[None, :, None] * e2
    )
    r = np.asarray(r)
    cam = np.stack([dot3(d, r[:, i]) for i in range(3)], -1)  # R^T d
    h, w = size
    z = np.where(cam[..., 2] > 0, cam[..., 2], 1.0)
    u = cam[..., 0] / z * k[0, 0] + k[0, 2]
    v = cam[..., 1] / z * k[1, 1] + k[1, 2]
    inside = (cam[..., 2] > 0) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    weight = np.broadcast_to(np.sin(rho)[:, None], inside.shape)
    return float(weight[inside].sum() / weight.sum())


def _pano_directions(pano_size: tuple[int, int]) -> np.ndarray:
    """Unit directions ``(h, w, 3)`` float32 of the pixel centres of a ``pano_size`` = (h, w) panorama."""
    h, w = pano_size
    lon, lat = sphere.lonlat_from_equirect_xy(np.arange(w)[None, :], np.arange(h)[:, None], w, h)
    return sphere.direction_from_lonlat(lon, lat).astype(np.float32)


def object_mask(dirs: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """Exact equirectangular mask ``(H, W)`` bool: pixel centres within ``radius`` of ``center``."""
    return dot3(dirs, center) >= np.float32(np.cos(radius))


def render_frame(background: np.ndarray, dirs: np.ndarray, scene: Scene, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame ``t`` ``(H, W, 3)`` uint8 and its exact object mask ``(H, W)`` bool."""
    c = scene.centers[t]
    mask = object_mask(dirs, c, scene.radius)
    frame = background.copy()
    d = dirs[mask].astype(np.float64)
    e1 = _tangent(c, 0.0)
    e2 = np.cross(c, e1)
    a, b = dot3(d, e1) / scene.radius, dot3(d, e2) / scene.radius
    checker = (np.floor(a * 3 + scene.texture_phase) + np.floor(b * 3)) % 2
    tex = np.where(checker[:, None] > 0, [235, 45, 40], [250, 215, 35]).astype(np.float64)
    tex[np.hypot(a, b) > 0.85] = [40, 20, 90]
    frame[mask] = tex.astype(np.uint8)
    return frame, mask


def make_scene(cfg: SynthConfig, index: int) -> tuple[Scene, np.random.Generator, float]:
    """Scene ``index`` of a seeded set: even indices dynamic, odd static."""
    rng = np.random.default_rng([cfg.seed, index])
    subset = "dynamic" if index % 2 == 0 else "static"
    source_id = "".join(rng.choice(list(_ID_ALPHABET), 11))
    c0 = sphere.direction_from_lonlat(rng.uniform(-np.pi, np.pi), rng.uniform(-0.35, 0.35))
    times = np.arange(cfg.n_frames) / cfg.fps
    speed = np.deg2rad(cfg.speed_deg_s) if subset == "dynamic" else 0.0
    heading = rng.uniform(-0.4, 0.4) + (np.pi if rng.random() < 0.5 else 0.0)
    centers = object_path(c0, heading, speed, times)
    # Pan away against the object's horizontal motion so it cannot drift into the away view.
    direction = -1.0 if np.cos(heading) > 0 else 1.0
    scene = Scene(
        subset, source_id, f"Synth_{source_id}_0_obj_1", centers, np.deg2rad(cfg.radius_deg), rng.uniform(0, 1)
    )
    return scene, rng, direction


def _frames(background: np.ndarray, dirs: np.ndarray, scene, n: int, masks: list[dict]) -> Iterator[np.ndarray]:
    """The scene's ``n`` panoramas in order; each frame's object mask is appended to ``masks`` as COCO RLE."""
    for t in range(n):
        frame, mask = render_frame(background, dirs, scene, t)
        masks.append(encode_mask(mask))
        yield frame


def generate(out: str | os.PathLike, cfg: SynthConfig, base_url: str | None = None, progress: bool = False) -> Path:
    """Write ``cfg.scenes`` scenes under ``out``; return the recipes path.

    Source URLs in the recipes are ``<base_url>/<source_id>.mp4`` when
    ``base_url`` is given, else the relative path ``sources/<source_id>.mp4``
    (resolved against the recipes file when read). Same config, same bytes.
    """
    from tqdm import tqdm

    out = Path(out)
    paths = SynthLayout(out)
    pano_hw, view_hw = cfg.pano_size[::-1], cfg.view_size[::-1]  # the configuration's sizes are (w, h)
    dirs = _pano_directions(pano_hw)
    k = sphere.intrinsics_from_fov(np.deg2rad(cfg.hfov_deg), *cfg.view_size)
    lines = []
    for i in tqdm(range(cfg.scenes), desc="synth", unit="scene", disable=not progress):
        scene, rng, direction = make_scene(cfg, i)
        background = render_background(pano_hw, rng)
        masks: list[dict] = []
        clip = paths.source_clip(scene.source_id)
        encoding = encode_video(clip, _frames(background, dirs, scene, cfg.n_frames, masks), cfg.fps)
        fp_idx = sorted({0, cfg.n_frames // 2, cfg.n_frames - 1})
        decoded = {t: f.copy() for t, f in enumerate(read_frames(clip)) if t in fp_idx}
        views = camera_schedules(scene.centers, cfg, direction)
        rot = sphere.rotation_from_ypr(np.deg2rad(views["view_0"]["yaw_deg"]), np.deg2rad(views["view_0"]["pitch_deg"]))
        visibility = [analytic_visibility(c, scene.radius, r, k, view_hw) for c, r in zip(scene.centers, rot)]
        url = f"{base_url.rstrip('/')}/{clip.name}" if base_url else f"sources/{clip.name}"
        hold = round(cfg.window_ratio * cfg.n_frames)
        recipe = {
            "version": VERSION,
            "case_id": scene.case_id,
            "subset": scene.subset,
            "source": {
                "id": scene.source_id,
                "url": url,
                "start": 0.0,
                "fps": cfg.fps,
                "n_frames": cfg.n_frames,
                "width": cfg.pano_size[0],
                "height": cfg.pano_size[1],
            },
            "output": {"width": cfg.view_size[0], "height": cfg.view_size[1], "hfov_deg": cfg.hfov_deg},
            "views": views,
            "object": {"id": "1", "masks": masks},
            "window": {
                "mode": "return",
                "window_ratio": hold / cfg.n_frames,
                "window_move_ratio": max(1, round(cfg.window_move_ratio * cfg.n_frames)) / cfg.n_frames,
                "use_stationary": scene.subset == "static",
            },
            "fingerprint": make_fingerprint(decoded),
        }
        lines.append(recipe_line(recipe))
        lon, lat = sphere.lonlat_from_direction(scene.centers)
        write_json(
            paths.truth_json(scene.case_id),
            {
                "case_id": scene.case_id,
                "subset": scene.subset,
                "radius_deg": cfg.radius_deg,
                "object_lon_deg": np.rad2deg(lon).round(9).tolist(),
                "object_lat_deg": np.rad2deg(lat).round(9).tolist(),
                "view_0_visibility": [round(v, 9) for v in visibility],
                "encoding": encoding,
            },
        )
    write_text(paths.synth_json, dump_json({"config": asdict(cfg), "base_url": base_url}))
    write_text(paths.recipes_jsonl, "".join(line + "\n" for line in lines))
    return paths.recipes_jsonl
