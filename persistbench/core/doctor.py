"""``persistbench doctor``: what this machine has for each command, and what fixes what is missing.

Each :class:`Check` says ok or missing, what was found (a version, a path) and
the fix. ``needed_for`` names the commands that cannot work without it; the
exit code is non-zero when a check needed by the requested commands fails.
With a judge (``--judge-url``), its endpoint is checked before a long run: the
models it lists, and one tiny request (a 16 x 16 image, a one-line JSON
question) with the time it took, each within the judge's timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from persistbench.core.checks import Check, installed_version

COMMANDS = ("download", "infer", "score", "pack", "fetch", "synth", "report", "demo", "arena")


def _package(dist: str, needed_for: set[str], fix: str, used_by: set[str] = frozenset()) -> Check:
    v = installed_version(dist)
    return Check(dist, v is not None, v or "not installed", "" if v else fix, frozenset(needed_for), frozenset(used_by))


def _importable(module: str, needed_for: set[str], fix: str) -> Check:
    """A package whose distribution and module share ``module``'s name, checked by importing it."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as e:
        return Check(module, False, f"does not import ({e})", fix, frozenset(needed_for))
    return Check(module, True, installed_version(module) or "imports", "", frozenset(needed_for))


def _ffmpeg() -> Check:
    from persistbench.io.video import ffmpeg_exe

    fix = "pip install imageio-ffmpeg (bundles ffmpeg), or point IMAGEIO_FFMPEG_EXE at an ffmpeg binary"
    needed = frozenset({"download", "pack", "demo", "synth"})
    try:
        exe = ffmpeg_exe()
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return Check("ffmpeg", False, str(e).splitlines()[0] if str(e) else type(e).__name__, fix, needed)
    return Check("ffmpeg", True, f"{out.split(' Copyright')[0].strip()} ({exe})", "", needed)


def _lpips(weights: str | None) -> list[Check]:
    fix = 'pip install -e ".[lpips]"'
    checks = [_package(d, {"score"}, fix) for d in ("torch", "torchvision", "lpips")]
    if not all(c.ok for c in checks):
        return [
            Check(c.name, c.ok, c.detail, c.fix, used_by=SCORE) for c in checks
        ]  # without torch, LPIPS is stated unavailable
    from persistbench.backends.lpips import ALEXNET_FILE, alexnet_path

    path = alexnet_path(weights)
    found = os.path.isfile(path)
    checks.append(
        Check(
            "LPIPS AlexNet weights",
            found,
            path if found else f"not found at {path}",
            "" if found else f"put {ALEXNET_FILE} there (or pass --lpips-weights FILE, or score --allow-download)",
            used_by=SCORE,
        )
    )
    import torch

    cuda = torch.cuda.is_available()
    checks.append(
        Check(
            "CUDA",
            cuda,
            torch.cuda.get_device_name(0) if cuda else "no CUDA device (LPIPS runs on the CPU)",
            "" if cuda else "optional: a CUDA build of torch and a GPU make LPIPS faster",
            used_by=frozenset({"infer", "score"}),
        )
    )
    return checks


def _backends(judge=None) -> list[Check]:
    """Each model backend (optional): whether its package imports and its weights are in the Hugging Face cache
    (nothing is downloaded or loaded); the judge's endpoint is checked by :func:`_judge_endpoint`."""
    from persistbench.backends import BACKENDS, BackendOptions, BackendUnavailable, check_backend

    out = []
    for name, spec in BACKENDS.items():
        try:
            check_backend(name, BackendOptions(judge=judge))
            ok, detail, fix = True, spec.repo or "", ""
        except BackendUnavailable as e:
            ok, detail = False, str(e)
            fix = "only for " + spec.role.split(":")[0]
        except Exception as e:  # an unreadable cache, a broken install
            ok, detail, fix = False, f"{type(e).__name__}: {e}".splitlines()[0], "only for " + spec.role.split(":")[0]
        if name == "judge" and not ok and "--judge-url" in detail:
            ok, detail, fix = True, "pass --judge-url URL to score (an OpenAI-compatible endpoint)", ""
        out.append(Check(f"backend {name}", ok, f"{detail} [{spec.role}; CPU: {spec.cpu}]", fix, used_by=SCORE))
    return out


def _judge_endpoint(opts) -> list[Check]:
    """The judge's listing (is ``opts.model`` among the models it serves?) and one tiny judgment, timed."""
    import time
    from dataclasses import replace

    import numpy as np

    from persistbench.backends import BACKENDS as specs
    from persistbench.backends import BackendUnavailable, require

    needed = frozenset({"score"})
    try:
        require(specs["judge"])
    except BackendUnavailable as e:
        return [Check("judge endpoint", False, str(e), "pip install 'persistbench[judge]'", needed)]
    from persistbench.backends.judge import Judge, JudgmentFailed, Request

    judge = Judge(replace(opts, retries=0, max_failures=0), cache=False)
    where = judge.provenance()["judge_url"]
    start = time.monotonic()
    try:
        listed = judge.models()
        took = time.monotonic() - start
        ok = opts.model in listed
        detail = f"{where} lists {', '.join(listed) or 'no models'} ({took:.2f} s)"
        listing = Check(
            "judge endpoint",
            ok,
            detail if ok else f"{detail}; {opts.model} is not among them",
            "" if ok else "pass --judge-model with one of the models listed",
            needed,
        )
    except JudgmentFailed as e:  # some endpoints have no listing: the request below still says whether it works
        listing = Check("judge endpoint", True, f"{where}: no model listing ({e})", used_by=needed)
    question = Request('Reply with the JSON object {"ok": true} and nothing else.', (np.zeros((16, 16, 3), np.uint8),))
    start = time.monotonic()
    try:
        answer = judge.ask(replace(question, max_tokens=256), lambda obj: obj)
    except JudgmentFailed as e:
        fix = "check --judge-url, the key in $" + opts.key_env + " and --judge-timeout"
        request = Check("judge request", False, f"{e} after {time.monotonic() - start:.2f} s", fix, needed)
    else:
        by = answer.judge.get("answered_by") or opts.model
        detail = f"{by} answered in {time.monotonic() - start:.2f} s: {answer.raw.strip()[:60]!r}"
        request = Check("judge request", True, detail, "", needed)
    return [listing, request]


def judge_battery(opts, dataset: str, protocol: str | None) -> Check:
    """The judge's calibration battery (:mod:`.calibration`) on ``dataset`` under ``protocol`` (default: the
    suite's), asked alone: right when its accuracy reaches ``opts.min_accuracy``."""
    from persistbench.backends.judge import Judge
    from persistbench.core import calibration
    from persistbench.core.suites import detect, open_suite

    suite = open_suite(dataset, detect(dataset), {})
    chosen = suite.load_protocol(protocol)
    items = chosen.scorer.judge_battery(suite, chosen, chosen.metrics)
    needed = frozenset({"score"})
    if not items:
        return Check("judge calibration", False, f"protocol {chosen.name} asks no judge", "pass --protocol", needed)
    found = calibration.ask(Judge(opts, cache=False), items)
    line = calibration.check(found, opts.min_accuracy, False)
    detail = calibration.md_lines({**found, "date": "now"})[0].strip()
    return Check(
        "judge calibration",
        line is None,
        detail if line is None else line,
        "" if line is None else "choose another judge",
        needed,
    )


def _writable(label: str, directory: Path, needed_for: set[str]) -> Check:
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        return Check(label, False, f"{directory}: {e.strerror}", "choose a writable directory", frozenset(needed_for))
    return Check(label, True, f"{directory} (writable)", "", frozenset(needed_for))


def run_checks(
    cache: str | os.PathLike = "cache",
    output: str | os.PathLike = ".",
    lpips_weights: str | None = None,
    judge=None,
) -> list[Check]:
    """Every check, in a fixed order; ``judge`` (a :class:`~persistbench.backends.JudgeOptions`) adds its
    endpoint's."""
    from persistbench.core.suites import SUITES

    py = sys.version_info
    checks = [
        Check(
            "python",
            py >= (3, 10),
            sys.version.split()[0],
            "" if py >= (3, 10) else "Python >= 3.10",
            frozenset(COMMANDS),
        )
    ]
    checks.append(_package("persistbench", set(COMMANDS), "pip install -e ."))
    core = {
        "numpy": {"download", "infer", "score"},
        "opencv-python-headless": {"download", "infer", "score"},
        "yt-dlp": {"download", "demo"},
        "huggingface_hub": {"fetch"},
        "click": set(COMMANDS),
        "pillow": {"report"},
    }
    checks += [_package(d, needed, "pip install -e .") for d, needed in core.items()]
    checks.append(_ffmpeg())
    checks += [c for name in SUITES for c in SUITES[name].checks()]
    checks += _lpips(lpips_weights)
    checks.append(_package("matplotlib", {"report", "demo"}, 'pip install -e ".[report]"'))
    checks += [_importable(d, {"arena"}, 'pip install -e ".[arena]"') for d in ("starlette", "uvicorn")]
    stages = {"download", "infer", "score", "pack", "fetch"}
    checks.append(_package("ray", set(), "pip install 'persistbench[ray]' (only for --executor ray)", stages))
    checks += _backends(judge)
    checks += _judge_endpoint(judge) if judge is not None else []
    checks.append(_writable("cache directory", Path(cache), {"download", "demo"}))
    checks.append(_writable("output directory", Path(output), set(COMMANDS)))
    return checks


DOWNLOAD, SCORE = frozenset({"download"}), frozenset({"score"})


def failing(checks: list[Check], wanted: str) -> list[Check]:
    """Checks that fail and are needed for ``wanted`` (a command, or ``all``)."""
    return [c for c in checks if not c.ok and c.needed_for and (wanted == "all" or wanted in c.needed_for)]
