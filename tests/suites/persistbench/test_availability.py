"""Issue 43: which cases still exist. A download whose host refuses two of eight sources writes an availability
manifest with the refusals' kinds; verify, score, report and compare --cases say what is available."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from fakes.scripted_host import Scripted

from persistbench.cli import main
from persistbench.io.serve import FileServer
from persistbench.suites.persistbench.build.availability import refusal_kind
from persistbench.suites.persistbench.synth import SynthConfig, generate

pytestmark = pytest.mark.slow  # eight cases downloaded through yt-dlp, inferred, scored and reported

CFG = SynthConfig(scenes=8, seed=11, pano_size=(512, 256), view_size=(128, 96), n_frames=12, fps=8.0)


def test_a_refusal_names_its_kind():
    assert refusal_kind("c1: source http://127.0.0.1/x unavailable: removed: HTTP Error 404 (gone)") == "removed"
    assert refusal_kind("c1: source http://127.0.0.1/x unavailable: geo blocked: HTTP Error 451 (...)") == "geo_blocked"
    assert refusal_kind("c1: reconstruction failed: bad frame") is None


def test_two_refused_sources_leave_six_of_eight_cases_available(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796515200")  # 2026-12-06
    root = tmp_path / "hosts"
    with FileServer(root) as real:
        generate(root / "http", CFG, base_url=f"{real.url}/http/sources")
        with Scripted(f"{real.url}/http/sources") as scripted:
            lines = (root / "http" / "recipes.jsonl").read_text().splitlines()
            assert len(lines) == 8
            refused = {}
            for i, code in ((1, 404), (4, 451)):
                obj = json.loads(lines[i])
                obj["source"]["url"] = f"{scripted.url}/status/{code}/{obj['source']['id']}.mp4"
                refused[f"{obj['subset']}.{obj['case_id']}"] = {404: "removed", 451: "geo_blocked"}[code]
                lines[i] = json.dumps(obj)
            recipes = tmp_path / "recipes.jsonl"
            recipes.write_text("\n".join(lines) + "\n")
            ds = tmp_path / "ds"
            args = ["download", "--recipes", str(recipes), "--output", str(ds), "--cache", str(tmp_path / "cache")]
            result = CliRunner().invoke(main, [*args, "--no-progress", "--retries", "0"])
    assert result.exit_code == 1, result.output  # two cases failed
    manifest = json.loads((ds / "availability.json").read_text())
    assert manifest["total"] == 8 and manifest["built"] == 6 and manifest["date"] == "2026-12-06"
    assert {k: v["kind"] for k, v in manifest["cases"].items() if v["status"] == "refused"} == refused
    assert all(v["status"] == "built" for k, v in manifest["cases"].items() if k not in refused)

    verified = CliRunner().invoke(main, ["verify", str(ds), "--no-progress"])
    assert "availability: 6 of 8 cases available (missing: geo blocked 1, removed 1; 2026-12-06)" in verified.output

    run = tmp_path / "runs" / "hold"
    inferred = CliRunner().invoke(
        main, ["infer", "--model", "hold", "--dataset", str(ds), "-o", str(run), "--no-progress"]
    )
    assert inferred.exit_code == 0, inferred.output
    scored = CliRunner().invoke(main, ["score", "--pred", str(run), "--metrics", "psnr,ssim", "--no-progress"])
    assert scored.exit_code == 0, scored.output
    summary = json.loads((run / "scores" / "classic-v1" / "summary.json").read_text())
    available = summary["cases_behind"]["available"]
    assert (available["built"], available["total"], available["missing"]) == (6, 8, {"geo_blocked": 1, "removed": 1})
    assert summary["cases_behind"]["count"] == 6
    assert "The dataset: 6 of 8 cases available" in (run / "scores" / "classic-v1" / "summary.md").read_text()
    page = tmp_path / "report.html"
    reported = CliRunner().invoke(main, ["report", str(run), "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert "hold: its dataset has 6 of 8 cases available" in page.read_text()

    # a colleague's copy of the dataset in which one more case is gone
    other = tmp_path / "other"
    shutil.copytree(ds, other)
    theirs = json.loads((other / "availability.json").read_text())
    gone = next(k for k, v in theirs["cases"].items() if v["status"] == "built")
    theirs["cases"][gone] = {"status": "refused", "kind": "private", "reason": "private video"}
    theirs["built"] -= 1
    (other / "availability.json").write_text(json.dumps(theirs))
    cases = CliRunner().invoke(main, ["compare", "--cases", str(run), str(other)])
    assert cases.exit_code == 0, cases.output
    assert f"only in {run}: 1: {gone}" in cases.output and f"only in {other}: 0" in cases.output
    assert "5 of 8 cases available (missing: geo blocked 1, private 1, removed 1" in cases.output

    theirs["built"] = 7  # counts that do not add up: refused in one line naming the file
    (other / "availability.json").write_text(json.dumps(theirs))
    bad = CliRunner().invoke(main, ["compare", "--cases", str(ds), str(other)])
    assert bad.exit_code == 1 and "availability.json: not an availability manifest" in bad.output
