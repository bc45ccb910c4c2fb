"""demo, report and doctor: the offline chain end to end, the report in headless Chromium, missing pieces named."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import CHROMIUM

from persistbench.cli import main
from persistbench.core.layout import RunLayout
from persistbench.suites.persistbench.report import frames_since_left, memory_curve, wilson


def test_frames_since_left_counts_source_frames_from_the_last_visible_one():
    idx = [0, 2, 4, 6, 8, 10, 12]
    vis = [False, True, True, False, False, True, False]
    inv = [False, False, False, True, True, False, True]
    assert frames_since_left(idx, vis, inv) == [None, None, None, 2, 4, None, 2]
    assert frames_since_left([0, 1], [False, False], [True, True]) == [None, None]  # never seen: not a memory frame


def test_memory_curve_means_and_intervals():
    def case(values):
        return {
            "frame_indices": [0, 1, 2],
            "visible": [True, False, False],
            "invisible": [False, True, True],
            "metrics": {"psnr": values},
        }

    off, mean, low, high, n = memory_curve([case([50, 10, 20]), case([50, 30, None]), case([50, 20, 40])], "psnr")
    assert off.tolist() == [1, 2] and n.tolist() == [3, 2]
    assert mean.tolist() == [20.0, 30.0]
    assert high[0] - mean[0] == pytest.approx(1.96 * np.std([10, 30, 20], ddof=1) / np.sqrt(3), rel=1e-4)
    assert mean[1] - low[1] == pytest.approx(1.96 * np.std([20, 40], ddof=1) / np.sqrt(2), rel=1e-4)


def test_memory_curve_bands_stay_in_the_metric_range():
    def case(metric, values):
        return {
            "frame_indices": [0, 1, 2],
            "visible": [True, False, False],
            "invisible": [False, True, True],
            "metrics": {metric: values},
        }

    # IoU near 0 with a wide spread: the normal band would go below 0; it is clipped.
    _, mean, low, high, _ = memory_curve([case("iou", [1, 0.0, 0.9]), case("iou", [1, 0.0, 0.0])], "iou")
    assert low.min() >= 0 and high.max() <= 1 and low[1] == 0.0
    # Presence is a rate: Wilson's interval, inside [0, 1] and not zero-width at 1 (3 of 3 present).
    _, mean, low, high, _ = memory_curve([case("presence", [1, 1, 1])] * 3, "presence")
    assert mean.tolist() == [1.0, 1.0] and high.tolist() == [1.0, 1.0]
    assert low[0] == pytest.approx(wilson(3, 3)[0]) and 0.4 < low[0] < 0.5  # Wilson 95% lower bound of 3/3: 0.438


@pytest.mark.slow
def test_demo_runs_the_whole_chain(demo_dir):
    out, output = demo_dir
    assert sorted(p.name for p in out.iterdir()) == [
        "cache",
        "dataset",
        "r2m",
        "report.html",
        "runs",
        "sources",
        "wrop",
    ]
    summaries = {
        m: json.loads(RunLayout(out / "runs" / m).summary_json("classic-v1").read_text())
        for m in ("hold", "reproject", "oracle")
    }
    for split in ("visible", "invisible"):
        block = summaries["oracle"]["subsets"]["all"][split]
        assert (
            block["psnr"]["mean"] == 100.0 and block["iou"]["mean"] == 1.0 and block["ssim"]["mean"] == pytest.approx(1)
        )
    inv = {m: s["subsets"]["all"]["invisible"]["psnr"]["mean"] for m, s in summaries.items()}
    assert inv["reproject"] > inv["hold"]
    assert {s["subsets"]["all"]["cases"] for s in summaries.values()} == {4}
    assert {"dynamic", "static"} <= set(summaries["hold"]["subsets"])
    # The printed tables: PersistBench's, one row per model, the oracle perfect; then R2M-Bench's; then WROP's.
    persistbench_table, rest = output.split("R2M-Bench NMR")
    r2m_table, wrop_table = rest.split("WROP ")

    def table_rows(text: str, models: tuple[str, ...]) -> dict[str, list[str]]:
        """Model -> its cells, without the marks of a reference run ("(ref)") and a partial Overall ("*")."""
        rows = {}
        for line in text.splitlines():
            cells = [c.rstrip("*") for c in line.split() if c != "(ref)"]
            if cells[:1] in [[m] for m in models]:
                rows.setdefault(cells[0], cells[1:])  # the row, not a note naming the run below it
        return rows

    rows = table_rows(persistbench_table, ("hold", "reproject", "oracle"))
    assert rows["oracle"][:2] == ["100.0000", "100.0000"] and float(rows["reproject"][1]) > float(rows["hold"][1])
    assert (
        f"done: open {out / 'report.html'}, {out / 'r2m' / 'report.html'} and {out / 'wrop' / 'report.html'}" in output
    )
    # R2M-Bench: the pose-rendered reference remembers, the warp remembers rotations, hold is excluded.
    r2m = table_rows(r2m_table, ("pose-rendered", "warp", "hold"))
    assert "pose-rendered (ref)" in r2m_table and "* warp: Overall partial" in r2m_table
    assert float(r2m["pose-rendered"][1]) > 0.8 and float(r2m["warp"][1]) > 0.5 and r2m["hold"][0] == "n/a"
    # WROP, read in place over loopback HTTP: hold gains exactly 0; flow, which extrapolates the last motion,
    # gains in the changed region where the ball rolls on behind the screen (and loses where it stops or drops).
    wrop = table_rows(wrop_table, ("hold", "flow"))
    assert {float(v) for v in wrop["hold"][1::2]} == {0.0} and float(wrop["flow"][5]) != 0
    flow = json.loads((out / "wrop" / "runs" / "flow" / "scores" / "wrop-cont-v1" / "summary.json").read_text())
    assert flow["categories"]["baillargeonian_occlusion"]["changed"]["psnr"]["gain"] > 0
    info = json.loads((out / "wrop" / "runs" / "flow" / "run.json").read_text())
    assert info["dataset"]["root"].startswith("http://127.0.0.1:") and (out / "wrop" / "report.html").is_file()
    # The loopback server is gone: its port refuses connections.
    url = json.loads((out / "sources" / "recipes.jsonl").read_text().splitlines()[0])["source"]["url"]
    port = urlparse(url).port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.slow
def test_the_report_warns_when_runs_are_not_comparable(demo_dir, tmp_path):
    out, _ = demo_dir
    runs = [shutil.copytree(out / "runs" / m, tmp_path / m) for m in ("hold", "reproject")]
    report = tmp_path / "same.html"
    assert CliRunner().invoke(main, ["report", *map(str, runs), "--out", str(report)]).exit_code == 0
    assert "class='warning'" not in report.read_text()
    summary = RunLayout(runs[1]).summary_json("classic-v1")
    data = json.loads(summary.read_text())
    data["dataset_fingerprint"], data["partial"] = "f" * 64, True
    summary.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["report", *map(str, runs), "--out", str(report)])
    assert result.exit_code == 0, result.output
    text = report.read_text()
    assert "different datasets (fingerprint)" in text and "reproject: ffffffffffff" in text and "Partial runs" in text
    missing = CliRunner().invoke(main, ["report", str(out / "dataset"), "--out", str(report)])
    assert missing.exit_code == 1 and "not scored" in missing.output


def test_the_demo_refuses_a_used_directory(tmp_path):
    (tmp_path / "x").write_text("mine")
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path), "--no-progress"])
    assert (
        result.exit_code == 1 and "exists and is not empty" in result.output and (tmp_path / "x").read_text() == "mine"
    )


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (.ci/run installs it)")
def test_report_loads_in_headless_chromium(demo_dir, tmp_path):
    from playwright.sync_api import sync_playwright

    out, _ = demo_dir
    report = out / "report.html"
    text = report.read_text()
    assert "src='http" not in text and 'src="http' not in text and "<link" not in text  # self-contained
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        failed: list[str] = []
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate("Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])")
        assert len(images) >= 7 and all(ok for _, ok in images), images
        assert page.locator("#leaderboard tbody tr").count() == 3

        def first_col():
            return page.eval_on_selector_all("#leaderboard tbody tr", "rs => rs.map(r => r.cells[0].textContent)")

        assert first_col() == ["hold", "reproject", "oracle"]
        page.click("#leaderboard th[data-col='3']")  # psnr inv, ascending
        assert first_col() == ["hold", "reproject", "oracle"]
        page.click("#leaderboard th[data-col='3']")
        assert first_col() == ["oracle", "reproject", "hold"]
        assert page.locator("#provenance tbody tr").count() == 3
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        page.goto((out / "r2m" / "report.html").as_uri())  # R2M-Bench: NMR leaderboard, profile, scatters
        page.wait_for_load_state("load")
        images = page.evaluate("Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])")
        assert len(images) >= 5 and all(ok for _, ok in images), images
        assert {alt for alt, _ in images} >= {"NMR profile", "MG vs DR frame_psnr"}
        assert first_col() == ["pose-rendered (reference)", "warp", "hold"]  # the perfect-memory reference, marked
        browser.close()
    assert not errors and not failed, (errors, failed)
    assert (tmp_path / "report.png").stat().st_size > 10_000


def doctor(*args, env=None):
    return CliRunner().invoke(main, ["doctor", *args], env=env)


@pytest.mark.slow
def test_doctor_names_what_is_missing(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"IMAGEIO_FFMPEG_EXE": str(tmp_path / "no-ffmpeg"), "PATH": str(empty), "TORCH_HOME": str(tmp_path / "torch")}
    result = doctor("--for", "download", "--cache", str(tmp_path / "cache"), env=env)
    assert result.exit_code == 1
    lines = {
        line.split()[1]: line
        for line in result.output.splitlines()
        if line.split()[:1] in (["ok"], ["MISSING"], ["missing"])
    }
    assert lines["ffmpeg"].startswith("MISSING") and "1 missing for download: ffmpeg" in result.output
    assert "fix: pip install imageio-ffmpeg" in result.output
    assert lines["JavaScript"].startswith("missing")  # only YouTube needs it: reported, not fatal
    result = doctor("--for", "score", env=env)
    assert result.exit_code == 0 and "ready for score" in result.output
    try:
        import lpips  # noqa: F401
    except ImportError:
        assert 'pip install -e ".[lpips]"' in result.output
    else:  # torch is here; the AlexNet weights are not in the empty TORCH_HOME
        weights = next(line for line in result.output.splitlines() if "LPIPS AlexNet weights" in line)
        assert weights.startswith("missing") and str(tmp_path / "torch") in weights
    result = doctor("--for", "download", "--cache", str(tmp_path / "cache"))
    assert result.exit_code == 0 and "ready for download" in result.output and "ok       ffmpeg" in result.output


def test_readme_starts_with_the_two_commands():
    """The README's first command is the demo; the second is the one .ci/run runs (and CI runs .ci/run)."""
    root = Path(__file__).resolve().parents[1]
    lines = [line for line in (root / "README.md").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert lines[0].endswith("&& .venv/bin/persistbench demo") and '".[test' in lines[1] and "pytest" in lines[1]
    assert (
        "grep -m1 '^python3 -m venv .venv && .venv/bin/pip install -e \".\\[test'" in (root / ".ci" / "run").read_text()
    )


@pytest.mark.slow
def test_the_readme_first_command_runs_as_written(tmp_path):
    """In a copy of the repository (tracked and unignored files): fresh venv, install, demo."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    command = next(line for line in (root / "README.md").read_text().splitlines() if line.startswith("python3 -m venv"))
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    copy = tmp_path / "repo"
    for name in files:
        src = root / name
        if src.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / name, follow_symlinks=False)
    proc = subprocess.run(["bash", "-c", command], cwd=copy, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (copy / "persistbench-demo" / "report.html").stat().st_size > 100_000
    assert "done: open persistbench-demo/report.html" in proc.stdout


XSS = 'x"><script>document.title="XSS"</script><img src=x onerror="document.title=\'XSS\'">'


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (.ci/run installs it)")
def test_values_from_runs_never_become_markup(demo_dir, tmp_path):
    """A subset name, a metric key, a model name or a note from a shared run is text in the report, never script."""
    from playwright.sync_api import sync_playwright

    out, _ = demo_dir
    hostile = tmp_path / "runs"
    shutil.copytree(out / "runs", hostile)
    for run in hostile.iterdir():
        scores = RunLayout(run).summary_json("classic-v1").parent
        summary = json.loads((scores / "summary.json").read_text())
        summary["subsets"] = {(XSS if k == "static" else k): v for k, v in summary["subsets"].items()}
        summary["model"] = XSS
        (scores / "summary.json").write_text(json.dumps(summary))
        results = json.loads((scores / "results.json").read_text())
        for case in results["cases"]:
            case["subset"] = XSS if case["subset"] == "static" else case["subset"]
            for block in (case["metrics"], case["means"]["invisible"], case["means"]["visible"]):
                block[XSS] = block.pop("psnr")
        (scores / "results.json").write_text(json.dumps(results))
    r2m = tmp_path / "r2m"
    shutil.copytree(out / "r2m" / "runs", r2m)
    for path in r2m.glob("*/scores/*/summary.json"):
        summary = json.loads(path.read_text())
        summary["model"], summary["overall_note"] = XSS, XSS
        path.write_text(json.dumps(summary))
    pages = []
    for runs, name in ((sorted(hostile.iterdir()), "pb.html"), (sorted(r2m.iterdir()), "r2m.html")):
        result = CliRunner().invoke(main, ["report", *map(str, runs), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        text = (tmp_path / name).read_text()
        assert "<script>document" not in text and text.count("<script>") == 1
        pages.append(tmp_path / name)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        for report in pages:
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(200)
            assert page.title() == "persistbench report"
            assert page.evaluate("document.scripts.length") == 1
            assert XSS in page.evaluate("document.body.innerText")
        browser.close()
