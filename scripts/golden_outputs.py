"""Checksums of every file PersistBench's chain writes for the small synthetic fixture.

``tests/suites/persistbench/test_golden.py`` rebuilds the chain (reconstruct -> infer hold/reproject/oracle -> score) and
compares with ``tests/data/golden_outputs.json``: the dataset and the predictions (integer pixels,
decisions) byte for byte, the scores (floats) number by number to ``TOLERANCE``, since their last bits
depend on the CPU's SIMD level (docs/data-format.md, "What is bit-identical"). Regenerate only when an
output changes on purpose:

    python scripts/golden_outputs.py tests/data/golden_outputs.json
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path

from persistbench.core.infer import InferOptions, infer
from persistbench.core.score import ScoreOptions, score
from persistbench.io.files import dump_json, write_text
from persistbench.suites.persistbench.build.recipes import load_recipes
from persistbench.suites.persistbench.build.reconstruct import clip_frames, reconstruct_case
from persistbench.suites.persistbench.synth import SynthConfig, generate

CONFIG = SynthConfig(scenes=2, seed=3, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)
MODELS = ("hold", "reproject", "oracle")
METRICS = ("psnr", "ssim", "iou", "presence", "continuity")  # LPIPS needs weights: not in the fixture
# |a - b| <= ABS + REL * max(|a|, |b|) for every number of a score file (observed across SIMD levels: 5e-15).
TOLERANCE = {"rel": 1e-9, "abs": 1e-12}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def _digest(path: Path) -> str:
    if path.name == "run.json":  # the start time and the absolute dataset path differ between runs
        info = json.loads(path.read_text())
        info.pop("started")
        info["dataset"].pop("root")
        return hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_score(path: str) -> bool:
    """Whether an output of the chain holds float scores (compared to a tolerance, not by bytes)."""
    return "/scores/" in path


def _close(x: float, y: float) -> bool:
    return x == y or abs(x - y) <= TOLERANCE["abs"] + TOLERANCE["rel"] * max(abs(x), abs(y))


def _same_values(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and _close(float(a), float(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same_values(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_values, a, b))
    return type(a) is type(b) and a == b


def same_numbers(a: str, b: str) -> bool:
    """Whether score files ``a`` and ``b`` are equal but for floats within :data:`TOLERANCE` of each other.

    JSON is compared value by value (strings, keys and integers exactly); other text (CSV, Markdown)
    token by token, its numbers to the tolerance.
    """
    try:
        return _same_values(json.loads(a), json.loads(b))
    except ValueError:
        pass
    if _NUMBER.split(a) != _NUMBER.split(b):
        return False
    return all(map(_close, map(float, _NUMBER.findall(a)), map(float, _NUMBER.findall(b))))


def chain_outputs(work: Path) -> dict[str, str]:
    """Run the chain in ``work``; return {relative path: sha256} of the dataset's and the runs' files."""
    generate(work / "synth", CONFIG)
    for recipe in load_recipes(work / "synth" / "recipes.jsonl"):
        clip = work / "synth" / "sources" / f"{recipe.source.id}.mp4"
        reconstruct_case(recipe, clip_frames(recipe, clip), work / "dataset")
    for model in MODELS:
        run = work / "runs" / model
        outcomes = infer(InferOptions(dataset=work / "dataset", output=run, model=model), progress=False)
        if any(o.status != "done" for o in outcomes):
            raise SystemExit(f"infer {model} failed: {outcomes}")
        score(ScoreOptions(pred=run, dataset=work / "dataset", metrics=METRICS), progress=False)
    return {
        p.relative_to(work).as_posix(): _digest(p)
        for top in ("dataset", "runs")
        for p in sorted((work / top).rglob("*"))
        if p.is_file() and ".state" not in p.parts
    }


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/golden_outputs.json")
    with tempfile.TemporaryDirectory() as tmp:
        sums = chain_outputs(Path(tmp))
        scores = {p: (Path(tmp) / p).read_text() for p in sums if is_score(p)}
    exact = {p: h for p, h in sums.items() if not is_score(p)}
    write_text(target, dump_json({"files": exact, "scores": scores, "tolerance": TOLERANCE}))
    print(f"{len(exact)} checksums and {len(scores)} score files -> {target}")


if __name__ == "__main__":
    main()
