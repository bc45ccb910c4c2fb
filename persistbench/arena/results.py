"""A study's results: the people's ratings, the judge's, per category, agreement; ``ratings.json`` and
``leaderboard.csv`` in the study folder.

People are every rater with a token; the judge's votes are stored under ``judge:<model>`` (``arena
--judge-url``) and rated apart. The categories are the cases' subsets (PersistBench: static/dynamic;
WROP: the families; R2M-Bench: its trajectory kinds).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from persistbench.arena import ratings
from persistbench.arena.store import JUDGE_PREFIX, Store
from persistbench.arena.study import Study
from persistbench.io.files import dump_json, write_text


def votes_of(store: Store, study: Study, judge: bool) -> list[ratings.Vote]:
    """The study's votes as :class:`ratings.Vote` (people's or the judge's), on its runs and cases, in order."""
    runs = list(study.runs)
    subsets = {study.suite.key(c): c.subset for c in study.cases}
    out = []
    for v in store.votes():
        if v["rater"].startswith(JUDGE_PREFIX) != judge:
            continue
        if v["case_key"] in subsets and v["left_run"] in runs and v["right_run"] in runs:
            out.append(
                ratings.Vote(
                    v["case_key"],
                    v["rater"],
                    runs.index(v["left_run"]),
                    runs.index(v["right_run"]),
                    v["answer"],
                    subsets[v["case_key"]],
                )
            )
    return out


def outcome(v: ratings.Vote) -> tuple[tuple[int, int], str]:
    """A vote's item (the two runs, sorted) and its outcome: the winning run's index or ``tie``."""
    item = (min(v.left, v.right), max(v.left, v.right))
    return item, ("tie" if v.answer in ("tie", "both_wrong") else str(v.left if v.answer == "left" else v.right))


def summarise(store: Store, study: Study, rounds: int = 1000) -> dict:
    """Everything ``ratings.json`` holds."""
    people = votes_of(store, study, judge=False)
    judge = votes_of(store, study, judge=True)
    out = {
        "study": study.describe(),
        "closed": store.closed(),
        "people": ratings.rate(people, study.runs, rounds),
        "raters": sorted({v.rater for v in people}),
        "rater_agreement": ratings.agreement(people),
        "categories": {
            c: ratings.rate([v for v in people if v.category == c], study.runs, rounds)
            for c in sorted({v.category for v in people})
        },
        "judge": ratings.rate(judge, study.runs, rounds) if judge else None,
    }
    if judge:
        judged = {(v.case, *outcome(v)[:1]): outcome(v)[1] for v in judge}
        pairs = [(judged.get((v.case, outcome(v)[0])), outcome(v)[1]) for v in people]
        both = [(a, b) for a, b in pairs if a is not None]
        out["judge_vs_people"] = {
            "votes": len(both),
            "agree": sum(a == b for a, b in both),
            "share": sum(a == b for a, b in both) / len(both) if both else None,
        }
    return out


def write(store: Store, study: Study, folder: Path, rounds: int = 1000) -> dict:
    """``ratings.json`` and ``leaderboard.csv`` in ``folder``; returns the summary."""
    summary = summarise(store, study, rounds)
    write_text(folder / "ratings.json", dump_json(summary))
    judge = {r["run"]: r for r in (summary["judge"] or {}).get("runs", [])}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "rank",
            "run",
            "bt_rating",
            "bt_low",
            "bt_high",
            "elo",
            "votes",
            "wins",
            "ties",
            "both_wrong",
            "judge_bt_rating",
            "cases",
            "predicted",
        ]
    )
    for rank, r in enumerate(summary["people"]["runs"], 1):
        j = judge.get(r["run"], {}).get("bt_rating")
        w.writerow(
            [rank, r["run"], f"{r['bt_rating']:.1f}", *(f"{x:.1f}" for x in r["bt_interval"]), f"{r['elo']:.1f}"]
            + [r["votes"], r["wins"], r["ties"], r["both_wrong"], "" if j is None else f"{j:.1f}"]
            + [len(study.cases), dict(zip(study.runs, study.predicted)).get(r["run"], "")]
        )
    write_text(folder / "leaderboard.csv", buf.getvalue())
    return summary
