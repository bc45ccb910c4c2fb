"""``persistbench package``'s submission: the public toolkit's three reports and our manifest, checked by our
validation and, where its wheel is available offline, by the public toolkit's own (tests/fakes/public_toolkit.py).

The records are built by hand here (their scores are inputs to packaging); tests/test_backends.py packages
and re-scores a run scored end to end on every backend.
"""

from __future__ import annotations

import copy
import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from fakes import public_toolkit
from fakes.clirun import peak_rss_mib, refused

from persistbench.core.errors import PersistbenchError
from persistbench.suites.persistbench import submission
from persistbench.suites.persistbench.paper import PAPER_METRICS
from persistbench.suites.persistbench.suite import PersistBench

HEADER = {
    "dataset_fingerprint": "d" * 64,
    "protocol": "paper-v3",
    "protocol_sha256": "p" * 64,
    "backends": {"sam2": [{"sha256": "5" * 64, "weights": "/w", "device": "cpu"}], "judge": [{"judge_model": "j"}]},
}


def record(i: int, rng: np.random.Generator) -> dict:
    """A ``paper-v3`` record of case ``i``: 6 frames, the first ``start`` without scores, means that add up."""
    start = int(rng.integers(0, 3))
    visible = [bool(v) for v in rng.random(6) < 0.5]
    invisible = [not v and bool(rng.random() < 0.7) for v in visible]
    metrics = {}
    for m in PAPER_METRICS:
        low = -1.0 if m == "appearance_preservation" else 0.0
        frames = [None if k < start or rng.random() < 0.1 else float(rng.uniform(low, 1.0)) for k in range(6)]
        metrics[m] = frames
    means = {}
    for split, mask in (("visible", visible), ("invisible", invisible)):
        means[split] = {}
        for m, frames in metrics.items():
            picked = [v for k, v in enumerate(frames) if k >= start and mask[k] and v is not None]
            means[split][m] = sum(picked) / len(picked) if picked else None
    subset = "static" if i % 2 else "dynamic"
    return {
        "uid": f"case_{i:04d}",
        "subset": subset,
        "use_stationary": {"static": 1, "dynamic": 0}[subset],
        "eval_size": [384, 512],
        "visible": visible,
        "invisible": invisible,
        "start": start,
        "matching_score": 0.5,
        "metrics": metrics,
        "means": means,
        "judge": {"failed": 0, "answered_by": [{"answered_by": "served-judge"}]},
        "prediction_sha256": hashlib.sha256(f"prediction {i}".encode()).hexdigest(),
        "protocol_sha256": HEADER["protocol_sha256"],
    }


def make(n: int, seed: int = 0) -> submission.Submission:
    rng = np.random.default_rng(seed)
    records = [record(i, rng) for i in range(n)]
    files = {f"{r['subset']}__{r['uid']}": {"00000.png": r["prediction_sha256"]} for r in records}
    fields = {uid: {"fov": 90.0, "obj_id": "obj_1"} for uid in files}
    config = PersistBench.load_protocol("paper-v3").config
    return submission.build(
        "my-model", records, files, fields, HEADER, config, {"eval_length": 6, "eval_reso": -1}, "r" * 64
    )


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """The unpacked public toolkit, or a skip saying how to get it."""
    path = public_toolkit.wheel()
    if path is None:
        pytest.skip(f"the public wheel {public_toolkit.WHEEL} is not available offline (.ci/run downloads it)")
    root = public_toolkit.unpack(path, tmp_path_factory.mktemp("public"))
    assert public_toolkit.version(root) == "0.1.7"
    return root


def _zip(tmp_path, sub: submission.Submission, name: str):
    return submission.write(sub, tmp_path / name)


def _tampered(sub: submission.Submission, change) -> submission.Submission:
    run, results, summary, manifest = (copy.deepcopy(x) for x in (sub.run, sub.results, sub.summary, sub.manifest))
    change(run, results, summary)
    return submission.Submission(run, results, summary, manifest)


def _flip_frame(run, results, summary):
    scores = results[0]["results"]["motion_continuity"]["per_frame"]["score"]
    k = next(
        i
        for i, v in enumerate(scores)
        if v is not None and i >= results[0]["results"]["metadata"]["track_start_frame_idx"]
    )
    scores[k] = 1.0 - scores[k] if scores[k] != 0.5 else 0.25


def _drop_case(run, results, summary):
    del results[-1]


def _change_mean(run, results, summary):
    summary["averages"]["motion_continuity_visible"] += 1e-6


TAMPERS = {"a flipped frame score": _flip_frame, "a missing case": _drop_case, "a changed mean": _change_mean}


@pytest.mark.slow
def test_a_full_coverage_submission_is_accepted_and_tampered_ones_refused_by_both(tmp_path, public):
    sub = make(submission.PUBLISHED_CASES)
    submission.validate(sub.run, sub.results, sub.summary)  # all 2,000 cases: no subset needed
    path = _zip(tmp_path, sub, "full.zip")
    assert public_toolkit.validate(public, path, allow_subset=False) == (True, "accepted")
    assert path.read_bytes() == _zip(tmp_path, make(submission.PUBLISHED_CASES), "again.zip").read_bytes()
    for what, change in TAMPERS.items():
        bad = _tampered(sub, change)
        with pytest.raises(ValueError):
            submission.validate(bad.run, bad.results, bad.summary)
        accepted, line = public_toolkit.validate(public, _zip(tmp_path, bad, "bad.zip"), allow_subset=False)
        assert not accepted and line.startswith("refused: "), (what, line)


def test_a_subset_is_refused_unless_allowed_by_both(tmp_path, public):
    sub = make(8, seed=1)
    path = _zip(tmp_path, sub, "subset.zip")
    with pytest.raises(ValueError, match="8 cases; the leaderboard requires all 2,000 published cases"):
        submission.validate(sub.run, sub.results, sub.summary)
    submission.validate(sub.run, sub.results, sub.summary, allow_subset=True)
    assert public_toolkit.validate(public, path, allow_subset=False)[0] is False
    assert public_toolkit.validate(public, path, allow_subset=True) == (True, "accepted")


@pytest.mark.parametrize("what", list(TAMPERS))
def test_our_validation_names_what_does_not_add_up(what):
    sub = make(8, seed=2)
    bad = _tampered(sub, TAMPERS[what])
    expected = {
        "a flipped frame score": "case_0000: motion_continuity/.*: the saved mean differs from the frame scores",
        "a missing case": "results.json: 7 results for 8 cases",
        "a changed mean": "summary.json: differs from the means of results.json",
    }[what]
    with pytest.raises(ValueError, match=expected):
        submission.validate(bad.run, bad.results, bad.summary, allow_subset=True)


def test_results_carry_the_evaluation_identity_and_the_summary_its_means():
    sub = make(8, seed=3)
    evaluation = hashlib.sha256(json.dumps(sub.run, sort_keys=True).encode()).hexdigest()
    assert {e["evaluation_run_id"] for e in sub.results} == {evaluation}
    assert [e["uid"] for e in sub.results] == sorted(sub.run["case_ids"]) == sorted(sub.summary["per_case"])
    key = "appearance_preservation_invisible"
    values = [v[key] for v in sub.summary["per_case"].values() if v[key] is not None]
    assert sub.summary["averages"][key] == pytest.approx(np.mean(values), abs=1e-12)
    statics = [v[key] for u, v in sub.summary["per_case"].items() if u.startswith("static__") and v[key] is not None]
    assert sub.summary["groups"]["static"]["averages"][key] == pytest.approx(np.mean(statics), abs=1e-12)
    assert sub.summary["groups"]["unknown"] == {
        "cases": 0,
        "averages": dict.fromkeys(submission.SCORE_KEYS),
        "valid_counts": dict.fromkeys(submission.SCORE_KEYS, 0),
    }
    # a result changed after packaging (its id recomputed or not) belongs to another evaluation
    bad = _tampered(sub, lambda run, results, summary: run.update(name="other"))
    with pytest.raises(ValueError, match="belongs to another evaluation"):
        submission.validate(bad.run, bad.results, bad.summary, allow_subset=True)


def test_the_zip_is_read_only_as_written(tmp_path):
    sub = make(4, seed=4)
    path = _zip(tmp_path, sub, "s.zip")
    back = submission.read(path)
    assert back == sub
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
        assert [i.date_time for i in z.infolist()] == [submission.ZIP_TIME] * 4

    def rewrite(name, members):
        out = tmp_path / name
        with zipfile.ZipFile(out, "w") as z:
            for n, data in members.items():
                z.writestr(n, data)
        return out

    cases = [
        ("extra.zip", {**members, "notes.txt": b"x"}, "members .* expected"),
        ("nested.zip", {("../" + n if n == "run.json" else n): d for n, d in members.items()}, "members .* expected"),
        ("nomanifest.zip", {n: d for n, d in members.items() if n != "manifest.json"}, "members .* expected"),
        (
            "edited.zip",
            {**members, "summary.json": members["summary.json"].replace(b'"complete": true', b'"complete": false')},
            "summary.json differs from the manifest",
        ),
        ("nan.zip", {**members, "results.json": members["results.json"].replace(b"0.5", b"NaN", 1)}, "results.json"),
    ]
    for name, content, message in cases:
        with pytest.raises(PersistbenchError, match=message):
            submission.read(rewrite(name, content))
    (tmp_path / "text.zip").write_text("not a zip")
    with pytest.raises(PersistbenchError, match="text.zip: not a ZIP file"):
        submission.read(tmp_path / "text.zip")


def test_check_finds_predictions_that_changed_and_results_that_do_not_follow():
    sub = make(4, seed=5)
    claimed = {uid: c["prediction_files"] for uid, c in sub.manifest["cases"].items()}
    entries = {e["uid"]: e for e in sub.results}
    uids = sorted(claimed)
    problems, checks = submission.check(sub, claimed.get, lambda u: copy.deepcopy(entries[u]), uids, 1e-6)
    assert problems == [] and [c.max_frame_diff for c in checks] == [0.0] * 4
    changed = {**claimed, uids[1]: {"00000.png": "0" * 64}}
    rescored = copy.deepcopy(entries[uids[2]])
    scores = rescored["results"]["appearance_preservation"]["per_frame"]["score"]
    k = next(i for i, v in enumerate(scores) if v is not None)
    scores[k] += 0.01
    problems, checks = submission.check(
        sub, changed.get, lambda u: rescored if u == uids[2] else entries[u], uids, 1e-6
    )
    assert problems == [
        f"{uids[1]}: prediction files differ from the manifest (00000.png first)",
        f"{uids[2]}: appearance_preservation: a frame score is 0.01 from the one re-scored",
    ]
    assert checks[2].max_frame_diff == pytest.approx(0.01)
    assert submission.sample_uids(uids, 2, "seed") == submission.sample_uids(uids, 2, "seed")
    assert len(submission.sample_uids(uids, 9, "seed")) == 4


def _bomb_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.mark.slow
def test_the_submission_gate_bounds_memory_not_only_bytes(tmp_path):
    """Issue 39: a 250 MiB results.json of ``[],`` (honest sizes, a few hundred KB zipped) is refused before
    parsing, under a 1 GiB peak; a member encrypted, of another compression method, or corrupt, and entries of
    the wrong types are one line each."""
    sub = make(4, seed=4)
    good = _zip(tmp_path, sub, "s.zip")
    with zipfile.ZipFile(good) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    (tmp_path / "run").mkdir()
    bomb = _bomb_zip(tmp_path / "bomb.zip", {**members, "results.json": b"[" + b"[]," * ((250 << 20) // 3) + b"[]]"})
    assert bomb.stat().st_size < 2 << 20
    result, peak = peak_rss_mib("package", "--check", bomb, "--pred", tmp_path / "run")
    line = refused(result, "results.json", "JSON lists and objects")
    assert peak < 256, (peak, line)  # measured: 45 MiB (3.7 GB and a MemoryError before)
    raw = good.read_bytes()
    i = raw.index(b"PK\x03\x04")
    encrypted = bytearray(raw)
    encrypted[i + 6] |= 1  # the first member's local header ...
    j = raw.index(b"PK\x01\x02")
    encrypted[j + 8] |= 1  # ... and its directory entry carry the encryption flag
    (tmp_path / "enc.zip").write_bytes(bytes(encrypted))
    method = bytearray(raw)
    method[i + 8 : i + 10] = (99).to_bytes(2, "little")
    method[j + 10 : j + 12] = (99).to_bytes(2, "little")
    (tmp_path / "method.zip").write_bytes(bytes(method))
    corrupt = bytearray(raw)
    name_len = int.from_bytes(raw[i + 26 : i + 28], "little")
    start = i + 30 + name_len
    corrupt[start : start + 16] = b"\xff" * 16  # the deflate stream's first bytes
    (tmp_path / "corrupt.zip").write_bytes(bytes(corrupt))

    def consistent(name: str, results: bytes) -> Path:  # the manifest agreeing with the hostile results.json
        manifest = json.loads(members["manifest.json"])
        manifest["reports"]["results.json"] = hashlib.sha256(results).hexdigest()
        return _bomb_zip(
            tmp_path / name, {**members, "results.json": results, "manifest.json": json.dumps(manifest).encode()}
        )

    wrong = [consistent("strs.zip", b'["x"]'), consistent("mixed.zip", b'[{"uid": 1}, {"uid": "a"}]')]
    for path, needle in (
        (tmp_path / "enc.zip", "an encrypted member"),
        (tmp_path / "method.zip", "compression method 99 refused"),
        (tmp_path / "corrupt.zip", "a damaged member"),
        *((p, "every entry must be an object with a text uid") for p in wrong),
    ):
        with pytest.raises(PersistbenchError) as e:
            submission.read(path)
        assert needle in str(e.value) and "\n" not in str(e.value), (path.name, e.value)
