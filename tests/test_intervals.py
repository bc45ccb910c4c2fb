"""Issue 43 through the real commands on the demo's runs of the three suites: every summary number has its
interval and the cases it stands on, the interval is about the number the summary reports, compare runs
on each suite, and the intervals do not depend on the number of workers."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core import stats as st
from persistbench.core.report import load_runs, scorer_of

pytestmark = pytest.mark.slow  # the demo's three chains (built once per test run)


def _summaries(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("scores/*/summary.json") if "upstream" not in p.parts)


def test_every_summary_number_has_an_interval_about_the_number_it_reports(demo_dir):
    out, _ = demo_dir
    suites, counted = set(), 0
    for path in _summaries(out):
        summary = json.loads(path.read_text())
        suites.add(summary["suite"])
        (run,) = load_runs([path.parent.parent.parent])
        _, scorer = scorer_of([run])
        est = scorer.estimands(run["results"]["cases"], summary)
        with (path.parent / "leaderboard.csv").open() as f:
            (row,) = list(csv.DictReader(f))
        iv = summary["intervals"]
        with_value = [n for n, e in est.exprs.items() if st.point(est.units, e) is not None]
        assert iv["resamples"] == 1000 and sorted(iv["values"]) == sorted(with_value), path
        counted += len(with_value)
        for name, (low, high) in iv["values"].items():
            value = st.point(est.units, est.exprs[name])
            assert row[name] and abs(float(row[name]) - value) <= 5e-7, (path, name)  # the csv's 6 decimals
            assert low <= high and row[f"{name}:low"] and row[f"{name}:high"]
        assert set(summary["detectable"]) <= set(est.headline)
        assert not with_value or "95% intervals: percentile bootstrap" in (path.parent / "summary.md").read_text()
    assert suites == {"persistbench", "r2m", "wrop"} and counted > 100


@pytest.mark.parametrize(
    "suite, runs, unit",
    [
        ("persistbench", ["runs/hold", "runs/reproject", "runs/oracle"], "cases"),
        ("r2m", ["r2m/runs/pose-rendered", "r2m/runs/warp", "r2m/runs/hold"], "videos"),
        ("wrop", ["wrop/runs/flow", "wrop/runs/hold"], "samples"),
    ],
)
def test_compare_on_the_demos_runs(demo_dir, tmp_path, suite, runs, unit):
    out, _ = demo_dir
    paths = [str(out / r) for r in runs]
    result = CliRunner().invoke(main, ["compare", *paths, "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("comparing on ") and f" {unit} every run has (" in result.output.splitlines()[0]
    found = json.loads((tmp_path / "compare.json").read_text())
    pairs = len(runs) * (len(runs) - 1) // 2
    assert found["unit"] == unit and found["numbers"]
    for number in found["numbers"].values():
        assert len(number["pairs"]) == pairs
    assert "| number | run a | run b |" in (tmp_path / "compare.md").read_text()


def test_compare_refuses_runs_on_other_protocols(demo_dir):
    out, _ = demo_dir
    result = CliRunner().invoke(main, ["compare", str(out / "runs" / "hold"), str(out / "r2m" / "runs" / "warp")])
    assert result.exit_code == 1 and "one suite's scorer" in result.output or "different suites" in result.output


def test_one_and_two_workers_give_the_same_intervals_byte_for_byte(demo_dir, tmp_path):
    out, _ = demo_dir
    texts = []
    for workers in ("1", "2"):
        run = Path(shutil.copytree(out / "runs" / "reproject", tmp_path / workers / "reproject"))
        args = ["score", "--pred", str(run), "--dataset", str(out / "dataset"), "--no-progress", "--workers", workers]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        texts.append((run / "scores" / "classic-v1" / "summary.json").read_bytes())
    assert texts[0] == texts[1] and b'"intervals"' in texts[0]


def test_runs_of_one_model_with_seeds_form_a_group(demo_dir, tmp_path):
    """Three seeds of a noisy model: each case's seed comes from the run's (the same with 1 or 2 workers); compare
    and report show the group's mean and standard deviation over seeds, its interval drawing seeds in cases."""
    out, _ = demo_dir
    model = f"{Path(__file__).parent / 'adapters' / 'noisy_hold.py'}:NoisyHold"
    runs = []
    for seed, workers in (("1", "1"), ("2", "2"), ("3", "1"), ("1", "2")):
        run = tmp_path / f"seed{seed}-w{workers}" / "noisy"
        args = ["infer", "--model", model, "--dataset", str(out / "dataset"), "-o", str(run), "--seed", seed]
        result = CliRunner().invoke(main, [*args, "--workers", workers, "--no-progress"])
        assert result.exit_code == 0, result.output
        assert json.loads((run / "run.json").read_text())["seed"] == int(seed)
        scored = CliRunner().invoke(main, ["score", "--pred", str(run), "--metrics", "psnr,ssim", "--no-progress"])
        assert scored.exit_code == 0, scored.output
        runs.append(run)
    frames = [sorted(p.read_bytes() for p in r.rglob("*.png")) for r in (runs[0], runs[3], runs[1])]
    assert frames[0] == frames[1] != frames[2]  # the seed decides, not the worker
    hold = Path(shutil.copytree(out / "runs" / "hold", tmp_path / "hold"))
    scored = CliRunner().invoke(
        main,
        ["score", "--pred", str(hold), "--dataset", str(out / "dataset"), "--metrics", "psnr,ssim", "--no-progress"],
    )
    assert scored.exit_code == 0, scored.output
    result = CliRunner().invoke(main, ["compare", str(hold), *map(str, runs[:3]), "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    found = json.loads((tmp_path / "compare.json").read_text())
    group = f"{model} (3 seeds)"
    assert found["runs"] == ["hold", group]
    psnr = found["numbers"]["all/invisible/psnr"]
    v = psnr["values"][group]
    per_seed = [
        json.loads((r / "scores" / "classic-v1" / "summary.json").read_text())["subsets"]["all"]["invisible"]["psnr"][
            "mean"
        ]
        for r in runs[:3]
    ]
    assert v["seeds"] == 3 and v["mean"] == pytest.approx(sum(per_seed) / 3, abs=1e-9) and v["std"] > 0
    assert v["interval"][0] < v["mean"] < v["interval"][1]
    assert "Groups of seeds" in (tmp_path / "compare.md").read_text()
    page = tmp_path / "r.html"
    reported = CliRunner().invoke(main, ["report", str(hold), *map(str, runs[:3]), "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert f"{group}</td><td>all/invisible/psnr</td><td>{v['mean']:.4g} ± {v['std']:.4g}" in page.read_text()
