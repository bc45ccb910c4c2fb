"""The arena's section of ``persistbench report``: a study's ``ratings.json`` (read as untrusted) as tables."""

from __future__ import annotations

from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.figures import table
from persistbench.core.markup import Markup, tag
from persistbench.io.files import read_json


def _num(v, digits: int = 0) -> str:
    return "n/a" if not isinstance(v, int | float) else f"{v:.{digits}f}"


def _ratings_table(table_id: str, block: dict) -> Markup:
    head = ["run", "Bradley-Terry", "95 % interval", "Elo", "votes", "wins", "ties", "both wrong"]
    rows = [
        [
            str(r["run"]),
            _num(r["bt_rating"]),
            f"{_num(r['bt_interval'][0])} to {_num(r['bt_interval'][1])}",
            _num(r["elo"]),
            str(r["votes"]),
            str(r["wins"]),
            str(r["ties"]),
            str(r["both_wrong"]),
        ]
        for r in block["runs"]
    ]
    return table(table_id, head, rows)


def sections(study_dir: Path) -> list[Markup]:
    """The arena section of the study in ``study_dir``: ratings with intervals (people; the judge beside),
    the win-rate matrix, per category, position bias and agreement."""
    path = Path(study_dir) / "ratings.json"
    data = read_json(path)
    try:
        people, runs = data["people"], [str(r["run"]) for r in data["people"]["runs"]]
        parts = [
            tag("h2", f"Arena: {data['study']['question']}"),
            tag("p", f"{people['votes']} votes by {len(data['raters'])} rater(s). {people['method']}.", class_="note"),
            _ratings_table("arena-people", people),
        ]
        if data.get("judge"):
            agree = data.get("judge_vs_people") or {}
            parts += [
                tag("h3", "The judge as a rater (both orders of every pair; disagreeing orders are ties)"),
                _ratings_table("arena-judge", data["judge"]),
                tag(
                    "p",
                    f"The judge agrees with {agree.get('agree')} of {agree.get('votes')} people's votes.",
                    class_="note",
                ),
            ]
        rates = people["win_rate"]
        parts += [
            tag("h3", "Win rate (row against column; ties count half)"),
            table(
                "arena-wins",
                ["", *runs],
                [[a, *(_num(rates[a].get(b), 2) if a != b else "" for b in runs)] for a in runs],
            ),
            tag("h3", "Per category"),
            table(
                "arena-categories",
                ["category", "run", "Bradley-Terry", "votes"],
                [
                    [str(c), str(r["run"]), _num(r["bt_rating"]), str(r["votes"])]
                    for c, block in data["categories"].items()
                    for r in block["runs"]
                ],
            ),
        ]
        pos, agree = people["position"], data["rater_agreement"]
        parts.append(
            tag(
                "p",
                f"Position: left won {pos['left']}, right {pos['right']} (two-sided binomial p = {_num(pos['p_value'], 3)}). "
                f"Raters on the same case and pair agreed {agree['agree']} of {agree['rater_pairs']} times.",
                class_="note",
            )
        )
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise PersistbenchError(
            f"{path}: not what persistbench arena writes ({type(e).__name__}: {str(e)[:80]})"
        ) from None
    return parts
