"""Issue 44: a certificate for every suite's run, and a check that catches what was changed after it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from persistbench.cli import main

pytestmark = pytest.mark.slow  # the demo's runs (built once per test run)

RUNS = {  # suite -> (run in the demo, extra arguments: WROP's demo runs read a loopback server, gone now)
    "persistbench": ("runs/reproject", ()),
    "r2m": ("r2m/runs/warp", ()),
    "wrop": ("wrop/runs/flow", ("--dataset", "wrop/corpus")),
}


def _copy(out: Path, tmp_path: Path, suite: str) -> tuple[Path, list[str]]:
    where, extra = RUNS[suite]
    run = Path(shutil.copytree(out / where, tmp_path / suite / Path(where).name))
    return run, [a if not a.startswith("wrop/") else str(out / a) for a in extra]


def _certify(run: Path, extra: list[str], *more: str):
    return CliRunner().invoke(main, ["certify", str(run), *extra, *more])


@pytest.mark.parametrize("suite", sorted(RUNS))
def test_an_unchanged_run_follows_from_its_certificate(demo_dir, tmp_path, suite):
    out, _ = demo_dir
    run, extra = _copy(out, tmp_path, suite)
    made = _certify(run, extra)
    assert made.exit_code == 0, made.output
    cert = json.loads((run / "certificate.json").read_text())
    assert cert["suite"] == suite and cert["cases"]["count"] == len(cert["cases"]["each"]) > 0
    assert cert["toolkit"]["version"] and "numpy" in cert["stack"] and cert["hardware"]["cpu"]
    checked = _certify(run, extra, "--check", str(run / "certificate.json"), "--sample", "3")
    assert checked.exit_code == 0, checked.output
    assert "the run follows from it (3 case(s) scored again" in checked.output


def _check(run: Path, extra: list[str]):
    return _certify(run, extra, "--check", str(run / "certificate.json"), "--sample", "100")


def test_every_change_after_the_certificate_is_caught(demo_dir, tmp_path):
    out, _ = demo_dir
    run, extra = _copy(out, tmp_path, "persistbench")
    assert _certify(run, extra).exit_code == 0
    cert_path = run / "certificate.json"
    pristine = cert_path.read_text()
    scores = run / "scores" / "classic-v1"
    records = sorted(scores.glob("*/*.json"))

    # 1. one frame score edited
    record = json.loads(records[0].read_text())
    saved = records[0].read_text()
    k = next(i for i, v in enumerate(record["metrics"]["psnr"]) if v is not None)
    record["metrics"]["psnr"][k] += 1.0
    records[0].write_text(json.dumps(record))
    result = _check(run, extra)
    assert result.exit_code == 1 and f"{records[0]}: edited since the certificate" in result.output
    assert f"{records[0]}: does not follow from its prediction (metrics/psnr[{k}]" in result.output
    records[0].write_text(saved)

    # 2. one prediction file replaced
    frame = sorted((run / records[0].parent.name / records[0].stem / "frames").glob("*.png"))[0]
    original = frame.read_bytes()
    shutil.copy(sorted(frame.parent.glob("*.png"))[-1], frame)
    result = _check(run, extra)
    key = f"{records[0].parent.name}.{records[0].stem}"
    assert result.exit_code == 1 and f"{key}: its prediction's files are not those scored" in result.output
    frame.write_bytes(original)

    # 3. a case removed
    gone = records[-1].read_bytes()
    records[-1].unlink()
    result = _check(run, extra)
    assert result.exit_code == 1 and "(a case removed)" in result.output
    records[-1].write_bytes(gone)

    # 4. the summary's mean edited, its sha256 in the certificate updated to agree
    import hashlib

    summary_path = scores / "summary.json"
    summary_text = summary_path.read_text()
    summary = json.loads(summary_text)
    summary["subsets"]["all"]["invisible"]["psnr"]["mean"] += 5.0
    summary_path.write_text(json.dumps(summary))
    cert = json.loads(pristine)
    cert["summary_sha256"] = hashlib.sha256(summary_path.read_bytes()).hexdigest()
    cert_path.write_text(json.dumps(cert))
    result = _check(run, extra)
    assert (
        result.exit_code == 1
        and "summary.json: does not follow from the records (subsets/all/invisible/psnr/mean" in result.output
    )
    summary_path.write_text(summary_text)

    # 5. a certificate claiming other weights
    cert = json.loads(pristine)
    cert["weights"] = {"lpips": ["0" * 64]}
    cert_path.write_text(json.dumps(cert))
    result = _check(run, extra)
    assert result.exit_code == 1 and "certificate.json: claims weights {'lpips'" in result.output

    cert_path.write_text(pristine)  # everything back: the check agrees again, exactly
    again = _check(run, extra)
    assert again.exit_code == 0, again.output
