"""Tiny WROP corpora in the real layout and the generator's forms, from our own renderer: ``synth --suite wrop``.

``make(out, cfg)`` writes ``out/train/checksums.txt`` and one tar per task, each holding
``cfg.samples`` samples (``train/shard<K>/<task>_task/<task>_<NNNN>/`` with H.264 yuv420p videos of
60 frames, ``prompt.txt``, ``trajectory.npz`` and ``metadata.json``), plus ``out/synth.json``; with
``loose=True`` the generator's loose output instead (``out/<task>_task/<task>_<NNNN>/``).
``metadata.json`` (``parameters``, ``provenance``, ``video_split``) and ``trajectory.npz`` (``xpos``,
``xquat`` (w, x, y, z), ``qpos``, ``qvel``, ``body_*``, ``is_target``, ``fps``, ``frame_start``,
``frame_end``) take the forms the generator (``hokindeng/object-permanence`` 1.9.1,
``generator/core/generate.py``) writes. Three real tasks, each a 2-D scene of 120 rendered frames at 24
fps with a static camera, one per split method the generator uses:

* ``u_track_occluded_ball`` (G37, Baillargeonian occlusion; ``midpoint``): a striped ball rolls at
  constant speed behind a screen and comes out the other side; input frames 0-59, target 60-119.
* ``trapdoor_drop`` (G94, object drop; ``manifest_event_boundary`` / ``before_event``): a ball held
  above a cup is dropped into it; the target starts at the frame it reaches the rim (40), the input is
  frames 0-39 with the first frame repeated 20 times in front.
* ``knock_ball_off_ledge`` (G142, object collision; ``manifest_event_boundary`` / ``overlap_event``):
  a ball rolls into a second one resting on a ledge and knocks it off; the contact frame (35) ends the
  input (0-35, 24 frames of padding) and starts the target (35-94).

Archives are byte-reproducible (sorted members, fixed owners and times, bit-exact encodes).
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

from persistbench import __version__
from persistbench.core.layout import SYNTH_RECORD
from persistbench.io.files import atomic_path, dump_json, write_bytes, write_text
from persistbench.io.video import H264_SETTINGS, encode_video
from persistbench.suites.wrop import layout

SOURCE_FRAMES, CLIP, FPS = 120, 60, 24.0
# task -> its manifest video_split (the generator's task.json; None: the midpoint split), 1-based Blender frames
TASKS = {
    "u_track_occluded_ball": None,
    "trapdoor_drop": {"method": "before_event", "event": "ball reaches the rim", "first_target_frame": 41},
    "knock_ball_off_ledge": {
        "method": "overlap_event",
        "event": "ball_contact",
        "event_frame": 36,
        "first_target_frame": 36,
    },
}
PROMPTS = {
    "u_track_occluded_ball": "A {color} striped ball rolls to the right towards a grey screen on a tiled floor.",
    "trapdoor_drop": "A {color} ball is held above an open blue cup and then dropped into it.",
    "knock_ball_off_ledge": "A {color} ball rolls into a grey ball resting on a ledge and knocks it off.",
}
COLORS = {"red": (220, 40, 40), "orange": (235, 140, 30), "green": (40, 170, 60), "purple": (150, 60, 200)}


@dataclass(frozen=True)
class WropSynthConfig:
    samples: int = 3  # per task; the split methods are taken in turn
    size: tuple[int, int] = (96, 160)  # (h, w), even (yuv420p)
    seed: int = 0
    tasks: tuple[str, ...] = tuple(TASKS)
    loose: bool = False  # the generator's loose output (<task>_task/<task>_<NNNN>/) instead of tars

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
        """The target ball's centre ``(x, y)`` and roll angle at source frame ``t``."""
        p = self.params
        if self.task == "u_track_occluded_ball":
            x = p["x0"] + p["speed"] * t
            return x, p["y"], x / self.r
        if self.task == "knock_ball_off_ledge":  # rolls until the contact, then stops against the other ball
            x = p["x0"] + p["speed"] * min(t, self.event)
            return x, p["y"], x / self.r
        fall = max(0, t - p["release"])
        return p["x"], min(p["y0"] + 0.5 * p["g"] * fall * fall, p["floor"]), 0.0

    def struck_at(self, t: int) -> tuple[float, float, float]:
        """The struck ball's centre and angle (``knock_ball_off_ledge``): at rest until the contact, then rolling
        right at the striker's speed and falling once past the ledge's edge."""
        p = self.params
        moved = p["speed"] * max(0, t - self.event)
        x = p["x0"] + p["speed"] * self.event + 2 * self.r + moved
        off = max(0.0, t - self.event - (p["ledge_x1"] - (x - moved)) / p["speed"])
        return x, min(p["y"] + 0.5 * p["g"] * off * off, p["floor"]), moved / self.r

    def render(self, t: int, ss: int = 2) -> np.ndarray:
        h, w, p = self.h * ss, self.w * ss, self.params
        img = _background(h, w).copy()
        x, y, angle = self.ball_at(t)
        if self.task == "u_track_occluded_ball":
            _ball(img, x, y, self.r, COLORS[self.color], angle, ss)
            _box(img, p["screen_x0"], 0.25 * self.h, p["screen_x1"], 0.9 * self.h, (110, 110, 115), ss)
        elif self.task == "knock_ball_off_ledge":
            _box(img, 0, p["y"] + self.r, p["ledge_x1"], p["y"] + self.r + 0.05 * self.h, (90, 70, 60), ss)
            _ball(img, x, y, self.r, COLORS[self.color], angle, ss)
            _ball(img, *self.struck_at(t)[:2], self.r, (150, 150, 155), self.struck_at(t)[2], ss)
        else:
            cup = (40, 80, 200)
            _box(img, p["cup_x0"], p["rim"], p["cup_x1"], p["cup_bottom"], (30, 50, 130), ss)  # inside, back wall
            _ball(img, x, y, self.r, COLORS[self.color], angle, ss)
            _box(img, p["cup_x0"], p["rim"], p["cup_x1"], p["cup_bottom"], cup, ss)  # front wall hides the ball
        import cv2

        return cv2.resize(np.clip(img + 0.5, 0, 255).astype(np.uint8), (self.w, self.h), interpolation=cv2.INTER_AREA)


def event_index(task: str) -> int:
    """The rendered frame (0-based) of a task's event: its manifest's ``first_target_frame`` - 1, or for the
    midpoint task the frame the ball reaches the screen (a scene detail, not a split)."""
    manifest = TASKS[task]
    return manifest["first_target_frame"] - 1 if manifest else 68


def scene(task: str, size: tuple[int, int], rng: np.random.Generator) -> Scene:
    h, w = size
    color = list(COLORS)[int(rng.integers(len(COLORS)))]
    r = 0.08 * h
    event = event_index(task)
    if task == "u_track_occluded_ball":
        x1 = float(rng.uniform(0.5, 0.6)) * w
        speed = (x1 + r) / event  # starts just off the left edge: x(0) = -r
        params = {"x0": -r, "y": 0.7 * h - r, "speed": speed, "screen_x0": x1, "screen_x1": x1 + 0.1 * w}
        return Scene(task, h, w, color, r, params, event)
    if task == "knock_ball_off_ledge":
        contact = float(rng.uniform(0.3, 0.4)) * w  # the striker's centre at the contact
        y = 0.45 * h
        params = {
            "x0": -r,
            "y": y,
            "speed": (contact + r) / event,
            "ledge_x1": contact + 2 * r + 0.15 * w,
            "g": 0.02 * h,
            "floor": 0.85 * h - r,
        }
        return Scene(task, h, w, color, r, params, event)
    rim, y0, fall = 0.55 * h, float(rng.uniform(0.1, 0.14)) * h, 20
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


def split(task: str, n: int = SOURCE_FRAMES) -> dict:
    """``video_split`` as the generator's ``compute_split`` writes it for ``task`` (its manifest's boundary, else
    the midpoint) over ``n`` rendered frames: 0-based indices, ends exclusive, clips of :data:`CLIP` frames
    padded at the input's start and the target's end."""
    out = {"mode": "half", "n_frames": n, "midpoint_index": max(1, n // 2)}
    manifest = TASKS[task]
    if manifest is None:
        input_end = target_start = max(1, n // 2)
        out.update(split_index=input_end, method="midpoint")
    else:
        target_start = manifest["first_target_frame"] - 1
        overlap = manifest["method"] == "overlap_event"
        input_end = target_start + 1 if overlap else target_start
        out.update(
            split_index=target_start,
            method="manifest_event_boundary",
            boundary_method=manifest["method"],
            event=manifest["event"],
            policy="fixed_length_around_event_with_edge_padding; "
            + ("contact_frame_repeated_at_input_target_seam" if overlap else "input_strictly_before_event"),
            first_target_frame=manifest["first_target_frame"],
            last_input_frame=input_end,
            first_target_rendered_frame=target_start + 1,
        )
        if overlap:
            out.update(event_frame=manifest["event_frame"], seam_overlap_frames=1)
    input_start, target_end = max(0, input_end - CLIP), min(n, target_start + CLIP)
    out.update(
        input_start_index=input_start,
        input_end_index=input_end,
        target_start_index=target_start,
        target_end_index=target_end,
        input_source_frames=input_end - input_start,
        target_source_frames=target_end - target_start,
        input_pad_start_frames=CLIP - (input_end - input_start),
        target_pad_end_frames=CLIP - (target_end - target_start),
        clip_frames=CLIP,
        equal_length=True,
    )
    if manifest is not None:
        out.update(first_input_frame=input_start + 1, last_target_frame=target_end)
    return out


def _window(frames: list[np.ndarray], start: int, end: int, pad_start: int, pad_end: int) -> list[np.ndarray]:
    """Frames ``[start, end)``, the first repeated ``pad_start`` times in front, the last ``pad_end`` times behind
    (the generator's ``trim`` + ``tpad`` clone)."""
    window = frames[start:end]
    return [window[0]] * pad_start + window + [window[-1]] * pad_end


def _quat_y(angle: np.ndarray) -> np.ndarray:
    """``(T, 4)`` (w, x, y, z) rotations by ``angle`` radians about the y axis."""
    return np.stack([np.cos(angle / 2), np.zeros_like(angle), np.sin(angle / 2), np.zeros_like(angle)], -1)


def _trajectory(sc: Scene) -> bytes:
    """``trajectory.npz`` as the generator writes it: world poses of every non-environment body per rendered
    frame (pixels / 100 as metres, z up), ``qpos`` per body ``[x y z qw qx qy qz]``, ``qvel`` per body
    ``[vx vy vz wx wy wz]`` by backward differences times fps (row 0 copies row 1)."""
    t = np.arange(SOURCE_FRAMES)
    moving = [sc.ball_at] + ([sc.struck_at] if sc.task == "knock_ball_off_ledge" else [])
    p = sc.params
    if sc.task == "u_track_occluded_ball":
        still = [((p["screen_x0"] + p["screen_x1"]) / 2, 0.575 * sc.h)]
        names, roles, shapes = ["ball", "screen"], ["target", "occluder"], ["sphere", "cube"]
        colors = [sc.color, "grey"]
    elif sc.task == "knock_ball_off_ledge":
        still = [(p["ledge_x1"] / 2, p["y"] + sc.r)]
        names, roles, shapes = (
            ["ball", "struck_ball", "ledge"],
            ["target", "target", "ledge"],
            ["sphere"] * 2 + ["cube"],
        )
        colors = [sc.color, "grey", "brown"]
    else:
        still = [((p["cup_x0"] + p["cup_x1"]) / 2, (p["rim"] + p["cup_bottom"]) / 2)]
        names, roles, shapes = ["ball", "cup"], ["target", "container"], ["sphere", "cylinder"]
        colors = [sc.color, "blue"]
    n = len(names)
    xpos = np.zeros((SOURCE_FRAMES, n, 3), np.float64)
    xquat = np.zeros((SOURCE_FRAMES, n, 4), np.float64)
    xquat[..., 0] = 1.0
    for i, at in enumerate(moving):
        path = np.array([at(int(k)) for k in t], np.float64)
        xpos[:, i, 0], xpos[:, i, 2] = path[:, 0] / 100, -path[:, 1] / 100
        xquat[:, i] = _quat_y(path[:, 2])
    for j, (x, y) in enumerate(still, len(moving)):
        xpos[:, j, 0], xpos[:, j, 2] = x / 100, -y / 100
    xpos, xquat = np.round(xpos, 4).astype(np.float32), xquat.astype(np.float32)
    lin = np.diff(xpos, axis=0, prepend=xpos[:1]) * FPS
    ang = np.zeros_like(lin)
    ang[..., 1] = np.diff(2 * np.arctan2(xquat[..., 2], xquat[..., 0]), axis=0, prepend=0.0 * xquat[:1, :, 0]) * FPS
    qvel = np.concatenate([lin, ang], 2)
    qvel[0] = qvel[1]
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        xpos=xpos,
        xquat=xquat,
        qpos=np.concatenate([xpos, xquat], 2).reshape(SOURCE_FRAMES, n * 7),
        qvel=qvel.astype(np.float32).reshape(SOURCE_FRAMES, n * 6),
        body_names=np.array(names),
        body_roles=np.array(roles),
        body_shapes=np.array(shapes),
        body_colors=np.array(colors),
        is_target=np.array([r == "target" for r in roles]),
        fps=np.float32(FPS),
        frame_start=np.int32(1),
        frame_end=np.int32(SOURCE_FRAMES),
    )
    return buf.getvalue()


def _sample_files(task: str, i: int, cfg: WropSynthConfig, work: Path) -> dict[str, bytes]:
    seed = [cfg.seed, list(TASKS).index(task), i]
    sc = scene(task, cfg.size, np.random.default_rng(seed))
    frames = [sc.render(t) for t in range(SOURCE_FRAMES)]
    vs = split(task)
    clips = {
        layout.INPUT_VIDEO: _window(
            frames, vs["input_start_index"], vs["input_end_index"], vs["input_pad_start_frames"], 0
        ),
        layout.TARGET_VIDEO: _window(
            frames, vs["target_start_index"], vs["target_end_index"], 0, vs["target_pad_end_frames"]
        ),
    }
    videos = {}
    for name, clip in clips.items():
        path = work / name
        encode_video(path, clip, FPS, H264_SETTINGS)
        videos[name] = path.read_bytes()
    metadata = {
        "parameters": {
            "source_index": list(TASKS).index(task),
            "source_script": f"persistbench synth: {task}",
            "seed": int(hashlib.sha256(json.dumps(seed).encode()).hexdigest()[:8], 16),
            "preview": False,
            "diversity_profile": "task",
            "applied_transforms": {"color": sc.color, "radius_px": sc.r, **{k: float(v) for k, v in sc.params.items()}},
            "preview_sampling": None,
        },
        "provenance": {
            "generator_version": f"persistbench {__version__} synth",
            "blender_version": None,
            "render_engine": "persistbench 2-D renderer",
        },
        "video_split": vs,
    }
    prompt = "Continue this scene as a short video. " + PROMPTS[task].format(color=sc.color) + "\n"
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
    """Write the corpus under ``out`` (or, with ``cfg.loose``, the generator's loose output); returns the tasks."""
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
                    if cfg.loose:
                        write_bytes(out / layout.task_folder(task) / sample / name, data)
                    else:
                        members[layout.member_path(shard, task, sample, name)] = data
                bar.update()
            if not cfg.loose:
                digest = write_tar(out / layout.archive_path(task), members)
                lines.append(f"{digest}  {layout.archive_name(task)}  {len(members)}\n")
        bar.close()
    if not cfg.loose:
        write_text(out / layout.CHECKSUMS, "".join(sorted(lines, key=lambda s: s.split()[1])))
    write_text(out / SYNTH_RECORD, json.dumps({"config": asdict(cfg)}, indent=2) + "\n")
    return list(cfg.tasks)
