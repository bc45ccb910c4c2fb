"""``persistbench compare``: is run A better than run B, on the cases both scored, and how sure is that?

Runs of one suite, protocol (sha256) and dataset are compared pairwise on the units every run has
(:mod:`persistbench.core.stats`): per summary number the difference, its paired-bootstrap 95 % interval,
the paired permutation test's two-sided p-value (exact below 20 units), Holm's adjustment over the pairs,
and the effect size. Every run is resampled with the same draws, so the ranks' intervals come from them too.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from persistbench.core import stats as st
from persistbench.core.errors import PersistbenchError

ALPHA = 0.05


@dataclass
class Compared:
    """What :func:`compare` found: the runs' names, the units they share and each run's count, and per
    number the pairs' comparisons and the ranks."""

    runs: list[str]
    unit: str
    common: list[str]
    counts: dict[str, int]
    numbers: dict[str, dict]  # name -> {"higher_is_better", "pairs": [...], "ranks": {run: [rank, low, high]}}

    def to_json(self) -> dict:
        return {
            "runs": self.runs,
            "unit": self.unit,
            "units": len(self.common),
            "fingerprint": st.fingerprint(self.common),
            "counts": self.counts,
            "numbers": self.numbers,
        }


def check_comparable(runs: list[dict]) -> None:
    """Refuse runs scored with different protocols (sha256), datasets or suites, in one line naming them."""
    for key, what in (
        ("suite", "suites"),
        ("protocol_sha256", "protocols (sha256)"),
        ("dataset_fingerprint", "datasets (fingerprint)"),
    ):
        values = {r["summary"].get(key) for r in runs}
        if len(values) > 1:
            named = ", ".join(f"{r['name']}: {str(r['summary'].get(key))[:12]}" for r in runs)
            raise PersistbenchError(
                f"compare: the runs were scored on different {what} ({named}); compare like with like"
            )


def _aligned(units: list[st.Units], keys: list[str]) -> list[st.Units]:
    """The runs' units on ``keys``, each with every run's columns (0 where a run has none)."""
    columns = list(dict.fromkeys(c for u in units for c in u.columns))
    out = []
    for u in units:
        sub = u.subset(keys)
        values = np.zeros((len(keys), len(columns)))
        at = {c: j for j, c in enumerate(columns)}
        for j, c in enumerate(sub.columns):
            values[:, at[c]] = sub.values[:, j]
        out.append(st.Units(sub.keys, sub.strata, tuple(columns), values))
    return out


def seed_groups(runs: list[dict]) -> list[tuple[str, list[int]]]:
    """The runs as compared: runs of one model (its name in ``run.json``) inferred with different seeds
    (``infer --seed``) form one group, named ``<model> (<k> seeds)``; any other run stands alone."""
    by_model: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        info = r.get("info") or {}
        if isinstance(info.get("seed"), int):
            by_model.setdefault(str(info.get("model")), []).append(i)
    grouped = {
        i: model
        for model, idx in by_model.items()
        if len(idx) > 1 and len({runs[k]["info"]["seed"] for k in idx}) == len(idx)  # one run per seed
        for i in idx
    }
    out: list[tuple[str, list[int]]] = []
    for i, r in enumerate(runs):
        if i not in grouped:
            out.append((r["name"], [i]))
        elif not any(grouped[i] == grouped.get(j[0]) for _, j in out):
            members = by_model[grouped[i]]
            out.append((f"{grouped[i]} ({len(members)} seeds)", members))
    return out


def compare(
    runs: list[dict], estimands: list[st.Estimands], resamples: int = 1000, permutations: int = 10_000
) -> Compared:
    """Every pair of ``runs`` (as :func:`persistbench.core.report.load_runs` gives them, with their scorer's
    :class:`~persistbench.core.stats.Estimands`) on the units all of them have, for each number any of them
    has (n/a where a run has no value); Holm's adjustment over the pairs of each number; the runs' ranks
    with their intervals. Runs of one model with different seeds are one entry (:func:`seed_groups`): its
    value the mean over the seeds, with their standard deviation; its intervals draw seeds within cases."""
    check_comparable(runs)
    groups = seed_groups(runs)
    names = [name for name, _ in groups]
    common = sorted(set.intersection(*(set(e.units.keys) for e in estimands)))
    counts = {r["name"]: len(e.units.keys) for r, e in zip(runs, estimands)}
    if not common:
        raise PersistbenchError(f"compare: the runs share no {estimands[0].unit} ({', '.join(counts)})")
    aligned = _aligned([e.units for e in estimands], common)
    members = [[aligned[i] for i in idx] for _, idx in groups]
    numbers = list(dict.fromkeys(n for e in estimands for n in e.exprs))  # a run without one compares as n/a
    seed = st.seed_of(str(runs[0]["summary"].get("protocol_sha256")), st.fingerprint(common))
    weights = st.resample_weights(aligned[0].strata, resamples, seed)
    exprs = {n: next(e.exprs[n] for e in estimands if n in e.exprs) for n in numbers}
    higher = {n: estimands[0].headline.get(n, _direction(n, estimands[0])) for n in numbers}
    pairs: dict[str, list[dict]] = {n: [] for n in numbers}
    for i, j in itertools.combinations(range(len(groups)), 2):
        for number, p in st.paired(members[i], members[j], exprs, resamples, permutations, seed).items():
            pairs[number].append({"a": names[i], "b": names[j], **p.to_json()})
    found: dict[str, dict] = {}
    for number, expr in exprs.items():
        for pair, adjusted in zip(pairs[number], st.holm([p["p"] for p in pairs[number]])):
            pair["p_holm"] = adjusted
            pair["better"] = _better(pair, higher[number])
        spread = [st.seed_values(m, expr) for m in members]
        values = np.stack(
            [np.concatenate([[mean], expr(st.seed_sums(m, weights, seed))]) for m, (mean, _) in zip(members, spread)],
            1,
        )
        intervals = [st.percentile_interval(values[1:, k]) for k in range(len(members))]
        ranks = None if np.isnan(values[0]).any() else st.rank_intervals(values, higher[number])
        found[number] = {
            "higher_is_better": higher[number],
            "values": {
                n: {"mean": _num(v), "std": sd, "seeds": len(m), "interval": iv.to_json()}
                for n, (v, sd), m, iv in zip(names, spread, members, intervals)
            },
            "pairs": pairs[number],
            "ranks": None if ranks is None else {n: list(r) for n, r in zip(names, ranks)},
        }
    return Compared(names, estimands[0].unit, common, counts, found)


def _num(v: float) -> float | None:
    return None if np.isnan(v) else v


def _direction(number: str, est: st.Estimands) -> bool:
    """Whether higher is better for a number that is not a headline one: as the headline number of the same
    metric (the last path part, gaps included) says; higher otherwise."""
    metric = number.rsplit("/", 1)[-1]
    for name, higher in est.headline.items():
        if name.rsplit("/", 1)[-1] == metric:
            return higher
    from persistbench.metrics.registry import METRICS

    spec = METRICS.get(metric.removesuffix("_gain"))
    return True if spec is None or metric.endswith("_gain") else spec.higher_is_better


def _better(pair: dict, higher: bool) -> str | None:
    """Which run is better with confidence (Holm-adjusted p below :data:`ALPHA`), or None."""
    if pair["p_holm"] is None or pair["p_holm"] >= ALPHA or not pair["difference"]:
        return None
    return pair["a"] if (pair["difference"] > 0) == higher else pair["b"]


def _fmt(v: float | None, digits: int = 4) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def markdown(result: Compared, headline: dict[str, bool]) -> str:
    """``compare.md``: the units compared, then per number the pairs (difference, interval, p, Holm's p,
    effect) and the ranks; headline numbers first."""
    lines = [
        f"# compare: {', '.join(result.runs)}",
        "",
        f"On the {len(result.common)} {result.unit} every run has "
        f"({', '.join(f'{n}: {c}' for n, c in result.counts.items())}; "
        f"fingerprint {st.fingerprint(result.common)[:12]}).",
        "",
        "Difference = first minus second run; 95% paired-bootstrap interval; p: paired permutation test, two-sided "
        "(exact below 20 units); p (Holm): adjusted over the pairs; effect: difference over the standard deviation "
        "of a unit's difference (d_z for a mean).",
        "",
        "| number | run a | run b | value a | value b | a - b | 95% interval | p | p (Holm) | effect | better, with confidence |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = [n for n in headline if n in result.numbers] + [n for n in result.numbers if n not in headline]
    for number in order:
        for p in result.numbers[number]["pairs"]:
            lines.append(
                f"| {number} | {p['a']} | {p['b']} | {_fmt(p['value_a'])} | {_fmt(p['value_b'])} "
                f"| {_fmt(p['difference'])} | [{_fmt(p['low'])}, {_fmt(p['high'])}] "
                f"| {_fmt(p['p'])}{' (exact)' if p['exact'] else ''} | {_fmt(p['p_holm'])} | {_fmt(p['effect'], 2)} "
                f"| {p['better'] or 'neither'} |"
            )
    seeded = [n for n, v in next(iter(result.numbers.values()), {}).get("values", {}).items() if v["seeds"] > 1]
    if seeded:
        lines += ["", "Groups of seeds (mean ± standard deviation over the seeds):", ""]
        for number in [n for n in headline if n in result.numbers]:
            for name in seeded:
                v = result.numbers[number]["values"][name]
                lines.append(f"- {number}, {name}: {_fmt(v['mean'])} ± {_fmt(v['std'])}")
    ranked = [n for n in headline if n in result.numbers and result.numbers[n]["ranks"]]
    for number in ranked:
        lines += ["", f"Ranks on {number} (95% interval over the resamples):", ""]
        for name, (rank, low, high) in sorted(result.numbers[number]["ranks"].items(), key=lambda kv: kv[1][0]):
            lines.append(f"- {name}: {rank} ({low}-{high})")
    return "\n".join(lines) + "\n"
