"""PersistBench's numbers in the published leaderboard's form, and the published leaderboard itself.

The leaderboard (shipped as data with its source and date, ``persistbench/data/leaderboards/``, read
by :func:`published`) has, per model and subset, six scores x 100 with two decimals: object
permanence, motion continuity and appearance preservation on the visible and on the invisible frames;
``memory`` = the mean of the three invisible scores, ``visible_average`` = the mean of the three
visible ones, ``gap = visible_average - memory``, each from the two-decimal values and rounded to two
decimals (half away from zero on the exact binary value, as JavaScript's ``toFixed``); ``gap`` is
blank where the visible scores are not used (``visible_available`` false). Per case its motion
continuity is ``exp(-mean d)`` over a split's frames, not the public toolkit 0.1.7's mean of
``exp(-d)`` (docs/metrics.md, "Two aggregations of motion continuity").
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from importlib import resources

from persistbench.core.errors import PersistbenchError
from persistbench.suites.persistbench.layout import SPLITS

# the leaderboard's score columns: (its name, our metric, our split)
SCORES: tuple[tuple[str, str, str], ...] = tuple(
    (f"{short}_{split}", metric, split)
    for short, metric in (
        ("permanence", "object_permanence"),
        ("continuity", "motion_continuity"),
        ("appearance", "appearance_preservation"),
    )
    for split in SPLITS
)
COLUMNS = tuple(c for c, _, _ in SCORES) + ("memory", "visible_average", "gap")
GROUPS = ("static", "dynamic")  # the leaderboard's subsets, in its order
PROCEDURE = "default-three-paper-v3"  # the protocol the leaderboard publishes (paper-v3)


def round2(value: float) -> float:
    """``value`` rounded to two decimals, half away from zero on its exact binary value."""
    return float(Decimal(value).quantize(Decimal("0.01"), ROUND_HALF_UP))


def derived(scores: dict[str, float | None], visible_available: bool = True) -> dict[str, float | None]:
    """``memory``, ``visible_average`` and ``gap`` from the six two-decimal scores (x 100), as the page derives
    them; None where a score they need is missing, ``gap`` None too where the visible scores are not used."""
    invisible = [scores[c] for c, _, split in SCORES if split == "invisible"]
    visible = [scores[c] for c, _, split in SCORES if split == "visible"]
    memory = None if None in invisible else round2(math.fsum(invisible) / 3)
    average = None if None in visible else round2(math.fsum(visible) / 3)
    gap = None if memory is None or average is None or not visible_available else round2(average - memory)
    return {"memory": memory, "visible_average": average, "gap": gap}


def block(cases: list[dict]) -> dict:
    """The leaderboard-form numbers of a group of paper-v3 case records: each score the mean, over the cases
    that have one (equal weights), of the case's ``published`` value, x 100 and rounded; the derived
    columns; how many cases each score stands on. Records without ``published`` values (written before
    they were kept, or read from public ``result.json`` files, which hold no distances) count as missing."""
    scores, counts = {}, {}
    for column, metric, split in SCORES:
        values = [v for r in cases if (v := ((r.get("published") or {}).get(split) or {}).get(metric)) is not None]
        scores[column] = round2(100 * math.fsum(values) / len(values)) if values else None
        counts[column] = len(values)
    visible = all(scores[c] is not None for c, _, split in SCORES if split == "visible")
    return {
        "cases": len(cases),
        "scores": scores,
        **derived(scores),
        "visible_available": visible,
        "valid_counts": counts,
    }


@dataclass(frozen=True)
class Row:
    """One row of the leaderboard: a published model's, or a run's (``run`` its name, ``cases`` how many cases
    its numbers stand on; both None for a published row)."""

    id: str
    model: str
    group: str
    subset: str
    values: dict[str, float | None]  # COLUMNS -> the number shown (x 100, two decimals), None when blank
    visible_available: bool = True
    run: str | None = None
    cases: int | None = None
    complete: bool = True  # a run scored on every case of the benchmark
    fingerprint: str | None = None  # of the cases the run's numbers stand on (its summary's cases_behind)


@dataclass(frozen=True)
class Published:
    """The shipped leaderboard: its rows in the page's order, where it comes from, when it was read."""

    rows: tuple[Row, ...]
    source: str
    read: str
    benchmark_cases: int

    def subset(self, subset: str) -> list[Row]:
        return [r for r in self.rows if r.subset == subset]


def _number(text: str, where: str) -> float | None:
    if text == "":
        return None
    value = float(text)
    if not math.isfinite(value) or not -100.0 <= value <= 100.0:
        raise ValueError(f"{where}: {text!r} is not a score x 100")
    return value


@functools.cache
def published() -> Published:
    """The leaderboard shipped with the package, checked against the sha256 its source file records."""
    folder = resources.files("persistbench") / "data" / "leaderboards"
    meta = json.loads((folder / "persistbench.json").read_text())
    raw = (folder / meta["file"]).read_bytes()
    if hashlib.sha256(raw).hexdigest() != meta["sha256"]:
        raise PersistbenchError(f"{folder / meta['file']}: differs from the leaderboard its source file names")
    rows = []
    for i, line in enumerate(csv.DictReader(io.StringIO(raw.decode())), start=2):
        where = f"{meta['file']} line {i}"
        values = {c: _number(line[c], f"{where} {c}") for c in COLUMNS}
        rows.append(
            Row(
                line["id"],
                line["model"],
                line["group"],
                line["subset"],
                values,
                visible_available=line["visible_available"] == "true",
            )
        )
    return Published(tuple(rows), meta["source"], meta["read"], int(meta["benchmark_cases"]))


def run_row(name: str, model: str, summary: dict, subset: str, board: Published) -> Row | None:
    """A scored run's row of ``subset`` (``static``, ``dynamic`` or ``overall``) from its summary's
    ``published`` block; None when the run has no case there (or was scored before the block existed).
    It is complete when the run stands on the benchmark's number of cases over both subsets."""
    blocks = summary.get("published") or {}
    group = blocks.get(subset)
    if not group or not group.get("cases"):
        return None
    values = {**group["scores"], **{k: group[k] for k in ("memory", "visible_average", "gap")}}
    complete = (blocks.get("overall") or {}).get("cases", 0) >= board.benchmark_cases
    cases = (summary.get("cases_behind") or {}).get("fingerprint")
    return Row(name, model, "", subset, values, group["visible_available"], name, group["cases"], complete, cases)


def different_cases(rows: list[Row]) -> str | None:
    """A note when the runs' rows stand on different cases (their numbers are then not ranked together)."""
    if len({r.fingerprint for r in rows if r.run is not None}) <= 1:
        return None
    named = ", ".join(f"{r.run}: {r.cases} cases ({str(r.fingerprint)[:12]})" for r in rows if r.run is not None)
    return f"your runs stand on different cases ({named}): compare them on the cases they share (persistbench compare)"


def runs_rows(paths: list[str], protocol: str | None, board: Published) -> dict[str, list[Row]]:
    """Per subset, the rows of the scored runs at ``paths`` (:func:`run_row`); a run not scored with paper-v3,
    or scored before its summaries had the leaderboard's form, is refused in one line naming it."""
    from persistbench.core.report import load_runs

    out: dict[str, list[Row]] = {}
    for run in load_runs(paths, protocol) if paths else []:
        summary = run["summary"]
        if summary.get("procedure") != PROCEDURE:
            raise PersistbenchError(f"{run['path']}: not scored with paper-v3 (the leaderboard's protocol)")
        if "published" not in summary:
            raise PersistbenchError(
                f"{run['path']}: scored before summaries had the leaderboard's form; score it again (--resume)"
            )
        for subset in GROUPS:
            row = run_row(run["name"], str(summary.get("model")), summary, subset, board)
            if row is not None:
                out.setdefault(subset, []).append(row)
    return out


def ranked(rows: list[Row]) -> list[Row]:
    """``rows`` by ``memory``, highest first; rows of equal or no memory keep their order (no memory: last)."""
    return sorted(rows, key=lambda r: -r.values["memory"] if r.values["memory"] is not None else math.inf)


def fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def head() -> list[str]:
    return ["rank", "model", "group", "cases", *COLUMNS, "source"]


def table(board: Published, subset: str, runs: list[Row]) -> list[tuple[Row, list[str]]]:
    """The published rows of ``subset`` and the runs' rows in one ranking (:func:`ranked`), as cells under
    :func:`head`, each with its row. A run on fewer cases than the benchmark is placed by its memory but not given a rank,
    and its cases cell says why; the published rows say where they come from."""
    rows, rank = [], 0
    for r in ranked([*board.subset(subset), *runs]):
        ranks = r.run is None or (r.complete and r.values["memory"] is not None)
        rank += ranks
        if r.run is None:
            who, cases, source = r.model, f"all {board.benchmark_cases}", "published"
        else:
            who, source, cases = f"{r.model} (yours: {r.run})", "this toolkit", str(r.cases)
            if not r.complete:
                cases += f" of {board.benchmark_cases}: not ranked"
        cells = [str(rank) if ranks else "-", who, r.group or "-", cases, *(fmt(r.values[c]) for c in COLUMNS)]
        rows.append((r, [*cells, source]))
    return rows


def text(board: Published, subset: str, runs: list[Row]) -> str:
    """:func:`table` of ``subset`` as aligned text, with the source line under it."""
    table_ = [head(), *(cells for _, cells in table(board, subset, runs))]
    widths = [max(len(row[i]) for row in table_) for i in range(len(table_[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table_]
    note = different_cases(runs)
    return "\n".join(
        [f"{subset}:", *lines, f"published: {board.source}, read {board.read}", *([f"note: {note}"] if note else [])]
    )
