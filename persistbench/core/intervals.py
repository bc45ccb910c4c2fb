"""What a summary says about how sure its numbers are and which cases they stand on (``summary.json``'s
``cases``, ``intervals`` and ``detectable``; their lines in ``summary.md`` and columns in ``leaderboard.csv``).

The numbers come from the scorer's :meth:`~persistbench.core.protocol.Scorer.estimands` and
:mod:`persistbench.core.stats`; the resamples are seeded from the protocol's sha256 and the units' keys, so
a summary is the same whatever the workers, shards or restarts that scored it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from persistbench.core import stats as st

DEFAULT_RESAMPLES = 1000


def cases_block(keys: Sequence[str], available: dict | None = None) -> dict:
    """``summary.json``'s ``cases_behind``: how many cases the numbers stand on and the sha256 of their sorted
    keys (two summaries with one fingerprint stand on the same cases)."""
    return {"count": len(keys), "fingerprint": st.fingerprint(keys), **({"available": available} if available else {})}


def summary_blocks(est: st.Estimands | None, protocol_sha256: str, resamples: int) -> dict:
    """``intervals`` (each number's 95 % percentile interval and standard error over ``resamples`` stratified
    resamples of the units, for the numbers that have a value; None when turned off or the scorer has
    none) and ``detectable`` (the
    headline numbers' minimum detectable difference at 80 % power)."""
    if est is None or resamples <= 0 or not est.units.keys:
        return {"intervals": None, "detectable": None}
    seed = st.seed_of(protocol_sha256, est.units.fingerprint())
    exprs = {name: e for name, e in est.exprs.items() if st.point(est.units, e) is not None}
    found = st.bootstrap(est.units, exprs, resamples, seed)
    return {
        "intervals": {
            "level": st.LEVEL,
            "method": "percentile bootstrap",
            "resamples": resamples,
            "seed": seed,
            "unit": est.unit,
            "units": len(est.units.keys),
            "strata": est.strata,
            "values": {name: iv.to_json() for name, iv in found.items()},
            "se": {name: iv.se for name, iv in found.items()},
            "missing": {name: iv.missing for name, iv in found.items() if iv.missing},
        },
        "detectable": {name: st.detectable(found[name].se) for name in est.headline if name in found},
    }


def available_summary(manifest: dict) -> dict:
    """What a summary records of a dataset's availability manifest (:meth:`Suite.availability`): the counts,
    the date, the built set's fingerprint and the missing cases by kind."""
    missing = Counter(v.get("kind") or v["status"] for v in manifest["cases"].values() if v["status"] != "built")
    return {
        "built": manifest["built"],
        "total": manifest["total"],
        "date": manifest["date"],
        "fingerprint": manifest["fingerprint"],
        "missing": dict(sorted(missing.items())),
    }


def available_differences(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """The cases built in manifest ``a`` and not in ``b``, and the other way round, sorted."""
    built_a = {k for k, v in a["cases"].items() if v["status"] == "built"}
    built_b = {k for k, v in b["cases"].items() if v["status"] == "built"}
    return sorted(built_a - built_b), sorted(built_b - built_a)


def available_line(available: dict) -> str:
    """``6 of 8 cases available (missing: private 1, removed 1; 2026-12-06)``."""
    why = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in (available.get("missing") or {}).items())
    return f"{available['built']} of {available['total']} cases available" + (
        f" (missing: {why}; {available['date']})" if why else f" ({available['date']})"
    )


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def md_lines(summary: dict) -> list[str]:
    """``summary.md``'s lines on the cases, the intervals and what difference the run can see."""
    cases = summary.get("cases_behind") or {}
    lines = ["", f"Stands on {cases.get('count', 0)} cases (fingerprint {str(cases.get('fingerprint'))[:12]})."]
    available = cases.get("available")
    if available:
        lines[-1] += f" The dataset: {available_line(available)}."
    iv = summary.get("intervals")
    if not iv:
        return [*lines, "No intervals (--bootstrap 0)."]
    lines += [
        "",
        f"95% intervals: percentile bootstrap, {iv['resamples']} resamples of the {iv['units']} {iv['unit']}"
        + (f" within each {iv['strata']}" if iv["strata"] else "")
        + ":",
        "",
        "| number | 95% interval | standard error |",
        "| --- | --- | --- |",
    ]
    for name, (low, high) in iv["values"].items():
        if low is not None:
            lines.append(f"| {name} | [{_fmt(low)}, {_fmt(high)}] | {_fmt(iv['se'][name])} |")
    detectable = {k: v for k, v in (summary.get("detectable") or {}).items() if v is not None}
    if detectable:
        lines += [
            "",
            f"The smallest difference this run can tell from another of the same spread with {iv['units']} "
            f"{iv['unit']} (80% power, 5% two-sided; 0: the {iv['unit']} do not differ):",
            "",
            "| number | detectable from |",
            "| --- | --- |",
            *(f"| {name} | {mdd:.4g} |" for name, mdd in detectable.items()),
        ]
    return lines


def csv_columns(summary: dict) -> dict[str, str]:
    """``leaderboard.csv``'s columns: the cases' count and fingerprint, each number's interval."""
    cases = summary.get("cases_behind") or {}
    row = {"cases": str(cases.get("count", "")), "cases_fingerprint": str(cases.get("fingerprint", ""))[:12]}
    for name, (low, high) in ((summary.get("intervals") or {}).get("values") or {}).items():
        row[f"{name}:low"] = "" if low is None else f"{low:.6f}"
        row[f"{name}:high"] = "" if high is None else f"{high:.6f}"
    return row
