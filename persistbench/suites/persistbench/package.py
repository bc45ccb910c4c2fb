"""``persistbench package``: a scored ``paper-v3`` run as a leaderboard submission, and the check of one.

:func:`package` reads the run's ``paper-v3`` scores (``scores/paper-v3/results.json``), its predictions and the
dataset's ``data.db``, refuses what the leaderboard would refuse (or must not receive: an oracle run, scores
of a changed protocol, cases without a judgment) and writes :mod:`submission`'s ZIP. :func:`check` takes a ZIP
and the run it claims to come from, and says whether the claims follow from the predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from persistbench.core.case import CaseRef
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.core.runs import read_run_info
from persistbench.io.files import read_json, sha256_file
from persistbench.suites.persistbench import submission
from persistbench.suites.persistbench.index import read_index
from persistbench.suites.persistbench.paper import PAPER_METRICS, PROCEDURE
from persistbench.suites.persistbench.suite import PersistBench

PROTOCOL = "paper-v3"


@dataclass(frozen=True)
class RunScores:
    """What a submission is made of: the run, its suite and its ``paper-v3`` scores."""

    run: RunLayout
    info: dict | None
    suite: PersistBench
    header: dict  # results.json without its cases
    records: list[dict]

    @classmethod
    def open(cls, pred: Path, dataset: Path | None) -> RunScores:
        from persistbench.core.score import dataset_of

        run = RunLayout(pred)
        path = run.results_json(PROTOCOL)
        if not path.is_file():
            raise PersistbenchError(
                f"{path}: not there; score the run first: persistbench score --pred {pred} --protocol {PROTOCOL}"
            )
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise PersistbenchError(f"{path}: not a scores file (no cases)")
        header = {k: v for k, v in data.items() if k != "cases"}
        shipped = PersistBench.load_protocol(PROTOCOL)
        if header.get("procedure") != PROCEDURE or header.get("protocol_sha256") != shipped.sha256:
            raise PersistbenchError(
                f"{path}: scored by protocol sha256 {str(header.get('protocol_sha256'))[:12]}, not the shipped "
                f"{PROTOCOL} ({shipped.sha256[:12]}): only the published protocol's scores can be submitted"
            )
        suite = PersistBench(dataset if dataset is not None else dataset_of(pred))
        return cls(run, read_run_info(run), suite, header, data["cases"])

    def uid(self, record: dict) -> str:
        return f"{record['subset']}__{record['uid']}"

    def prediction_files(self, subset: str, case_id: str) -> dict[str, str] | None:
        """File name -> sha256 of the case's prediction (its frames and, where there is one, its record)."""
        pred = self.suite.read_prediction(self.run.root, self.info, CaseRef(subset, case_id))
        if pred is None:
            return None
        files = {f.name: sha256_file(f) for f in pred.files}
        if pred.record is not None:
            files[pred.record.name] = sha256_file(pred.record)
        return files

    def preprocessing(self) -> dict:
        """``{eval_length, eval_reso}`` of the run's inputs: the public run's own, or our run's sampling."""
        info = self.info or {}
        if isinstance(info.get("preprocessing"), dict):
            return info["preprocessing"]
        sampling = info.get("sampling") or {}
        reso = sampling.get("resolution", [-1, -1])
        return {
            "eval_length": sampling.get("num_frames", -1),
            "eval_reso": -1 if list(reso) == [-1, -1] else list(reso),
        }


def case_fields(rows: list[dict]) -> dict[str, dict]:
    """uid -> the public result's per-case fields from the dataset's ``data.db`` rows."""
    return {f"{r.get('subset')}__{r.get('uid')}": {k: r.get(k) for k in submission.CASE_FIELDS} for r in rows}


def package(
    pred: Path, output: Path, name: str | None, allow_subset: bool, dataset: Path | None = None
) -> submission.Submission:
    """Write the submission ZIP of the scored run ``pred`` to ``output``; refuse, in one line naming what, a run
    the leaderboard would refuse: partial or an oracle (unless ``allow_subset``: a diagnostic package), failed
    judgments, scores of a changed protocol."""
    scores = RunScores.open(pred, dataset)
    where = scores.run.results_json(PROTOCOL)
    h = scores.header
    if h.get("oracle") and not allow_subset:
        raise PersistbenchError(
            f"{where}: an oracle run (it copies the ground truth): not a result to submit (--allow-subset packages "
            "it for diagnostics)"
        )
    if h.get("partial") and not allow_subset:
        missing = len(h.get("missing_cases") or [])
        raise PersistbenchError(
            f"{where}: partial scores ({missing} cases of the dataset without a prediction); the leaderboard "
            "requires every case (--allow-subset packages the scored ones for diagnostics)"
        )
    if not scores.records:
        raise PersistbenchError(f"{where}: no scored case")
    for r in scores.records:
        if r.get("protocol_sha256") != h.get("protocol_sha256"):
            raise PersistbenchError(f"{where}: {scores.uid(r)}: scored under another protocol; score the run again")
        if r["judge"].get("failed"):
            raise PersistbenchError(
                f"{where}: {scores.uid(r)}: object permanence has no judgment ({r['judge'].get('reason')}); "
                f"persistbench score --pred {pred} --protocol {PROTOCOL} --resume asks again"
            )
        missing = [m for m in PAPER_METRICS if m not in r.get("metrics", {})]
        if missing:
            raise PersistbenchError(f"{where}: {scores.uid(r)}: {', '.join(missing)} not scored")
    files = {}
    for r in scores.records:
        files[scores.uid(r)] = scores.prediction_files(r["subset"], r["uid"])
        if files[scores.uid(r)] is None:
            raise PersistbenchError(f"{where}: {scores.uid(r)}: the run has no prediction of this case any more")
    sub = submission.build(
        name or (scores.info or {}).get("name") or scores.run.root.name,
        scores.records,
        files,
        case_fields(read_index(scores.suite.root)),
        h,
        scores.suite.load_protocol(PROTOCOL).config,
        scores.preprocessing(),
        submission.canonical_sha256(scores.info or {}),
        _available(scores.suite.availability()),
    )
    try:
        submission.validate(sub.run, sub.results, sub.summary, allow_subset)
    except ValueError as e:
        raise PersistbenchError(f"{where}: {e}") from None
    submission.write(sub, output)
    return sub


def _available(manifest: dict | None) -> dict | None:
    from persistbench.core.intervals import available_summary

    return None if manifest is None else available_summary(manifest)


def check(zip_path: Path, pred: Path, sample: int, seed: str | None, tolerance: float, backends, dataset=None):
    """``(problems, checks)``: what in the ZIP does not follow from the run ``pred`` (see
    :func:`submission.check`), ``sample`` cases re-scored with ``backends``."""
    from persistbench.suites.persistbench import paper

    sub = submission.read(zip_path)
    scores = RunScores.open(pred, dataset)
    protocol = scores.suite.load_protocol(PROTOCOL)
    evaluation_id = submission.canonical_sha256(sub.run)
    fields = case_fields(read_index(scores.suite.root))

    def split(uid: str) -> tuple[str, str]:
        subset, _, case_id = uid.partition("__")
        return subset, case_id

    def rescore(uid: str) -> dict:
        subset, case_id = split(uid)
        pred_ = scores.suite.read_prediction(scores.run.root, scores.info, CaseRef(subset, case_id))
        if pred_ is None:
            raise PersistbenchError(f"{pred}: no prediction of {uid}")
        record = paper.score_case(scores.suite.case(subset, case_id), pred_, protocol, protocol.metrics, backends)
        return submission.result_entry(record.to_json(), fields.get(uid, {}), evaluation_id, protocol.config)

    uids = submission.sample_uids(list(sub.manifest["cases"]), sample, seed or sha256_file(zip_path))
    return submission.check(sub, lambda uid: scores.prediction_files(*split(uid)), rescore, uids, tolerance)
