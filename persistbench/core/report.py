"""``persistbench report``: one self-contained HTML file comparing scored runs of one suite.

The page is the runs' leaderboard and provenance, with the warnings that say why numbers are not
comparable (different protocol hash or dataset, partial runs); what the leaderboard shows and which
figures follow are the scorer's (:meth:`~persistbench.core.protocol.Scorer.report_sections`), found from the
summaries' header (``suite``, ``scorer``). Charts
use matplotlib (the ``report`` extra); every image is inlined as a PNG data URI.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from persistbench.core import stats as st
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.figures import run_colour, table
from persistbench.core.intervals import available_line
from persistbench.core.layout import RunLayout
from persistbench.core.markup import Markup, join, page, tag
from persistbench.executors import read_records
from persistbench.io.files import read_json, write_text


def _load_run(path: Path, protocol: str | None) -> dict:
    run = RunLayout(path)
    if protocol is None:
        scored = sorted(d.name for d in (path / "scores").glob("*") if os.path.lexists(d / "summary.json"))
        if len(scored) > 1:
            raise PersistbenchError(f"{path}: scored with several protocols ({', '.join(scored)}); pass --protocol")
        if not scored:
            raise PersistbenchError(f"{path}: not scored; run persistbench score --pred {path}")
        protocol = scored[0]
    files = (run.summary_json(protocol), run.results_json(protocol))
    if not all(os.path.lexists(f) for f in files):
        raise PersistbenchError(f"{path}: not scored with protocol {protocol}; run persistbench score --pred {path}")
    summary, results = (read_json(f) for f in files)  # there but unreadable: the reader's one line
    if not (isinstance(summary, dict) and isinstance(results, dict)):
        raise PersistbenchError(f"{path}: summary.json and results.json must hold JSON objects")
    return {
        "name": path.name,
        "path": path,
        "layout": run,
        "summary": summary,
        "results": results,
        "info": read_json(run.run_json) if os.path.lexists(run.run_json) else None,
    }


def _load(path: Path, protocol: str | None) -> list[dict]:
    """The scored run at ``path``, or the runs a suite reads from another toolkit's result files there."""
    from persistbench.core.suites import SUITES

    if path.parent.name == "scores" and (path / "summary.json").is_file():  # RUN/scores/<protocol> given
        return [_load_run(path.parent.parent, protocol or path.name)]
    if not (path / "scores").is_dir():
        for name in SUITES:
            for scorer in dict.fromkeys(SUITES[name].scorers.values()):
                found = scorer.foreign_results(SUITES[name], path)
                if found is not None:
                    return found
    return [_load_run(path, protocol)]


def load_runs(
    run_dirs: list[str | Path], protocol: str | None = None, sheets: tuple[str, ...] | None = None
) -> list[dict]:
    """The scored runs at ``run_dirs`` (or the runs another toolkit's result files there hold), each named
    uniquely and coloured (:func:`name_runs`), marked for per-case figures when ``sheets`` names it (None:
    every run)."""
    runs = name_runs([run for p in run_dirs for run in _load(Path(p), protocol)])
    if sheets is not None:
        known = {r["name"] for r in runs} | {str(r.get("path")) for r in runs}
        unknown = [s for s in sheets if s not in known]
        if unknown:
            raise UsageError(f"--sheets {unknown[0]}: no such run; the runs are {', '.join(r['name'] for r in runs)}")
        for r in runs:
            r["sheets"] = r["name"] in sheets or str(r.get("path")) in sheets
    return runs


def name_runs(runs: list[dict]) -> list[dict]:
    """Give each run a name no other run of the report has (its folder's name; with its parent's where two
    share one; then numbered) and its colour (:func:`~persistbench.core.figures.run_colour`), in order."""
    from collections import Counter

    counts = Counter(r["name"] for r in runs)
    for r in runs:
        if counts[r["name"]] > 1 and "path" in r:
            r["name"] = f"{Path(r['path']).parent.name}/{r['name']}"
    seen: Counter = Counter()
    counts = Counter(r["name"] for r in runs)
    for i, r in enumerate(runs):
        if counts[r["name"]] > 1:
            seen[r["name"]] += 1
            r["name"] = f"{r['name']} #{seen[r['name']]}"
        r["colour"] = run_colour(i)
    return runs


def scorer_of(runs: list[dict]):
    """``(suite class, scorer)`` that wrote the runs' summaries, from their headers; one pair for all."""
    from persistbench.core.suites import SUITES

    found = {(r["summary"].get("suite"), r["summary"].get("scorer")) for r in runs}
    if len(found) != 1:
        raise PersistbenchError(
            "report: the runs must be scored by one suite's scorer; got "
            + ", ".join(f"{r['name']}: {r['summary'].get('suite')}/{r['summary'].get('scorer')}" for r in runs)
        )
    suite, scorer = found.pop()
    if not (isinstance(suite, str) and isinstance(scorer, str)):
        names = ", ".join(r["name"] for r in runs)
        raise PersistbenchError(f"report: {names}: summary.json names no suite and scorer; score the runs again")
    cls = SUITES[suite]
    chosen = next((s for s in cls.scorers.values() if s.name == scorer), None)
    if chosen is None:
        raise PersistbenchError(f"report: suite {suite} has no scorer {scorer!r}")
    return cls, chosen


def _provenance(runs: list[dict]) -> Markup:
    head = [
        "run",
        "toolkit",
        "protocol",
        "protocol sha256",
        "dataset fingerprint",
        "mask source",
        "oracle",
        "partial",
        "unavailable",
        "model backends",
    ]
    rows = []
    for r in runs:
        s = r["summary"]
        cells = [
            r["name"],
            s.get("toolkit_version"),
            s.get("protocol"),
            (s.get("protocol_sha256") or "")[:12],
            (s.get("dataset_fingerprint") or "")[:12],
            ", ".join(s.get("mask_source", [])),
            "yes (checks the scorer)" if s.get("oracle") else "no",
            "yes" if s.get("partial") else "no",
            "; ".join(f"{m}: {why}" for m, why in (s.get("unavailable") or {}).items()) or "none",
            backends_cell(s.get("backends")),
        ]
        rows.append([str(c) for c in cells])
    return table("provenance", head, rows, sortable=False)


def _timing(runs: list[dict]) -> Markup:
    """Where the time went: per run and stage, the cases timed, their summed and median seconds, each phase's share
    (decode, model, write, ...), retries and workers, from the executor's per-case records."""
    head = [
        "run",
        "stage",
        "cases",
        "seconds (sum)",
        "median s/case",
        "phases (share of the sum)",
        "retries",
        "workers",
    ]
    rows = []
    for r in runs:
        folders = (
            ("infer", r["layout"].state_dir),
            ("score", r["layout"].scores_state_dir(r["summary"]["scores_dir"])),
        )
        for stage, folder in folders:
            records = [x for x in read_records(folder) if x.get("status") == "done"]
            if not records:
                continue
            seconds = sorted(float(x.get("seconds", 0.0)) for x in records)
            phases: dict[str, float] = {}
            for x in records:
                for name, value in x["phases"].items():
                    phases[name] = phases.get(name, 0.0) + float(value)
            total = sum(seconds)
            shares = " · ".join(f"{k} {100 * v / total:.0f}%" for k, v in phases.items()) if total > 0 else ""
            retries = sum(max(0, int(x.get("attempts", 1)) - 1) for x in records)
            workers = len({x.get("worker") for x in records})
            cells = [r["name"], stage, len(records), f"{total:.2f}", f"{seconds[len(seconds) // 2]:.3f}", shares]
            rows.append([str(c) for c in [*cells, retries, workers]])
    if not rows:
        return Markup()
    note = tag(
        "p",
        "From each case's record (",
        tag("code", ".state/records/"),
        "); cases skipped on a rerun keep the record of the run that made them.",
        class_="note",
    )
    return join(tag("h2", "Where the time went"), note, table("timing", head, rows, sortable=False))


_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0], col = +th.dataset.col;
    var asc = th.dataset.order !== 'asc';
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].textContent, y = b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    th.dataset.order = asc ? 'asc' : 'desc';
  });
});
"""

_CSS = """body{font-family:system-ui,sans-serif;margin:24px;max-width:1400px}table{border-collapse:collapse;margin:8px 0 20px;
font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f0f0f0;cursor:pointer}
td:first-child,td:nth-child(2){text-align:left}img{max-width:100%}.note{color:#555;font-size:13px}
.warning{background:#fff3cd;border:1px solid #e0b000;padding:8px 12px}tr.yours{background:#e8f1fb;font-weight:600}
tr.published td{color:#444}"""


def _backend_entries(backends: object) -> list[tuple[str, dict]]:
    if not isinstance(backends, dict):
        return []
    return [
        (name, e)
        for name, entries in sorted(backends.items())
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    ]


def backends_cell(backends: object) -> str:
    """What produced a run's model-based scores: each backend's weights (sha256, device) or judge (model, URL)."""
    parts = [
        f"{name}: {e.get('judge_model')} at {e.get('judge_url')}"
        if "judge_model" in e
        else f"{name}: {str(e.get('sha256', '?'))[:12]} on {e.get('device', '?')}"
        for name, e in _backend_entries(backends)
    ]
    return "; ".join(parts) or "none"


def _models(backends: object) -> frozenset:
    """The weights and judges behind the scores, whatever device ran them."""
    return frozenset((name, e.get("judge_model") or e.get("sha256")) for name, e in _backend_entries(backends))


def judge_warnings(runs: list[dict]) -> list[str]:
    """Runs whose judgments come from more than one judge identity (the model asked, served, named in the
    reply, its system fingerprint), and runs judged by different identities."""
    from persistbench.backends.judge import identity_line

    out = []
    sets = {}
    for r in runs:
        ids = r["summary"].get("judge_identities") or []
        sets[r["name"]] = frozenset(identity_line(j) for j in ids if isinstance(j, dict))
        if len(sets[r["name"]]) > 1:
            out.append(
                f"{r['name']}: its judgments come from {len(sets[r['name']])} judge identities: "
                + "; ".join(sorted(sets[r["name"]]))
            )
    judged = {k: v for k, v in sets.items() if v}
    if len(set(judged.values())) > 1:
        out.append(
            "The runs were judged by different identities: "
            + "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in judged.items())
        )
    return out


def comparability_warnings(runs: list[dict]) -> list[str]:
    """Why the runs' numbers cannot be compared side by side (different protocol hash, dataset, model weights
    or judge, or partial runs)."""
    out = []
    for key, what in (
        ("protocol_sha256", "protocol definitions (sha256)"),
        ("dataset_fingerprint", "datasets (fingerprint)"),
    ):
        values = {r["summary"].get(key) for r in runs}
        if len(values) > 1:
            out.append(
                f"The runs were scored with different {what}: "
                + ", ".join(f"{r['name']}: {(r['summary'].get(key) or '?')[:12]}" for r in runs)
            )
    if len({_models(r["summary"].get("backends")) for r in runs}) > 1:
        out.append(
            "The runs' model-based scores come from different weights or judges: "
            + ", ".join(f"{r['name']}: {backends_cell(r['summary'].get('backends'))}" for r in runs)
        )
    out += judge_warnings(runs)
    partial = [r["name"] for r in runs if r["summary"].get("partial")]
    if partial:
        out.append(f"Partial runs (cases without predictions were not scored): {', '.join(partial)}")
    return out


def _rank(rank: list[int] | None) -> str:
    """A rank as the report shows it: the rank where its 95 % interval is that one rank, else the interval
    (``2-3``): runs whose ranks may swap are not shown as ordered."""
    if rank is None:
        return ""
    return str(rank[0]) if rank[1] == rank[2] else f"{rank[1]}-{rank[2]}"


def _cell(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def confidence_sections(runs: list[dict], scorer) -> list[Markup]:
    """Each run's headline numbers with their 95 % intervals and the cases they stand on; for comparable runs,
    ranks with their intervals and which run is better than which with confidence (:mod:`.compare`)."""
    from persistbench.core.compare import compare

    estimands = [scorer.estimands((r["results"] or {}).get("cases") or [], r["summary"]) for r in runs]
    if any(e is None or not e.units.keys for e in estimands):
        return []
    head = estimands[0].headline
    parts: list[Markup] = [
        tag("h2", "How sure"),
        tag(
            "p",
            f"95% intervals: percentile bootstrap over each run's {estimands[0].unit}"
            + (f" (within each {estimands[0].strata})" if estimands[0].strata else "")
            + ". Runs whose rank intervals overlap are not ordered; 'better' needs the paired permutation test "
            "(Holm-adjusted over the pairs) below 0.05 on the cases both runs have.",
            class_="note",
        ),
    ]
    for r in runs:
        available = (r["summary"].get("cases_behind") or {}).get("available")
        if available:
            parts.append(tag("p", f"{r['name']}: its dataset has {available_line(available)}.", class_="note"))
    prints = {r["summary"].get("cases_behind", {}).get("fingerprint") for r in runs}
    if len(prints) > 1:
        parts.append(
            tag(
                "p",
                "The runs stand on different cases: "
                + ", ".join(f"{r['name']}: {len(e.units.keys)} {e.unit}" for r, e in zip(runs, estimands))
                + "; ranks and comparisons below use the cases they share.",
                class_="warning",
            )
        )
    result = None
    if len(runs) > 1:
        try:
            result = compare(runs, estimands, resamples=1000, permutations=2000)
        except PersistbenchError as e:
            parts.append(tag("p", f"{e}; no ranks or comparisons.", class_="warning"))
    rows = []
    for r, e in zip(runs, estimands):
        iv = (r["summary"].get("intervals") or {}).get("values") or {}
        for number in head:
            value = st.point(e.units, e.exprs[number]) if number in e.exprs else None
            if value is None:
                continue
            low, high = iv.get(number, (None, None))
            ranks = ((result.numbers.get(number) or {}).get("ranks") or {}) if result else {}
            rank = ranks.get(r["name"])
            rows.append(
                [
                    r["name"],
                    number,
                    _cell(value),
                    f"[{_cell(low)}, {_cell(high)}]",
                    str(len(e.units.keys)),
                    _rank(rank),
                ]
            )
    for number, found in result.numbers.items() if result else ():
        for name, v in found["values"].items():
            if v["seeds"] > 1 and number in head and v["mean"] is not None:
                rank = (found.get("ranks") or {}).get(name)
                low, high = v["interval"]
                rows.append(
                    [
                        name,
                        number,
                        f"{_cell(v['mean'])} ± {_cell(v['std'])}",
                        f"[{_cell(low)}, {_cell(high)}]",
                        str(len(result.common)),
                        _rank(rank),
                    ]
                )
    parts.append(table("intervals", ["run", "number", "value", "95% interval", e.unit, "rank (95%)"], rows))
    if result is not None:
        first = next((n for n in head if n in result.numbers), None)
        if first is not None:
            names = result.runs
            better = {(p["a"], p["b"]): p["better"] for p in result.numbers[first]["pairs"]}
            grid = []
            for a in names:
                cells = [a]
                for b in names:
                    won = better.get((a, b)) or better.get((b, a))
                    cells.append("" if a == b else "better" if won == a else "worse" if won == b else "-")
                grid.append(cells)
            parts += [
                tag("h3", f"Better than, with confidence: {first}"),
                tag(
                    "p", f"Row against column, on the {len(result.common)} {result.unit} all runs have.", class_="note"
                ),
                table("better-than", ["run", *names], grid, sortable=False),
            ]
    return parts


def calibration_sections(runs: list[dict]) -> list[Markup]:
    """The judges' calibration batteries of the runs that have them: the figures of each, and drift: the
    questions a later battery (of the same run, or of another run on the same dataset) answered otherwise."""
    from persistbench.backends.judge import identity_line
    from persistbench.core import calibration

    found = {
        r["name"]: calibration.batteries(Path(r["layout"].scores_dir(r["summary"]["scores_dir"])))
        for r in runs
        if r.get("layout") and r["summary"].get("scores_dir")
    }
    found = {k: v for k, v in found.items() if v}
    if not found:
        return []
    pct = lambda v: "n/a" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    rows = [
        [
            name,
            str(b.get("date")),
            str(b["items"]),
            pct(b.get("accuracy")),
            pct(b.get("consistency")),
            ", ".join(f"{k}: {n}" for k, n in (b.get("refusals") or {}).items()) or "none",
            f"{b.get('latency_s') or 0:.2f}",
            "; ".join(identity_line(j) for j in b.get("identities") or []),
        ]
        for name, entries in found.items()
        for b in entries
    ]
    parts = [
        tag("h2", "Judge calibration"),
        tag(
            "p",
            "Before judging, each run's judge answered questions whose answers hold by construction, each twice "
            'with its parts swapped (docs/metrics.md, "A judge checked before it judges").',
            class_="note",
        ),
        table(
            "judge-calibration",
            ["run", "date", "questions", "accuracy", "consistent", "refusals", "latency (s)", "identity"],
            rows,
        ),
    ]
    drifts = []
    for name, entries in found.items():
        for a, b in zip(entries, entries[1:]):
            changed = calibration.drift(a, b)
            if changed:
                drifts.append(
                    f"{name}: its judge answered {len(changed)} question(s) differently on {b.get('date')} than on {a.get('date')}: {', '.join(changed)}"
                )
    latest = list(found.items())
    for (na, ea), (nb, eb) in itertools.combinations(latest, 2):
        changed = calibration.drift(ea[-1], eb[-1])
        if changed:
            drifts.append(
                f"{na} and {nb}: their judges answered {len(changed)} question(s) differently: {', '.join(changed)}"
            )
    parts += [tag("p", f"Drift: {d}.", class_="warning") for d in drifts]
    return parts


def build_report(
    run_dirs: list[str | Path],
    out: str | Path,
    protocol: str | None = None,
    progress: bool = False,
    arena: str | Path | None = None,
    sheets: tuple[str, ...] | None = None,
) -> Path:
    """Write the report of the scored runs to ``out`` (one HTML file); returns its path.

    ``protocol``: the scores' folder name (default: each run's only one); ``arena``: a study folder of
    ``persistbench arena`` whose ratings are added as a section; ``sheets``: the runs (names or folders) a
    suite draws per-case figures of (contact sheets; default: every run).
    """
    from tqdm import tqdm

    if not run_dirs:
        raise PersistbenchError("report: give at least one run directory")
    runs = load_runs(run_dirs, protocol, sheets)
    suite, scorer = scorer_of(runs)
    used = runs[0]["summary"].get("protocol")
    try:
        bar = tqdm(total=scorer.report_steps(runs), desc="report", unit="figure", disable=not progress)
        try:
            note, board, figures = scorer.report_sections(runs, bar.update)
        finally:
            bar.close()
        board += confidence_sections(runs, scorer) + calibration_sections(runs)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        # Runs are shared files: one that lacks a field the suite's score writes, or holds another type there.
        names = ", ".join(str(r["path"]) for r in runs)
        raise PersistbenchError(
            f"{names}: summary.json or results.json is not what {suite.name} score writes "
            f"({type(e).__name__}: {str(e)[:80]})"
        ) from None
    parts: list[object] = [
        tag("h1", f"persistbench report: {suite.title}"),
        tag("p", f"Protocol {used}. {note} Click a column to sort.", class_="note"),
    ]
    parts += [tag("p", w, class_="warning") for w in comparability_warnings(runs)]
    parts += board
    if arena is not None:
        from persistbench.arena.report import sections as arena_sections

        parts += arena_sections(Path(arena))
    parts += [tag("h2", "Provenance"), _provenance(runs), _timing(runs), *figures]
    write_text(out, page("persistbench report", _CSS, parts, _SORT_JS) + "\n")
    return Path(out)
