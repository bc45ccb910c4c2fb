"""A toy suite that plugs into persistbench from outside the package, through the entry point group
``persistbench.suites`` (``toysuite-0.1.dist-info/entry_points.txt`` beside this file).

Its dataset is ``toy.json``: ``{"levels": [64, 128, 192], "size": [h, w]}``, one case per grey level.
A model gets two frames of the case's constant grey and returns two frames; protocol ``toy-v1`` scores
each returned frame's PSNR against the constant image (capped), and the run's mean over cases.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from persistbench.core.case import CaseRef, Prediction, Request
from persistbench.core.layout import RunLayout
from persistbench.core.markup import tag
from persistbench.core.protocol import Scorer
from persistbench.core.records import CaseScores
from persistbench.core.runs import case_record
from persistbench.core.schema import metric_list, number
from persistbench.core.suite import Suite
from persistbench.core.synth import synth_option
from persistbench.io.files import read_json, write_json
from persistbench.io.images import read_image
from persistbench.metrics.frame import masked_psnr

DATASET = "toy.json"


class ConstantPsnr(Scorer):
    name = "constant-psnr"
    schema = {"metrics": metric_list(("psnr",)), "cap_db": number(1.0, 1000.0)}

    def score_case(self, suite, case, pred, protocol, ctx) -> dict:
        truth = suite.image(case)
        everywhere = np.ones(truth.shape[:2], bool)
        values = [masked_psnr(read_image(f), truth, everywhere, protocol.config["cap_db"]) for f in pred.files]
        common = CaseScores.common(protocol, ctx.wanted, ctx.unavailable, pred.digest)
        return {**common, "case": case.case_id, "metrics": {"psnr": values}}

    def merge(self, new: dict, old: dict) -> dict:
        return new

    def summarise(self, suite, results, protocol, ctx) -> tuple[dict, dict]:
        means = [float(np.mean(r["metrics"]["psnr"])) for r in results]
        return {}, {"cases": len(results), "psnr": float(np.mean(means))}

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return ["| cases | psnr |", "| --- | --- |", f"| {summary['cases']} | {summary['psnr']:.4f} |"], {
            "psnr": f"{summary['psnr']:.4f}"
        }

    def report_steps(self, runs: list[dict]) -> int:
        return 0

    def report_sections(self, runs, advance):
        rows = [tag("tr", tag("td", r["name"]), tag("td", f"{r['summary']['psnr']:.4f}")) for r in runs]
        return "PSNR against the constant grey image.", [tag("h2", "Leaderboard"), tag("table", *rows)], []


class Toy(Suite):
    name = "toy"
    title = "Toy"
    subsets = ("grey",)
    scorers = {"toy-v1": ConstantPsnr()}
    protocol_dir = Path(__file__).parent
    option_specs = (synth_option("size", "Frame size WxH; default 32x24."),)

    @classmethod
    def detect(cls, root: Path) -> bool:
        return (Path(root) / DATASET).is_file()

    def _data(self) -> dict:
        return read_json(self.root / DATASET)

    def cases(self) -> list[CaseRef]:
        return [CaseRef("grey", f"level{v:03d}") for v in self._data()["levels"]]

    def fingerprint(self) -> str:
        return hashlib.sha256((self.root / DATASET).read_bytes()).hexdigest()

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        levels = self._data()["levels"]
        problems = [f"{self.root / DATASET}: level {v} is not in [0, 255]" for v in levels if not 0 <= v <= 255]
        return problems, len(levels)

    def image(self, case: CaseRef) -> np.ndarray:
        """The case's constant frame, ``(h, w, 3)`` uint8."""
        h, w = self._data()["size"]
        return np.full((h, w, 3), int(case.case_id.removeprefix("level")), np.uint8)

    def request(self, case, num_frames, resolution, oracle) -> Request:
        frame = self.image(case)
        return Request(
            fields={
                "uid": case.case_id,
                "input_frames": np.stack([frame, frame]).astype(np.float32) / 255.0,
                "n_targets": 2,
            },
            n_frames=2,
            size=frame.shape[:2],
            record={"size": [frame.shape[1], frame.shape[0]]},
        )

    def read_prediction(self, run, run_info, case) -> Prediction | None:
        layout = RunLayout(Path(run))
        info = case_record(layout, case.subset, case.case_id)
        if info is None:
            return None
        return Prediction(
            tuple(sorted(layout.frames_dir(case.subset, case.case_id).glob("*.png"))),
            layout.case_json(case.subset, case.case_id),
        )

    def predicted(self, run, run_info) -> set[str]:
        return {f"grey.{p.name}" for p in (Path(run) / "grey").glob("*") if (p / "case.json").is_file()}

    @classmethod
    def synthesize(cls, out: Path, config_file, options: dict, progress: bool = True) -> str:
        w, h = options.get("size", (32, 24))
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / DATASET, {"levels": [64, 128, 192], "size": [h, w]})
        return f"wrote 3 cases: {out / DATASET}"
