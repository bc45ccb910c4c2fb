"""``persistbench score``: the shared scoring loop of every suite, and the output files.

The suite (detected from the dataset root) says which cases exist, where a run's prediction of
a case is, and how a case is scored and aggregated; this module owns the rest: the protocol,
which cases are in (coverage: missing, absent and unexpected predictions make a result
*partial*), the case loop (workers, shards, ``--resume``), keeping metrics scored earlier, and
the files ``scores/<protocol>/{<subset>/<case_id>.json, results.json, summary.json,
leaderboard.csv, summary.md}``. Aggregates are recomputed from the per-case files only.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from persistbench import __version__
from persistbench.backends import BackendOptions, BackendUnavailable, check_backend, load
from persistbench.core import calibration
from persistbench.core.case import CaseRef, ScoreContext
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.intervals import (
    DEFAULT_RESAMPLES,
    available_summary,
    cases_block,
    csv_columns,
    md_lines,
    summary_blocks,
)
from persistbench.core.layout import RunLayout
from persistbench.core.options import recorded
from persistbench.core.outputs import RUN, check_output, recognise
from persistbench.core.protocol import Protocol
from persistbench.core.runs import read_run_info, stale_cases
from persistbench.core.suite import Suite
from persistbench.core.suites import SUITES, detect, open_suite
from persistbench.core.timing import phase, today
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor, check_sharding
from persistbench.io.files import check_writable, read_json, write_json, write_text
from persistbench.metrics.registry import METRICS, order


@dataclass(frozen=True)
class ScoreOptions:
    pred: Path
    dataset: Path | str  # a folder, or a URL for suites that read remote data
    protocol: str | None = None  # name or file; None: the suite's default
    metrics: tuple[str, ...] | None = None  # None: the protocol's
    eval_size: tuple[int, int] | None = None  # (height, width); None: the protocol's (PersistBench)
    suite: str | None = None  # None: detected from the dataset root
    suite_options: dict = field(default_factory=dict, hash=False)  # e.g. R2M's {"pairs": FILE}
    allow_partial: bool = False  # set by score(): the suite may summarise a partial run
    backends: BackendOptions = field(default_factory=BackendOptions)  # how the metrics' backends are loaded
    bootstrap: int = DEFAULT_RESAMPLES  # resamples of each summary number's interval; 0: none

    def open_suite(self) -> Suite:
        return open_suite(self.dataset, self.suite, self.suite_options)

    def load_protocol(self, suite: Suite) -> Protocol:
        return suite.load_protocol(self.protocol, {"eval_size": list(self.eval_size)} if self.eval_size else None)


def wanted_metrics(protocol: Protocol, names: tuple[str, ...] | None) -> tuple[str, ...]:
    """The metrics to compute: ``names`` (checked against what the protocol can score) or the protocol's."""
    if names is None:
        return protocol.metrics
    allowed = [m for m in METRICS if m in protocol.metrics or m in protocol.on_request]
    if not names:
        raise UsageError(f"--metrics: no metric named; choose from {','.join(allowed)}")
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise UsageError(
            f"--metrics: unknown metrics {unknown} for protocol {protocol.name}; choose from {','.join(allowed)}"
        )
    return tuple(order(names))


def unavailable_metrics(wanted: tuple[str, ...], backends: BackendOptions) -> dict[str, str]:
    """Metric of ``wanted`` -> why it cannot be computed here: a backend it always needs
    (:attr:`~persistbench.metrics.registry.MetricSpec.backend`) does not load."""
    out = {}
    for m in wanted:
        if METRICS[m].backend:
            try:
                load(METRICS[m].backend, backends)
            except BackendUnavailable as e:
                out[m] = str(e)
    return out


def _context(opts: ScoreOptions, wanted: tuple[str, ...], scores_dir: Path | None = None) -> ScoreContext:
    unavailable = unavailable_metrics(wanted, opts.backends)
    return ScoreContext(wanted, unavailable, dict(opts.suite_options), opts.allow_partial, scores_dir, opts.backends)


@dataclass
class Prepared:
    """What every case of a scoring needs in one worker (:attr:`persistbench.executors.Job.setup`): the suite
    opened on its dataset, the protocol and the score context (the metrics' backends tried once)."""

    suite: Suite
    protocol: Protocol
    ctx: ScoreContext
    run: RunLayout


def prepare(opts: ScoreOptions, wanted: tuple[str, ...]) -> Prepared:
    suite = opts.open_suite()
    protocol = opts.load_protocol(suite)
    run = RunLayout(opts.pred)
    return Prepared(suite, protocol, _context(opts, wanted, run.scores_dir(protocol.dirname)), run)


def _score_one(state: Prepared, key: tuple[str, str], run_info: dict | None) -> None:
    suite, protocol, run = state.suite, state.protocol, state.run
    case = CaseRef(*key)
    with phase("decode"):
        pred = suite.read_prediction(run.root, run_info, case)
    if pred is None:
        raise PersistbenchError(f"{suite.key(case)}: the prediction disappeared while scoring")
    path = run.case_scores(protocol.dirname, *key)
    with phase("metrics"):  # the suite decodes the frames it scores as it goes
        new = protocol.scorer.score_case(suite, case, pred, protocol, state.ctx)
    with phase("write"):
        old = read_json(path) if path.is_file() else None
        if isinstance(old, dict) and all(old.get(k) == new[k] for k in ("protocol_sha256", "prediction_sha256")):
            new = protocol.scorer.merge(new, old)
        write_json(path, new)


def _up_to_date(suite: Suite, run: RunLayout, protocol: Protocol, wanted, run_info, case, unavailable) -> bool:
    """``--resume``: the case's scores exist for this protocol and prediction, with every requested metric (one
    recorded unavailable counts when it is unavailable now for the same reason)."""
    try:
        old = read_json(run.case_scores(protocol.dirname, case.subset, case.case_id))
    except PersistbenchError:
        return False
    pred = suite.read_prediction(run.root, run_info, case)
    if pred is None or old.get("protocol_sha256") != protocol.sha256 or old.get("prediction_sha256") != pred.digest:
        return False
    before = old.get("unavailable") if isinstance(old.get("unavailable"), dict) else {}
    optional = {m for m in wanted if METRICS[m].backend}
    same = all(before.get(m) == unavailable.get(m) for m in optional)
    have = protocol.scorer.scored_metrics(old) | {m for m in optional if m in unavailable}
    return same and set(wanted) <= have


@dataclass(frozen=True)
class Coverage:
    """Which cases a run and its dataset have in common; anything else makes the result partial."""

    present: list  # predicted and on disk: scored
    missing: list[str]  # in the dataset, not predicted
    absent: list[str]  # recorded in the dataset, but its data is gone
    unexpected: list[str]  # predicted, not a case of the dataset

    @property
    def partial(self) -> bool:
        return bool(self.missing or self.absent or self.unexpected)

    def problems(self) -> list[str]:
        def few(ids: list[str]) -> str:
            return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")

        out = []
        if self.missing:
            out.append(f"no prediction for {few(self.missing)}")
        if self.absent:
            out.append(f"the dataset lacks the folder of {few(self.absent)}")
        if self.unexpected:
            out.append(f"predictions for cases the dataset does not have: {few(self.unexpected)}")
        return out


def coverage(suite: Suite, run: RunLayout, run_info: dict | None, cases: list, everything: list) -> Coverage:
    """Compare the selected ``cases`` (of ``everything`` the dataset lists) with what the run predicted."""
    known = {suite.key(c) for c in everything}
    absent = [suite.key(c) for c in cases if not suite.on_disk(c)]
    missing = [
        suite.key(c)
        for c in cases
        if suite.key(c) not in absent and suite.read_prediction(run.root, run_info, c) is None
    ]
    present = [c for c in cases if suite.key(c) not in set(absent) | set(missing)]
    return Coverage(present, missing, absent, sorted(suite.predicted(run.root, run_info) - known))


def check_cases_unchanged(suite: Suite, run: RunLayout, cases: list, recorded: str, fingerprint: str) -> None:
    """The dataset is not the one the run recorded (it grew, or some case changed): the run stays valid for
    each case whose content is as it was predicted on; a changed case is named."""
    stale = stale_cases(suite, run, cases)
    if stale is None:
        raise PersistbenchError(
            f"{run.run_json}: predicted on a dataset with fingerprint {recorded[:12]}, "
            f"but {suite.dataset_id()} has {fingerprint[:12]}; pass the dataset the run was made on"
        )
    if stale:
        shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
        raise PersistbenchError(
            f"{run.root}: {len(stale)} case(s) changed in {suite.dataset_id()} since they were predicted: {shown}; "
            f"predict them again with persistbench infer --resume --output {run.root} ..."
        )


def check_pred(pred: str | Path) -> None:
    """Refuse a ``--pred`` folder that holds a dataset (or anything else this toolkit writes) instead of a run."""
    held = recognise(pred)
    if held not in (None, RUN):
        raise UsageError(f"{pred}: --pred holds {held}, not a run; pass the folder `persistbench infer` wrote")


def dataset_of(pred: str | Path) -> Path | str:
    """The dataset a run was predicted on, from its ``run.json``: a folder, or an ``hf://`` repository (read
    through the Hub endpoint the user configured). A usage error when it names none, or an ``http(s)`` URL:
    a shared run must not make ``score`` contact a server the user did not name."""
    check_pred(pred)
    info = read_run_info(RunLayout(Path(pred)))
    if info is None:
        raise UsageError(f"{pred}: no run.json (another toolkit's predictions?): pass --dataset")
    root = info.get("dataset", {}).get("root") if isinstance(info.get("dataset"), dict) else None
    if not isinstance(root, str):
        raise UsageError(f"{pred}/run.json names no dataset: pass --dataset")
    if root.startswith("hf://"):
        return root
    if "://" in root:
        raise UsageError(f"{pred}/run.json names the server {root[:200]}; to read it, pass --dataset {root[:200]}")
    return Path(root)


def recorded_options(run_info: dict | None, run: RunLayout, suite: str) -> dict:
    """The case options that selected a run's cases (``run.json``'s ``dataset.options``, checked by the
    declarations of ``suite``), so that scoring opens the dataset as inference did."""
    dataset = (run_info or {}).get("dataset")
    values = dataset.get("options", {}) if isinstance(dataset, dict) else {}
    return recorded(SUITES[suite].option_specs, values, f"{run.run_json}: dataset.options")


def score(
    opts: ScoreOptions,
    selection: Selection | None = None,
    executor: Executor | None = None,
    *,
    resume: bool = False,
    allow_partial: bool = False,
    aggregate_only: bool = False,
    progress: bool = True,
) -> RunResult:
    """Score every case of the dataset that the run predicted (of ``selection``: its shard) on ``executor``
    (default: serial); write per-case files and aggregates. The result's ``value`` is the summary. ``infer``
    takes the same ``(options, selection, executor)`` and flags.

    With ``selection.shard``, only that shard's cases are scored and no aggregates are written (``value`` is None): run
    ``aggregate_only`` once every shard is done. When a case fails, no aggregates are written either. Without
    ``resume`` every selected case is scored again; with it, cases whose scores are up to date are kept.
    Metrics not requested now but scored before for the same prediction and protocol are kept.
    """
    selection = selection or Selection()
    shard = selection.shard
    check_sharding(shard, aggregate_only)
    check_pred(opts.pred)
    run = RunLayout(opts.pred)
    run_info = read_run_info(run)
    name = opts.suite or detect(opts.dataset)
    opts = replace(opts, suite=name, suite_options={**recorded_options(run_info, run, name), **opts.suite_options})
    suite = opts.open_suite()
    protocol = opts.load_protocol(suite)
    asked = opts.metrics  # named with --metrics (None: the protocol's)
    wanted = wanted_metrics(protocol, opts.metrics)
    check_output(run.scores_root, inputs=[("dataset", opts.dataset)], accepts=None, option="--pred")
    check_writable(run.scores_root)
    fingerprint = suite.fingerprint()
    recorded = (
        (run_info or {}).get("dataset", {}).get("fingerprint")
        if isinstance((run_info or {}).get("dataset"), dict)
        else None
    )
    everything = suite.cases()
    if not everything:
        raise PersistbenchError(f"{suite.dataset_id()}: no cases to score against")
    if recorded and recorded != fingerprint:
        check_cases_unchanged(suite, run, everything, recorded, fingerprint)
    cov = coverage(suite, run, run_info, selection.apply(everything, lambda c: c.subset), everything)
    if cov.partial and not allow_partial:
        raise PersistbenchError(f"{run.root}: {'; '.join(cov.problems())}; --allow-partial scores the rest")
    opts = replace(opts, metrics=wanted, allow_partial=allow_partial)
    result = RunResult("score", [])
    if not aggregate_only:
        missing = []  # every backend that cannot run, in one line, before any case
        for name in protocol.scorer.backends_needed(protocol, wanted):
            try:
                check_backend(name, opts.backends)
            except BackendUnavailable as e:
                missing.append(str(e))
        if len(missing) == 1:
            raise BackendUnavailable(missing[0])
        if missing:
            raise BackendUnavailable(f"{len(missing)} backends cannot run: " + "; ".join(missing))
        if opts.backends.judge is not None:
            calibrate(suite, protocol, run, opts, wanted)
        now = unavailable_metrics(wanted, opts.backends) if resume else {}
        done = (
            {suite.key(c) for c in cov.present if _up_to_date(suite, run, protocol, wanted, run_info, c, now)}
            if resume
            else set()
        )
        keys = {(c.subset, c.case_id): suite.key(c) for c in cov.present}
        rescored = (
            0 if resume else sum(run.case_scores(protocol.dirname, c.subset, c.case_id).is_file() for c in cov.present)
        )
        job = Job(
            "score",
            functools.partial(_score_one, run_info=run_info),
            run.scores_state_dir(protocol.dirname),
            setup=functools.partial(prepare, opts, wanted),
        )
        result = (executor or SerialExecutor()).run(
            job,
            [(c.subset, c.case_id) for c in cov.present],
            key_of=keys.__getitem__,
            is_done=lambda k: keys[k] in done,
            progress=progress,
        )
    if shard is not None or not result.ok:
        return result
    results = [read_json(run.case_scores(protocol.dirname, c.subset, c.case_id)) for c in cov.present]
    header = ScoresHeader.of(run, run_info, suite, protocol, fingerprint, results, cov)
    cases = [suite.key(c) for c in cov.present]
    ctx = _context(opts, ())
    result.value = write_aggregates(run, suite, protocol, header, results, ctx, cases, opts.bootstrap)
    if not aggregate_only and rescored:  # said, so that a second score without --resume is no surprise
        result.value["rescored"] = rescored
    never = {m: header.unavailable[m] for m in asked or () if m in never_computed(results)}
    if never:  # named with --metrics and without a value in any case: the command fails, saying why
        result.value["failed_metrics"] = {**never, **(result.value.get("failed_metrics") or {})}
    return result


def calibrate(suite: Suite, protocol: Protocol, run: RunLayout, opts: ScoreOptions, wanted: tuple[str, ...]) -> None:
    """Ask the judge its calibration battery before any case (:mod:`.calibration`) and keep the result in the
    run's scores folder (the summary reports the last); stop the run when the judge is below
    ``--judge-min-accuracy`` (one line naming the figure) unless ``--judge-force``."""
    from persistbench.backends.judge import Judge

    items = protocol.scorer.judge_battery(suite, protocol, wanted)
    judge_opts = opts.backends.judge
    if not items or judge_opts is None:
        return
    found = calibration.ask(Judge(judge_opts, cache=False), items)
    line = calibration.check(found, judge_opts.min_accuracy, judge_opts.force)
    found["forced"] = bool(line)
    calibration.record(run.scores_dir(protocol.dirname), found, today())
    if line and not judge_opts.force:
        raise PersistbenchError(f"{run.scores_dir(protocol.dirname) / calibration.BATTERY}: {line}")


def never_computed(results: list[dict]) -> set[str]:
    """The metrics every case's record states unavailable (none when there are no cases)."""
    sets = [set(r.get("unavailable") or {}) for r in results]
    return set.intersection(*sets) if sets else set()


@dataclass
class ScoresHeader:
    """What every aggregate file of a scoring says about itself (the first keys of ``results.json`` and
    ``summary.json``); the scorer's ``summarise`` adds fields of its own (classic-v1: ``mask_source``)."""

    run: str
    model: str
    oracle: bool
    protocol: str
    protocol_sha256: str
    suite: str  # the suite and the scorer that wrote the file (how report finds them again)
    scorer: str
    dataset_fingerprint: str
    partial: bool
    missing_cases: list[str]
    cases_missing_from_dataset: list[str]
    unexpected_predictions: list[str]
    scores_dir: str
    unavailable: dict[str, str]  # metric -> why it was not computed (the least of the cases' reasons)
    toolkit_version: str
    problems: list[str] = field(default_factory=list)  # the coverage problems, for summary.md

    @classmethod
    def of(cls, run, run_info, suite, protocol, fingerprint, results, cov) -> ScoresHeader:
        reasons: dict[str, set[str]] = {}
        for r in results:
            for m, why in (r.get("unavailable") or {}).items():
                reasons.setdefault(m, set()).add(why)
        return cls(
            run=run.root.name,
            model=(run_info or {}).get("model", suite.external_label),
            oracle=bool((run_info or {}).get("oracle")),
            protocol=protocol.name,
            protocol_sha256=protocol.sha256,
            suite=suite.name,
            scorer=protocol.scorer.name,
            dataset_fingerprint=fingerprint,
            partial=cov.partial,
            missing_cases=cov.missing,
            cases_missing_from_dataset=cov.absent,
            unexpected_predictions=cov.unexpected,
            scores_dir=protocol.dirname,
            unavailable={m: min(reasons[m]) for m in order(list(reasons))},
            toolkit_version=__version__,
            problems=cov.problems(),
        )

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("problems")
        return out


def write_aggregates(
    run: RunLayout,
    suite: Suite,
    protocol: Protocol,
    header: ScoresHeader,
    results: list[dict],
    ctx: ScoreContext,
    keys: list[str],
    resamples: int = DEFAULT_RESAMPLES,
) -> dict:
    """``results.json``, ``summary.json``, ``leaderboard.csv`` and ``summary.md`` from the per-case results
    (of the cases ``keys``), each number with its interval over ``resamples`` resamples (:mod:`.intervals`).

    A scorer's ``summarise`` may name reasons its numbers are partial beyond the cases' coverage
    (``partial_reasons`` in its header fields: R2M-Bench's Overall over some families); ``partial`` is then
    true, and said in every output, as ``oracle`` is for a reference run (a scorer may set it too)."""
    extra, body = protocol.scorer.summarise(suite, results, protocol, ctx)
    reasons = list(extra.pop("partial_reasons", []))
    head = {**header.to_json(), **extra}
    head["partial"] = header.partial or bool(reasons)
    summary = {**head, **body}
    manifest = suite.availability()
    summary["cases_behind"] = cases_block(keys, None if manifest is None else available_summary(manifest))
    judged = calibration.latest(run.scores_dir(protocol.dirname))
    if judged is not None:  # only runs whose judge answered a battery
        summary["judge_calibration"] = judged
    estimands = protocol.scorer.estimands(results, summary) if results else None
    summary |= summary_blocks(estimands, protocol.sha256, resamples)
    write_json(run.results_json(protocol.dirname), {**head, "cases": results})
    write_json(run.summary_json(protocol.dirname), summary)
    table, columns = protocol.scorer.tables(summary)
    source = summary.get("mask_source")  # classic-v1: where the scored masks came from
    row = {
        "run": header.run,
        "model": header.model,
        "oracle": head["oracle"],
        "partial": head["partial"],
        "protocol": protocol.name,
        "protocol_sha256": protocol.sha256[:12],
        "dataset_fingerprint": header.dataset_fingerprint[:12],
        "toolkit_version": header.toolkit_version,
        **({"mask_source": " ".join(source) if isinstance(source, list) else source} if source else {}),
        **columns,
        **csv_columns(summary),
    }
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
    writer.writeheader()
    writer.writerow(row)
    write_text(run.leaderboard_csv(protocol.dirname), buf.getvalue())
    masks = f", masks: {', '.join(source) if isinstance(source, list) else source}" if source else ""
    lines = [
        f"# {header.run} ({header.model}), protocol {protocol.name} ({protocol.sha256[:12]})",
        "",
        f"dataset fingerprint {header.dataset_fingerprint[:12]}, persistbench {header.toolkit_version}{masks}",
        "",
    ]
    if head["oracle"] and summary.get("reference"):
        lines.append(f"**reference run: {summary['reference']}; it is not a result.**\n")
    elif head["oracle"]:
        lines.append("**oracle run: copies the ground truth; it checks the scorer and is not a result.**\n")
    if header.partial:
        lines.append(f"**partial: {'; '.join(header.problems)}; those cases were not scored.**\n")
    for why in reasons:
        lines.append(f"**partial: {why}.**\n")
    for m, why in header.unavailable.items():
        lines.append(f"**{m} unavailable: {why}**\n")
    lines += calibration.md_lines(summary.get("judge_calibration"))
    write_text(run.summary_md(protocol.dirname), "\n".join(lines + table + md_lines(summary)) + "\n")
    protocol.scorer.write_files(summary, results, run.scores_dir(protocol.dirname))
    return summary
