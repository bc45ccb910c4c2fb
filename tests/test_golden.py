"""PersistBench's outputs are byte-identical to those recorded before the core became suite-agnostic."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("golden_outputs", ROOT / "scripts" / "golden_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_persistbench_outputs_unchanged(tmp_path):
    want = json.loads((ROOT / "tests" / "data" / "golden_outputs.json").read_text())["files"]
    got = _script().chain_outputs(tmp_path)
    assert sorted(got) == sorted(want)
    changed = [p for p in want if got[p] != want[p]]
    assert not changed, f"{len(changed)} file(s) differ, e.g. {changed[:5]}"
