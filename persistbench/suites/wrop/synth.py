"""Tiny WROP corpora in the real layout, from our own renderer: ``persistbench synth --suite wrop``.

``make(out, cfg)`` writes ``out/train/checksums.txt`` and one tar per task, each holding
``cfg.samples`` samples (``train/shard<K>/<task>_task/<task>_<NNNN>/`` with H.264 yuv420p videos of
60 frames, ``prompt.txt``, ``trajectory.npz`` and ``metadata.json``), plus ``out/synth.json``.
Tasks, each a 2-D scene of 120 source frames at 24 fps with a static camera:

* ``ball_roll_occluder`` (baillargeonian occlusion): a striped ball rolls at constant speed behind
  a screen and comes out the other side; the event is the frame it reaches the screen.
* ``ball_into_container`` (container permanence): a ball held above a cup is dropped and
  disappears behind the cup's front wall; the event is the frame it reaches the rim.

Samples take the ``video_split`` methods in turn: ``midpoint`` (input 0-59, target 60-119),
``before_event`` (input ends at the event; frames before 0 and after 119 are padding, the first
or last source frame repeated, counted in ``input_pad_start_frames`` / ``target_pad_end_frames``)
and ``overlap_event`` (the target starts ``seam`` frames before the input ends). Archives are
byte-reproducible (sorted members, fixed owners and times, bit-exact encodes).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from persistbench.io.files import atomic_path, dump_json, write_text
from persistbench.io.video import H264_SETTINGS, encode_video
from persistbench.suites.wrop import layout

SOURCE_FRAMES, CLIP, FPS = 120, 60, 24.0
SEAM = 6
TASKS = {"ball_roll_occluder": "baillargeonian_occlusion", "ball_into_container": "container_permanence"}
METHODS = ("midpoint", "before_event", "overlap_event")
PROMPTS = {
    "ball_roll_occluder": "A {color} striped ball rolls to the right towards a grey screen on a tiled floor.",
    "ball_into_container": "A {color} ball is held above an open blue cup and then dropped into it.",
}
COLORS = {"red": (220, 40, 40), "orange": (235, 140, 30), "green": (40, 170, 60), "purple": (150, 60, 200)}


@dataclass(frozen=True)
class WropSynthConfig:
    samples: int = 3  # per task; the split methods are taken in turn
    size: tuple[int, int] = (96, 160)  # (h, w), even (yuv420p)
    seed: int = 0
    tasks: tuple[str, ...] = tuple(TASKS)
    category_in_metadata: bool = True  # False: metadata names no category (a mapping file must)

    def __post_init__(self):
        if not 1 <= self.samples <= 9999:
            raise ValueError("samples must be in [1, 9999]")
        if len(self.size) != 2 or any(v < 32 or v % 2 for v in self.size):
            raise ValueError("size must be (height, width), even, at least 32")
        unknown = set(self.tasks) - set(TASKS)
        if unknown or not self.tasks:
            raise ValueError(f"tasks must be among {sorted(TASKS)}")


# ---------------------------------------------------------------- the renderer


@functools.lru_cache(maxsize=4)
def _background(h: int, w: int) -> np.ndarray:
    """A tiled floor under a graded wall, float32 ``(h, w, 3)`` (read-only: copy before drawing)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    wall = np.stack([150 + 40 * y / h, 170 + 30 * y / h, 200 - 20 * y / h], -1)
    tiles = ((x // 8 + y // 8) % 2)[..., None] * 30 + np.array([120, 100, 80], np.float32)
    img = np.where((y >= 0.7 * h)[..., None], tiles, wall).astype(np.float32)
    img.setflags(write=False)
    return img


def _ball(img: np.ndarray, cx: float, cy: float, r: float, color, angle: float, ss: int) -> None:
    """A ball whose stripes turn with ``angle`` (radians), drawn into ``img`` (supersampled by ``ss``) in place."""
    h, w = img.shape[:2]
    y0, y1 = max(0, int((cy - r) * ss) - 1), min(h, int((cy + r) * ss) + 2)
    x0, x1 = max(0, int((cx - r) * ss) - 1), min(w, int((cx + r) * ss) + 2)
    if y0 >= y1 or x0 >= x1:
        return
    y, x = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    dx, dy = (x + 0.5) / ss - cx, (y + 0.5) / ss - cy
    inside = dx * dx + dy * dy <= r * r
    u = dx * np.cos(angle) + dy * np.sin(angle)
    stripe = (np.floor(u / (0.5 * r)) % 2 == 0)[..., None]
    paint = np.where(stripe, np.array(color, np.float32), np.array(color, np.float32) * 0.45 + 120)
    img[y0:y1, x0:x1][inside] = paint[inside]


def _box(img: np.ndarray, x0: float, y0: float, x1: float, y1: float, color, ss: int) -> None:
    img[int(y0 * ss) : int(y1 * ss), int(x0 * ss) : int(x1 * ss)] = color


@dataclass(frozen=True)
class Scene:
    """One sample's scene: positions in pixels of the output frame; ``event`` is the event's source frame."""

    task: str
    h: int
    w: int
    color: str
    r: float
    params: dict
    event: int

    def ball_at(self, t: int) -> tuple[float, float, float]:
        """Ball centre ``(x, y)`` and roll angle at source frame ``t``."""
        p = self.params
        if self.task == "ball_roll_occluder":
            x = p["x0"] + p["speed"] * t
            return x, p["y"], x / self.r
        fall = max(0, t - p["release"])
        return p["x"], min(p["y0"] + 0.5 * p["g"] * fall * fall, p["floor"]), 0.0

    def render(self, t: int, ss: int = 2) -> np.ndarray:
        h, w, p = self.h * ss, self.w * ss, self.params
        img = _background(h, w).copy()
        x, y, angle = self.ball_at(t)
        if self.task == "ball_roll_occluder":
            _ball(img, x, y, self.r, COLORS[self.color], angle, ss)
            _box(img, p["screen_x0"], 0.25 * self.h, p["screen_x1"], 0.9 * self.h, (110, 110, 115), ss)
        else:
            cup = (40, 80, 200)
            _box(img, p["cup_x0"], p["rim"], p["cup_x1"], p["cup_bottom"], (30, 50, 130), ss)  # inside, back wall
            _ball(img, x, y, self.r, COLORS[self.color], angle, ss)
            _box(img, p["cup_x0"], p["rim"], p["cup_x1"], p["cup_bottom"], cup, ss)  # front wall hides the ball
        import cv2

        return cv2.resize(np.clip(img + 0.5, 0, 255).astype(np.uint8), (self.w, self.h), interpolation=cv2.INTER_AREA)


def scene(task: str, size: tuple[int, int], rng: np.random.Generator) -> Scene:
    h, w = size
    color = list(COLORS)[int(rng.integers(len(COLORS)))]
    r = 0.08 * h
    if task == "ball_roll_occluder":
        event = int(rng.integers(62, 74))  # the ball reaches the screen: target padding under before_event
        x1 = 0.55 * w
        speed = (x1 + r) / event  # starts just off the left edge: x(0) = -r
        params = {"x0": -r, "y": 0.7 * h - r, "speed": speed, "screen_x0": x1, "screen_x1": x1 + 0.1 * w}
        return Scene(task, h, w, color, r, params, event)
    event = int(rng.integers(36, 46))  # the ball reaches the rim: input padding under before_event
    rim, y0, fall = 0.55 * h, 0.12 * h, 20
    params = {
        "x": 0.5 * w,
        "y0": y0,
        "g": 2 * (rim - r - y0) / fall**2,
        "release": event - fall,
        "floor": 0.85 * h - r,
        "rim": rim,
        "cup_x0": 0.5 * w - 2 * r,
        "cup_x1": 0.5 * w + 2 * r,
        "cup_bottom": 0.88 * h,
    }
    return Scene(task, h, w, color, r, params, event)


def split(method: str, event: int) -> dict:
    """``video_split`` of a method: source frame ranges and the padding and overlap they need."""
    if method == "midpoint":
        input_end = SOURCE_FRAMES // 2
        seam = 0
    elif method == "before_event":
        input_end, seam = event, 0
    else:
        input_end, seam = event + SEAM // 2, SEAM
    input_start, target_start = input_end - CLIP, input_end - seam
    return {
        "method": method,
        "input_start": max(0, input_start),
        "input_end": min(SOURCE_FRAMES, input_end),
        "target_start": max(0, target_start),
        "target_end": min(SOURCE_FRAMES, target_start + CLIP),
        "input_pad_start_frames": max(0, -input_start),
        "target_pad_end_frames": max(0, target_start + CLIP - SOURCE_FRAMES),
        "seam_overlap_frames": seam,
    }


def _clip(frames: list[np.ndarray], start: int) -> list[np.ndarray]:
    """``CLIP`` source frames from ``start``, the first or last repeated where the range leaves the source."""
    return [frames[min(max(t, 0), SOURCE_FRAMES - 1)] for t in range(start, start + CLIP)]


def _trajectory(sc: Scene) -> bytes:
    t = np.arange(SOURCE_FRAMES)
    balls = np.array([sc.ball_at(int(i)) for i in t], np.float32)
    n = 3
    xpos = np.zeros((SOURCE_FRAMES, n, 3), np.float32)
    xpos[:, 0, 0], xpos[:, 0, 2] = balls[:, 0] / 100, -balls[:, 1] / 100  # metres, z up
    xquat = np.zeros((SOURCE_FRAMES, n, 4), np.float32)
    xquat[:, :, 0] = 1.0  # wxyz identity
    xquat[:, 0, 0], xquat[:, 0, 2] = np.cos(balls[:, 2] / 2), np.sin(balls[:, 2] / 2)
    buf = io.BytesIO()
    np.savez(
        buf,
        xpos=xpos,
        xquat=xquat,
        qpos=np.concatenate([xpos[:, 0], xquat[:, 0]], 1),
        qvel=np.gradient(xpos[:, 0], axis=0).repeat(2, 1) * FPS,
        body_names=np.array(["ball", "screen" if sc.task == "ball_roll_occluder" else "cup", "floor"]),
        roles=np.array(["target", "occluder" if sc.task == "ball_roll_occluder" else "container", "ground"]),
        shapes=np.array(["sphere", "box", "plane"]),
        colors=np.array([sc.color, "grey" if sc.task == "ball_roll_occluder" else "blue", "brown"]),
        is_target=np.array([True, False, False]),
        fps=np.float32(FPS),
        frame_start=np.int32(0),
        frame_end=np.int32(SOURCE_FRAMES - 1),
    )
    return buf.getvalue()


def _sample_files(task: str, i: int, cfg: WropSynthConfig, work: Path) -> dict[str, bytes]:
    rng = np.random.default_rng([cfg.seed, list(TASKS).index(task), i])
    sc = scene(task, cfg.size, rng)
    frames = [sc.render(t) for t in range(SOURCE_FRAMES)]
    vs = split(METHODS[i % len(METHODS)], sc.event)
    start = vs["input_start"] - vs["input_pad_start_frames"]
    clips = {
        layout.INPUT_VIDEO: _clip(frames, start),
        layout.TARGET_VIDEO: _clip(frames, start + CLIP - vs["seam_overlap_frames"]),
    }
    videos = {}
    for name, clip in clips.items():
        path = work / name
        encode_video(path, clip, FPS, H264_SETTINGS)
        videos[name] = path.read_bytes()
    metadata = {
        "task": task,
        "parameters": {
            "camera": {"azimuth_offset_deg": 0.0, "elevation_offset_deg": 0.0, "distance_offset": 0.0},
            "ball_color": sc.color,
            "ball_radius_px": sc.r,
            "event_frame": sc.event,
            **{k: float(v) for k, v in sc.params.items()},
        },
        "provenance": {
            "generator": "persistbench synth --suite wrop",
            "seed": cfg.seed,
            "source_frames": SOURCE_FRAMES,
        },
        "video_split": vs,
    }
    if cfg.category_in_metadata:
        metadata["category"] = TASKS[task]
    prompt = "Continue this scene as a short video. " + PROMPTS[task].format(color=sc.color)
    return {
        **videos,
        layout.PROMPT: prompt.encode(),
        layout.TRAJECTORY: _trajectory(sc),
        layout.METADATA: dump_json(metadata).encode(),
    }


def write_tar(path: Path, members: dict[str, bytes]) -> str:
    """A reproducible GNU tar of ``members`` (name -> bytes), in name order; returns its sha256."""
    with atomic_path(path) as tmp:
        with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
            for name in sorted(members):
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(members[name]), 0, 0o644
                tar.addfile(info, io.BytesIO(members[name]))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make(out: Path, cfg: WropSynthConfig, progress: bool = False) -> list[str]:
    """Write the corpus under ``out``; returns the tasks written."""
    import tempfile

    from tqdm import tqdm

    lines = []
    with tempfile.TemporaryDirectory(prefix="persistbench-wrop-") as tmp:
        bar = tqdm(total=len(cfg.tasks) * cfg.samples, desc="synth", unit="sample", disable=not progress)
        for task in cfg.tasks:
            members = {}
            for i in range(cfg.samples):
                sample = f"{task}_{i:04d}"
                shard = 1 + i * 5 // cfg.samples
                for name, data in _sample_files(task, i, cfg, Path(tmp)).items():
                    members[layout.member_path(shard, task, sample, name)] = data
                bar.update()
            digest = write_tar(out / layout.archive_path(task), members)
            lines.append(f"{digest}  {layout.archive_name(task)}  {len(members)}\n")
        bar.close()
    write_text(out / layout.CHECKSUMS, "".join(sorted(lines, key=lambda s: s.split()[1])))
    write_text(out / "synth.json", json.dumps({"config": asdict(cfg), "categories": TASKS}, indent=2) + "\n")
    return list(cfg.tasks)
