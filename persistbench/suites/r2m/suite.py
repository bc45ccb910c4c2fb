"""R2M-Bench as a suite: upstream's checkout read unchanged, generated videos, relative revisit scores (``r2m-v2``).

What the model gets (:meth:`R2MBench.request`): the conditioning image as a one-frame input at
pose 0, the prompt, and every pose of the trajectory as target cameras; it returns one frame per
pose. The image is centre-cropped to the model's aspect ratio and resized (PersistBench's rule);
the trajectory's ``K`` describes a ``2 cx x 2 cy`` frame (1920 x 1080 upstream) and is cropped to
the same aspect ratio from that frame and scaled to the model's size, whatever the image's own
size. Predictions are written as ``<run>/<T>/<id>/gen.mp4`` (lossless) plus ``case.json``, which
is upstream's second layout, so upstream's tools read our runs and we read theirs
(``<T>/<id>.mp4`` too).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from persistbench.core.case import Prediction, Request
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR, RunLayout
from persistbench.core.options import ExistingFolder, SuiteOption
from persistbench.core.protocol import Protocol
from persistbench.core.runs import case_record
from persistbench.core.suite import DemoResult, Suite
from persistbench.core.synth import synth_option
from persistbench.executors import Executor, RunResult
from persistbench.geometry.camera import Camera
from persistbench.geometry.sampling import (
    CROP_RULE,
    crop_box,
    crop_resize,
    describe_resize,
    fit_camera,
    target_size,
)
from persistbench.io.files import check_regular, read_json, sha256_file, write_json
from persistbench.io.images import image_size, read_image
from persistbench.io.limits import check_asked_size, check_frame_size, check_memory
from persistbench.io.names import name_problem
from persistbench.io.video import count_frames, probe, read_frames
from persistbench.suites.r2m import layout, pairs, upstream_pairs
from persistbench.suites.r2m.data import Checkout, R2MCase, Trajectory, fps_of, read_trajectory
from persistbench.suites.r2m.relative import KINDS

INPUT_RESIZE = "area"  # how the conditioning image is resized for a model


@functools.lru_cache(maxsize=8)
def _trajectory(path: Path, mtime_ns: int, size: int) -> Trajectory:
    return read_trajectory(path)


def trajectory_of(case: R2MCase) -> Trajectory:
    """The case's trajectory, parsed once per process (and again when the file changes)."""
    try:
        st = case.trajectory.stat()
    except OSError:
        raise PersistbenchError(f"{case.trajectory}: missing (named by the metadata of {case.subset})") from None
    return _trajectory(case.trajectory, st.st_mtime_ns, st.st_size)


def conditioning_image(case: R2MCase) -> np.ndarray:
    """The case's image ``(h, w, 3)`` uint8 RGB, decoded in full (a truncated file is refused), its size bounded
    from the header first; what both ``verify`` and ``infer`` read."""
    check_frame_size(case.image, *image_size(case.image))
    return read_image(case.image)


@dataclass(frozen=True)
class VideoPrediction(Prediction):
    """A generated video (``files[0]``); its identity covers the video's bytes and the pairs it is scored on."""

    pairs_source: str  # the trajectory's sha256, or the --pairs file's
    asked: tuple[int, int] | None = (
        None  # (w, h) its case.json says the model was asked for (ours; upstream's has none)
    )

    @functools.cached_property
    def digest(self) -> str:
        return video_digest(self.files[0], self.pairs_source)


def video_digest(video: Path, pairs_source: str) -> str:
    """A generated video's identity: its bytes and the pairs it is scored on."""
    return hashlib.sha256(f"{sha256_file(video)}:{pairs_source}".encode()).hexdigest()


class R2MBench(Suite):
    name = "r2m"
    title = "R2M-Bench"
    question = "Which video returns to the same place when the camera comes back?"
    scorers = {
        "r2m-v2": "persistbench.suites.r2m.scoring:NMR",
        "r2m-paper-v1": "persistbench.suites.r2m.scoring:NMR",
        "r2m-v1": "persistbench.suites.r2m.scoring:NMR",
    }
    subsets = ("DDDAAA", "WSLRRLL", "revisit_loop")
    external_label = "external videos"
    option_specs = (
        SuiteOption(
            "pairs",
            "A folder of upstream's pair files (<T>.json for each trajectory) instead of sampling them.",
            ("score",),
            ExistingFolder(),
            "DIR",
        ),
        synth_option("scenes", "Specs (images) per trajectory; default 2."),
        synth_option("frames", "Poses per trajectory; default 481."),
        synth_option("size", "Image and video size WxH; default 128x96."),
        synth_option("seed", "Random seed; default 5."),
        synth_option("hfov", "Horizontal field of view, degrees; default 70."),
        synth_option("pano_size", "The scene's panorama WxH; default 1024x512."),
    )

    def __init__(self, root, options=None):
        super().__init__(root, options)
        self.checkout = Checkout(self.root)
        self._pair_files: dict[str, str] = {}  # trajectory -> sha256 of its --pairs file, hashed once

    @classmethod
    def detect(cls, root: Path) -> bool:
        return Checkout.detect(root)

    @functools.cached_property
    def _cases(self) -> dict[tuple[str, str], R2MCase]:
        return {(c.subset, c.case_id): c for c in self.checkout.cases()}

    def cases(self) -> list[R2MCase]:
        return list(self._cases.values())

    def case(self, ref) -> R2MCase:
        try:
            return self._cases[ref.subset, ref.case_id]
        except KeyError:
            raise PersistbenchError(f"{self.root}: no case {ref.subset}/{ref.case_id}") from None

    def fingerprint(self) -> str:
        return self.checkout.fingerprint()

    def case_digest(self, ref) -> str | None:
        """sha256 of the case's conditioning image, prompt and trajectory file."""
        case = self.case(ref)
        text = f"{sha256_file(case.image)}\n{case.prompt}\n{trajectory_of(case).sha256}"
        return hashlib.sha256(text.encode()).hexdigest()

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        problems: list[str] = []
        try:
            cases = self.cases()
        except PersistbenchError as e:
            return [str(e)], 0
        for t in self.checkout.trajectories:
            try:
                read_trajectory(self.checkout.trajectory_file(t))
            except PersistbenchError as e:
                problems.append(str(e))
        for case in {c.image: c for c in cases}.values():  # each image once, whatever trajectories use it
            try:
                conditioning_image(case)
            except PersistbenchError as e:
                problems.append(f"{e}; the images come with: persistbench fetch --suite r2m --output {self.root}")
        return problems, len(cases)

    @classmethod
    def fetch(cls, output, repo, revision, from_dir, include, progress, options=None, **run) -> RunResult:
        """The conditioning images (:mod:`persistbench.suites.r2m.fetch`); the checkout itself comes from git."""
        from persistbench.suites.r2m.fetch import fetch_images

        result = fetch_images(Path(output), repo, revision, from_dir, progress, **run)
        if result.value is not None:
            result.value = (
                f"fetched {result.value['images']} image(s) into {Path(output) / layout.HUB_IMAGES}; "
                f"check with: persistbench verify {output}"
            )
        return result

    # ---------------------------------------------------------------- synthetic data

    # persistbench synth's options -> R2MSynthConfig's fields
    SYNTH_FIELDS = {
        "scenes": "cases",
        "frames": "n_poses",
        "size": "size",
        "seed": "seed",
        "hfov": "hfov_deg",
        "pano_size": "pano_size",
    }

    @classmethod
    def synthesize(cls, out: Path, config_file: str | None, options: dict, progress: bool = True) -> str:
        """A small R2M tree with videos of known outcomes (:mod:`persistbench.suites.r2m.synth`)."""
        from persistbench.core.synth import suite_config
        from persistbench.io.files import check_writable
        from persistbench.suites.r2m.synth import R2MSynthConfig, make

        cfg = suite_config(R2MSynthConfig, cls.name, cls.SYNTH_FIELDS, config_file, options, hw=("size", "pano_size"))
        check_writable(out)
        make(out, cfg)
        return f"wrote {cfg.cases} spec(s) x {len(cls.subsets)} trajectories and their videos: {out}"

    # ---------------------------------------------------------------- inference

    def sampling_note(self) -> str:
        return (
            f"the conditioning image at pose 0: {CROP_RULE}; {describe_resize(INPUT_RESIZE)}; every pose as a "
            "target camera, K cropped from its 2cx x 2cy frame to the aspect ratio and scaled"
        )

    has_ground_truth = False  # generated videos are scored against themselves

    def request(self, ref, num_frames: int, resolution: tuple[int, int], oracle: bool) -> Request:
        if oracle:
            raise PersistbenchError("R2M-Bench has no ground-truth video: an oracle model cannot run on it")
        case = self.case(ref)
        traj = trajectory_of(case)
        image = conditioning_image(case)
        h, w = image.shape[:2]
        out = target_size((h, w), resolution)
        frame = crop_resize(image, crop_box((h, w), resolution), out, rgb=INPUT_RESIZE)
        cam = fit_camera(Camera(traj.k, *traj.size, traj.rigid_poses), crop_box(traj.size, out), out)
        return Request(
            fields={
                "uid": case.case_id,
                "input_frames": frame[None].astype(np.float32) / 255.0,
                "input_cameras": cam.at(np.array([0])).as_model_input(),
                "target_cameras": cam.as_model_input(),
                "prompt": case.prompt,
            },
            n_frames=len(traj.poses),
            size=out,
            record={"size": [out[1], out[0]], "poses": len(traj.poses), "trajectory_sha256": traj.sha256},
            video_fps=fps_of(len(traj.poses)),
        )

    # ---------------------------------------------------------------- pairs

    def pair_file(self, case: R2MCase, protocol: Protocol, video: Path | None = None) -> dict:
        """The case's trajectory's pairs: upstream's file from ``--pairs DIR``, or sampled by the protocol's
        sampler; upstream's samples for the length of ``video`` where it is shorter than the trajectory, as
        upstream samples for its representative video."""
        traj = trajectory_of(case)
        if self.options.get("pairs"):
            path = layout.pairs_path(Path(self.options["pairs"]), case.subset)
            if not path.is_file():
                raise PersistbenchError(f"{path}: no pair file for trajectory {case.subset} (--pairs)")
            data = pairs.check_pair_file(read_json(path), str(path), len(traj.poses))
            return {**data, "meta": {**data["meta"], "key": self._pairs_source(case)}}
        params = protocol.config["pairs"]
        if video is not None and params["sampler"] == upstream_pairs.SAMPLER:
            n_video = count_frames(video)
            if n_video < len(traj.poses):
                return pairs.build(traj, params, n_video)
        return pairs.build(traj, params)

    def reference_of(self, results: list[dict]) -> dict:
        """``{"oracle": True, "reference": ...}`` when every scored video is the synthetic checkout's pose-rendered
        one (``synth --suite r2m``: a reference that remembers perfectly), else ``{}``."""
        if not results or not layout.synth_json(self.root).is_file():
            return {}
        for r in results:
            case = self._cases.get((r["subset"], r["uid"]))
            path = layout.synth_video(self.root, "pose", r["subset"], r["uid"])
            if case is None or not path.is_file():
                return {}
            if video_digest(path, self._pairs_source(case)) != r["prediction_sha256"]:
                return {}
        return {"oracle": True, "reference": "the synthetic checkout's pose-rendered videos, a perfect memory"}

    def _pairs_source(self, case: R2MCase) -> str:
        """What a video's pairs come from: the trajectory's sha256, or ``file:<sha256>`` of its --pairs file."""
        if not self.options.get("pairs"):
            return trajectory_of(case).sha256
        if case.subset not in self._pair_files:
            path = layout.pairs_path(Path(self.options["pairs"]), case.subset)
            self._pair_files[case.subset] = f"file:{sha256_file(path)}" if path.is_file() else "file:missing"
        return self._pair_files[case.subset]

    # ---------------------------------------------------------------- predictions

    def read_prediction(self, run: Path, run_info, ref) -> VideoPrediction | None:
        case = self.case(ref)
        for path in layout.video_paths(Path(run), case.subset, case.case_id):
            if os.path.lexists(path):  # identified by its bytes and its pairs (VideoPrediction.digest), not a record
                check_regular(path, "video file")
                asked = (case_record(RunLayout(Path(run)), case.subset, case.case_id) or {}).get("size")
                return VideoPrediction((path,), None, self._pairs_source(case), tuple(asked) if asked else None)
        return None

    def predicted(self, run: Path, run_info) -> set[str]:
        out = set()
        for t in sorted(Path(run).iterdir()):
            if not t.is_dir() or name_problem(t.name) or t.name in ("scores", "logs", STATE_DIR):
                continue
            for entry in t.iterdir():
                if entry.suffix == ".mp4" and entry.is_file():
                    out.add(f"{t.name}.{entry.stem}")
                elif (entry / "gen.mp4").is_file():
                    out.add(f"{t.name}.{entry.name}")
        return out

    # ---------------------------------------------------------------- scoring

    def pair_frames(
        self, ref, pred: VideoPrediction, protocol: Protocol, scores_dir: Path | None
    ) -> tuple[R2MCase, dict[int, np.ndarray], int, int, dict]:
        """What the scorer needs of one video: ``(case, {frame index: (h, w, 3) uint8 frame} of every frame its
        pairs use, frames in the video (up to the trajectory's), poses in the trajectory, the pair file)``;
        the pair file is also written under ``scores_dir`` (``pairs/<T>.json``, or ``pairs/<T>_<n>frames.json``
        for a video of n frames, shorter than the trajectory, under upstream's sampler)."""
        case = self.case(ref)
        n_poses = len(trajectory_of(case).poses)
        video = pred.files[0]
        pair_file = self.pair_file(case, protocol, video)
        if scores_dir is not None:
            path = layout.pairs_path(scores_dir / layout.PAIRS_DIR, case.subset, pair_file["meta"].get("n_video"))
            write_json(path, pair_file)
        info = probe(video)
        check_asked_size(video, info["width"], info["height"], pred.asked)
        needed = {f for kind in KINDS for p in pair_file[kind] for f in p}
        check_memory(video, len(needed) * info["width"] * info["height"] * 3)
        frames, n_video = {}, 0
        for i, frame in enumerate(read_frames(video)):
            if i >= n_poses:  # frames beyond the trajectory are ignored
                break
            n_video = i + 1
            if i in needed:
                frames[i] = frame
        if n_video == 0:
            raise PersistbenchError(f"{video}: the video has no frames")
        return case, frames, n_video, n_poses, pair_file

    @classmethod
    def demo(cls, out: Path, executor: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
        from persistbench.suites.r2m import demo

        return demo.run(out, executor, progress, step)
