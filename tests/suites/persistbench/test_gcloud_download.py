"""download --backend gcloud: the commands it runs, checked against a stand-in ``gcloud`` on PATH
(tests/fakes/gcloud_standin.py) that records its arguments and reaches a real OpenSSH server on loopback as the VM.
Google's side (creating the VM, running its startup script) is the only part that cannot run here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import TESTS
from fakes.compute_api import ComputeApi
from fakes.download_cli import download, tree
from fakes.sshd import MISSING

from persistbench.cli import main
from persistbench.suites.persistbench.build.gcloud import Vm, ready_python, startup_script
from persistbench.suites.persistbench.build.gcloud_cli import Gcloud, GcloudError
from persistbench.suites.persistbench.build.remote import remote_spec, spec_hash

pytestmark = pytest.mark.skipif(MISSING, reason="openssh-server (.ci/run installs it)")
STANDIN = TESTS / "fakes" / "gcloud_standin.py"
REAL_GCLOUD = shutil.which("gcloud")  # the Google Cloud CLI, when this machine has it


def _standin(tmp_path: Path, sshd_server, **config) -> tuple[Path, dict]:
    """A folder holding the stand-in's config and a ``gcloud`` that runs it; the env that puts it first on PATH."""
    home = tmp_path / "gcloud-home"
    (home / "bin").mkdir(parents=True)
    ssh = {"user": sshd_server.user, "port": sshd_server.port, "key": str(sshd_server.key)}
    settings = {"account": "researcher@example.org", "project": "lab-project", "zone": None, "python": sys.executable}
    (home / "config.json").write_text(json.dumps({**settings, "ready_after": 1, "ssh": ssh, **config}))
    gcloud = home / "bin" / "gcloud"
    gcloud.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    gcloud.chmod(0o755)
    return home, {"PATH": f"{home / 'bin'}:{os.environ['PATH']}", "GCLOUD_STANDIN": str(home)}


def _calls(home: Path) -> list[list[str]]:
    lines = (home / "calls.jsonl").read_text().splitlines() if (home / "calls.jsonl").exists() else []
    return [json.loads(x) for x in lines]


def _verbs(calls: list[list[str]]) -> list[str]:
    """Each call as its command words (``compute instances create``), flags and names left out."""
    return [" ".join(a for a in c if not a.startswith("-") and not a.startswith("persistbench-")) for c in calls]


@pytest.mark.slow
def test_gcloud_makes_the_vm_downloads_through_it_and_stops_it(sshd_server, served_recipes, tmp_path):
    sources, _ = served_recipes
    local = download(sources, tmp_path / "local")
    assert local.exit_code == 0, local.output
    vm_python = tmp_path / "vm-python"  # the VM's interpreter: logs each job the backend sends it
    vm_python.write_text(f'#!/bin/sh\necho "$2" >> {tmp_path}/vm-python.log\nexec {sys.executable} "$@"\n')
    vm_python.chmod(0o755)
    home, env = _standin(tmp_path, sshd_server, python=str(vm_python))
    user_vm = "persistbench-download-" + os.environ.get("USER", "root").lower()

    first = download(sources, tmp_path / "vm", "--backend", "gcloud", "--stop-vm-when-done", env=env)
    assert first.exit_code == 0, first.output
    assert tree(tmp_path / "vm" / "ds") == tree(tmp_path / "local" / "ds")
    jobs = [x for x in (tmp_path / "vm-python.log").read_text().splitlines() if x.startswith("{")]
    assert len(jobs) == len(list((tmp_path / "local" / "cache").rglob("*.mp4")))  # every clip came through the VM
    calls = _calls(home)
    assert _verbs(calls) == [
        "auth list",
        "config get-value project",
        "config get-value compute/zone",
        "compute instances describe",
        "compute instances create",
        "compute instances get-guest-attributes",  # not ready yet
        "compute instances get-guest-attributes",
        "compute ssh",  # --command=true: gcloud propagates the key and records the host key
        "compute ssh",  # --dry-run: the OpenSSH command line every later command uses
        "compute instances stop",
    ]
    where = [user_vm, "--zone=us-central1-a", "--project=lab-project"]
    create = calls[4]
    assert create[:6] == ["compute", "instances", "create", *where]
    for flag in (
        "--machine-type=e2-standard-2",
        "--image-family=debian-12",
        "--image-project=debian-cloud",
        "--labels=persistbench=download-worker",
        "--metadata=enable-guest-attributes=TRUE",
        "--quiet",
    ):
        assert flag in create, flag
    assert calls[7] == ["compute", "ssh", *where, "--command=true", "--quiet"]
    assert calls[8] == ["compute", "ssh", *where, "--dry-run", "--quiet"]
    assert calls[9] == ["compute", "instances", "stop", *where, "--quiet"]
    script = (home / "startup-script.sh").read_text()
    assert f"H={spec_hash(remote_spec())}" in script and remote_spec() in script and "python3-venv" in script
    out = first.output
    assert f"creating VM {user_vm} (e2-standard-2, zone us-central1-a, project lab-project)" in out
    assert f"gcloud compute instances delete {user_vm} --zone=us-central1-a --project=lab-project" in out
    assert "is stopped" in out

    # A new cache: the stopped VM is started, not made again, and stays running (the user is told how to stop it).
    (home / "calls.jsonl").unlink()
    again = download(sources, tmp_path / "vm2", "--backend", "gcloud", "--machine-type", "e2-small", env=env)
    assert again.exit_code == 0, again.output
    assert tree(tmp_path / "vm2" / "ds") == tree(tmp_path / "local" / "ds")
    verbs = _verbs(_calls(home))
    assert "compute instances create" not in verbs and "compute instances stop" not in verbs
    assert verbs[3:6] == [
        "compute instances describe",
        "compute instances start",
        "compute instances get-guest-attributes",
    ]
    assert "is still running and billed" in again.output
    assert f"gcloud compute instances stop {user_vm} --zone=us-central1-a --project=lab-project" in again.output

    plan = download(sources, tmp_path / "vm3", "--backend", "gcloud", "--zone", "europe-west4-a", "--dry-run", env=env)
    assert plan.exit_code == 0 and not (tmp_path / "vm3").exists(), plan.output
    assert f"on VM {user_vm} (zone europe-west4-a, project lab-project)" in plan.output

    # Everything cached: gcloud is checked, the VM is not touched.
    (home / "calls.jsonl").unlink()
    cached = download(sources, tmp_path / "vm2", "--backend", "gcloud", env=env)
    assert cached.exit_code == 0, cached.output
    assert _verbs(_calls(home)) == ["auth list", "config get-value project", "config get-value compute/zone"]


def test_gcloud_missing_signed_out_or_without_project_is_one_line_and_nothing_is_written(
    sshd_server, served_recipes, tmp_path
):
    sources, _ = served_recipes
    cases = {
        "missing": ({"PATH": str(tmp_path / "empty")}, "the Google Cloud CLI (gcloud) is not on PATH"),
        "signed out": (
            _standin(tmp_path / "a", sshd_server, account="")[1],
            "gcloud is not signed in: run `gcloud auth login`",
        ),
        "no project": (_standin(tmp_path / "b", sshd_server, project="")[1], "gcloud has no project: pass --project"),
    }
    for what, (env, why) in cases.items():
        out = tmp_path / what.replace(" ", "-")
        result = download(sources, out, "--backend", "gcloud", env=env)
        lines = [x for x in result.output.splitlines() if x.strip()]
        assert result.exit_code == 1 and len(lines) == 1 and why in lines[0], (what, result.output)
        assert not (out / "ds").exists() and not (out / "cache").exists(), what
    assert "compute" not in json.dumps(_calls(tmp_path / "a" / "gcloud-home"))  # nothing made or started
    for args, why in (
        (["--backend", "gcloud", "--remote", "me@host"], "--remote is for --backend ssh"),
        (["--backend", "ssh", "--remote", "me@host", "--vm", "x"], "--vm is for --backend gcloud"),
        (["--backend", "gcloud", "--vm", "Bad_Name"], "a Compute Engine name"),
    ):
        bad = CliRunner().invoke(main, ["download", *args, "--dry-run"])
        assert bad.exit_code == 2 and why in bad.output, (args, bad.output)


def test_doctor_reports_gcloud(sshd_server, tmp_path):
    for config, expected in (
        (
            {},
            "ok       gcloud (download --backend gcloud)  Google Cloud SDK 578.0.0, signed in as researcher@example.org",
        ),
        ({"account": ""}, "missing  gcloud (download --backend gcloud)  Google Cloud SDK 578.0.0, nobody signed in"),
    ):
        _, env = _standin(tmp_path / str(len(config)), sshd_server, **config)
        result = CliRunner().invoke(main, ["doctor", "--for", "download"], env=env)
        assert expected in result.output, result.output
    result = CliRunner().invoke(main, ["doctor", "--for", "download"], env={"PATH": str(tmp_path)})
    assert "missing  gcloud (download --backend gcloud)  not on PATH" in result.output, result.output


def test_what_the_startup_script_reports_decides_the_interpreter(sshd_server, tmp_path, monkeypatch):
    home, _ = _standin(tmp_path, sshd_server, ready_after=0)
    vm = Vm("persistbench-download-x", "europe-west4-a", "lab-project")
    state = {"id": 1, "status": "RUNNING", "labels": {}, "queries": 0}
    cli = Gcloud(str(home / "bin" / "gcloud"))
    said: list[str] = []
    monkeypatch.setenv("GCLOUD_STANDIN", str(home))
    for pins, expected in (
        (spec_hash(remote_spec()), sys.executable),  # this machine's pins: the venv it made
        ("0123456789ab", None),  # other pins (an older run): the SSH backend makes its own venv
    ):
        (home / "state.json").write_text(json.dumps({vm.name: {**state, "pins": pins}}))
        assert ready_python(cli, vm, said.append, wait=True) == expected
    failed = "failed: E: Unable to locate package python3-venv"
    (home / "config.json").write_text(json.dumps({**json.loads((home / "config.json").read_text()), "report": failed}))
    with pytest.raises(GcloudError) as e:
        ready_python(cli, vm, said.append, wait=True)
    assert str(e.value).splitlines() == [
        "persistbench-download-x: its startup script failed (E: Unable to locate package python3-venv); its log: "
        "gcloud compute instances get-serial-port-output persistbench-download-x --zone=europe-west4-a "
        "--project=lab-project"
    ]
    assert said == []  # ready at the first query: no waiting message


@pytest.mark.slow
@pytest.mark.skipif(REAL_GCLOUD is None, reason="the Google Cloud CLI is not installed")
def test_the_real_gcloud_cli_against_a_loopback_compute_api(sshd_server, served_recipes, tmp_path):
    """The real ``gcloud`` runs every command of the backend. Only Google is replaced: a loopback Compute API
    (tests/fakes/compute_api.py) whose new VM "boots" by reporting the startup script's venv, whose project metadata
    "propagates" the user's key into the loopback sshd, and whose VM address maps port 22 to that sshd."""
    sources, _ = served_recipes
    local = download(sources, tmp_path / "local")
    assert local.exit_code == 0, local.output
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    nat = home / "bin" / "ssh"  # the VM's port 22 is the loopback sshd's port
    nat.write_text(f'#!/bin/sh\nexec {shutil.which("ssh")} -p {sshd_server.port} "$@"\n')
    nat.chmod(0o755)
    vm_python = tmp_path / "vm-python"
    vm_python.write_text(f'#!/bin/sh\necho "$2" >> {tmp_path}/vm-python.log\nexec {sys.executable} "$@"\n')
    vm_python.chmod(0o755)
    env = {"CLOUDSDK_CONFIG": str(home / "config"), "HOME": str(home), "PATH": f"{home / 'bin'}:{os.environ['PATH']}"}
    (home / "token").write_text("a-token\n")
    with ComputeApi() as api:
        for key, value in (
            ("auth/access_token_file", str(home / "token")),
            ("api_endpoint_overrides/compute", api.base),
            ("core/project", "lab-project"),
            ("core/disable_usage_reporting", "true"),
            ("component_manager/disable_update_check", "true"),
        ):
            subprocess.run(
                [REAL_GCLOUD, "config", "set", key, value], env={**os.environ, **env}, check=True, capture_output=True
            )

        def boot(vm: dict) -> None:
            script = next(i["value"] for i in vm["metadata"]["items"] if i["key"] == "startup-script")
            pins = re.search(r"^H=(\w+)$", script, re.M).group(1)
            api.guest["persistbench/ready"] = f"ready {pins} {vm_python}"

        def guest_agent(ssh_keys: str) -> None:
            with open(sshd_server.key.parent / "authorized_keys", "a") as keys:
                keys.writelines(line.split(":", 1)[1] + "\n" for line in ssh_keys.splitlines())

        api.on_insert, api.on_ssh_keys = boot, guest_agent
        result = download(
            sources, tmp_path / "vm", "--backend", "gcloud", "--vm", "pb-test", "--stop-vm-when-done", env=env
        )
    assert result.exit_code == 0, result.output
    assert tree(tmp_path / "vm" / "ds") == tree(tmp_path / "local" / "ds")
    jobs = [x for x in (tmp_path / "vm-python.log").read_text().splitlines() if x.startswith("{")]
    assert len(jobs) == len(list((tmp_path / "local" / "cache").rglob("*.mp4")))  # every clip came through the VM
    calls = [(method, path.split("/lab-project/")[-1]) for method, path, _ in api.requests]
    vm = "zones/us-central1-a/instances/pb-test"
    assert ("POST", "zones/us-central1-a/instances") in calls and ("POST", "setCommonInstanceMetadata") in calls
    assert calls.index(("POST", "zones/us-central1-a/instances")) < calls.index(("GET", f"{vm}/getGuestAttributes"))
    assert calls[-2:][0] == ("POST", f"{vm}/stop")
    inserted = next(body for method, path, body in api.requests if method == "POST" and path.endswith("/instances"))
    assert inserted["name"] == "pb-test" and inserted["labels"] == {"persistbench": "download-worker"}
    assert inserted["machineType"].endswith("/zones/us-central1-a/machineTypes/e2-standard-2")
    assert inserted["disks"][0]["initializeParams"]["sourceImage"].endswith(
        "/debian-cloud/zones/-/imageFamilyViews/debian-12"
    )
    metadata = {i["key"]: i["value"] for i in inserted["metadata"]["items"]}
    assert metadata == {"enable-guest-attributes": "TRUE", "startup-script": startup_script(remote_spec())}
    assert (
        "is stopped" in result.output
        and "gcloud compute instances delete pb-test --zone=us-central1-a" in result.output
    )
