"""Every JSON file the toolkit reads from outside, damaged in every way a reader must survive.

Groups: "device files" (a FIFO, a link to /dev/zero, a file beyond the size limit: items 5 and 6 of
the second round) and "malformed JSON" (deep nesting, a 400-digit integer, a duplicate key, NaN,
invalid UTF-8, the wrong top-level type: item 10).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .fixtures import Fixtures
from .harness import check, fresh


@dataclass(frozen=True)
class Target:
    name: str
    copies: tuple[str, ...]  # fixture folders copied into the work folder
    path: str  # the file damaged, relative to the work folder
    args: tuple[str, ...]  # the command that must read it
    allowed: tuple[str, ...]  # prefixes of the paths the command may write
    needle: str | tuple[str, ...] | None = None  # what the one line says, any of (default: the file's name)


def targets(fx: Fixtures) -> list[Target]:
    r2m_score = ("score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--metrics", "frame_psnr")
    return [
        Target("R2M meta_data", ("r2m",), "r2m/meta_data/data_single_DDDAAA_100.json", ("verify", "r2m"), ()),
        Target(
            "R2M meta_data (infer)",
            ("r2m",),
            "r2m/meta_data/data_single_DDDAAA_100.json",
            ("infer", "--no-progress", "--model", "warp", "--dataset", "r2m", "--output", "o"),
            ("o",),
        ),
        Target("R2M trajectory", ("r2m",), "r2m/trajectories/trajectory_DDDAAA_30s.json", ("verify", "r2m"), ()),
        Target(  # a readable file's new bytes change the dataset's fingerprint: refused before it is parsed
            "R2M trajectory (score)",
            ("r2m", "r2m_run"),
            "r2m/trajectories/trajectory_DDDAAA_30s.json",
            r2m_score,
            ("r2m_run/scores",),
            ("trajectory_DDDAAA_30s.json", "pass the dataset the run was made on"),
        ),
        Target("R2M run.json", ("r2m", "r2m_run"), "r2m_run/run.json", r2m_score, ("r2m_run/scores",)),
        # (R2M's case.json is not read by score: upstream's layout has none; resume redoes a damaged one.)
        Target(
            "R2M --pairs file",
            ("r2m", "r2m_run"),
            "r2m_run/scores/r2m-v2/pairs/DDDAAA.json",
            (*r2m_score, "--pairs", "r2m_run/scores/r2m-v2/pairs"),
            ("r2m_run/scores",),
        ),
        Target(
            "R2M --protocol file",
            ("r2m", "r2m_run"),
            "p.json",
            ("score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--protocol", "p.json"),
            ("r2m_run/scores",),
        ),
        Target(
            "WROP run.json",
            ("wrop", "wrop_run"),
            "wrop_run/run.json",
            ("score", "--no-progress", "--pred", "wrop_run", "--dataset", "wrop", "--metrics", "psnr"),
            ("wrop_run/scores",),
        ),
        Target(
            "WROP --categories",
            ("wrop",),
            "c.json",
            (
                "infer",
                "--no-progress",
                "--model",
                "hold",
                "--dataset",
                "wrop",
                "--categories",
                "c.json",
                "--output",
                "o",
            ),
            ("o",),
        ),
        Target(
            "PersistBench run.json",
            ("ds", "run"),
            "run/run.json",
            ("score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"),
            ("run/scores",),
        ),
        Target(
            "PersistBench case.json",
            ("ds", "run"),
            "run/static/" + next((fx.run / "static").iterdir()).name + "/case.json",
            ("score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"),
            ("run/scores",),
        ),
        Target("PersistBench availability.json", ("ds",), "ds/availability.json", ("verify", "ds"), ()),
        Target(
            "PersistBench availability.json (score)",
            ("ds", "run"),
            "ds/availability.json",
            ("score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"),
            ("run/scores",),
        ),
        Target(
            "report: results.json",
            ("run",),
            "run/scores/classic-v1/results.json",
            ("report", "run", "--output", "r.html"),
            ("r.html",),
        ),
        Target(
            "report: summary.json",
            ("run",),
            "run/scores/classic-v1/summary.json",
            ("report", "run", "--output", "r.html"),
            ("r.html",),
        ),
        Target(
            "report: R2M summary.json",
            ("r2m_run",),
            "r2m_run/scores/r2m-v2/summary.json",
            ("report", "r2m_run", "--output", "r.html"),
            ("r.html",),
        ),
    ]


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _oversize(path: Path) -> None:
    with open(path, "wb") as f:  # valid JSON, 80 MiB of it: beyond every reader's limit
        f.write(b"{" + b" " * (80 << 20) + b"}")


def _text(text: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return write


def _edit(transform: Callable[[str], str]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        text = path.read_text() if path.exists() else '{"a": 1}'
        path.write_text(transform(text))

    return write


DEVICE = [("a FIFO", _fifo), ("a link to /dev/zero", _dev_zero), ("80 MiB", _oversize)]
MALFORMED = [
    ("nested 100,000 deep", _text("[" * 100_000 + "]" * 100_000)),
    ("objects nested 5,000 deep", _text('{"a":' * 5_000 + "1" + "}" * 5_000)),
    ("a 400-digit integer", _edit(lambda t: t.replace("{", '{"big": ' + "9" * 400 + ",", 1))),
    ("a duplicate key", _edit(lambda t: t.replace("{", '{"dup": 1, "dup": 2,', 1))),
    ("NaN and Infinity", _edit(lambda t: t.replace("{", '{"nan": NaN, "inf": -Infinity,', 1))),
    ("invalid UTF-8", _text(b'{"a": "\xff\xfe"}')),
    ("truncated", _edit(lambda t: t[: len(t) // 2])),
    ("a list instead of an object", _text("[1, 2, 3]")),
]


def cases(fx: Fixtures, work: Path) -> None:
    for target in targets(fx):
        for group, damages in (("device files", DEVICE), ("malformed JSON", MALFORMED)):
            for label, damage in damages:
                if target.name.startswith("R2M meta_data") and label == "a list instead of an object":
                    continue  # meta_data files are lists: their wrong type is an object
                fresh(work, *((getattr(fx, c), c) for c in target.copies))
                if target.path == "p.json":
                    (work / "p.json").write_text('{"name": "x"}')
                if target.path == "c.json":
                    (work / "c.json").write_text("{}")
                damage(work / target.path)
                allowed = target.allowed + (target.path,)
                check(
                    group,
                    f"{target.name}: {label}",
                    work,
                    list(target.args),
                    target.needle or Path(target.path).name,
                    lambda p, a=allowed: p.startswith(a),
                )
