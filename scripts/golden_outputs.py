"""Checksums of every file PersistBench's chain writes for the small synthetic fixture.

The redesign into suites must not change one byte of PersistBench's outputs: ``tests/test_golden.py``
rebuilds the chain (reconstruct -> infer hold/reproject/oracle -> score) and compares with
``tests/data/golden_outputs.json``. Regenerate only when an output changes on purpose:

    python scripts/golden_outputs.py tests/data/golden_outputs.json
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from persistbench.files import dump_json, write_text
from persistbench.infer import InferOptions, infer
from persistbench.recipes import load_recipes
from persistbench.reconstruct import clip_frames, reconstruct_case
from persistbench.score import ScoreOptions, score
from persistbench.synth import SynthConfig, generate

CONFIG = SynthConfig(scenes=2, seed=3, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)
MODELS = ("hold", "reproject", "oracle")
METRICS = ("psnr", "ssim", "iou", "presence", "continuity")  # LPIPS needs weights: not in the fixture


def _digest(path: Path) -> str:
    if path.name == "run.json":  # the start time and the absolute dataset path differ between runs
        info = json.loads(path.read_text())
        info.pop("started")
        info["dataset"].pop("root")
        return hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
    write_text(target, dump_json({"files": sums}))
    print(f"{len(sums)} checksums -> {target}")


if __name__ == "__main__":
    main()
