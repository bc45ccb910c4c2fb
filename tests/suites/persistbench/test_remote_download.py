"""download --backend ssh against a real OpenSSH server on loopback (Debian's openssh-server, started here with a
temporary host key, user key and port): the same dataset as a local download, a transfer cut off and resumed,
a wrong host key and an unreachable host refused before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes.download_cli import download, tree
from fakes.scripted_host import Scripted, with_urls
from fakes.sshd import MISSING, Sshd, free_port

from persistbench.cli import main
from persistbench.suites.persistbench.build.recipes import load_recipes
from persistbench.suites.persistbench.build.remote import job_folder
from persistbench.suites.persistbench.build.sources import SourceOptions, job, needed_range

pytestmark = pytest.mark.skipif(MISSING, reason="openssh-server (.ci/run installs it)")


def _ssh_args(sshd_server: Sshd) -> list[str]:
    return [
        "--backend",
        "ssh",
        "--remote",
        sshd_server.remote,
        "--ssh-key",
        str(sshd_server.key),
        "--known-hosts",
        str(sshd_server.known_hosts),
    ]


def _remote_folders(recipes: Path) -> list[Path]:
    """The remote job folders of ``recipes``' clips that still exist (the loopback remote's home is this one's)."""
    opts = SourceOptions(cache=recipes.parent)
    jobs = [job(r, opts, "", *needed_range(r, opts.pad)) for r in load_recipes(recipes)]
    return [Path.home() / job_folder(j) for j in jobs if (Path.home() / job_folder(j)).exists()]


@pytest.mark.slow
def test_ssh_gives_the_local_dataset_and_a_cut_transfer_resumes(sshd_server, served_recipes, tmp_path):
    recipes, files = served_recipes
    local = download(recipes, tmp_path / "local")
    assert local.exit_code == 0, local.output

    # the first run's ssh cuts the first clip transfer off half way (exit 255, as a dropped connection)
    wrapper = tmp_path / "bin" / "ssh"
    wrapper.parent.mkdir()
    real = shutil.which("ssh")
    wrapper.write_text(
        "#!/bin/bash\n"
        f'if [[ "${{@: -1}}" == cat\\ * && ! -e {tmp_path}/cut ]]; then touch {tmp_path}/cut; '
        f'{real} "$@" | head -c 2000; exit 255; fi\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    args = [*_ssh_args(sshd_server), "--remote-python", sys.executable]
    env = {"PATH": f"{wrapper.parent}:{os.environ['PATH']}"}
    cut = download(recipes, tmp_path / "ssh", *args, env=env)
    assert cut.exit_code == 1 and "failed 1" in cut.output, cut.output
    cache = tmp_path / "ssh" / "cache"
    assert not [p for p in cache.rglob("*") if p.name.startswith(".tmp")], "nothing partial in the cache"
    fetched = len(files.requests)
    again = download(recipes, tmp_path / "ssh", *args, env=env)  # the wrapper now passes everything through
    assert again.exit_code == 0, again.output
    assert len(files.requests) == fetched  # the cut clip came from the remote copy, not the source again
    assert tree(tmp_path / "ssh" / "ds") == tree(tmp_path / "local" / "ds")
    assert not _remote_folders(recipes)  # fetched clips are removed there


def test_a_wrong_host_key_or_an_unreachable_host_is_one_line_and_nothing_is_written(
    sshd_server, served_recipes, tmp_path
):
    recipes, _ = served_recipes
    base = ["--backend", "ssh", "--ssh-key", str(sshd_server.key), "--remote-python", sys.executable]
    cases = {
        "wrong key": (
            [*base, "--remote", sshd_server.remote, "--known-hosts", str(sshd_server.wrong_known_hosts)],
            "host key",
        ),
        "unreachable": (
            [*base, "--remote", f"nobody@127.0.0.1:{free_port()}", "--known-hosts", str(sshd_server.known_hosts)],
            "unreachable (Connection refused)",
        ),
    }
    for what, (args, why) in cases.items():
        out = tmp_path / what.replace(" ", "-")
        result = download(recipes, out, *args)
        lines = [x for x in result.output.splitlines() if x.strip()]
        assert result.exit_code == 1 and len(lines) == 1 and why in lines[0], (what, result.output)
        assert not (out / "ds").exists() and not (out / "cache").exists(), what
    bad = CliRunner().invoke(main, ["download", "--backend", "ssh", "--dry-run"])
    assert bad.exit_code == 2 and "--backend ssh needs --remote" in bad.output


@pytest.mark.slow
def test_over_ssh_a_rate_limiting_host_slows_down_and_a_refusal_is_one_line(sshd_server, served_recipes, tmp_path):
    recipes, files = served_recipes
    root = recipes.parent.parent
    with Scripted(f"{files.url}/http/sources") as host:
        urls = [f"{host.url}/flaky/2/{{file}}", f"{host.url}/status/403/{{file}}"]
        recipes = with_urls(root, tmp_path, urls)
        args = [*_ssh_args(sshd_server), "--remote-python", sys.executable, "--workers", "2"]  # one master connection
        result = download(recipes, tmp_path / "o", *args)
    assert result.exit_code == 1 and "done 1, skipped 0, failed 1" in result.output, result.output
    assert [code for _, code in host.requests if code == 429] == [429, 429]  # refused twice, then fetched remotely
    state = json.loads((tmp_path / "o" / "cache" / ".throttle.json").read_text())
    assert 0 < state["delay"] < 5  # the remote's 429s slowed this machine's run down
    assert not _remote_folders(recipes)  # nor does a failed download leave anything there
    lines = [x for x in result.output.splitlines() if "HTTP Error 403" in x]
    assert len(lines) == 1 and "unavailable: forbidden: " in lines[0] and "--cookies or --proxy" in lines[0], lines


@pytest.mark.slow
def test_over_ssh_cookies_reach_yt_dlp_there_and_are_removed_after(sshd_server, served_recipes, tmp_path):
    recipes, files = served_recipes
    root = recipes.parent.parent
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\ts3cr3t\n")
    args = [*_ssh_args(sshd_server), "--remote-python", sys.executable]
    with Scripted(f"{files.url}/http/sources") as host:
        signed = with_urls(root, tmp_path, [f"{host.url}/signed/s3cr3t/{{file}}"])
        refused = download(signed, tmp_path / "without", *args)
        result = download(signed, tmp_path / "with", *args, "--cookies", str(cookies))
    assert refused.exit_code == 1 and "unavailable: forbidden" in refused.output, refused.output
    assert result.exit_code == 0 and "done 1, skipped 0, failed 0" in result.output, result.output
    assert any(p.startswith("/signed/s3cr3t/") and code == 302 for p, code in host.requests)  # sent there
    assert not _remote_folders(signed)  # the job folder, and the cookies in it, are gone from the remote
    ds = tmp_path / "with" / "ds"
    assert not [p for p in ds.rglob("*") if p.is_file() and b"s3cr3t" in p.read_bytes()]  # nor in the outputs


@pytest.mark.slow
def test_a_hostile_remote_is_read_as_untrusted(sshd_server, served_recipes, tmp_path):
    """Issue 39: the remote's answer is checked against its schema (not JSON, a list, a size missing or as
    text, a 20 MB message cut), and its clip is read up to the size it declared: a clip that is /dev/zero is
    cut off there, and no partial file is left in the cache."""
    recipes, _ = served_recipes
    zero = tmp_path / "zero.mp4"
    zero.symlink_to("/dev/zero")
    answers = {
        "not json": ("garbage", "the download job's answer: not JSON"),
        "a list": ("[1, 2]", "not a result object"),
        "no size": (json.dumps({"ok": True, "path": str(zero), "sha256": "0" * 64}), "size: must be an integer"),
        "text size": (json.dumps({"ok": True, "path": str(zero), "size": "9", "sha256": "0" * 64}), "size: must"),
        "long": (json.dumps({"ok": False, "message": "x" * 20_000_000}), "more characters cut"),
        "zero": (json.dumps({"ok": True, "path": str(zero), "size": 100_000, "sha256": "0" * 64}), "sent more than"),
    }
    for name, (answer, needle) in answers.items():
        (tmp_path / "answer").write_text(answer + "\n")
        fake = tmp_path / "python"  # the remote's "interpreter": imports fine, answers what the test says
        fake.write_text(f'#!/bin/bash\n[ "$1" = -c ] && exit 0\ncat > /dev/null\ncat {tmp_path / "answer"}\n')
        fake.chmod(0o755)
        out = tmp_path / name
        result = download(recipes, out, *_ssh_args(sshd_server), "--remote-python", str(fake))
        assert result.exit_code == 1, (name, result.output)
        lines = [line for line in result.output.splitlines() if needle in line]
        assert lines and len(lines[0]) < 1000, (name, result.output[-2000:])
        assert "Traceback" not in result.output and "internal error" not in result.output, name
        assert not [p for p in (out / "cache").rglob("*") if p.is_file() and p.suffix == ".mp4"], name
