"""PersistBench runs of the second round: run.json fields accepted into outputs (item 15), and
``infer --resume`` on outputs that case.json names but that are not there (item 12)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .fixtures import Fixtures
from .harness import check, fresh


def _run_json(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(work: Path) -> None:
        info = json.loads((work / "run/run.json").read_text())
        change(info)
        (work / "run/run.json").write_text(json.dumps(info))

    return apply


def _case_json(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(work: Path) -> None:
        path = sorted((work / "run").glob("*/*/case.json"))[0]
        info = json.loads(path.read_text())
        change(info)
        path.write_text(json.dumps(info))

    return apply


def _first_frame(work: Path) -> Path:
    return sorted((work / "run").glob("*/*/frames/*.png"))[0]


def cases(fx: Fixtures, work: Path) -> None:
    score = ["score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"]
    for name, change in [
        ("model of 5 MB", lambda i: i.update(model="m" * (5 << 20))),
        ("model a dict", lambda i: i.update(model={"name": "x"})),
        ("oracle 'yes'", lambda i: i.update(oracle="yes")),
        ("sampling num_frames 'all'", lambda i: i["sampling"].update(num_frames="all")),
        (
            "an earlier version's protocol num_frames 'all'",
            lambda i: i.update(protocol={**i.pop("sampling"), "num_frames": "all"}),
        ),
        ("started 10^400", lambda i: i.update(started=int("9" * 400))),
        ("config nested 900 deep", lambda i: i.update(config=json.loads("[" * 900 + "]" * 900))),
    ]:
        fresh(work, (fx.ds, "ds"), (fx.run, "run"))
        _run_json(change)(work)
        check("runs", f"PersistBench run.json {name}", work, score, "run.json", lambda p: p.startswith("run/scores"))

    def redone(code: int, text: str, w: Path) -> bool:
        frames = list((w / "run").glob("*/*/frames"))
        return code == 0 and frames and all(any(p.iterdir()) for p in frames) and "done 0" not in text

    infer = ["infer", "--no-progress", "--model", "hold", "--dataset", "ds", "--output", "run", "--resume"]
    for name, damage in [
        ("a frame deleted", lambda w: _first_frame(w).unlink()),
        ("a frame truncated", lambda w: _first_frame(w).write_bytes(_first_frame(w).read_bytes()[:100])),
        ("case.json size ['x', -1]", _case_json(lambda c: c.update(size=["x", -1]))),
        ("case.json frame_indices 10^6 long", _case_json(lambda c: c.update(frame_indices=list(range(10**6))))),
        ("frames folder deleted", lambda w: __import__("shutil").rmtree(_first_frame(w).parent)),
    ]:
        fresh(work, (fx.ds, "ds"), (fx.run, "run"))
        damage(work)
        check(
            "resume",
            f"PersistBench infer --resume: {name}",
            work,
            infer,
            "",
            lambda p: p.startswith("run"),
            outcome=redone,
        )
