"""The third round (issue 39): inputs whose bytes are bounded but whose memory or time was not, and readers
that bypassed the project's safe ones. The submission gate, recipes read as a stream, the Hub, the arena's
merged votes and store, the WROP loose output and the scores link. Each command must also stay under
:data:`MEMORY_MB` (a stricter budget than the harness's default)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from . import harness
from .fixtures import Fixtures
from .harness import ROOT, fresh

MEMORY_MB = 1024
sys.path.insert(0, str(ROOT / "tests"))  # the loopback Hub of the tests (tests/fakes/fakehub.py)


def check(*args, **kwargs):
    """The harness's check under this round's memory budget."""
    return harness.check(*args, memory_mb=MEMORY_MB, **kwargs)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _members(results: bytes = b"[]") -> dict[str, bytes]:
    """The four members of a submission, the manifest agreeing with ``results``."""
    from persistbench.suites.persistbench.submission import MANIFEST, MANIFEST_FORMAT, REPORTS

    reports = {name: b"{}" for name in REPORTS}
    reports["results.json"] = results
    manifest = {
        "format": MANIFEST_FORMAT,
        "reports": {n: hashlib.sha256(d).hexdigest() for n, d in reports.items()},
        "cases": {},
    }
    return {**reports, MANIFEST: json.dumps(manifest).encode()}


def _patched(raw: bytes, header: int, directory: int, value: bytes) -> bytes:
    """``raw`` with ``value`` written at offset ``header`` of the first local header and ``directory`` of
    the first central directory entry."""
    out = bytearray(raw)
    i, j = raw.index(b"PK\x03\x04"), raw.index(b"PK\x01\x02")
    out[i + header : i + header + len(value)] = value
    out[j + directory : j + directory + len(value)] = value
    return bytes(out)


def submission_cases(fx: Fixtures, work: Path) -> None:
    group = "submission gate"
    fresh(work)
    (work / "run").mkdir()
    good = _zip(work / "good.zip", _members()).read_bytes()
    i = good.index(b"PK\x03\x04")
    name_len = int.from_bytes(good[i + 26 : i + 28], "little")
    corrupt = bytearray(good)
    corrupt[i + 30 + name_len : i + 46 + name_len] = b"\xff" * 16
    flag = good[i + 6] | 1
    inputs = {
        "a 250 MiB results.json of [], (zipped: 255 KB)": (
            lambda p: _zip(p, _members(b"[" + b"[]," * ((250 << 20) // 3) + b"[]]")),
            "JSON lists and objects",
        ),
        "results.json nested 200,000 deep": (
            lambda p: _zip(p, _members(b"[" * 200_000 + b"]" * 200_000)),
            ("nested", "deeper"),
        ),
        "an encrypted member": (lambda p: p.write_bytes(_patched(good, 6, 8, bytes([flag]))), "an encrypted member"),
        "compression method 99": (
            lambda p: p.write_bytes(_patched(good, 8, 10, (99).to_bytes(2, "little"))),
            "compression method 99 refused",
        ),
        "a corrupt deflate stream": (lambda p: p.write_bytes(bytes(corrupt)), "a damaged member"),
        'results.json = ["x"]': (lambda p: _zip(p, _members(b'["x"]')), "every entry must be an object"),
        "uids of mixed types": (
            lambda p: _zip(p, _members(b'[{"uid": 1}, {"uid": "a"}]')),
            "every entry must be an object",
        ),
        "duplicate keys in the manifest": (
            lambda p: _zip(p, {**_members(), "manifest.json": b'{"format": 1, "format": 2}'}),
            "appears twice",
        ),
    }
    for name, (make, needle) in inputs.items():
        path = work / "s.zip"
        path.unlink(missing_ok=True)
        make(path)
        check(group, name, work, ["package", "--check", "s.zip", "--pred", "run"], needle)


def _cache(path: str) -> bool:
    """The download cache is the command's own (a refused download may leave its folders, never a file)."""
    return path in ("cache", "cache/recipes")


def recipes_cases(fx: Fixtures, work: Path) -> None:
    group = "recipes as a stream"
    fresh(work)
    with open(work / "blank.jsonl", "wb") as f:
        for _ in range(256):
            f.write(b"\n" * (1 << 20))
    with open(work / "long.jsonl", "wb") as f:
        f.write(b'{"x": "')
        for _ in range(70):
            f.write(b"a" * (1 << 20))
        f.write(b'"}\n')
    for name, file, needle in (
        ("256 MiB of blank lines", "blank.jsonl", "no recipes"),
        ("one 70 MiB line", "long.jsonl", "a line of more than 64 MiB"),
    ):
        args = ["download", "--no-progress", "--recipes", file, "--output", "ds", "--cache", "cache"]
        check(group, name, work, args, needle, _cache)


def hub_cases(fx: Fixtures, work: Path) -> None:
    from fakes.fakehub import FakeHub

    group = "hub"
    fresh(work)
    repo = work.parent / "hub-repo"
    repo.mkdir(exist_ok=True)
    (repo / "recipes.jsonl").write_bytes(b"{}\n")
    env = {"PERSISTBENCH_HTTP_TIMEOUT": "3", "HF_HOME": str(work.parent / "hf-home")}
    args = ["download", "--no-progress", "--recipes", "hf://someone/data/recipes.jsonl", "--output", "ds"]
    args += ["--cache", "cache"]
    with FakeHub("someone/data", repo) as hub:
        env["HF_ENDPOINT"] = hub.url
        hub.slow = "/"
        check(group, "a Hub answering one byte every 0.2 s", work, args, "no complete answer", _cache, env=env)
        hub.slow = None
        hub.declared["recipes.jsonl"] = 3 << 30
        check(group, "recipes declared at 3 GiB", work, args, "the Hub declares", _cache, env=env)
        hub.declared["recipes.jsonl"] = 1000
        check(group, "recipes sent past their declared size", work, args, "larger than", _cache, env=env)
    wrop = fresh(work, (fx.wrop, "corpus")) / "corpus"
    with FakeHub("Hokin/object-permanence", wrop) as hub:
        env["HF_ENDPOINT"] = hub.url
        hub.slow = "/api/"
        infer = ["infer", "--no-progress", "--model", "hold", "--dataset", "hf://datasets/Hokin/object-permanence"]
        check(group, "a slow Hub corpus", work, [*infer, "--output", "run"], "no complete answer", env=env)


def arena_cases(fx: Fixtures, work: Path) -> None:
    group = "arena merge and store"
    fresh(work, (fx.wrop_run, "hold"))
    subprocess.run(
        [sys.executable, "-m", "persistbench", "infer", "--no-progress", "--model", "flow", "--dataset", fx.wrop]
        + ["--output", "flow"],
        cwd=work,
        check=True,
        capture_output=True,
    )
    made = subprocess.run(
        [sys.executable, "-m", "persistbench", "arena", "hold", "flow", "--output", "study", "--add-rater", "zoe"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        raise SystemExit(f"arena fixture: {made.stderr.strip()}")
    from persistbench.arena.study import open_study

    study = open_study([work / "hold", work / "flow"])
    case = sorted(study.suite.key(c) for c in study.cases)
    good = {
        "pair": "p1", "study": study.id, "rater": "zoe", "case_key": case[0], "left_run": "hold",
        "right_run": "flow", "answer": "left", "time": "2026-01-01T00:00:00Z", "page_version": "arena-1",
    }  # fmt: skip
    os.mkfifo(work / "fifo.jsonl")
    (work / "zero.jsonl").symlink_to("/dev/zero")
    (work / "bytes.jsonl").write_bytes(b'{"pair": "\xff"}\n')
    for name, content in {
        "judge": {**good, "rater": "judge:Qwen"},
        "same": {**good, "right_run": "hold"},
        "case": {**good, "case_key": "nowhere/none"},
        "big": {**good, "rater": "x" * 50_000_000},
    }.items():
        (work / f"{name}.jsonl").write_text(json.dumps(content) + "\n")
    for name, file, needle in (
        ("a FIFO", "fifo.jsonl", "not a regular file"),
        ("a link to /dev/zero", "zero.jsonl", "not a regular file"),
        ("a non-UTF-8 byte", "bytes.jsonl", "decode"),
        ("a vote in the judge's name", "judge.jsonl", "the judge's name"),
        ("one run on both sides", "same.jsonl", "two different runs"),
        ("an unknown case", "case.jsonl", ("not one of this study's", "case")),
        ("a 50 MB rater name", "big.jsonl", "larger than the"),
    ):
        check(group, f"--merge {name}", work, ["arena", "--output", "study", "--merge", file], needle)
    for name, content in (("garbage", b"\x00garbage" * 100), ("empty", b"")):
        folder = work / f"damaged-{name}"
        shutil.copytree(work / "study", folder)
        (folder / "arena.sqlite").write_bytes(content)
        args = ["arena", "--output", folder.name, "--ratings"]
        check(group, f"an arena.sqlite that is {name}", work, args, "arena.sqlite")


def layout_cases(fx: Fixtures, work: Path) -> None:
    group = "links and layouts"
    fresh(work, (fx.run, "run"), (fx.ds, "ds"))
    (work / "elsewhere").mkdir()
    shutil.rmtree(work / "run" / "scores")
    (work / "run" / "scores").symlink_to(work / "elsewhere")
    args = ["score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"]
    check(group, "a scores link pointing outside the run", work, args, "scores")
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    loose = work / "loose"
    make(loose, WropSynthConfig(samples=1, loose=True))
    task = sorted(p for p in loose.glob("*_task") if p.is_dir())[0]
    task.symlink_to(Path(shutil.move(task, work / "moved")))
    args = ["infer", "--no-progress", "--model", "hold", "--dataset", "loose", "--output", "wr"]
    check(group, "a linked <task>_task folder", work, args, "links are refused")
