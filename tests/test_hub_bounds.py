"""The Hub read as untrusted: every exchange bounded as a whole in time, declared sizes checked before a
byte is fetched, transfers stopped at what was declared, nothing left behind, and no call the user did not
ask for (huggingface_hub's telemetry). A loopback Hub (tests/fakes/fakehub.py) that drips or lies, run through
the real CLI in a fresh process (huggingface_hub reads ``HF_ENDPOINT`` when it is first imported)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.clirun import peak_rss_mib
from fakes.fakehub import FakeHub

from persistbench.suites.wrop import layout as wrop_layout

pytestmark = pytest.mark.slow  # every test here takes seconds: slow servers are waited out to their deadlines

REPO = "someone/persistbench"
DEADLINE_S = 2


def _cli(hub: FakeHub, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "0",
        "PERSISTBENCH_HTTP_TIMEOUT": str(DEADLINE_S),
    }
    env.pop("HF_HUB_DISABLE_TELEMETRY", None)
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", *args, "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    return result, time.monotonic() - start


def _one_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def recipes_repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "recipes.jsonl").write_bytes(b"{}\n")
    return root


def test_a_slow_hub_cannot_hold_the_recipes_download(recipes_repo, tmp_path):
    """Headers and body one byte every 0.2 s: per-read timeouts never fire; the whole exchange is cut at the
    deadline, and not retried."""
    with FakeHub(REPO, recipes_repo) as hub:
        hub.slow = "/"  # every request of the exchange drips
        result, seconds = _cli(
            hub, tmp_path, "download", "--recipes", f"hf://{REPO}/recipes.jsonl", "--output", "ds", "--cache", "c"
        )
        asked = [p for _, p, _ in hub.requests]
    _one_line(result, f"hf://{REPO}/recipes.jsonl: cannot fetch recipes", f"no complete answer within {DEADLINE_S} s")
    assert seconds < DEADLINE_S + 10, seconds
    assert len(asked) == 1, asked  # a passed deadline is not retried
    assert not (tmp_path / "ds").exists() and not list((tmp_path / "c").rglob("*.jsonl"))


def test_hub_recipes_declared_too_large_are_refused_before_a_byte(recipes_repo, tmp_path):
    with FakeHub(REPO, recipes_repo) as hub:
        hub.declared["recipes.jsonl"] = 3 << 30
        result, _ = _cli(
            hub, tmp_path, "download", "--recipes", f"hf://{REPO}/recipes.jsonl", "--output", "ds", "--cache", "c"
        )
        methods = [m for m, p, _ in hub.requests if p.endswith("recipes.jsonl")]
    _one_line(result, f"the Hub declares {3 << 30} bytes, more than the")
    assert methods == ["HEAD"]  # never asked for the bytes
    assert not list((tmp_path / "c").rglob("*")) or not [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert not (tmp_path / "hf").exists() or not [p for p in (tmp_path / "hf").rglob("*") if p.is_file()]


def test_hub_recipes_are_stopped_at_their_declared_size(recipes_repo, tmp_path):
    """A HEAD that declares 1,000 bytes, a GET that sends zeros without end: stopped at 1,000, memory flat,
    nothing left in the cache."""
    with FakeHub(REPO, recipes_repo) as hub:
        hub.declared["recipes.jsonl"] = 1000
        result, _ = _cli(
            hub, tmp_path, "download", "--recipes", f"hf://{REPO}/recipes.jsonl", "--output", "ds", "--cache", "c"
        )
    _one_line(result, "larger than the 1000 bytes allowed")
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and "repo" not in p.parts]


def test_hub_recipes_from_an_honest_hub(recipes_repo, tmp_path):
    """The control: the same Hub, honest, gives the file; only the file was asked for (no telemetry, no
    other call)."""
    from persistbench.suites.persistbench.build.download import bundled_recipes

    (recipes_repo / "recipes.jsonl").write_bytes(bundled_recipes().read_bytes())
    with FakeHub(REPO, recipes_repo) as hub:
        result, _ = _cli(
            hub,
            tmp_path,
            "download",
            "--recipes",
            f"hf://{REPO}/recipes.jsonl",
            "--output",
            "ds",
            "--cache",
            "c",
            "--dry-run",
        )
        asked = [(m, p) for m, p, _ in hub.requests]
    assert result.returncode == 0 and "dry run: 8 case(s)" in result.stdout, result.stderr
    assert asked == [("HEAD", f"/datasets/{REPO}/resolve/main/recipes.jsonl")] + [
        ("GET", f"/datasets/{REPO}/resolve/main/recipes.jsonl")
    ], asked


@pytest.fixture(scope="module")
def wrop(tmp_path_factory) -> Path:
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    out = tmp_path_factory.mktemp("wrop")
    make(out, WropSynthConfig(samples=1))
    return out


@pytest.mark.parametrize("slow", ["/api/datasets/", ".tar"])
def test_a_slow_hub_cannot_hold_a_wrop_corpus(wrop, tmp_path, slow):
    """hf://datasets/... for WROP: the revision's resolution and the archives' range reads are bounded."""
    with FakeHub(wrop_layout.HUB_REPO, wrop) as hub:
        hub.slow = slow
        args = ["infer", "--model", "flow", "--dataset", f"hf://datasets/{wrop_layout.HUB_REPO}", "--output", "run"]
        result, seconds = _cli(hub, tmp_path, *args, "--per-task", "1")
        asked = [p for _, p, _ in hub.requests]
    lines = result.stderr.strip().splitlines()
    if slow == ".tar":  # each case fails on its own, its line naming the read that passed the deadline
        assert result.returncode == 1 and lines[0].startswith("Error: 3 cases failed"), result.stderr[-2000:]
        assert len(lines) == 4 and all(f"no complete answer within {DEADLINE_S} s" in line for line in lines[1:])
        assert seconds < 3 * DEADLINE_S + 15, seconds
    else:
        _one_line(result, f"no complete answer within {DEADLINE_S} s")
        assert seconds < DEADLINE_S + 10, seconds
        assert not (tmp_path / "run").exists()
    assert not any("telemetry" in p for p in asked), asked


def test_the_hub_clients_memory_stays_flat_against_an_endless_file(recipes_repo, tmp_path, monkeypatch):
    """A file declared at 1 GiB (within the limit) whose GET sends 256 MiB and stops: streamed to disk, memory
    flat, the short transfer refused, nothing left."""
    with FakeHub(REPO, recipes_repo) as hub:
        hub.declared["recipes.jsonl"] = 1 << 30
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        args = ["download", "--no-progress", "--recipes", f"hf://{REPO}/recipes.jsonl"]
        result, peak = peak_rss_mib(*args, "--output", tmp_path / "ds", "--cache", tmp_path / "c")
    _one_line(result, f"{256 << 20} bytes received, {1 << 30} declared")
    assert peak < 300, peak
    assert not [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
