"""Model backends and the paper-v3 protocol, without weights or network: the real architectures (transformers)
built with random weights and saved to a temporary folder, the judge against a loopback scripted endpoint.

The numbers mean nothing (random weights); what is checked is the loading path, the shapes, the masking and
pooling against a numpy computation on the same features, the judge's failure handling, and the protocol's
arithmetic against direct computations of its definitions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from judge_server import JudgeServer, completion, seen

from persistbench import paper_metrics as pm
from persistbench.backends import BACKENDS, BackendOptions, BackendUnavailable, JudgeOptions, check_backend
from persistbench.backends.features import PatchFeatures
from persistbench.backends.judge import Judge, JudgmentFailed, Request
from persistbench.backends.weights import resolve
from persistbench.cli import main
from persistbench.layout import RunLayout, public_result
from persistbench.suites.persistbench import paper

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


# ---------------------------------------------------------------- random-weight checkpoints


def _dinov2_reg(folder):
    from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    torch.manual_seed(0)
    cfg = Dinov2WithRegistersConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=14, image_size=98
    )
    Dinov2WithRegistersModel(cfg).eval().save_pretrained(folder)
    return folder


def _dinov3(folder):
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    torch.manual_seed(1)
    cfg = DINOv3ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=16
    )
    DINOv3ViTModel(cfg).eval().save_pretrained(folder)
    return folder


def _sam2(folder, size=256):
    from transformers import (
        Sam2ImageProcessorFast,
        Sam2VideoConfig,
        Sam2VideoModel,
        Sam2VideoProcessor,
        Sam2VideoVideoProcessor,
    )

    torch.manual_seed(2)
    cfg = Sam2VideoConfig(
        image_size=size,
        vision_config={
            "model_type": "sam2_vision_model",
            "backbone_feature_sizes": [[size // 4] * 2, [size // 8] * 2, [size // 16] * 2],
            "backbone_config": {"model_type": "sam2_hiera_det_model", "image_size": [size, size]},
        },
        prompt_encoder_config={"image_size": size},
        memory_attention_rope_feat_sizes=[size // 16] * 2,
    )
    Sam2VideoModel(cfg).eval().save_pretrained(folder)
    hw = {"height": size, "width": size}
    Sam2VideoProcessor(
        image_processor=Sam2ImageProcessorFast(size=hw), video_processor=Sam2VideoVideoProcessor(size=hw)
    ).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    return {
        "dinov2-reg-large": _dinov2_reg(root / "dinov2"),
        "dinov3-large": _dinov3(root / "dinov3"),
        "sam2": _sam2(root / "sam2"),
    }


def _opts(checkpoints, judge=None) -> BackendOptions:
    return BackendOptions("cpu", tuple((k, str(v)) for k, v in sorted(checkpoints.items())), False, 4, judge)


# ---------------------------------------------------------------- weights


def test_weights_resolve_from_a_folder_and_record_their_sha256(checkpoints):
    import hashlib

    w = resolve(BACKENDS["dinov3-large"], str(checkpoints["dinov3-large"]), False)
    assert w.sha256 == hashlib.sha256((checkpoints["dinov3-large"] / "model.safetensors").read_bytes()).hexdigest()
    assert w.provenance() == {"weights": str(checkpoints["dinov3-large"]), "sha256": w.sha256}


def test_missing_weights_say_which_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendUnavailable) as e:
        check_backend("dinov3-large", BackendOptions())
    msg = str(e.value)
    assert "\n" not in msg and "facebook/dinov3-vitl16-pretrain-lvd1689m" in msg and "--allow-download" in msg
    (tmp_path / "pickled").mkdir()
    (tmp_path / "pickled" / "config.json").write_text("{}")
    (tmp_path / "pickled" / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(BackendUnavailable, match="pytorch_model.bin are pickles"):
        resolve(BACKENDS["sam2"], str(tmp_path / "pickled"), False)
    with pytest.raises(BackendUnavailable, match="the judge needs --judge-url"):
        check_backend("judge", BackendOptions())


# ---------------------------------------------------------------- features, masking and pooling


def test_patch_features_are_the_models_normed_patch_tokens(checkpoints):
    from transformers import AutoModel

    w = resolve(BACKENDS["dinov2-reg-large"], str(checkpoints["dinov2-reg-large"]), False)
    f = PatchFeatures(w, "cpu", batch_size=2)
    frames = np.random.default_rng(0).random((3, 50, 61, 3), dtype=np.float32)
    got = f(frames, fit="resize")
    assert got.shape == (3, 4, 5, 32)  # ceil(50 / 14), ceil(61 / 14)
    model = AutoModel.from_pretrained(checkpoints["dinov2-reg-large"]).eval()
    x = torch.nn.functional.interpolate(torch.from_numpy(frames).permute(0, 3, 1, 2), size=(56, 70), mode="bilinear")
    mean, std = (
        torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1),
        torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1),
    )
    with torch.no_grad():
        tokens = model(pixel_values=(x - mean) / std).last_hidden_state  # CLS, 4 registers, then patches
    np.testing.assert_allclose(got, tokens[:, 5:].reshape(3, 4, 5, 32).numpy(), atol=1e-5)
    w3 = resolve(BACKENDS["dinov3-large"], str(checkpoints["dinov3-large"]), False)
    assert PatchFeatures(w3, "cpu")(frames[:1], fit="floor").shape == (1, 3, 3, 32)  # 50 // 16, 61 // 16


def test_mask_grid_is_torch_area_interpolation_and_pooling_matches_numpy():
    rng = np.random.default_rng(1)
    for h, w, gh, gw in [(50, 61, 4, 5), (384, 512, 28, 37), (30, 30, 3, 3)]:
        mask = rng.random((h, w)) > 0.97
        area = torch.nn.functional.interpolate(
            torch.from_numpy(mask.astype(np.float32))[None, None], (gh, gw), mode="area"
        )
        assert np.array_equal(pm.mask_grid(mask, gh, gw), area[0, 0].numpy() > 0)
    feats = rng.standard_normal((4, 5, 8)).astype(np.float32)
    mask = np.zeros((50, 61), bool)
    mask[20:30, 10:14] = True
    cells = pm.mask_grid(mask, 4, 5)
    v = feats[cells].mean(0)
    np.testing.assert_allclose(pm.pooled(feats, mask), v / (np.linalg.norm(v) + 1e-8), atol=1e-6)
    v = feats.reshape(-1, 8).mean(0)  # no cell touched: every cell
    np.testing.assert_allclose(pm.pooled(feats, np.zeros((50, 61), bool)), v / (np.linalg.norm(v) + 1e-8), atol=1e-6)


def test_best_match_is_the_brute_force_minimum():
    rng = np.random.default_rng(2)
    tar = rng.standard_normal((23, 31, 40)).astype(np.float32)
    src = tar[7:15, 12:21] + 0.01 * rng.standard_normal((8, 9, 40)).astype(np.float32)

    def unit(a):
        return a / (np.linalg.norm(a, axis=-1, keepdims=True) + 1e-8)

    scores = np.array(
        [
            [1 - np.mean(np.sum(unit(src) * unit(tar[y : y + 8, x : x + 9]), -1)) for x in range(31 - 9 + 1)]
            for y in range(23 - 8 + 1)
        ]
    )
    y, x, score = pm.best_match(torch.from_numpy(src), torch.from_numpy(tar), chunk=16)
    assert (y, x) == np.unravel_index(np.argmin(scores), scores.shape) == (7, 12)
    assert math.isclose(score, scores.min(), abs_tol=1e-4)


def test_boxes_and_placed_masks():
    mask = np.zeros((40, 60), bool)
    mask[10:20, 30:50] = True
    box = pm.mask_box(mask, 0.1)
    assert box.pixels() == (28, 9, 50, 19)  # x 30-1.9 .. 49+1.9, y 10-0.9 .. 19+0.9, truncated
    # same size: the cut (rows 9..18, end exclusive as upstream: the mask's last row is lost) pasted at (5, 2)
    placed = pm.place_mask(mask, box, pm.placed_box(5, 2, 10, 22, 40, 60))
    assert placed.shape == (40, 60) and placed[6:15, 4:24].all() and placed.sum() == 9 * 20
    doubled = pm.place_mask(mask, box, pm.placed_box(0, 0, 20, 44, 40, 60))  # nearest, twice the size
    assert doubled.sum() == 4 * 9 * 20 and doubled[2:20, 4:44].all()


def test_motion_continuity_and_split_means():
    ref = [np.zeros((10, 10), bool) for _ in range(4)]
    pred = [np.zeros((10, 10), bool) for _ in range(4)]
    ref[1][2:4, 2:4] = ref[2][2:4, 2:4] = True  # area 4 on frames 1 and 2, 0 on frame 3
    pred[1][2:4, 2:4] = True
    pred[2][2:4, 5:7] = True  # 3 px to the right
    out = pm.motion_continuity(ref, pred, start=1)
    scale = math.sqrt((4 + 4 + 0) / 3)
    assert math.isnan(out[0]) and out[1] == 1.0 and math.isclose(out[2], math.exp(-3 / scale)) and math.isnan(out[3])
    assert pm.split_mean(out, np.array([True, True, True, True]), 1) == pytest.approx((1 + out[2]) / 2)
    assert pm.split_mean(out, np.array([True, False, False, True]), 1) is None


def test_the_judges_frames_are_sampled_adaptively():
    assert pm.spread(list(range(10)), 4) == [0, 3, 6, 9] and pm.spread([5, 6], 4) == [5, 6]
    truth = [True] * 15 + [False] * 15  # frames 0..29; scoring starts at 2; frame 25's tracked mask is empty
    asked = []

    def ask(indices):
        asked.append(list(indices))
        return {i: truth[i] for i in indices}

    status, seen_frames = pm.judge_statuses(2, 30, {25}, 4, ask)
    assert status == [None, None] + truth[2:]
    # 4 spread over 2..29, then 4 between the differing answers at 11 and 20, then the last 2 between 14 and 17
    assert asked == [[2, 11, 20, 29], [12, 14, 17, 19], [15, 16]]
    assert seen_frames == [2, 11, 12, 14, 15, 16, 17, 19, 20, 25, 29]
    # a run between two equal answers is not looked into (as upstream): it takes their answer
    dip = [True] * 12 + [False] * 8 + [True] * 10
    status, _ = pm.judge_statuses(2, 30, set(), 4, lambda idx: {i: dip[i] for i in idx})
    assert status[2:] == [True] * 28


# ---------------------------------------------------------------- the judge


def _judge(server, tmp_path, monkeypatch, **kw) -> Judge:
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-secret-123")
    return Judge(JudgeOptions(server.url, "judge-x", "MY_JUDGE_KEY", retries=2, backoff_s=0.01, **kw))


def _score_parser(obj):
    from persistbench.backends.judge import BadReply

    v = obj.get("score")
    if type(v) is not int or not 1 <= v <= 5:
        raise BadReply(f"score {v!r} is not an integer in [1, 5]")
    return v


REQ = Request("rate it", (np.full((8, 8, 3), 200, np.uint8),))


@pytest.mark.parametrize(
    ("replies", "value", "requests"),
    [
        ([completion('```json\n{"score": 4}\n```')], 4, 1),  # fenced
        ([(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}), completion('{"score": 2}')], 2, 2),
        ([(503, {"error": {"message": "busy"}}, {}), completion('<answer>{"score": 5}</answer>')], 5, 2),
        ([completion('{"score": 9}'), completion('{"score": 3}')], 3, 2),  # out of range: asked again
    ],
)
def test_the_judge_parses_strictly_and_retries(tmp_path, monkeypatch, replies, value, requests):
    with JudgeServer(lambda n, body: replies[min(n, len(replies) - 1)]) as server:
        judge = _judge(server, tmp_path, monkeypatch)
        answer = judge.ask(REQ, _score_parser)
        assert (answer.value, answer.cached, len(server.requests)) == (value, False, requests)
        assert server.headers[0]["authorization"] == "Bearer sk-secret-123"
        body = server.requests[0]
        assert body["model"] == "judge-x" and body["temperature"] == 0.0 and body["max_tokens"] == 2048
        assert body["messages"][-1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
        again = _judge(server, tmp_path, monkeypatch).ask(REQ, _score_parser)
        assert (again.value, again.cached, len(server.requests)) == (value, True, requests)  # from the cache
    cached = list((tmp_path / "cache" / "judge").rglob("*.json"))
    assert len(cached) == 1 and "sk-secret" not in cached[0].read_text()


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (completion('{"score": 3', finish="length"), "truncated"),
        (completion(None, refusal="I cannot help with that"), "refused"),
        (completion("I'm sorry, I can't judge images."), "no JSON object"),
        (completion('{"score": "high"}'), "not an integer"),
        ((400, {"error": {"message": "bad model"}}, {}), "HTTP 400"),
        ((500, {"error": {"message": "down"}}, {}), "after 3 attempts"),
    ],
)
def test_every_kind_of_bad_reply_is_a_counted_failure(tmp_path, monkeypatch, reply, why):
    with JudgeServer(lambda n, body: reply) as server:
        out = _judge(server, tmp_path, monkeypatch).ask_many([REQ, REQ], [_score_parser, _score_parser])
    assert all(isinstance(o, JudgmentFailed) and why in str(o) for o in out)
    assert not (tmp_path / "cache" / "judge").exists()  # failures are not cached


def test_concurrency_is_bounded(tmp_path, monkeypatch):
    import threading
    import time

    active, peak = [0], [0]
    lock = threading.Lock()

    def script(n, body):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return completion('{"score": 1}')

    reqs = [Request(f"q{i}", REQ.images) for i in range(9)]
    with JudgeServer(script) as server:
        out = _judge(server, tmp_path, monkeypatch, concurrency=3).ask_many(reqs, [_score_parser] * 9)
    assert [a.value for a in out] == [1] * 9 and peak[0] == 3


# ---------------------------------------------------------------- paper-v3 end to end


@pytest.fixture(scope="module")
def oracle_run(sample_ds, tmp_path_factory):
    run = tmp_path_factory.mktemp("paper") / "oracle"
    model = f"{Path(__file__).parent / 'adapters' / 'short_oracle.py'}:ShortOracle"
    args = ["infer", "--no-progress", "--model", model, "--dataset", str(sample_ds), "--output", str(run)]
    result = CliRunner().invoke(main, [*args, "--limit", "2"])
    assert result.exit_code == 0, result.output
    return run


def _score(run, checkpoints, url, *extra):
    weights = [a for k, v in sorted(checkpoints.items()) for a in ("--weights", f"{k}={v}")]
    args = [
        "score",
        "--no-progress",
        "--pred",
        str(run),
        "--protocol",
        "paper-v3",
        "--allow-partial",
        "--device",
        "cpu",
    ]
    return CliRunner().invoke(main, [*args, *weights, "--judge-url", url, "--judge-model", "judge-x", *extra])


def test_paper_v3_scores_a_run_with_every_backend(oracle_run, checkpoints, tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PERSISTBENCH_JUDGE_KEY", "sk-never-written")
    run = RunLayout(oracle_run)
    with JudgeServer(lambda n, body: completion(None, refusal="no")) as broken:
        result = _score(oracle_run, checkpoints, broken.url)
    assert result.exit_code == 0, result.output
    summary = json.loads(run.summary_json("paper-v3").read_text())
    assert summary["judge_failures"] == 2 and summary["valid_counts"]["object_permanence_visible"] == 0
    assert summary["valid_counts"]["motion_continuity_visible"] == 2  # the other scores stand

    with JudgeServer(lambda n, body: seen(body)) as server:
        result = _score(oracle_run, checkpoints, server.url, "--resume")  # cases with failed judgments again
        assert result.exit_code == 0, result.output
        asked = len(server.requests)
        assert asked >= 2 and "done 2" in result.output
        summary = json.loads(run.summary_json("paper-v3").read_text())
        assert summary["judge_failures"] == 0
        for key in ("object_permanence_visible", "motion_continuity_visible", "appearance_preservation_visible"):
            assert summary["valid_counts"][key] == 2 and summary["averages"][key] is not None, key
        assert summary["backends"]["judge"] == [{"judge_model": "judge-x", "judge_url": server.url}]
        assert (
            summary["backends"]["sam2"][0]["sha256"]
            == resolve(BACKENDS["sam2"], str(checkpoints["sam2"]), False).sha256
        )
        result = _score(oracle_run, checkpoints, server.url)  # everything again: the judge's answers are cached
        assert result.exit_code == 0 and len(server.requests) == asked
    assert "judge-x" in run.summary_md("paper-v3").read_text()

    records = sorted((run.scores_dir("paper-v3")).glob("*/*.json"))
    for path in records:
        record = json.loads(path.read_text())
        assert record["protocol"] == "paper-v3" and len(record["metrics"]["object_permanence"]) == 10
        start = record["start"]
        assert all(v is None for m in record["metrics"].values() for v in m[:start])
        # the public toolkit's result.json, written beside ours and read back by its rules
        public = json.loads(public_result(run.scores_dir("paper-v3"), record["subset"], record["uid"]).read_text())
        back = paper.from_public(public, "result.json")
        assert back["means"] == record["means"] and back["use_stationary"] == record["use_stationary"]
    assert not any("sk-never-written" in p.read_text() for p in run.scores_dir("paper-v3").rglob("*.json"))


def test_a_public_result_that_does_not_add_up_is_refused(oracle_run):
    record = {
        "uid": "c",
        "subset": "static",
        "use_stationary": 1,
        "eval_size": [8, 8],
        "visible": [False, True, True],
        "invisible": [False, False, False],
        "start": 1,
        "matching_score": 0.1,
        "metrics": {m: [None, 0.5, 1.0] for m in paper.PAPER_METRICS},
        "means": {
            "visible": {m: 0.75 for m in paper.PAPER_METRICS},
            "invisible": {m: None for m in paper.PAPER_METRICS},
        },
    }
    public = paper.to_public(record)
    assert paper.from_public(public, "ok.json")["means"]["visible"]["motion_continuity"] == 0.75
    public["results"]["motion_continuity"]["scalars"]["visible"] = 0.7
    with pytest.raises(Exception, match="bad.json: .*saved mean differs"):
        paper.from_public(public, "bad.json")


def test_paper_v3_without_backends_fails_in_one_line(oracle_run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["score", "--no-progress", "--pred", str(oracle_run), "--protocol", "paper-v3", "--allow-partial"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "dinov3-large" in result.output and "--weights" in result.output
