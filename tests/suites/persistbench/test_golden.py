"""PersistBench's outputs are those recorded: exact files byte for byte, score files to a stated tolerance."""

from __future__ import annotations

import importlib.util
import json

import pytest
from fakes import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("golden_outputs", ROOT / "scripts" / "golden_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_persistbench_outputs_unchanged(tmp_path):
    script = _script()
    golden = json.loads((ROOT / "tests" / "data" / "golden_outputs.json").read_text())
    got = script.chain_outputs(tmp_path)
    assert sorted(got) == sorted([*golden["files"], *golden["scores"]])
    changed = [p for p, digest in golden["files"].items() if got[p] != digest]
    assert not changed, f"{len(changed)} exact file(s) differ, e.g. {changed[:5]}"
    assert golden["tolerance"] == script.TOLERANCE
    drifted = [p for p, text in golden["scores"].items() if not script.same_numbers(text, (tmp_path / p).read_text())]
    assert not drifted, f"{len(drifted)} score file(s) differ beyond {script.TOLERANCE}, e.g. {drifted[:5]}"


def test_number_comparison_is_strict_outside_the_tolerance():
    same = _script().same_numbers
    assert same('{"psnr": 26.884970983327996}', '{"psnr": 26.884970983328001}')
    assert not same('{"psnr": 26.88497098}', '{"psnr": 26.88497198}')
    assert not same('{"psnr": 1.0}', '{"ssim": 1.0}')
    assert not same("a,1,2", "a,1")
    assert not same('{"sha": "6e68240"}', '{"sha": "6e68241"}')  # digits inside a hash are text
