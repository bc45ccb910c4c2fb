"""Issue 11, item 7: the public toolkit's (PyPI persistbench 0.1.7) inference output, read as it writes it.

``persistbench infer --model m.py:Cls --name NAME --output OUT`` there writes ``OUT/null/NAME/`` with
``run.json`` (``preprocessing: {eval_length, eval_reso}``, ``case_ids``), ``split_status.json``,
``logs/``, lock files and one folder per case named ``<subset>__<case_id>``, holding ``case.json``
(``uid``, ``num_frames``, ``sizes_wh``, ``files``), ``prediction/00000.png...``, ``input/...`` and the
camera files. The fixture below builds exactly that tree from the ground truth, sampled and cropped
as the public toolkit gives frames to its models, so a perfect score is the check.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core.layout import RunLayout
from persistbench.geometry.sampling import crop_box, crop_resize, sample_indices, target_size
from persistbench.io.files import write_json
from persistbench.io.images import write_image
from persistbench.io.safeload import save_npy_dict
from persistbench.suites.persistbench.dataset import Dataset


def public_tree(ds: Path, out: Path, length: int, reso: list[int] | int, drop: int | None = None) -> Path:
    """``OUT/null/mymodel/`` as the public toolkit 0.1.7 writes it, predictions = sampled ground truth."""
    run = out / "null" / "mymodel"
    cases = Dataset(ds).cases()
    uids = [f"{c.subset}__{c.case_id}" for c in cases]
    write_json(
        run / "run.json",
        {
            "schema_version": 1,
            "package_version": "0.1.7",
            "stage": "inference",
            "name": "mymodel",
            "model": "m.py:Cls",
            "model_config": {},
            "model_source_sha256": "0" * 64,
            "dataset_id": "f" * 64,
            "case_ids": uids,
            "num_splits": 1,
            "preprocessing": {"eval_length": length, "eval_reso": reso},
        },
    )
    write_json(run / "split_status.json", {"0": {"completed": len(cases)}})
    (run / "logs").mkdir()
    (run / ".split-0.lock").touch()
    hw = (-1, -1) if reso == -1 else tuple(reso)
    for k, (case, uid) in enumerate(zip(cases, uids)):
        if k == drop:
            continue
        full = case.size
        box, size = crop_box(full, hw), target_size(full, hw)
        idx = sample_indices(case.n_frames, length)
        d = run / uid
        files = {}
        for i, t in enumerate(idx):
            for sub, view in (("prediction", "center"), ("input", "view_0")):
                path = d / sub / f"{i:05d}.png"
                files[f"{sub}/{path.name}"] = write_image(path, crop_resize(case.view(view).frame(int(t)), box, size))
        for name, view in (("input_camera_params.npy", "view_0"), ("target_camera_params.npy", "center")):
            files[name] = save_npy_dict(d / name, case.view(view).camera())
        write_json(
            d / "case.json",
            {
                "schema_version": 1,
                "uid": uid,
                "num_frames": len(idx),
                "sizes_wh": [[size[1], size[0]]] * len(idx),
                "files": files,
            },
        )
    return run


def score(run: Path, ds: Path, *extra: str):
    return CliRunner().invoke(
        main, ["score", "--no-progress", "--pred", str(run), "--dataset", str(ds), "--metrics", "psnr,iou", *extra]
    )


@pytest.mark.slow
@pytest.mark.parametrize(("length", "reso"), [(12, -1), (16, [192, 192]), (-1, [192, 256])])
def test_public_inference_output_scores_perfectly(sample_ds, tmp_path, length, reso):
    run = public_tree(sample_ds, tmp_path, length, reso)
    result = score(run, sample_ds)
    assert result.exit_code == 0, result.output
    s = json.loads(RunLayout(run).summary_json("classic-v1").read_text())
    assert s["model"] == "m.py:Cls" and s["partial"] is False
    for split in ("visible", "invisible"):
        assert s["subsets"]["all"][split]["psnr"] == {"mean": 100.0, "cases": 8}
    case = json.loads(next(RunLayout(run).scores_dir("classic-v1").rglob("Synth_*.json")).read_text())
    assert case["frame_indices"] == sample_indices(60, length).tolist()
    record = next(run.glob("*__*/case.json"))
    assert len(case["prediction_sha256"]) == 64 and case["prediction_sha256"] != hashlib.sha256(b"").hexdigest()
    assert record.is_file()


@pytest.mark.slow
def test_public_case_ids_are_checked_against_the_dataset(sample_ds, tmp_path):
    run = public_tree(sample_ds, tmp_path, 12, -1, drop=2)
    gone = Dataset(sample_ds).cases()[2]
    dropped = f"{gone.subset}.{gone.case_id}"  # a case's one name
    info = json.loads((run / "run.json").read_text())
    info["case_ids"].append("static__Synth_elsewhere_0_obj_1")
    write_json(run / "run.json", info)
    result = score(run, sample_ds)
    assert result.exit_code == 1
    assert f"no prediction for {dropped}" in result.output
    assert "predictions for cases the dataset does not have: static.Synth_elsewhere_0_obj_1" in result.output
    result = score(run, sample_ds, "--allow-partial")
    assert result.exit_code == 0, result.output
    s = json.loads(RunLayout(run).summary_json("classic-v1").read_text())
    assert s["partial"] and s["missing_cases"] == [dropped]
    assert s["unexpected_predictions"] == ["static.Synth_elsewhere_0_obj_1"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda info, case: info["case_ids"].append("../../x"), "run.json: case_ids: '../../x' is not a safe name"),
        (lambda info, case: info["preprocessing"].update(eval_reso=[0, 5]), "eval_reso must be -1 or [height, width]"),
        (
            lambda info, case: info["preprocessing"].update(eval_length=0),
            "eval_length must be -1 or a positive integer",
        ),
        (lambda info, case: case.update(sizes_wh=[[10, 10]] * 12), "sizes_wh differ from the 256x192"),
        (lambda info, case: case.update(num_frames=99), "num_frames must be"),
    ],
)
def test_bad_public_records_name_the_file(sample_ds, tmp_path, edit, message):
    run = public_tree(sample_ds, tmp_path, 12, -1)
    info = json.loads((run / "run.json").read_text())
    record_path = next(run.glob("*__*/case.json"))
    record = json.loads(record_path.read_text())
    edit(info, record)
    write_json(run / "run.json", info)
    write_json(record_path, record)
    result = score(run, sample_ds)
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"preprocessing": {"eval_length": 16, "eval_reso": [192, 256]}}, (16, (192, 256), None)),
        ({"eval_length": -1, "case_ids": ["dynamic__A_b_0_obj_1"]}, (-1, (-1, -1), ("dynamic__A_b_0_obj_1",))),
        ({"model": "ours"}, None),  # our own run.json: not the public toolkit's
    ],
)
def test_the_public_run_record_is_read_as_the_toolkit_writes_it(info, expected):
    from persistbench.suites.persistbench.predictions import PublicRun

    got = PublicRun.from_run_info(info, Path("run.json"))
    assert (None if got is None else (got.eval_length, got.eval_reso, got.case_ids)) == expected


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({"eval_length": 0}, "eval_length must be -1 or a positive integer"),
        ({"eval_length": 8, "eval_reso": [0, 256]}, "eval_reso must be -1 or"),
        ({"eval_length": 8, "case_ids": ["../x"]}, "run.json: case_ids"),
    ],
)
def test_a_bad_public_run_record_is_refused_by_name(info, message):
    from persistbench.core.errors import PersistbenchError
    from persistbench.suites.persistbench.predictions import PublicRun

    with pytest.raises(PersistbenchError, match=message):
        PublicRun.from_run_info(info, Path("run.json"))
