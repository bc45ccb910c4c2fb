"""paper-v3 through the real scorer with stub networks and a loopback judge.

Issue 42: PersistBench's numbers as the published leaderboard computes them, beside the public toolkit's (the
leaderboard's motion continuity per case is ``exp(-mean d)`` over a split's frames; the public toolkit 0.1.7,
and our public-form outputs, the mean of ``exp(-d)``; one scoring gives both). Issue 44: the identity of every
judge answer.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import CHROMIUM
from fakes.judge_server import JudgeServer, looks, seen

from persistbench.cli import main
from persistbench.core import score
from persistbench.core.layout import RunLayout
from persistbench.suites.persistbench import leaderboard as board
from persistbench.suites.persistbench import paper
from persistbench.suites.persistbench.leaderboard import COLUMNS, SCORES, derived, published, round2

pytestmark = pytest.mark.slow  # the bundled sample is built, and two runs inferred and scored

REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "reference" / "persistbench-leaderboard.csv"


def test_memory_visible_average_and_gap_follow_from_the_six_published_scores():
    rows = published().rows
    assert len(rows) == 24 and {r.subset for r in rows} == {"static", "dynamic"}
    assert len({r.model for r in rows}) == 12
    for r in rows:
        six = {c: r.values[c] for c, _, _ in SCORES}
        got = derived(six, r.visible_available)
        assert got == {k: r.values[k] for k in ("memory", "visible_average", "gap")}, r.id
        assert (r.values["gap"] is None) == (not r.visible_available)  # the blank rule: HyDRA's two rows
    assert sum(not r.visible_available for r in rows) == 2
    if REFERENCE.is_file():  # the shipped copy is the reference's, byte for byte
        shipped = Path(board.__file__).parents[2] / "data" / "leaderboards" / "persistbench.csv"
        assert shipped.read_bytes() == REFERENCE.read_bytes()
        with REFERENCE.open() as f:
            assert [line["id"] for line in csv.DictReader(f)] == [r.id for r in rows]


def test_rounding_is_half_away_from_zero_on_the_exact_value():
    assert round2(0.125) == 0.13 and round2(-0.125) == -0.13  # exactly representable halves
    assert round2(1.005) == 1.0  # 1.005 is 1.00499999999999989... in binary, as JavaScript's toFixed sees it
    assert round2(25.146666666666665) == 25.15


def test_the_two_aggregations_of_d_0_and_2():
    d, frames = [0.0, 2.0], np.array([True, True])
    assert board_case(d, frames) == (pytest.approx(math.exp(-1)), pytest.approx((1 + math.exp(-2)) / 2))
    assert round(math.exp(-1), 4) == 0.3679 and round((1 + math.exp(-2)) / 2, 4) == 0.5677


def board_case(d, frames):
    """(the leaderboard's, the public toolkit's) motion continuity of one split with distances ``d``."""
    return paper.pm.published_continuity(d, frames, 0), paper.pm.split_mean(paper.pm.motion_continuity(d), frames, 0)


def _stubs(monkeypatch) -> list[dict]:
    """The networks replaced at ``paper.load`` (the parity harness's way): features are patch-mean colours;
    the tracker returns each frame's reference mask, moved right on every other frame by twice the square root
    of the case's mean reference area (so that d is 0, then about 2); the judge is the real client of a
    loopback endpoint. Returns what each case's tracking saw and gave."""
    import cv2

    real_load, real_track = paper.load, paper._track
    cases: list[dict] = []

    def features(frames, fit="resize"):
        n, h, w, _ = frames.shape
        size = (max(1, w // 16), max(1, h // 16))
        return np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in frames])

    class Tracker:
        def track(self, frames, prompt):
            case = cases[-1]
            areas = [np.count_nonzero(m) for m in case["refs"][case["start"] :]]
            px = int(round(2 * math.sqrt(np.mean(areas))))
            case["preds"] = [np.roll(m, px * (j % 2), axis=1) for j, m in enumerate(case["refs"][case["start"] :])]
            return case["preds"]

    def track(ref_frames, ref_masks, preds, start, cfg, opts):
        cases.append({"refs": ref_masks, "start": start})
        return real_track(ref_frames, ref_masks, preds, start, cfg, opts)

    stubs = {"dinov3-large": features, "dinov2-reg-large": features, "sam2-package": Tracker()}
    real_check = score.check_backend
    monkeypatch.setattr(score, "check_backend", lambda name, opts: None if name in stubs else real_check(name, opts))
    monkeypatch.setattr(paper, "load", lambda name, opts: stubs[name] if name in stubs else real_load(name, opts))
    real_provenance = paper.provenance

    def provenance(names, opts):
        stub = {"weights": "stub", "sha256": "0" * 64, "device": "cpu"}
        return {**real_provenance([n for n in names if n not in stubs], opts), **{n: stub for n in names if n in stubs}}

    monkeypatch.setattr(paper, "provenance", provenance)
    monkeypatch.setattr(paper, "_track", track)
    return cases


def _distances(case: dict) -> list[float | None]:
    """Each frame's d from the masks the tracker gave, computed here: centre distance over sqrt(mean ref area)."""
    refs, start = case["refs"], case["start"]
    scale = math.sqrt(np.mean([np.count_nonzero(m) for m in refs[start:]]))
    out: list[float | None] = [None] * start
    for ref, pred in zip(refs[start:], case["preds"]):
        if not ref.any() or not pred.any():
            out.append(None)
            continue
        (ax, ay), (bx, by) = (np.argwhere(m)[:, ::-1].mean(axis=0) for m in (ref, pred))
        out.append(math.hypot(ax - bx, ay - by) / scale)
    return out


def _infer(sample_ds, out, limit):
    model = f"{Path(__file__).parents[2] / 'adapters' / 'short_oracle.py'}:ShortOracle"
    args = ["infer", "--no-progress", "--model", model, "--dataset", str(sample_ds), "--output", str(out)]
    result = CliRunner().invoke(main, [*args, "--limit", str(limit)])
    assert result.exit_code == 0, result.output
    return out


def _score(run, url):
    args = ["score", "--no-progress", "--pred", str(run), "--protocol", "paper-v3", "--allow-partial"]
    result = CliRunner().invoke(main, [*args, "--judge-url", url, "--judge-model", "judge-x"])
    assert result.exit_code == 0, result.output
    return json.loads(RunLayout(run).summary_json("paper-v3").read_text())


@pytest.fixture(scope="module")
def oracle_runs(sample_ds, tmp_path_factory):
    root = tmp_path_factory.mktemp("leaderboard")
    return _infer(sample_ds, root / "a" / "oracle", 2), _infer(sample_ds, root / "b" / "oracle", 8)


def test_one_scoring_gives_the_public_means_and_the_leaderboards_exp_of_the_mean_distance(
    oracle_runs, tmp_path, monkeypatch
):
    """Each case's distance is 0 on every other frame and about 2 on the rest (the reference mask moved by twice
    the square root of its mean area): exp(-mean d) and mean(exp(-d)) differ by a known amount, and every output
    keeps its own."""
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = Path(shutil.copytree(oracle_runs[0], tmp_path / "oracle"))
    cases = _stubs(monkeypatch)
    with JudgeServer(lambda n, body: looks(body)) as judge:
        summary = _score(run, judge.url)
    records = [json.loads(p.read_text()) for p in sorted(RunLayout(run).scores_dir("paper-v3").glob("*/*.json"))]
    assert len(records) == 2
    assert len(cases) == 2
    checked = 0
    for record in records:
        d = record["motion_distance"]
        start = record["start"]
        (case,) = [c for c in cases if len(c["refs"]) == len(d) and c["start"] == start and _close(_distances(c), d)]
        assert all(v is None for v in d[:start]) and any(v is not None and v > 1.9 for v in d)
        for split in ("visible", "invisible"):
            picked = [d[i] for i in range(start, len(d)) if record[split][i] and d[i] is not None]
            if len(picked) < 2:
                continue
            frame_scores = [record["metrics"]["motion_continuity"][i] for i in range(len(d))]
            assert all(
                math.isclose(frame_scores[i], math.exp(-d[i]), rel_tol=1e-12) for i in range(len(d)) if d[i] is not None
            )
            public, leaderboard = (
                record["means"][split]["motion_continuity"],
                record["published"][split]["motion_continuity"],
            )
            assert public == pytest.approx(np.mean(np.exp(-np.asarray(picked))), abs=1e-12)
            assert leaderboard == pytest.approx(math.exp(-np.mean(picked)), abs=1e-12)
            assert leaderboard < public  # Jensen: exp(-d) is convex
            checked += 1
            for m in ("object_permanence", "appearance_preservation"):  # plain means in both forms
                assert record["published"][split][m] == record["means"][split][m]
    assert checked >= 2
    # the summary: the public form's averages, and the leaderboard's block beside them
    for group, block in summary["published"].items():
        cases = records if group == "overall" else [r for r in records if r["subset"] == group]
        assert block["cases"] == len(cases)
        for column, metric, split in SCORES:
            values = [r["published"][split][metric] for r in cases if r["published"][split][metric] is not None]
            assert block["valid_counts"][column] == len(values)
            assert block["scores"][column] == (round2(100 * math.fsum(values) / len(values)) if values else None)
        assert {k: block[k] for k in ("memory", "visible_average", "gap")} == derived(block["scores"])
    key = "motion_continuity_visible"
    public_mean = np.mean([r["means"]["visible"]["motion_continuity"] for r in records])
    assert summary["averages"][key] == pytest.approx(public_mean, abs=1e-12)
    assert summary["published"]["overall"]["scores"]["continuity_visible"] < round2(100 * summary["averages"][key])
    # summary.md and leaderboard.csv carry the leaderboard's columns
    md = RunLayout(run).summary_md("paper-v3").read_text()
    assert "| group | cases | " + " | ".join(COLUMNS) + " |" in md
    with RunLayout(run).leaderboard_csv("paper-v3").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["published/overall/memory"] == board.fmt(summary["published"]["overall"]["memory"])


def _close(a: list, b: list) -> bool:
    return all((x is None) == (y is None) and (x is None or math.isclose(x, y, abs_tol=1e-9)) for x, y in zip(a, b))


def test_report_and_leaderboard_place_two_runs_among_the_published_models(oracle_runs, tmp_path, monkeypatch):
    """Two paper-v3 runs (2 dynamic cases; all 8, 4 per subset; stub networks) in ``report`` (read in headless Chromium) and in
    ``persistbench leaderboard --with``: the published rows in their places, the runs marked, and their few
    cases said in the table."""
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    runs = [Path(shutil.copytree(r, tmp_path / r.parent.name / r.name)) for r in oracle_runs]
    _stubs(monkeypatch)
    with JudgeServer(lambda n, body: looks(body)) as judge:
        summaries = [_score(run, judge.url) for run in runs]
    page_file = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", *map(str, runs), "--output", str(page_file)])
    assert result.exit_code == 0, result.output

    printed = CliRunner().invoke(main, ["leaderboard", "--with", str(runs[0]), "--with", str(runs[1])])
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert sum("(yours: a/oracle)" in line for line in lines) == 1  # its cases are all dynamic
    assert sum("(yours: b/oracle)" in line for line in lines) == 2
    assert sum("of 2000: not ranked" in line for line in lines) == 3
    assert printed.output.count("published: the benchmark's project page") == 2
    assert "note: your runs stand on different cases (a/oracle: 2 cases" in printed.output  # marked, not ranked

    if CHROMIUM is None:
        pytest.skip("Debian's chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        for subset in ("static", "dynamic"):
            rows = page.eval_on_selector_all(
                f"#published-{subset} tbody tr",
                "rs => rs.map(r => [r.className, ...Array.from(r.cells, c => c.textContent)])",
            )
            published_rows = [r for r in rows if r[0] == "published"]
            yours = [r for r in rows if r[0] == "yours"]
            names = ("a/oracle", "b/oracle") if subset == "dynamic" else ("b/oracle",)
            assert len(published_rows) == 12 and len(yours) == len(names), rows
            assert [r[1] for r in published_rows] == [str(i) for i in range(1, 13)]  # ranks of the published
            expected = sorted(published().subset(subset), key=lambda r: -r.values["memory"])
            assert [r[2] for r in published_rows] == [r.model for r in expected]
            for name, summary in zip(("a/oracle", "b/oracle"), summaries):
                if name not in names:
                    continue
                (mine,) = [r for r in yours if f"(yours: {name})" in r[2]]
                block = summary["published"][subset]
                assert mine[1] == "-" and f"{block['cases']} of 2000: not ranked" == mine[4]
                assert mine[5 + COLUMNS.index("memory")] == board.fmt(block["memory"])
                assert mine[-1] == "this toolkit" and all(r[-1] == "published" for r in published_rows)
            memories = [float(r[5 + COLUMNS.index("memory")]) for r in rows]
            assert memories == sorted(memories, reverse=True)  # ranked by memory, the runs among the models
        note = page.locator("text=Published rows: the benchmark's project page").count()
        page.screenshot(path=str(tmp_path / "published.png"), full_page=True)
        browser.close()
    assert note == 1


def test_a_judge_that_changes_its_model_halfway_is_flagged(oracle_runs, tmp_path, monkeypatch):
    """The endpoint names another model (and fingerprint) in its replies after a few answers: the summary lists
    both identities, summary.md and the report say so, and compare notes it."""
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = Path(shutil.copytree(oracle_runs[0], tmp_path / "oracle"))
    _stubs(monkeypatch)

    def reply(n, body):
        status, completion, headers = looks(body)
        completion |= (
            {"model": "judge-a", "system_fingerprint": "fp-1"} if n < 20 else {"model": "judge-b"}
        )  # 16: the battery
        return status, completion, headers

    with JudgeServer(reply) as judge:
        summary = _score(run, judge.url)
    named = [(j["answered_by"], j["system_fingerprint"]) for j in summary["judge_identities"]]
    assert sorted(named, key=str) == [("judge-a", "fp-1"), ("judge-b", None)]
    assert "**The judgments come from 2 judge identities**" in RunLayout(run).summary_md("paper-v3").read_text()
    page = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["report", str(run), "-o", str(page)]).exit_code == 0
    assert "its judgments come from 2 judge identities" in page.read_text()


def test_the_batterys_answers_hold_by_construction(sample_ds):
    """Every background question's crop shows none of the object (its mask empty there, padding included);
    every same-object question's two crops show it; each item is asked twice, swapped."""
    from persistbench.suites.persistbench import battery
    from persistbench.suites.persistbench.dataset import Dataset
    from persistbench.suites.persistbench.suite import PersistBench

    cfg = PersistBench.load_protocol("paper-v3").config
    cases = Dataset(sample_ds).cases()
    items = battery.items(cases, cfg)
    assert len(items) == 16 and sum(i.expected for i in items) == 8 and sum(i.swapped for i in items) == 8
    padding = cfg["object_permanence"]["crop_padding"]
    checked = 0
    for case in sorted(cases, key=lambda c: (c.subset, c.case_id))[:4]:
        masks = [m > 0 for m in case.view("center").masks()]
        shown = [m for m in masks if m.any()]
        box = battery.background_mask(shown[-1], padding)
        y0, y1, x0, x1 = battery.padded_box(box, padding)
        b0, b1, c0, c1 = battery.padded_box(shown[-1], 0.0)
        assert box.sum() == (b1 - b0) * (c1 - c0)  # a box of the object's size, elsewhere
        assert not shown[-1][y0:y1, x0:x1].any() and shown[0].any() and shown[-1].any()
        checked += 1
    assert checked == 4


def _judges():
    rng = np.random.default_rng(0)
    return {
        "good": lambda n, body: looks(body),
        "random": lambda n, body: seen(body, visible=bool(rng.integers(0, 2))),
        "always yes": lambda n, body: seen(body),
    }


@pytest.mark.parametrize("name", ["good", "random", "always yes"])
def test_the_judge_answers_its_battery_before_it_judges(oracle_runs, tmp_path, monkeypatch, name):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = Path(shutil.copytree(oracle_runs[0], tmp_path / "oracle"))
    _stubs(monkeypatch)
    args = ["score", "--no-progress", "--pred", str(run), "--protocol", "paper-v3", "--allow-partial"]
    with JudgeServer(_judges()[name]) as judge:
        result = CliRunner().invoke(main, [*args, "--judge-url", judge.url, "--judge-model", "judge-x"])
        asked = len(judge.requests)
    battery = json.loads((RunLayout(run).scores_dir("paper-v3") / "judge_battery.json").read_text())["batteries"]
    assert len(battery) == 1 and battery[0]["items"] == 16
    if name == "good":
        assert result.exit_code == 0, result.output
        summary = json.loads(RunLayout(run).summary_json("paper-v3").read_text())
        assert summary["judge_calibration"]["accuracy"] == 1.0 and summary["judge_calibration"]["consistency"] == 1.0
        assert "Judge calibration" in result.output and "accuracy 100%" in result.output
    else:
        assert result.exit_code == 1 and asked == 16  # stopped before any case was judged
        (line,) = [x for x in result.output.splitlines() if x.startswith("Error:")]
        assert "judge_battery.json: the judge answered 16 of the 16 calibration questions" in line
        assert "% right (--judge-min-accuracy 0.75)" in line and "--judge-force" in line
        assert not list(RunLayout(run).scores_dir("paper-v3").glob("*/*.json"))


def test_a_judge_that_changes_its_answers_shows_drift(oracle_runs, tmp_path, monkeypatch):
    """The same run scored twice (and a second run once): the second time the judge answers the swapped
    background questions otherwise (still above the bar); the report names the questions."""
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = Path(shutil.copytree(oracle_runs[0], tmp_path / "oracle"))
    _stubs(monkeypatch)
    args = ["score", "--no-progress", "--pred", str(run), "--protocol", "paper-v3", "--allow-partial"]
    with JudgeServer(lambda n, body: looks(body)) as judge:
        assert CliRunner().invoke(main, [*args, "--judge-url", judge.url, "--judge-model", "judge-x"]).exit_code == 0
    with JudgeServer(lambda n, body: seen(body) if n in (3, 7) else looks(body)) as judge:  # two answers change
        again = CliRunner().invoke(main, [*args, "--judge-url", judge.url, "--judge-model", "judge-x"])
    assert again.exit_code == 0, again.output
    batteries = json.loads((RunLayout(run).scores_dir("paper-v3") / "judge_battery.json").read_text())["batteries"]
    assert len(batteries) == 2 and batteries[1]["accuracy"] == 14 / 16
    page = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["report", str(run), "-o", str(page)]).exit_code == 0
    text = page.read_text()
    assert "Judge calibration" in text and "its judge answered 2 question(s) differently" in text


def test_doctor_asks_the_battery_alone(sample_ds):
    """``doctor --judge-url --dataset``: the battery without a run; a judge that always says yes is named."""
    base = [
        "doctor",
        "--for",
        "score",
        "--dataset",
        str(sample_ds),
        "--protocol",
        "paper-v3",
        "--judge-model",
        "judge-x",
    ]
    with JudgeServer(lambda n, body: looks(body)) as good:
        ok = CliRunner().invoke(main, [*base, "--judge-url", good.url])
    line = next(x for x in ok.output.splitlines() if "judge calibration" in x)
    assert line.startswith("ok") and "16 questions with known answers, accuracy 100%" in line, ok.output
    with JudgeServer(lambda n, body: seen(body)) as yes:
        bad = CliRunner().invoke(main, [*base, "--judge-url", yes.url])
    assert bad.exit_code == 1 and "MISSING  judge calibration" in bad.output and "50% right" in bad.output
