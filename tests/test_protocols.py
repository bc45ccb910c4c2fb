"""Every field a shipped protocol declares acts on the scores, or is checked (a value the scorer cannot honour
is refused naming the field): the protocol file is the single source of the scoring parameters."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from persistbench.core.case import ScoreContext
from persistbench.core.errors import PersistbenchError
from persistbench.core.infer import InferOptions, infer
from persistbench.core.protocol import shipped_path
from persistbench.core.suites import open_suite
from persistbench.metrics.registry import METRICS
from persistbench.suites.persistbench.scoring import frame_sets
from persistbench.suites.persistbench.suite import PersistBench
from persistbench.suites.r2m import layout, pairs, synth
from persistbench.suites.r2m.data import Trajectory, read_trajectory
from persistbench.suites.r2m.scoring import score_video
from persistbench.suites.r2m.suite import R2MBench

CLASSIC = json.loads(shipped_path("classic-v1").read_text())
R2M = json.loads(shipped_path("r2m-v1").read_text())


def _load(suite, config: dict, tmp_path: Path):
    path = tmp_path / f"p{abs(hash(json.dumps(config, sort_keys=True)))}.json"
    path.write_text(json.dumps(config))
    return suite.load_protocol(str(path))


def _set(config: dict, field: str, value) -> dict:
    out = copy.deepcopy(config)
    *head, last = field.split(".")
    target = out
    for k in head:
        target = target[k]
    target[last] = value
    return out


def _fields(config: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in config.items():
        if k == "name":
            continue
        out += _fields(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
    return out


# ---------------------------------------------------------------- classic-v1 (PersistBench)

CLASSIC_ACTS = {  # field -> another valid value; each changes what is scored
    "visible_above": 0.95,
    "invisible_below": 0.05,
    "start": "first_frame",
    "eval_size": [96, 128],
    "resize.rgb": "cubic",
    "metrics": ["psnr"],
    "psnr.cap_db": 30.0,
    "ssim.sigma": 3.0,
    "ssim.window": 5,
    "ssim.k1": 0.2,
    "ssim.k2": 0.2,
    "ssim.covariance": "sample",
}
CLASSIC_CHECKED = {  # field -> a value the scorer does not implement: refused, naming the field
    "resize.mask": "area",
    "psnr.data_range": 255.0,
    "lpips.net": "vgg",
    "lpips.version": "0.0",
    "lpips.inputs": "[0, 1]",
    "lpips.reduce": "mean",
    "continuity.scale": "1",
    "aggregate": "per frame",
}


def test_every_classic_field_is_covered():
    assert sorted(_fields(CLASSIC)) == sorted(CLASSIC_ACTS | CLASSIC_CHECKED)


@pytest.fixture(scope="module")
def classic(dataset_dir, tmp_path_factory):
    runs = {}
    for model in ("hold", "oracle"):
        runs[model] = tmp_path_factory.mktemp(model) / model
        infer(InferOptions(dataset=dataset_dir, output=runs[model], model=model), progress=False)
    suite = open_suite(dataset_dir)
    return suite, runs


def _classic_scores(classic, config, tmp_path, model="hold") -> list[dict]:
    suite, runs = classic
    protocol = _load(PersistBench, config, tmp_path)
    out = []
    for case in suite.cases():
        pred = suite.read_prediction(runs[model], None, case)
        wanted = tuple(m for m in protocol.metrics if m != "lpips")
        out.append(protocol.scorer.score_case(suite, case, pred, protocol, ScoreContext(wanted)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(CLASSIC_ACTS))
def test_classic_fields_act(classic, tmp_path, field):
    changed = _set(CLASSIC, field, CLASSIC_ACTS[field])
    if field in ("visible_above", "invisible_below", "start"):  # which frames are visible / off-screen
        vis = np.array([0.2, 0.5, 0.9, 0.96, 0.6, 0.25, 0.04, 0.8])
        base = frame_sets(vis, _load(PersistBench, CLASSIC, tmp_path))
        new = frame_sets(vis, _load(PersistBench, changed, tmp_path))
        assert any(not np.array_equal(a, b) for a, b in zip(base, new))
        return
    model = "oracle" if field == "psnr.cap_db" else "hold"
    base = _classic_scores(classic, CLASSIC, tmp_path, model)
    new = _classic_scores(classic, changed, tmp_path, model)
    assert [r["metrics"] for r in base] != [r["metrics"] for r in new]
    if field == "psnr.cap_db":
        assert {v for r in new for v in r["metrics"]["psnr"] if v is not None} == {30.0}


@pytest.mark.parametrize("field", sorted(CLASSIC_CHECKED))
def test_classic_fields_are_checked(tmp_path, field):
    with pytest.raises(PersistbenchError, match=rf"{field.split('.')[0]}: .*(must be one of|must read exactly)"):
        _load(PersistBench, _set(CLASSIC, field, CLASSIC_CHECKED[field]), tmp_path)


def test_unknown_and_missing_fields_are_refused(tmp_path):
    with pytest.raises(PersistbenchError, match="extra: unknown field"):
        _load(PersistBench, {**CLASSIC, "extra": 1}, tmp_path)
    config = copy.deepcopy(CLASSIC)
    del config["ssim"]["sigma"]
    with pytest.raises(PersistbenchError, match="ssim: sigma: missing"):
        _load(PersistBench, config, tmp_path)


# ---------------------------------------------------------------- r2m-v1 (R2M-Bench)

R2M_PAIRS = {  # sampler field -> a value that changes the pairs of some trajectory
    "pairs.yaw_tol_deg": [0.5, 0.6],
    "pairs.pos_tol_m": [0.5, 1.0],
    "pairs.translation_m": 0.5,
    "pairs.rotation_deg": 3.0,
    "pairs.min_gap_frames": 200,
    "pairs.position_weight": 0.0,
    "pairs.fallback_below": 0,
    "pairs.min_gap_fraction": 0.5,
    "pairs.max_revisit": 10,
    "pairs.seed": 7,
    "pairs.baseline_relax_below": 1000,
    "pairs.max_short": 30,
    "pairs.min_short": 60,
}
R2M_VALUES = {  # metric field -> a value that changes the metric's values
    "frame_psnr.cap_db": 50.0,
    "frame_ssim.window": 11,
    "frame_ssim.data_range": 1023.0,
    "frame_ssim.k1": 0.2,
    "frame_ssim.k2": 0.3,
    "sift.ratio": 0.95,
    "sift.ransac_px": 0.3,
    "sift.confidence": 0.5,
    "epsilon": 1.0,
    "rounding": "upstream-88e0cd9",
    "metrics": ["frame_psnr"],
}
R2M_MODEL_VALUES = {  # model-family field -> a value that changes its metric's values (random-weight backends)
    "lightglue.long_side": 320,
    "lightglue.max_keypoints": 8,
    "lightglue.keypoint_threshold": 0.02,
    "lightglue.threshold": 0.5,
    "lightglue.ransac_px": 0.1,
    "lightglue.confidence": 0.5,
    "scene_identity.short_side": 56,
    "scene_identity.preprocess": "torchvision-bicubic",
    "scene_identity.crop": 56,
    "boq.size": [64, 64],
    "boq.preprocess": "torchvision-bicubic",
    "mutualvpr.size": [64, 64],
    "mutualvpr.preprocess": "torchvision-bicubic",
    "object_consistency.short_side": 56,
    "object_consistency.grid": 3,
    "object_consistency.min_area": 0.9,
    "object_consistency.max_area": 0.6,
    "object_consistency.overlap": 0.0,
    "object_persistence.text_prompt": "chair . red ball .",
    "object_persistence.box_threshold": 0.99999,
    "object_persistence.text_threshold": 0.7,
    "object_persistence.nms_iou": 0.0,
    "object_persistence.max_objects": 1,
    "object_persistence.min_area_ratio": 0.3,
    "object_persistence.match_threshold": 0.99,
    "object_persistence.appearance_weight": 3.0,
    "object_persistence.semantic_weight": 0.1,
    "object_persistence.detector_short_side": 96,
    "object_persistence.detector_max_side": 80,
    "object_persistence.feature_size": 42,
}
OBJECT_BASE = {  # small and permissive: every detection kept, so that each field's value has something to change
    "detector_short_side": 64,
    "detector_max_side": 128,
    "feature_size": 28,
    "box_threshold": 0.0,
    "text_threshold": 0.0,
    "max_objects": 3,
    "max_candidates": 3,
    "min_area_ratio": 0.0,
    "match_threshold": 0.0,
}
R2M_JUDGE_FIELDS = {  # persistent_state field -> a value that changes what the judge is sent
    "persistent_state.max_side": 64,
    "persistent_state.temperature": 0.7,
    "persistent_state.max_tokens": 100,
    "persistent_state.enable_thinking": True,
}
R2M_OTHER = (  # tests of their own below
    "extras",
    "persistent_state.prompt",
    "persistent_state.prompt_sha256",
    "persistent_state.pairs_per_kind",
    "object_persistence.max_candidates",
)
R2M_CHECKED = {
    "models": "sometimes",
    "lightglue.backend": "x",
    "scene_identity.backend": "x",
    "boq.backend": "x",
    "mutualvpr.backend": "x",
    "object_consistency.segmenter": "x",
    "object_consistency.features": "x",
    "persistent_state.backend": "x",
    "object_persistence.detector": "x",
    "object_persistence.segmenter": "x",
    "object_persistence.features": "x",
    "object_persistence.clip": "x",
    "pairs.sampler": "upstream",
    "frame_lpips.net": "vgg",
    "frame_lpips.version": "0.0",
    "frame_lpips.inputs": "[0, 1]",
}


def test_every_r2m_field_is_covered():
    covered = R2M_PAIRS | R2M_VALUES | R2M_MODEL_VALUES | R2M_JUDGE_FIELDS | R2M_CHECKED
    assert sorted(_fields(R2M)) == sorted([*covered, *R2M_OTHER])


@pytest.fixture(scope="module")
def r2m_tree(tmp_path_factory) -> Path:  # one case per trajectory (the session's r2m_tree has more)
    cfg = synth.R2MSynthConfig(cases=1)
    return synth.make(tmp_path_factory.mktemp("r2m") / "tree", cfg)


def _offset_return(traj: Trajectory) -> Trajectory:
    """DDDAAA coming back 0.12 m further forward: only a position tolerance above 0.12 m finds the revisits."""
    poses = traj.poses.copy()
    half = len(poses) // 2
    poses[half:, 2, 3] += 0.12
    return Trajectory(poses, traj.k, traj.sha256)


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(R2M_PAIRS))
def test_r2m_sampler_fields_act(r2m_tree, tmp_path, field):
    base = R2MBench.load_protocol().config["pairs"]
    new = _load(R2MBench, _set(R2M, field, R2M_PAIRS[field]), tmp_path).config["pairs"]
    trajs = [read_trajectory(layout.trajectory_path(r2m_tree, t)) for t in synth.TEMPLATES]
    trajs.append(_offset_return(trajs[0]))

    def lists(traj, params):
        return {k: v for k, v in pairs.build(traj, params).items() if k != "meta"}

    assert any(lists(t, base) != lists(t, new) for t in trajs)


def _video_scores(r2m_tree, config, tmp_path, kind: str) -> dict:
    protocol = _load(R2MBench, config, tmp_path)
    suite = open_suite(r2m_tree)
    case = next(c for c in suite.cases() if c.subset == "WSLRRLL")
    pair_file = suite.pair_file(case, protocol)
    from persistbench.io.video import read_frames

    frames = dict(enumerate(read_frames(r2m_tree / "videos" / kind / "WSLRRLL" / f"{case.case_id}.mp4")))
    wanted = tuple(m for m in protocol.metrics if not METRICS[m].backend_keys and m != "frame_lpips")
    ctx = ScoreContext(wanted)
    return score_video(
        frames, len(frames), len(frames), pair_file, protocol, ctx, ("WSLRRLL", case.case_id, "x")
    ).to_json()


def _textured_pair() -> dict[int, np.ndarray]:
    """A textured frame and a noisy perspective warp of it with a shifted patch (RANSAC has outliers to reject)."""
    import cv2

    rng = np.random.default_rng(3)
    a = cv2.GaussianBlur(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8), (0, 0), 1.2)
    h = np.array([[1.02, 0.03, 5], [0.01, 0.98, -4], [1e-4, 0, 1]])
    b = cv2.warpPerspective(a, h, (320, 240), borderMode=cv2.BORDER_REFLECT)
    b[100:180, 150:260] = np.roll(b[100:180, 150:260], 9, axis=1)
    return {0: a, 1: np.clip(b.astype(int) + rng.integers(-20, 21, b.shape), 0, 255).astype(np.uint8)}


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(R2M_VALUES))
def test_r2m_metric_fields_act(r2m_tree, tmp_path, field):
    if field.startswith("sift."):  # the synthetic scene is smooth: SIFT needs texture to show its parameters
        from persistbench.suites.r2m.pair_video import PairVideo

        def sift(config):
            protocol, video = _load(R2MBench, config, tmp_path), PairVideo(_textured_pair())
            return [
                METRICS[m].function(video, [(0, 1)], protocol.params(m))
                for m in ("sift_match_ratio", "sift_inlier_ratio")
            ]

        assert sift(R2M) != sift(_set(R2M, field, R2M_VALUES[field]))
        return
    kind = "static" if field == "frame_psnr.cap_db" else "pose"  # identical frames: the cap
    base = _video_scores(r2m_tree, R2M, tmp_path, kind)
    new = _video_scores(r2m_tree, _set(R2M, field, R2M_VALUES[field]), tmp_path, kind)
    if field == "epsilon":
        assert [r["valid"] for r in base["relative"].values()] != [r["valid"] for r in new["relative"].values()]
    else:
        assert base["values"] != new["values"]


def _model_values(config, tmp_path, checkpoints, metric: str, judge_url: str | None = None):
    """``metric`` on the textured pair with the random-weight backends."""
    from persistbench.backends import BackendOptions, JudgeOptions
    from persistbench.suites.r2m.pair_video import PairVideo

    judge = JudgeOptions(judge_url, "judge-x") if judge_url else None
    opts = BackendOptions("cpu", tuple((k, str(v)) for k, v in sorted(checkpoints.items())), False, 4, judge)
    protocol = _load(R2MBench, config, tmp_path)
    return METRICS[metric].function(PairVideo(_textured_pair(), backends=opts), [(0, 1)], protocol.params(metric))


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(R2M_MODEL_VALUES))
def test_r2m_model_fields_act(tmp_path, checkpoints, field):
    section = field.split(".")[0]
    metrics = [m for m, spec in METRICS.items() if spec.params == section]  # lightglue: both ratios
    base = copy.deepcopy(R2M)
    new = _set(base, field, R2M_MODEL_VALUES[field])
    if section == "lightglue":  # small frames: the random SuperPoint's keypoints spread over them
        # and every match of the random LightGlue kept, unless the threshold is the field that changes
        for key, value in (("long_side", 160), ("threshold", 0.0)):
            base["lightglue"][key] = value
            new["lightglue"][key] = R2M_MODEL_VALUES[field] if field == f"lightglue.{key}" else value
    if section == "object_persistence":
        small = dict(OBJECT_BASE)
        if field.split(".")[1] in ("nms_iou", "appearance_weight", "semantic_weight"):  # these act among many
            small.update(max_objects=0, max_candidates=0)  # all the random detector's boxes
        base["object_persistence"].update(small)
        new["object_persistence"].update({k: v for k, v in small.items() if k != field.split(".")[1]})
    if section == "object_consistency":  # start from every candidate kept, change one bound
        keep = {"grid": 2, "min_area": 0.0, "max_area": 1.0, "overlap": 1.0}
        base["object_consistency"].update(keep)
        new["object_consistency"].update({k: v for k, v in keep.items() if k != field.split(".")[1]})
    before = [_model_values(base, tmp_path, checkpoints, m) for m in metrics]
    after = [_model_values(new, tmp_path, checkpoints, m) for m in metrics]
    assert before != after, (before, after)


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(R2M_JUDGE_FIELDS))
def test_r2m_judge_fields_act(tmp_path, checkpoints, monkeypatch, field):
    from fakes.judge_server import JudgeServer, state

    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    with JudgeServer(lambda n, body: state(body)) as server:
        for config in (R2M, _set(R2M, field, R2M_JUDGE_FIELDS[field])):
            assert _model_values(config, tmp_path, checkpoints, "persistent_state", server.url)[0] in range(1, 6)
    assert server.requests[0] != server.requests[1]


def test_r2m_extras_are_scored_only_when_asked(tmp_path):
    from persistbench.core.errors import UsageError
    from persistbench.core.score import wanted_metrics

    plain, extra = (
        _load(R2MBench, R2M, tmp_path),
        _load(R2MBench, _set(R2M, "extras", ["scene_identity_boq"]), tmp_path),
    )
    assert "scene_identity_boq" not in extra.metrics and wanted_metrics(extra, None) == plain.metrics
    assert wanted_metrics(extra, ("scene_identity_boq",)) == ("scene_identity_boq",)
    with pytest.raises(UsageError, match="unknown metrics"):
        wanted_metrics(plain, ("scene_identity_boq",))
    with pytest.raises(PersistbenchError, match=r"extras: unknown \['psnr'\]"):
        _load(R2MBench, _set(R2M, "extras", ["psnr"]), tmp_path)


def _upstream_checkout(root: Path, system: str = "You judge two frames.", user: str = "Score them.") -> Path:
    """A checkout's ``src/metrics/persistent_state.py`` holding the two prompt constants (and code around them)."""
    path = root / "src" / "metrics" / "persistent_state.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"import json\n\nEVAL_SYSTEM_PROMPT = {system!r}\n\nEVAL_USER_PROMPT = {user!r}\n\nX = 1\n")
    return root


def test_r2m_state_prompt_is_upstreams_or_ours_and_pinned(tmp_path):
    from persistbench.suites.r2m.data import Checkout
    from persistbench.suites.r2m.pair_video import StateQuestion
    from persistbench.suites.r2m.scoring import state_question

    ours = state_question(Checkout(tmp_path), _load(R2MBench, R2M, tmp_path))
    assert ours == StateQuestion.shipped("state-v1") and not ours.text_first
    upstream = _set(R2M, "persistent_state.prompt", "upstream-88e0cd9")
    with pytest.raises(PersistbenchError, match=r"persistent_state\.py: not there"):
        state_question(Checkout(tmp_path), _load(R2MBench, upstream, tmp_path))
    checkout = Checkout(_upstream_checkout(tmp_path / "checkout"))
    theirs = state_question(checkout, _load(R2MBench, upstream, tmp_path))
    assert (theirs.system, theirs.user, theirs.text_first, theirs.attempts) == (
        "You judge two frames.",
        "Score them.",
        True,
        4,
    )
    pinned = _set(upstream, "persistent_state.prompt_sha256", theirs.sha256)
    assert state_question(checkout, _load(R2MBench, pinned, tmp_path)) == theirs
    for config in (
        _set(upstream, "persistent_state.prompt_sha256", "0" * 64),
        _set(R2M, "persistent_state.prompt_sha256", "0" * 64),
    ):
        with pytest.raises(PersistbenchError, match="its prompts have sha256 .*, not the protocol's 000000000000"):
            state_question(checkout, _load(R2MBench, config, tmp_path))


@pytest.mark.slow
def test_r2m_object_candidates_are_bounded(tmp_path, checkpoints, monkeypatch):
    """On the random detector the best candidate is the first ranked, so the bound is seen in what is compared."""
    from persistbench.suites.r2m import objects

    compared = []

    def counting(anchors, candidates, *rest):
        compared.append([len(c) for c in candidates])
        return persistence(anchors, candidates, *rest)

    persistence = objects.persistence
    monkeypatch.setattr(objects, "persistence", counting)
    for bound in (0, 2):
        config = _set(R2M, "object_persistence.max_candidates", bound)
        config["object_persistence"].update({k: v for k, v in OBJECT_BASE.items() if k != "max_candidates"})
        _model_values(config, tmp_path, checkpoints, "object_appearance_persistence")
    everything, bounded = compared
    assert max(everything) > 2 and bounded == [min(n, 2) for n in everything]


@pytest.mark.slow
def test_r2m_state_is_asked_on_the_first_pairs_of_each_kind(tmp_path, checkpoints, monkeypatch):
    from fakes.judge_server import JudgeServer, state

    from persistbench.backends import BackendOptions, JudgeOptions
    from persistbench.suites.r2m.pair_video import PairVideo

    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    frames = {i: np.full((24, 32, 3), 40 * i, np.uint8) for i in range(4)}
    pairs = [(0, 1), (1, 2), (2, 3)]
    with JudgeServer(lambda n, body: state(body)) as server:
        opts = BackendOptions("cpu", (), False, 4, JudgeOptions(server.url, "judge-x"))
        counts = []
        for limit in (None, 2):
            protocol = _load(R2MBench, _set(R2M, "persistent_state.pairs_per_kind", limit), tmp_path)
            before = len(server.requests)
            values = METRICS["persistent_state"].function(
                PairVideo(frames, opts), pairs, protocol.params("persistent_state")
            )
            counts.append((len(values), len(server.requests) - before))
    assert counts == [(3, 3), (2, 0)]  # the first two pairs' answers were cached by the first round


@pytest.mark.parametrize("field", sorted(R2M_CHECKED))
def test_r2m_fields_are_checked(tmp_path, field):
    with pytest.raises(PersistbenchError, match="must be (null or )?one of"):
        _load(R2MBench, _set(R2M, field, R2M_CHECKED[field]), tmp_path)


def test_protocols_belong_to_their_suite(tmp_path):
    with pytest.raises(PersistbenchError, match=r"no such protocol \(shipped: r2m-v2, r2m-paper-v1, r2m-v1\)"):
        R2MBench.load_protocol("classic-v1")
    with pytest.raises(PersistbenchError, match=r"metrics: unknown \['psnr'\]"):
        _load(R2MBench, _set(R2M, "metrics", ["psnr"]), tmp_path)


# ---------------------------------------------------------------- wrop-cont-v1 (WROP)

WROP = json.loads(shipped_path("wrop-cont-v1").read_text())
WROP_ACTS = {  # field -> another valid value; each changes the per-case values (exclude_tasks: the aggregates)
    "metrics": ["psnr"],
    "eval_size": [32, 48],
    "resize.rgb": "cubic",  # with eval_size [32, 48] on both sides
    "changed_region.tau": 0.3,
    "changed_region.dilate_px": 0,
    "psnr.cap_db": 30.0,
    "ssim.sigma": 3.0,
    "ssim.window": 5,
    "ssim.k1": 0.2,
    "ssim.k2": 0.2,
    "ssim.covariance": "sample",
    "exclude_tasks": ["u_track*"],
}
WROP_CHECKED = {
    "changed_region.reference": "first input frame",
    "psnr.data_range": 255.0,
    "lpips.net": "vgg",
    "lpips.version": "0.0",
    "lpips.inputs": "[0, 1]",
    "lpips.reduce": "mean",
    "frames": "all target frames",
    "gain": "model over hold",
    "aggregate": "per sample",
}


def test_every_wrop_field_is_covered():
    assert sorted(_fields(WROP)) == sorted(WROP_ACTS | WROP_CHECKED)


@pytest.fixture(scope="module")
def wrop(tmp_path_factory):
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    root = tmp_path_factory.mktemp("wrop")
    make(root, WropSynthConfig(samples=3, size=(64, 96)))
    run = tmp_path_factory.mktemp("flow") / "flow"
    infer(InferOptions(dataset=root, output=run, model="flow"), progress=False)
    return open_suite(root), run


def _wrop_scores(wrop, config, tmp_path) -> tuple[list[dict], dict]:
    from persistbench.suites.wrop.suite import Wrop

    suite, run = wrop
    protocol = _load(Wrop, config, tmp_path)
    ctx = ScoreContext(tuple(m for m in protocol.metrics if m != "lpips"))
    cases = suite.cases()[2:4]  # one sample of two tasks (a midpoint and an overlap_event split)
    records = [protocol.scorer.score_case(suite, c, suite.read_prediction(run, None, c), protocol, ctx) for c in cases]
    return records, protocol.scorer.summarise(suite, records, protocol, ctx)[1]


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(WROP_ACTS))
def test_wrop_fields_act(wrop, tmp_path, field):
    base_config = _set(WROP, "eval_size", [32, 48]) if field == "resize.rgb" else WROP
    base, base_summary = _wrop_scores(wrop, base_config, tmp_path)
    new, new_summary = _wrop_scores(wrop, _set(base_config, field, WROP_ACTS[field]), tmp_path)
    if field == "exclude_tasks":
        assert base_summary["overall"]["tasks"] == 2 and new_summary["overall"]["tasks"] == 1
        assert (
            new_summary["excluded_tasks"] == ["u_track_occluded_ball"] and new_summary["tasks"]["u_track_occluded_ball"]
        )
        return
    assert [r["values"] for r in base] != [r["values"] for r in new]
    if field == "psnr.cap_db":
        assert max(v for r in new for v in r["values"]["full"]["psnr"]["hold"] if v is not None) <= 30.0


@pytest.mark.parametrize("field", sorted(WROP_CHECKED))
def test_wrop_fields_are_checked(tmp_path, field):
    from persistbench.suites.wrop.suite import Wrop

    with pytest.raises(PersistbenchError, match=rf"{field.split('.')[0]}: .*(must be one of|must read exactly)"):
        _load(Wrop, _set(WROP, field, WROP_CHECKED[field]), tmp_path)
