"""Model backends and the paper-v3 protocol, without weights or network: the real architectures (transformers)
built with random weights and saved to a temporary folder, the judge against a loopback scripted endpoint.

The numbers mean nothing (random weights); what is checked is the loading path, the shapes, the masking and
pooling against a numpy computation on the same features, the judge's failure handling, and the protocol's
arithmetic against direct computations of its definitions.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes.judge_server import JudgeServer, completion, looks, state

from persistbench.backends import BACKENDS, BackendOptions, BackendUnavailable, JudgeOptions, check_backend, load
from persistbench.backends.features import IMAGENET_MEAN, IMAGENET_STD, PatchFeatures
from persistbench.backends.judge import BadReply, Judge, JudgmentFailed, Request
from persistbench.backends.matcher import PairMatcher
from persistbench.backends.weights import resolve
from persistbench.cli import main
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.core.protocol import shipped_path
from persistbench.metrics import pair as pair_metrics
from persistbench.metrics.registry import METRICS
from persistbench.suites.persistbench import paper
from persistbench.suites.persistbench import tracked as pm
from persistbench.suites.persistbench.layout import public_result
from persistbench.suites.r2m.pair_video import PairVideo, parse_state
from persistbench.suites.r2m.suite import R2MBench

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _opts(checkpoints, judge=None) -> BackendOptions:
    return BackendOptions("cpu", tuple((k, str(v)) for k, v in sorted(checkpoints.items())), False, 4, judge)


# ---------------------------------------------------------------- weights


@pytest.mark.slow
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


@pytest.mark.slow
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
        assert np.array_equal(pair_metrics.mask_grid(mask, gh, gw), area[0, 0].numpy() > 0)
    feats = rng.standard_normal((4, 5, 8)).astype(np.float32)
    mask = np.zeros((50, 61), bool)
    mask[20:30, 10:14] = True
    cells = pair_metrics.mask_grid(mask, 4, 5)
    v = feats[cells].mean(0)
    np.testing.assert_allclose(pair_metrics.pooled(feats, mask), v / (np.linalg.norm(v) + 1e-8), atol=1e-6)
    v = feats.reshape(-1, 8).mean(0)  # no cell touched: every cell
    np.testing.assert_allclose(
        pair_metrics.pooled(feats, np.zeros((50, 61), bool)), v / (np.linalg.norm(v) + 1e-8), atol=1e-6
    )


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
    d = pm.motion_distances(ref, pred, start=1)
    out = pm.motion_continuity(d)
    scale = math.sqrt((4 + 4 + 0) / 3)
    assert math.isnan(d[0]) and d[1] == 0.0 and math.isclose(d[2], 3 / scale) and math.isnan(d[3])
    assert math.isnan(out[0]) and out[1] == 1.0 and math.isclose(out[2], math.exp(-3 / scale)) and math.isnan(out[3])
    every, none = np.array([True, True, True, True]), np.array([True, False, False, True])
    assert pm.split_mean(out, every, 1) == pytest.approx((1 + out[2]) / 2)
    assert pm.split_mean(out, none, 1) is None
    # the published leaderboard's case value: exp of the mean distance, below the mean of the frame scores
    assert pm.published_continuity(d, every, 1) == pytest.approx(math.exp(-3 / scale / 2))
    assert pm.published_continuity(d, every, 1) < pm.split_mean(out, every, 1)
    assert pm.published_continuity(d, none, 1) is None


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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("replies", "value", "requests"),
    [
        ([completion('```json\n{"score": 4}\n```')], 4, 1),  # fenced
        ([(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}), completion('{"score": 2}')], 2, 2),
        ([(503, {"error": {"message": "busy"}}, {}), completion('<answer>{"score": 5}</answer>')], 5, 2),
        ([completion('{"score": 9}'), completion('{"score": 3}')], 3, 2),  # out of range: asked again
        # empty, refused and truncated replies are asked again too, as the public toolkit asks them
        ([completion(""), completion(None, refusal="no"), completion('{"score": 1}')], 1, 3),
        ([completion('{"score": 3', finish="length"), completion('{"score": 2}')], 2, 2),
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_paper_v3_scores_a_run_with_every_backend(oracle_run, checkpoints, tmp_path, monkeypatch):
    pytest.importorskip("sam2", reason="paper-v3's tracker is the sam2 package: pip install -e '.[sam2]'")
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PERSISTBENCH_JUDGE_KEY", "sk-never-written")
    run = RunLayout(oracle_run)
    with JudgeServer(lambda n, body: completion(None, refusal="no")) as broken:  # past its battery: forced
        result = _score(oracle_run, checkpoints, broken.url, "--judge-force")
    assert result.exit_code == 1, result.output  # a requested metric has no value in any case
    assert "object_permanence could not be computed" in result.output and "refusal: " in result.output
    summary = json.loads(run.summary_json("paper-v3").read_text())
    assert summary["judge_failures"] == 2 and summary["valid_counts"]["object_permanence_visible"] == 0
    assert "refusal" in summary["judge_failure_reasons"]  # then "circuit open", after 10 in a row
    assert list(summary["failed_metrics"]) == ["object_permanence"]
    assert summary["valid_counts"]["motion_continuity_visible"] == 2  # the other scores stand

    with JudgeServer(lambda n, body: looks(body)) as server:
        result = _score(oracle_run, checkpoints, server.url, "--resume")  # cases with failed judgments again
        assert result.exit_code == 0, result.output
        assert len(server.requests) >= 2 and "done 2" in result.output
        summary = json.loads(run.summary_json("paper-v3").read_text())
        assert summary["judge_failures"] == 0
        for key in ("object_permanence_visible", "motion_continuity_visible", "appearance_preservation_visible"):
            assert summary["valid_counts"][key] == 2 and summary["averages"][key] is not None, key
        assert summary["backends"]["judge"] == [
            {"judge_model": "judge-x", "judge_url": server.url, "served_model": None}
        ]
        (tracker,) = summary["backends"]["sam2-package"]
        assert tracker["sha256"] == resolve(BACKENDS["sam2-package"], str(checkpoints["sam2-package"]), False).sha256
        assert tracker["sam2_config"] == "configs/sam2.1/sam2.1_hiera_t.yaml" and tracker["precision"] == "float32"
        _package_and_check(oracle_run, checkpoints, server.url, tmp_path)
    assert "judge-x" in run.summary_md("paper-v3").read_text()
    report = CliRunner().invoke(main, ["report", str(oracle_run), "--output", str(tmp_path / "report.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report.html").read_text()
    sam2_sha = resolve(BACKENDS["sam2-package"], str(checkpoints["sam2-package"]), False).sha256
    assert f"sam2-package: {sam2_sha[:12]} on cpu" in page and "judge: judge-x at http://127.0.0.1:" in page
    assert "object_permanence_visible" in page and "default-three-paper-v3" in page

    records = sorted((run.scores_dir("paper-v3")).glob("*/*.json"))
    for path in records:
        record = json.loads(path.read_text())
        assert record["protocol"] == "paper-v3" and len(record["metrics"]["object_permanence"]) == 4
        start = record["start"]
        assert all(v is None for m in record["metrics"].values() for v in m[:start])
        # the public toolkit's result.json, written beside ours and read back by its rules
        public = json.loads(public_result(run.scores_dir("paper-v3"), record["subset"], record["uid"]).read_text())
        back = paper.from_public(public, "result.json")
        assert back["means"] == record["means"] and back["use_stationary"] == record["use_stationary"]
    assert not any("sk-never-written" in p.read_text() for p in run.scores_dir("paper-v3").rglob("*.json"))


def _package_and_check(run, checkpoints, url, tmp_path):
    """``package`` of the scored 2-of-8-case oracle run: refused for the leaderboard, written for diagnostics;
    ``--check`` re-scores both cases, and finds the one whose frame score and means were changed and whose
    summary and manifest were made to agree with it (which every check of the reports alone accepts)."""
    from persistbench.suites.persistbench import submission

    out = tmp_path / "submission.zip"
    refused = CliRunner().invoke(main, ["package", "--pred", str(run), "--output", str(out)])
    assert refused.exit_code == 1 and "an oracle run" in refused.output and not out.exists()
    written = CliRunner().invoke(main, ["package", "--pred", str(run), "--output", str(out), "--allow-subset"])
    assert written.exit_code == 0, written.output
    sub = submission.read(out)
    assert len(sub.results) == 2 and sub.run["judge"]["model"] == "Qwen/Qwen3.8-27B"
    assert sub.run["judge"]["serving"]["served_models"] == ["scripted"]

    entry = sub.results[0]
    res, meta = entry["results"]["motion_continuity"], entry["results"]["metadata"]
    k = next(i for i, v in enumerate(res["per_frame"]["score"]) if v is not None and meta["visible_mask"][i])
    res["per_frame"]["score"][k] /= 2
    picked = [v for i, v in enumerate(res["per_frame"]["score"]) if v is not None and meta["visible_mask"][i]]
    res["scalars"]["visible"] = math.fsum(picked) / len(picked)
    summary = submission.summarise(sub.run, sub.results)
    manifest = sub.manifest
    manifest["cases"][entry["uid"]]["result_sha256"] = submission.canonical_sha256(entry)
    forged = submission.Submission(sub.run, sub.results, summary, manifest)
    for name in submission.REPORTS:
        manifest["reports"][name] = hashlib.sha256(forged.members()[name]).hexdigest()
    submission.write(forged, tmp_path / "forged.zip")
    submission.validate(forged.run, forged.results, forged.summary, allow_subset=True)  # the reports add up

    weights = [a for k, v in sorted(checkpoints.items()) for a in ("--weights", f"{k}={v}")]
    args = ["package", "--check", str(tmp_path / "forged.zip"), "--pred", str(run), "--sample", "2"]
    args += ["--device", "cpu", *weights, "--judge-url", url, "--judge-model", "judge-x"]
    checked = CliRunner().invoke(main, args)
    assert checked.exit_code == 1, checked.output
    assert f"{entry['uid']}: motion_continuity: a frame score is" in checked.output
    other = sub.results[1]["uid"]
    assert f"re-scored {other}: largest frame difference 0\n" in checked.output  # the honest case re-scores exactly


def test_runs_scored_with_other_weights_or_judges_are_flagged():
    from persistbench.core.report import comparability_warnings

    def run(name, sha, judge, device="cpu"):
        backends = {"sam2": [{"weights": "w", "sha256": sha, "device": device}], "judge": [{"judge_model": judge}]}
        return {"name": name, "summary": {"backends": backends}}

    assert comparability_warnings([run("a", "1" * 64, "j"), run("b", "1" * 64, "j", "cuda")]) == []
    for other in (run("b", "2" * 64, "j"), run("b", "1" * 64, "k")):
        (warning,) = comparability_warnings([run("a", "1" * 64, "j"), other])
        assert warning.startswith("The runs' model-based scores come from different weights or judges")


@pytest.mark.slow
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


def _public_dir(root: Path, records: list[dict]) -> Path:
    for r in records:
        path = root / f"{r['subset']}__{r['uid']}" / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(paper.to_public(r)))
    return root


@pytest.mark.slow
def test_compare_public_reports_each_difference(tmp_path):
    import subprocess
    import sys

    def record(uid, stationary, frames):
        mean = float(np.mean(frames[1:]))
        return {
            "uid": uid,
            "subset": "static" if stationary else "dynamic",
            "use_stationary": stationary,
            "eval_size": [8, 8],
            "visible": [False, True, True],
            "invisible": [False, False, False],
            "start": 1,
            "matching_score": 0.1,
            "metrics": {m: [None, *frames[1:]] for m in paper.PAPER_METRICS},
            "means": {
                "visible": {m: mean for m in paper.PAPER_METRICS},
                "invisible": {m: None for m in paper.PAPER_METRICS},
            },
        }

    ours = _public_dir(tmp_path / "ours", [record("a", 1, [0, 0.5, 1.0]), record("b", 0, [0, 0.25, 0.75])])
    same = _public_dir(tmp_path / "same", [record("a", 1, [0, 0.5, 1.0]), record("b", 0, [0, 0.25, 0.75])])
    other = _public_dir(tmp_path / "other", [record("a", 1, [0, 0.5, 1.0]), record("b", 0, [0, 0.25, 0.5])])
    script = Path(__file__).parents[1] / "scripts" / "compare_public.py"

    def run(*args):
        return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True)

    ok = run(ours, same)
    assert ok.returncode == 0, ok.stderr
    assert "2 cases compared; largest difference 0" in ok.stdout
    differ = run(ours, other)
    assert differ.returncode == 1 and "largest difference 0.25" in differ.stdout
    assert "| dynamic__b | motion_continuity | 2 | 0.25 | 0 | 0.125 | n/a |" in differ.stdout
    assert run(ours, other, "--tolerance", "0.3").returncode == 0
    (other / "static__a" / "result.json").unlink()
    missing = run(ours, other, "--tolerance", "0.3")
    assert missing.returncode == 1 and "only in ours: static__a" in missing.stdout
    (other / "dynamic__b" / "result.json").write_text("{}")
    broken = run(ours, other)
    assert broken.returncode == 2 and "dynamic__b/result.json: not a default-three-paper-v3 result" in broken.stderr


@pytest.mark.slow
def test_paper_v3_without_backends_fails_in_one_line(oracle_run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["score", "--no-progress", "--pred", str(oracle_run), "--protocol", "paper-v3", "--allow-partial"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "dinov3-large" in result.output and "--weights" in result.output


# ---------------------------------------------------------------- R2M-Bench's model families


def _frames(n=3, h=42, w=56, seed=5) -> dict[int, np.ndarray]:
    import cv2

    rng = np.random.default_rng(seed)
    return {i: cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 1.5) for i in range(n)}


@pytest.mark.slow
def test_the_global_descriptor_is_the_class_token_and_scene_identity_its_cosine(checkpoints):
    from transformers import AutoModel

    w = resolve(BACKENDS["dinov2-base"], str(checkpoints["dinov2-base"]), False)
    frames = _frames()
    unit = np.stack([frames[i] for i in range(3)]).astype(np.float32) / 255.0
    emb = PatchFeatures(w, "cpu", 2).embed(unit)
    model = AutoModel.from_pretrained(checkpoints["dinov2-base"]).eval()
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    with torch.no_grad():
        ref = model(pixel_values=(torch.from_numpy(unit).permute(0, 3, 1, 2) - mean) / std).pooler_output.numpy()
    assert emb.shape == (3, 32) and np.allclose(emb, ref, atol=1e-5)
    video = PairVideo(frames, backends=_opts(checkpoints))
    ours = {"backend": "dinov2-base", "short_side": 42, "preprocess": "pil-bilinear", "crop": None}
    got = METRICS["scene_identity"].function(video, [(0, 1), (2, 2)], ours)
    a, b = emb[0].astype(np.float64), emb[1].astype(np.float64)
    assert got[0] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    assert got[1] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow
def test_scene_identity_under_upstreams_transform_is_torchvisions_resize_and_crop(checkpoints):
    """r2m-v2's DINOv2 input is upstream's transform: torchvision Resize(short, BICUBIC) of the PIL frame,
    CenterCrop, ToTensor, ImageNet Normalize; computed here by torchvision itself."""
    from PIL import Image
    from torchvision import transforms
    from transformers import AutoModel

    frames = _frames(2, 42, 57)  # 57 * 98 / 42 = 133: torchvision truncates the longer side
    params = {"backend": "dinov2-base", "short_side": 98, "preprocess": "torchvision-bicubic", "crop": 98}
    got = METRICS["scene_identity"].function(PairVideo(frames, backends=_opts(checkpoints)), [(0, 1)], params)
    tf = transforms.Compose(
        [
            transforms.Resize(98, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(98),
            transforms.ToTensor(),
            transforms.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
        ]
    )
    model = AutoModel.from_pretrained(checkpoints["dinov2-base"]).eval()
    with torch.no_grad():
        x = torch.stack([tf(Image.fromarray(frames[i])) for i in (0, 1)])
        d = torch.nn.functional.normalize(model(pixel_values=x).pooler_output, dim=-1).double().numpy()
    assert got[0] == pytest.approx(float(d[0] @ d[1]), abs=1e-6)


@pytest.mark.slow
def test_place_recognition_descriptors_come_from_an_exported_program(checkpoints, tmp_path):
    with pytest.raises(BackendUnavailable, match="backend boq: no weights; pass --weights boq=FILE.pt2"):
        check_backend("boq", BackendOptions())
    (tmp_path / "boq.pth").write_bytes(b"\x80\x04pickle")
    with pytest.raises(BackendUnavailable, match="boq.pth: not a torch.export archive"):
        check_backend("boq", BackendOptions(weights=(("boq", str(tmp_path / "boq.pth")),)))
    import zipfile

    with zipfile.ZipFile(tmp_path / "other.pt", "w") as z:
        z.writestr("x/data.txt", "not a module")
    with pytest.raises(BackendUnavailable, match="other.pt: not a torch.export archive"):
        load("boq", BackendOptions("cpu", (("boq", str(tmp_path / "other.pt")),)))
    frames = _frames()
    video = PairVideo(frames, backends=_opts(checkpoints))
    params = {"backend": "boq", "size": [32, 48], "preprocess": "pil-bilinear"}
    got = METRICS["scene_identity_boq"].function(video, [(0, 1), (1, 1)], params)
    module = torch.export.load(str(checkpoints["boq"])).module()
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    from PIL import Image

    x = np.stack([np.asarray(Image.fromarray(frames[i]).resize((48, 32), Image.BILINEAR)) for i in (0, 1)])
    with torch.no_grad():
        d = module((torch.from_numpy(x.astype(np.float32) / 255).permute(0, 3, 1, 2) - mean) / std).double().numpy()
    assert got[0] == pytest.approx(d[0] @ d[1] / np.linalg.norm(d[0]) / np.linalg.norm(d[1]), abs=1e-6)
    assert got[1] == pytest.approx(1.0, abs=1e-6)
    # upstream's transform: torchvision's Resize((h, w), BICUBIC) of the PIL frame
    from torchvision import transforms

    params = {"backend": "boq", "size": [32, 48], "preprocess": "torchvision-bicubic"}
    got = METRICS["scene_identity_boq"].function(PairVideo(frames, backends=_opts(checkpoints)), [(0, 1)], params)
    tf = transforms.Compose(
        [
            transforms.Resize((32, 48), interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.ToTensor(),
            transforms.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
        ]
    )
    with torch.no_grad():
        d = module(torch.stack([tf(Image.fromarray(frames[i])) for i in (0, 1)])).double().numpy()
    assert got[0] == pytest.approx(d[0] @ d[1] / np.linalg.norm(d[0]) / np.linalg.norm(d[1]), abs=1e-6)
    # a program exported for one size refuses another, saying so
    static = torch.export.export(module, (torch.zeros(2, 3, 32, 48),), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    torch.export.save(static, str(tmp_path / "static.pt2"))
    video = PairVideo(frames, backends=BackendOptions("cpu", (("boq", str(tmp_path / "static.pt2")),)))
    with pytest.raises(PersistbenchError, match="static.pt2: the exported program does not take 2 x 3 x 40 x 40"):
        METRICS["scene_identity_boq"].function(
            video, [(0, 1)], {"backend": "boq", "size": [40, 40], "preprocess": "pil-bilinear"}
        )


@pytest.mark.slow
def test_lightglue_matches_do_not_depend_on_the_batch_and_give_both_ratios(checkpoints):
    w = resolve(BACKENDS["superpoint-lightglue"], str(checkpoints["superpoint-lightglue"]), False)
    frames = _frames(3, 96, 128)
    pairs = [(frames[0], frames[0]), (frames[0], np.roll(frames[0], 4, axis=1)), (frames[0], frames[1])]
    batched = PairMatcher(w, "cpu", 4)(pairs, 128, 1024, 0.0005, 0.0)
    single = PairMatcher(w, "cpu", 1)(pairs, 128, 1024, 0.0005, 0.0)
    for x, y in zip(batched, single):
        assert (x.keypoints_a, x.keypoints_b) == (y.keypoints_a, y.keypoints_b)
        assert np.array_equal(x.points_a, y.points_a) and np.array_equal(x.points_b, y.points_b)
    same, other = batched[0], batched[2]
    assert np.array_equal(same.points_a, same.points_b) and len(same.points_a) > len(other.points_a)
    # the ratios, by hand: a translation is a fundamental matrix every match fits
    pa = np.random.default_rng(0).uniform(0, 100, (20, 2))
    assert pair_metrics.match_ratios(40, 50, pa, pa + [5.0, 0.0], 1.0, 0.99) == (0.5, 1.0)
    assert pair_metrics.match_ratios(40, 50, pa[:7], pa[:7], 1.0, 0.99) == (0.0, 0.0)
    # upstream's: the match ratio at any number of matches, over max(min(keypoints), 1); inliers from 8 matches
    assert pair_metrics.keypoint_ratios(40, 50, pa, pa + [5.0, 0.0], 1.0, 0.99) == (0.5, 1.0)
    assert pair_metrics.keypoint_ratios(40, 50, pa[:7], pa[:7], 1.0, 0.99) == (7 / 40, 0.0)
    assert pair_metrics.keypoint_ratios(0, 0, pa[:0], pa[:0], 1.0, 0.99) == (0.0, 0.0)
    # at most max_keypoints keypoints, mapped back into the frame's pixels from the resized frames
    few = PairMatcher(w, "cpu", 4)(pairs, 256, 5, 0.0005, 0.0)
    assert all(m.keypoints_a <= 5 and m.keypoints_b <= 5 for m in few)
    assert all(((m.points_a >= -0.5) & (m.points_a <= [127.5, 95.5])).all() for m in few)


def test_objects_are_detected_followed_and_compared():
    masks = np.zeros((4, 10, 10), bool)
    masks[0, :5, :5] = True  # 25 %: kept
    masks[1, :5, :4] = True  # overlaps object 0 by 80 %: a duplicate
    masks[2] = True  # the whole frame: background
    masks[3, 7:, 7:] = True  # 9 %: kept
    assert pair_metrics.detected(masks, 0.01, 0.25, 0.5) == [0, 3]
    assert pair_metrics.detected(masks, 0.0, 1.0, 1.0) == [0, 1, 2, 3]
    rng = np.random.default_rng(1)
    fa, fb = rng.normal(size=(5, 5, 8)), rng.normal(size=(5, 5, 8))
    found = masks[[0, 3]].copy()
    lost = found.copy()
    lost[1] = False
    expect = [pair_metrics.pooled(fa, m) @ pair_metrics.pooled(fb, m) for m in found]
    assert pair_metrics.object_score(fa, fb, masks[[0, 3]], found) == pytest.approx(np.mean(expect))
    assert pair_metrics.object_score(fa, fb, masks[[0, 3]], lost) == pytest.approx(expect[0] / 2)
    assert pair_metrics.object_score(fa, fb, masks[:0], masks[:0]) is None
    assert pair_metrics.point_grid(10, 20, 2).tolist() == [[5, 2.5], [15, 2.5], [5, 7.5], [15, 7.5]]


@pytest.mark.parametrize(
    "obj, value",
    [({"score": 4}, 4), ({"score": 5.0}, 5), ({"score": 0}, None), ({"score": 6}, None), ({"score": 2.5}, None)]
    + [({"score": True}, None), ({"score": "4"}, None), ({}, None), ({"score": float("nan")}, None)],
)
def test_state_replies_are_parsed_strictly(obj, value):
    if value is None:
        with pytest.raises(BadReply):
            parse_state(obj)
    else:
        assert parse_state(obj) == value


def _r2m_protocol(tmp_path, base: str, **changes) -> Path:
    """A copy of a shipped R2M protocol with few pairs per video (and ``changes`` to its sections)."""
    config = json.loads(shipped_path(base).read_text())
    config["pairs"].update(max_revisit=2, max_short=2, min_short=2)
    config["object_consistency"].update(grid=2, min_area=0.0, max_area=1.0, overlap=1.0)
    config["object_persistence"].update(detector_short_side=64, detector_max_side=128, feature_size=28, max_objects=2)
    config["persistent_state"].update(prompt_sha256=None)  # the test checkout's prompts (below), not upstream's
    config["lightglue"].update(threshold=0.0)  # every match of the random LightGlue kept (upstream keeps > 0.1)
    for key, value in changes.items():
        config[key] = value
    path = tmp_path / f"{base}-small.json"
    path.write_text(json.dumps(config))
    return path


def _score_r2m(run, tree, protocol, checkpoints, url, *extra):
    weights = [a for k, v in sorted(checkpoints.items()) for a in ("--weights", f"{k}={v}")]
    args = ["score", "--no-progress", "--pred", str(run), "--dataset", str(tree), "--protocol", str(protocol)]
    args += ["--device", "cpu", "--allow-partial", *weights, "--judge-url", url, "--judge-model", "judge-x", *extra]
    return CliRunner().invoke(main, args)


@pytest.mark.slow
def test_r2m_every_family_scores_with_its_backends(r2m_tree, checkpoints, tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = RunLayout(Path(shutil.copytree(r2m_tree / "videos" / "pose", tmp_path / "run")))
    tree = Path(shutil.copytree(r2m_tree, tmp_path / "tree", ignore=shutil.ignore_patterns("videos")))
    prompts = tree / "src" / "metrics" / "persistent_state.py"  # where upstream's judge prompts are read from
    prompts.parent.mkdir(parents=True)
    prompts.write_text('EVAL_SYSTEM_PROMPT = "Judge."\nEVAL_USER_PROMPT = "Rate the pair."\n')
    r2m_tree = tree
    for second in run.root.glob("*/0002.mp4"):  # one video per trajectory is enough (--allow-partial)
        second.unlink()
    protocol = _r2m_protocol(tmp_path, "r2m-paper-v1")
    dirname = R2MBench.load_protocol(str(protocol)).dirname
    wanted = [m for m in R2MBench.load_protocol("r2m-paper-v1").metrics if m != "frame_lpips"]  # no AlexNet here
    with JudgeServer(lambda n, body: state(body)) as server:
        result = _score_r2m(run.root, r2m_tree, protocol, checkpoints, server.url, "--metrics", ",".join(wanted))
        assert result.exit_code == 0, result.output
        asked = len(server.requests)
        assert asked and all(r["model"] == "judge-x" for r in server.requests)
        summary = json.loads(run.summary_json(dirname).read_text())
        families = {f: b["nmr"] for f, b in summary["families"].items()}
        assert sorted(families) == ["appearance", "geometric", "object", "persistent_state", "scene_identity"]
        assert all(v is not None for v in families.values()), families
        assert summary["families"]["object"]["metrics"] == [
            "object_appearance_persistence",
            "object_semantic_persistence",
        ]
        assert "lightglue_match_ratio" in summary["families"]["geometric"]["available"]
        assert "lightglue_inlier_ratio" in summary["metrics"]  # computed (its videos may all be excluded)
        assert summary["overall"] is not None and summary["unavailable"] == {}
        sha = resolve(BACKENDS["sam2-image"], str(checkpoints["sam2-image"]), False).sha256
        assert summary["backends"]["sam2-image"][0]["sha256"] == sha
        assert summary["backends"]["judge"] == [
            {"judge_model": "judge-x", "judge_url": server.url, "served_model": None}
        ]
        assert "Backend judge" in run.summary_md(dirname).read_text()
        record = json.loads(next(run.scores_dir(dirname).glob("*/*.json")).read_text())
        states = [v for k in ("revisit", "baseline", "short") for v in record["values"]["persistent_state"][k]]
        assert states and all(v in (1.0, 2.0, 3.0, 4.0, 5.0) for v in states)
        again = _score_r2m(run.root, r2m_tree, protocol, checkpoints, server.url, "--metrics", "persistent_state")
        battery = json.loads((run.scores_dir(dirname) / "judge_battery.json").read_text())["batteries"]
        assert again.exit_code == 0 and len(battery) == 2 and battery[-1]["accuracy"] == 1.0
        assert len(server.requests) == asked + battery[-1]["items"]  # the judgments cached; the battery asked anew
    assert json.loads(run.summary_json(dirname).read_text())["metrics"] == summary["metrics"]


@pytest.mark.slow
def test_r2m_backends_missing_are_unavailable_or_stop_the_run(r2m_tree, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    run = Path(shutil.copytree(r2m_tree / "videos" / "pose", tmp_path / "run"))
    args = ["score", "--no-progress", "--pred", str(run), "--dataset", str(r2m_tree), "--protocol"]
    # r2m-v1 scores what it can and says why the rest is missing; metrics named and computed for no video fail
    # the command (issue 38), the scores of the others written
    result = CliRunner().invoke(main, [*args, "r2m-v1", "--metrics", "frame_psnr,persistent_state,scene_identity"])
    assert result.exit_code == 1 and "persistent_state could not be computed" in result.output, result.output
    summary = json.loads(RunLayout(run).summary_json("r2m-v1").read_text())
    assert "--judge-url" in summary["unavailable"]["persistent_state"]
    assert (
        "dinov2-base" in summary["unavailable"]["scene_identity"]
        and "--weights" in summary["unavailable"]["scene_identity"]
    )
    assert summary["overall"] is None and summary["families"]["appearance"]["nmr"] is not None
    # r2m-v2 asks upstream's question: a checkout without upstream's persistent_state.py cannot ask it
    result = CliRunner().invoke(main, [*args, "r2m-v2", "--metrics", "frame_psnr,persistent_state"])
    assert result.exit_code == 1 and "persistent_state could not be computed" in result.output, result.output
    summary = json.loads(RunLayout(run).summary_json("r2m-v2").read_text())
    assert summary["unavailable"]["persistent_state"].endswith(
        "persistent_state.py: not there (upstream's persistent-state prompts are read from it)"
    )
    # r2m-paper-v1 requires its backends: one line before any video
    result = CliRunner().invoke(main, [*args, "r2m-paper-v1", "--metrics", "frame_psnr,scene_identity"])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "dinov2-base" in result.output and "--weights" in result.output
    assert not (RunLayout(run).scores_dir("r2m-paper-v1")).exists()


@pytest.mark.parametrize(
    ("reply", "seen"),
    [
        ('<answer>{"tag": "F0003", "visible": true}</answer>', True),
        ("<answer>{'tag': 'F0003', 'visible': False}</answer>", False),  # a Python dict, as the public parser reads
        ('Sure.\n```json\n{"visible_tags": ["F0003"], "not_visible_tags": []}\n```', True),
        ('<answer>```json\n{"tag": "F0003", "visible": false}\n```</answer>', False),  # fenced in the tags
        ('<answer>{"frame_assessments": 5, "not_visible_tags": ["F0003"]}</answer>', False),
        ("<answer>[1, 2]</answer> and no object", None),
        ("<answer>{'tag': __import__('os')}</answer>", None),  # literals only: nothing is run
        ("I cannot tell.", None),
    ],
)
def test_paper_replies_read_as_the_public_toolkit_reads_them(reply, seen):
    from persistbench.backends.judge import BadReply
    from persistbench.suites.persistbench.question import parse_seen, reply_object

    if seen is None:
        with pytest.raises(BadReply):
            parse_seen("F0003")(reply_object(reply))
    else:
        assert parse_seen("F0003")(reply_object(reply)) is seen
