"""Shared runs carrying HTML and JavaScript in every field that reaches the report (item 2), and runs
whose records are damaged (item 10)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .fixtures import Fixtures
from .harness import check, fresh

PAYLOADS = {
    "script": 'x"><script>document.title="XSS"</script>',
    "img onerror": "x'><img src=x onerror=alert(1)>",
    "javascript: URL": "javascript:alert(1)//<b>bold</b>",
}
LIVE = ("<script>document.title", "<img src=x onerror", "<b>bold</b>")  # what must never appear as markup


def _rename_key(obj: dict, old: str, new: str) -> None:
    obj[new] = obj.pop(old)


def _json(rel: str, change: Callable[[dict, str], object]) -> Callable[[Path, str], None]:
    def apply(work: Path, payload: str) -> None:
        path = work / rel
        data = json.loads(path.read_text())
        change(data, payload)
        path.write_text(json.dumps(data))

    return apply


def _each_record(run: str, change: Callable[[dict, str], object]) -> Callable[[Path, str], None]:
    def apply(work: Path, payload: str) -> None:
        for path in sorted((work / run / ".state/records").rglob("*.json")):
            data = json.loads(path.read_text())
            change(data, payload)
            path.write_text(json.dumps(data))

    return apply


def _escaped(code: int, text: str, work: Path) -> bool:
    """Shown as text (the report was written and holds none of the payloads as markup), or refused."""
    page = work / "r.html"
    if code != 0:
        return "Error:" in text and not page.exists()
    html = page.read_text(errors="replace")
    return not any(live in html for live in LIVE)


def fields(fx: Fixtures) -> list[tuple[str, str, Callable[[Path, str], None]]]:
    pb, r2m, wrop = "run/scores/classic-v1", "r2m_run/scores/r2m-v2", "wrop_run/scores/wrop-cont-v1"
    case_metrics = lambda d, p: [c["metrics"].__setitem__(p, c["metrics"].pop("psnr")) for c in d["cases"]]  # noqa: E731
    return [
        (
            "run",
            "PersistBench summary subset key",
            _json(f"{pb}/summary.json", lambda d, p: _rename_key(d["subsets"], "static", p)),
        ),
        ("run", "PersistBench results metric key", _json(f"{pb}/results.json", case_metrics)),
        (
            "run",
            "PersistBench results case id",
            _json(f"{pb}/results.json", lambda d, p: d["cases"][0].update(case_id=p)),
        ),
        ("run", "PersistBench summary model", _json(f"{pb}/summary.json", lambda d, p: d.update(model=p))),
        ("run", "PersistBench run.json model", _json("run/run.json", lambda d, p: d.update(model=p))),
        ("run", "PersistBench summary protocol", _json(f"{pb}/summary.json", lambda d, p: d.update(protocol=p))),
        ("run", "record phase name", _each_record("run", lambda d, p: d.update(phases={p: 1.0}))),
        ("run", "record host", _each_record("run", lambda d, p: d.update(host=p))),
        ("run", "record reason", _each_record("run", lambda d, p: d.update(reason=p))),
        (
            "r2m_run",
            "R2M trajectory name",
            _json(f"{r2m}/summary.json", lambda d, p: _rename_key(d["trajectories"], "DDDAAA", p)),
        ),
        (
            "r2m_run",
            "R2M family name",
            _json(f"{r2m}/summary.json", lambda d, p: _rename_key(d["families"], next(iter(d["families"])), p)),
        ),
        (
            "r2m_run",
            "R2M backend judge URL",
            _json(
                f"{r2m}/summary.json", lambda d, p: d.update(backends={"judge": [{"judge_url": p, "judge_model": p}]})
            ),
        ),
        (
            "r2m_run",
            "R2M unavailable reason",
            _json(f"{r2m}/summary.json", lambda d, p: d.update(unavailable={"frame_lpips": p})),
        ),
        ("r2m_run", "R2M overall note", _json(f"{r2m}/summary.json", lambda d, p: d.update(overall_note=p))),
        (
            "wrop_run",
            "WROP category name",
            _json(f"{wrop}/summary.json", lambda d, p: _rename_key(d["categories"], next(iter(d["categories"])), p)),
        ),
        (
            "wrop_run",
            "WROP task name",
            _json(f"{wrop}/summary.json", lambda d, p: _rename_key(d["tasks"], next(iter(d["tasks"])), p)),
        ),
        ("wrop_run", "WROP excluded task", _json(f"{wrop}/summary.json", lambda d, p: d.update(excluded_tasks=[p]))),
    ]


def cases(fx: Fixtures, work: Path) -> None:
    for run, name, damage in fields(fx):
        for label, payload in PAYLOADS.items():
            fresh(work, (getattr(fx, run), run))
            damage(work, payload)
            args = ["report", run, "--output", "r.html"]
            check("report", f"{name}: {label}", work, args, "", lambda p: p == "r.html", outcome=_escaped)
    damaged = [
        ("record seconds 'abc'", _each_record("run", lambda d, p: d.update(seconds="abc"))),
        ("record phase a string", _each_record("run", lambda d, p: d.update(phases="decode"))),
        ("record attempts [1]", _each_record("run", lambda d, p: d.update(attempts=[1]))),
        ("record a list", lambda w, p: [f.write_text("[]") for f in (w / "run/.state/records").rglob("*.json")]),
        ("summary without overall", _json("r2m_run/scores/r2m-v2/summary.json", lambda d, p: d.pop("overall"))),
        ("summary subsets a list", _json("run/scores/classic-v1/summary.json", lambda d, p: d.update(subsets=[1]))),
        ("results cases a string", _json("run/scores/classic-v1/results.json", lambda d, p: d.update(cases="x"))),
        (
            "results metric value a string",
            _json(
                "run/scores/classic-v1/results.json",
                lambda d, p: [c["metrics"].update(psnr="high") for c in d["cases"]],
            ),
        ),
    ]
    for name, damage in damaged:
        run = "r2m_run" if "overall" in name else "run"
        fresh(work, (getattr(fx, run), run))
        damage(work, "")
        args = ["report", run, "--output", "r.html"]
        check(
            "report",
            f"damaged: {name}",
            work,
            args,
            ("json", "record"),
            lambda p: p == "r.html",
            outcome=_shown_or_refused,
        )


def _shown_or_refused(code: int, text: str, work: Path) -> bool:
    """A damaged record is refused in one line naming its file, or the report shows it as unknown."""
    return (code != 0 and "Error:" in text and ".json" in text) or (code == 0 and (work / "r.html").is_file())
