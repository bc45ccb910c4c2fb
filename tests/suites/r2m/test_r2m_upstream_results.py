"""R2M-Bench's results in upstream's layout: written by ``score``, read back by our aggregation and ``report``,
and summarised by upstream's rules (re-derived here from the files alone) to our numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from persistbench.core.errors import PersistbenchError
from persistbench.core.report import build_report
from persistbench.core.score import ScoreOptions, score
from persistbench.suites.r2m import scoring, upstream_results
from persistbench.suites.r2m.upstream_metrics import OURS, UPSTREAM

FAMILIES = {  # compute_nmr_summary's families, by upstream's keys
    "Appearance": ["psnr", "ssim", "lpips"],
    "Scene ID": ["dino_similarity", "boq_similarity", "mvpr_similarity"],
    "Local Geo.": ["match_ratio", "ransac_inlier_ratio"],
    "State": ["state_score"],
}
TEMPLATES = ("DDDAAA", "WSLRRLL", "revisit_loop")


@pytest.fixture(scope="module")
def scored(r2m_tree, tmp_path_factory) -> dict[str, Path]:
    """The pose- and time-driven synthetic runs scored under r2m-v2 (upstream's pairs)."""
    out = {}
    for kind in ("pose", "time"):
        run = tmp_path_factory.mktemp(kind) / kind
        shutil.copytree(r2m_tree / "videos" / kind, run)
        opts = ScoreOptions(pred=run, dataset=r2m_tree, protocol="r2m-v2", metrics=("frame_psnr", "frame_ssim"))
        score(opts, allow_partial=True, progress=False)
        out[kind] = run
    return out


def upstream_rules(root: Path, eps: float = 1e-8) -> dict:
    """Model -> {"metrics": {key: (gain, nmr)}, "trajectories": {T: {key: nmr}}, "overall"}: the README's
    video-balanced protocol of compute_nmr_summary, from the files alone."""
    videos: dict[tuple[str, str], dict[str, dict]] = {}
    for path in sorted(root.glob("*/*/shard_*/results.json")):
        model, template = path.parts[-3].rsplit("_", 2)[0], path.parts[-3].rsplit("_", 2)[1]
        if path.parts[-3].endswith("_revisit_loop_30s"):
            model, template = path.parts[-3][: -len("_revisit_loop_30s")], "revisit_loop"
        for vid, entry in json.loads(path.read_text())["per_video"].items():
            v = videos.setdefault((model, template), {}).setdefault(vid, {k: {} for k in upstream_results.KINDS})
            for k in upstream_results.KINDS:
                v[k].update({m: s["mean"] for m, s in entry[k].items()})
    out: dict[str, dict] = {}
    keys = [k for ks in FAMILIES.values() for k in ks]
    for (model, template), vs in videos.items():
        cells = out.setdefault(model, {"cells": {}})["cells"].setdefault(template, {})
        for key in keys:
            valid = []
            for v in vs.values():
                if all(key in v[k] for k in upstream_results.KINDS):
                    r, b, s = (v[k][key] for k in upstream_results.KINDS)
                    mg, dr = (b - r, b - s) if key == "lpips" else (r - b, s - b)
                    if dr > eps:
                        valid.append((mg, dr))
            if valid:
                mg, dr = sum(x for x, _ in valid) / len(valid), sum(y for _, y in valid) / len(valid)
                cells[key] = (mg, mg / (dr + eps))
    for m in out.values():
        m["metrics"] = {}
        for key in keys:
            have = [m["cells"][t][key] for t in TEMPLATES if key in m["cells"].get(t, {})]
            if have:
                m["metrics"][key] = (np.mean([g for g, _ in have]), np.mean([n for _, n in have]))
        fams = [np.mean(v) for ks in FAMILIES.values() if (v := [m["metrics"][k][1] for k in ks if k in m["metrics"]])]
        m["overall"] = float(np.mean(fams))
    return out


@pytest.mark.slow
def test_score_writes_upstreams_layout_and_upstreams_rules_give_our_numbers(scored):
    for kind, run in scored.items():
        root = run / "scores" / "r2m-v2" / "upstream"
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json"))
        assert files == [f"appearance/{kind}_{t}_30s/shard_0/results.json" for t in sorted(TEMPLATES)]
        entry = json.loads((root / f"appearance/{kind}_DDDAAA_30s/shard_0/results.json").read_text())
        video = entry["per_video"]["0001"]
        assert set(video) == {
            "num_revisit_pairs",
            "num_baseline_pairs",
            "num_short_pairs",
            *upstream_results.KINDS,
            "nmr",
        }
        assert set(video["revisit"]["psnr"]) == {"mean", "std", "median", "count"}
        ours = json.loads((run / "scores" / "r2m-v2" / "summary.json").read_text())
        theirs = upstream_rules(root)[kind]
        for key, (gain, nmr) in theirs["metrics"].items():
            assert ours["metrics"][OURS[key]]["nmr"] == pytest.approx(nmr, rel=1e-12)
            assert ours["metrics"][OURS[key]]["memory_gain"] == pytest.approx(gain, rel=1e-12)
        for t in TEMPLATES:
            for key, (_, nmr) in theirs["cells"][t].items():
                assert ours["trajectories"][t][OURS[key]]["nmr"] == pytest.approx(nmr, rel=1e-12)
        assert ours["families"]["appearance"]["nmr"] == pytest.approx(theirs["overall"], rel=1e-12)


@pytest.mark.slow
def test_values_and_means_are_rounded_as_upstream_stores_them(scored):
    run = scored["pose"]
    case = json.loads((run / "scores" / "r2m-v2" / "WSLRRLL" / "0001.json").read_text())
    psnr = [v for k in scoring.KINDS for v in case["values"]["frame_psnr"][k]]
    ssim = [v for k in scoring.KINDS for v in case["values"]["frame_ssim"][k]]
    assert all(v == round(v, 4) for v in psnr) and any(v != round(v, 3) for v in psnr)
    assert all(v == round(v, 6) for v in ssim)
    rel = case["relative"]["frame_psnr"]
    for k in scoring.KINDS:
        assert rel[k] == round(float(np.mean(case["values"]["frame_psnr"][k])), 6)


@pytest.mark.slow
def test_upstreams_tree_is_read_back_into_our_records(scored, tmp_path):
    tree = tmp_path / "nmr"
    for run in scored.values():
        shutil.copytree(run / "scores" / "r2m-v2" / "upstream", tree, dirs_exist_ok=True)
    read = upstream_results.read(tree)
    assert sorted(read) == ["pose", "time"] and len(read["pose"]) == 6
    for kind, run in scored.items():
        ours = json.loads((run / "scores" / "r2m-v2" / "summary.json").read_text())
        again = scoring.summarise(upstream_results.records(read[kind], 1e-8), TEMPLATES, 1e-8, True).to_json()
        for m in ("frame_psnr", "frame_ssim"):
            assert again["metrics"][m]["nmr"] == pytest.approx(ours["metrics"][m]["nmr"], rel=1e-12)
            for t in TEMPLATES:
                assert again["trajectories"][t][m]["valid"] == ours["trajectories"][t][m]["valid"]
    page = build_report([tree], tmp_path / "report.html")
    html = page.read_text()
    assert "pose" in html and "time" in html and upstream_results.SOURCE in html


def _record(uid: str, subset: str, values: dict) -> dict:
    pairs = {k: [[0, 1]] * len(values["persistent_state"][k]) for k in scoring.KINDS}
    return {"uid": uid, "subset": subset, "values": values, "pairs": pairs}


def test_judge_scores_go_to_the_state_file_without_failures(tmp_path):
    values = {
        "persistent_state": {"revisit": [5.0, None, 4.0], "baseline": [2.0, 1.0], "short": [5.0, 5.0]},
        "sift_match_ratio": {"revisit": [0.5], "baseline": [0.1], "short": [0.9]},  # not upstream's: not written
    }
    written = upstream_results.write(tmp_path, "m", [_record("0001", "DDDAAA", values)])
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "persistent_state/results_gemini_nmr_m_DDDAAA_30s.json"
    ]
    video = json.loads(written[0].read_text())["videos"]["0001"]
    assert video["revisit_scores"] == [5.0, 4.0]  # the failed judgment is left out, never stored as a number
    assert video["nmr"]["nmr"] == pytest.approx(round((4.5 - 1.5) / (5.0 - 1.5), 6))
    back = upstream_results.read(tmp_path)["m"][0]
    assert back["means"]["persistent_state"] == {"revisit": 4.5, "baseline": 1.5, "short": 5.0}
    assert set(UPSTREAM) >= {"persistent_state"}


def test_object_family_goes_to_upstreams_object_folder_with_its_nmr_block(tmp_path):
    values = {
        "object_appearance_persistence": {"revisit": [0.9, 0.7], "baseline": [0.2, 0.4], "short": [0.95, 0.85]},
        "object_semantic_persistence": {"revisit": [0.5], "baseline": [0.5], "short": [0.5]},  # no range: not valid
    }
    pairs = {k: [[0, 1]] * 2 for k in scoring.KINDS}
    record = {"uid": "0001", "subset": "WSLRRLL", "values": values, "pairs": pairs}
    written = upstream_results.write(tmp_path, "m", [record])
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["object/m_WSLRRLL_30s/shard_0/results.json"]
    video = json.loads(written[0].read_text())["per_video"]["0001"]
    assert video["revisit"]["object_appearance_persistence"]["mean"] == 0.8
    r, b, s = 0.8, 0.3, 0.9  # object_identity.compute_object_nmr: (R - B) / (S - B + 1e-8), valid when S - B > 1e-8
    assert video["nmr"]["object_appearance_persistence"] == {
        "value": round((r - b) / (s - b + 1e-8), 6),
        "valid": True,
        "mg": round(r - b, 6),
        "dr": round(s - b, 6),
    }
    assert video["nmr"]["object_semantic_persistence"] == {"value": None, "valid": False, "mg": 0.0, "dr": 0.0}
    back = upstream_results.read(tmp_path)["m"][0]["means"]
    assert back["object_appearance_persistence"] == {"revisit": 0.8, "baseline": 0.3, "short": 0.9}


def test_the_state_file_lists_the_pairs_the_judge_was_asked_about(tmp_path):
    values = {"persistent_state": {"revisit": [5.0, 4.0], "baseline": [2.0], "short": [5.0]}}  # pairs_per_kind
    pairs = {k: [[0, 1], [2, 3], [4, 5]] for k in scoring.KINDS}
    record = {"uid": "0001", "subset": "DDDAAA", "values": values, "pairs": pairs}
    video = json.loads(upstream_results.write(tmp_path, "m", [record])[0].read_text())["videos"]["0001"]
    assert video["revisit_pairs"] == [[0, 1], [2, 3]] and video["baseline_pairs"] == [[0, 1]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, needle",
    [
        (lambda d: d["per_video"]["0001"]["revisit"]["psnr"].update(mean="NaN"), r"revisit\.psnr: mean is 'NaN'"),
        (lambda d: d.update(per_video=[]), "no per_video object"),
        (lambda d: d["per_video"].update({"0001": 3}), r"per_video\['0001'\] is not an object"),
    ],
)
def test_a_damaged_upstream_file_is_refused_in_one_line(scored, tmp_path, damage, needle):
    tree = Path(shutil.copytree(scored["pose"] / "scores" / "r2m-v2" / "upstream", tmp_path / "nmr"))
    path = tree / "appearance" / "pose_DDDAAA_30s" / "shard_0" / "results.json"
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    with pytest.raises(PersistbenchError, match=needle) as e:
        upstream_results.read(tree)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(PersistbenchError, match=needle):
        build_report([tree], tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists()


def test_task_names_are_parsed_as_upstream_names_them():
    assert upstream_results.parse_task("modelA_1400_DDDAAA_30s") == ("modelA_1400", "DDDAAA")
    assert upstream_results.parse_task("m_revisit_loop_30s") == ("m", "revisit_loop")
    assert upstream_results.parse_task("m_wslrrll_30s") == ("m", "WSLRRLL")
    assert upstream_results.parse_task("m_DDDAAA") is None
    with pytest.raises(PersistbenchError, match="not an upstream R2M-Bench result tree"):
        upstream_results.read(Path(__file__).parent)
