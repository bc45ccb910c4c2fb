"""What users meet when hosts refuse downloads: yt-dlp's messages mapped to one line with the fix, produced by
a real loopback server through real yt-dlp downloads, and a rate-limiting host slowing the run down instead of
failing its cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from fakes import ROOT
from fakes.fake_youtube import REFUSALS, FakeYouTube, deno
from fakes.scripted_host import Scripted, with_urls

from persistbench.cli import main
from persistbench.io.serve import FileServer
from persistbench.suites.persistbench.build.source_errors import explain
from persistbench.suites.persistbench.synth import SynthConfig, generate

CFG = SynthConfig(scenes=2, seed=7, pano_size=(512, 256), view_size=(128, 96), n_frames=16, fps=8.0)

# yt-dlp's own words for what YouTube answers (its extractor's messages, as a user sees them)
MESSAGES = {
    "bot_check": "[youtube] abc: Sign in to confirm you’re not a bot. Use --cookies-from-browser or --cookies for the "
    "authentication.",
    "rate_limited": "[youtube] abc: This content isn't available, try again later. The current session has been "
    "rate-limited by YouTube for up to an hour.",
    "age_restricted": "[youtube] abc: Sign in to confirm your age. This video may be inappropriate for some users.",
    "private": "[youtube] abc: Private video. Sign in if you've been granted access to this video",
    "removed": "[youtube] abc: Video unavailable. This video has been removed by the uploader",
    "geo_blocked": "[youtube] abc: The uploader has not made this video available in your country",
}


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_each_youtube_refusal_has_its_kind_and_fix(kind):
    problem = explain(MESSAGES[kind])
    line = problem.line(MESSAGES[kind])
    assert problem.kind == kind and "\n" not in line and line.startswith(kind.replace("_", " ") + ": ")
    assert problem.permanent == (kind != "rate_limited")
    fixes = {"bot_check": "--cookies", "rate_limited": "--sleep-interval", "age_restricted": "--cookies"}
    assert fixes.get(kind, "") in problem.fix


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    root = tmp_path_factory.mktemp("hosts")
    with FileServer(root) as real:
        generate(root / "http", CFG, base_url=f"{real.url}/http/sources")
        with Scripted(f"{real.url}/http/sources") as scripted:
            yield root, scripted


@pytest.mark.slow
@pytest.mark.parametrize(
    "code, kind, fix",
    [
        (404, "removed", "the source is gone"),
        (410, "removed", "the source is gone"),
        (451, "geo_blocked", "--proxy"),
        (403, "forbidden", "--cookies or --proxy"),
    ],
)
def test_a_refusing_host_gives_each_case_one_line_with_the_fix(hosts, tmp_path, code, kind, fix):
    root, scripted = hosts
    recipes = with_urls(root, tmp_path, [f"{scripted.url}/status/{code}/{{file}}"])
    args = ["download", "--recipes", str(recipes), "--output", str(tmp_path / "ds"), "--cache", str(tmp_path / "c")]
    result = CliRunner().invoke(main, [*args, "--no-progress", "--retries", "0"])
    assert result.exit_code == 1
    lines = [x for x in result.output.splitlines() if f"HTTP Error {code}" in x]
    assert len(lines) == 1 and f"unavailable: {kind.replace('_', ' ')}: " in lines[0] and fix in lines[0], result.output


@pytest.mark.slow
def test_a_rate_limiting_host_slows_the_run_down_and_every_case_is_rebuilt(hosts, tmp_path):
    root, scripted = hosts
    recipes = with_urls(root, tmp_path, [f"{scripted.url}/flaky/3/{{file}}", f"{scripted.url}/flaky/2/{{file}}"])
    cache = tmp_path / "cache"
    args = ["download", "--recipes", str(recipes), "--output", str(tmp_path / "ds"), "--cache", str(cache)]
    # --retries 0: other failures would end a case at once; 429s are retried, slower each time
    result = CliRunner().invoke(main, [*args, "--no-progress", "--retries", "0", "--sleep-interval", "0"])
    assert result.exit_code == 0, result.output
    assert "done 2, skipped 0, failed 0" in result.output
    limited = [p for p, code in scripted.requests if code == 429 and p.startswith("/flaky/")]
    assert len(limited) == 5  # 3 + 2 refusals, each followed by a slower retry
    state = json.loads((cache / ".throttle.json").read_text())
    assert 0 < state["delay"] < 5  # raised by the 429s, halved back by the downloads that went through


def test_rate_limit_and_sleep_interval_reach_yt_dlp(hosts, tmp_path):
    from persistbench.suites.persistbench.build.recipes import load_recipes
    from persistbench.suites.persistbench.build.sources import SourceOptions, job
    from persistbench.suites.persistbench.build.ytdl_job import Log, ydl_params

    root, _ = hosts
    recipe = load_recipes(root / "http" / "recipes.jsonl")[0]
    opts = SourceOptions(cache=tmp_path, rate_limit=2 * 1024 * 1024, sleep_interval=1.5)
    params = ydl_params(job(recipe, opts, str(tmp_path), 0.0, 1.0), Log(), [])
    assert params["ratelimit"] == 2 * 1024 * 1024 and params["sleep_interval"] == 1.5
    bad = CliRunner().invoke(main, ["download", "--rate-limit", "fast", "--dry-run"])
    assert bad.exit_code == 2 and "a rate in bytes a second" in bad.output


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "ssh"])
def test_youtubes_refusals_through_yt_dlps_youtube_extractor(hosts, sshd_server, tmp_path, backend):
    """Real yt-dlp, its YouTube extractor and our --proxy, against YouTube played on loopback (tests/fakes/fake_youtube.py):
    each refusal fails its case with one line naming the kind and the fix, here and on an SSH remote."""
    runtime = deno(ROOT / ".ci" / "wheels", tmp_path / "bin")
    if runtime is None:
        pytest.skip("the deno wheel (.ci/run downloads it into .ci/wheels)")
    root, _ = hosts
    base = json.loads((root / "http" / "recipes.jsonl").read_text().splitlines()[0])
    recipes = tmp_path / "youtube.jsonl"
    with open(recipes, "w") as f:
        for video in REFUSALS:
            source = {**base["source"], "id": video, "url": f"https://www.youtube.com/watch?v={video}"}
            case = f"Synth_{video}_0_obj_{base['case_id'].rsplit('_obj_', 1)[1]}"
            f.write(json.dumps({**base, "case_id": case, "source": source}) + "\n")
    with FakeYouTube(tmp_path.parent / "fake-youtube") as youtube:
        env = {**os.environ, "PYTHONPATH": str(youtube.pythonpath), "PATH": f"{runtime.parent}:{os.environ['PATH']}"}
        args = ["--recipes", str(recipes), "--output", str(tmp_path / "ds"), "--cache", str(tmp_path / "cache")]
        args += ["--proxy", youtube.url, "--retries", "0", "--no-progress"]
        if backend == "ssh":  # the remote interpreter trusts the test CA and finds deno beside it
            python = tmp_path / "bin" / "python"
            python.write_text(
                f'#!/bin/sh\nPATH={runtime.parent}:$PATH PYTHONPATH={youtube.pythonpath} exec {sys.executable} "$@"\n'
            )
            python.chmod(0o755)
            args += ["--backend", "ssh", "--remote", sshd_server.remote, "--ssh-key", str(sshd_server.key)]
            args += ["--known-hosts", str(sshd_server.known_hosts), "--remote-python", str(python)]
        done = subprocess.run(
            [sys.executable, "-m", "persistbench", "download", *args], env=env, capture_output=True, text=True
        )
    output = done.stdout + done.stderr
    assert done.returncode == 1 and f"done 0, skipped 0, failed {len(REFUSALS)}" in output, output
    kinds = {"botcheck000": ("bot check", "--cookies"), "agegated000": ("age restricted", "--cookies")}
    kinds |= {"private0000": ("private", ""), "removed0000": ("removed", "the source is gone")}
    kinds["geoblocked0"] = ("geo blocked", "--proxy")
    for video, (kind, fix) in kinds.items():
        lines = [x for x in output.splitlines() if f"watch?v={video}" in x]
        assert len(lines) == 1 and f"unavailable: {kind}: [youtube] {video}: " in lines[0] and fix in lines[0], lines
    assert ("POST", "/youtubei/v1/player?prettyPrint=false") in youtube.requests  # InnerTube was asked too


def test_doctor_says_when_yt_dlp_is_too_old():
    import datetime

    from persistbench.suites.persistbench.build.checks import yt_dlp_age

    assert yt_dlp_age("2026.10.26", datetime.date(2026, 11, 1)).ok
    old = yt_dlp_age("2026.01.02", datetime.date(2026, 11, 1))
    assert not old.ok and "pip install -U yt-dlp" in old.fix and "303 days old" in old.detail
    assert not yt_dlp_age("nightly", datetime.date(2026, 11, 1)).ok
