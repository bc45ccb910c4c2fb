"""A Compute Engine VM as the SSH backend's remote machine (``download --backend gcloud``).

Everything goes through the user's ``gcloud`` CLI, so its sign-in, project, OS Login, IAP and key handling
apply unchanged; nothing here talks to Google's APIs itself. A run:

1. checks the CLI is there and signed in, and resolves the project and zone (the CLI's defaults unless
   given);
2. finds the VM (``gcloud compute instances describe``), creating it when missing (Debian 12, the machine
   type asked for, label ``persistbench=download-worker`` and :func:`startup_script`) or starting it when
   stopped;
3. waits for the startup script, which reports through a guest attribute (``persistbench/ready``) the venv
   it made with this machine's pins (:func:`persistbench.suites.persistbench.build.remote.remote_spec`);
4. connects once with ``gcloud compute ssh --command true`` (which makes and propagates the user's key and
   records the host key), then reads the OpenSSH command line it uses from ``gcloud compute ssh
   --dry-run``, so that every later command is plain OpenSSH through one master connection (a gcloud call
   costs about a second of its own start-up; a run makes several per clip);
5. after the run, with ``--stop-vm-when-done``, ``gcloud compute instances stop``.

What cannot run here is Google's side; the tests use a stand-in ``gcloud`` on ``PATH`` that records its
arguments and answers as the CLI does (formats read from the Cloud SDK's source), backed by a real sshd.
"""

from __future__ import annotations

import getpass
import json
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import UsageError
from persistbench.suites.persistbench.build.gcloud_cli import Gcloud, GcloudError, error_line, signed_in
from persistbench.suites.persistbench.build.remote import SshTarget, remote_spec, spec_hash

DEFAULT_ZONE = "us-central1-a"
DEFAULT_MACHINE_TYPE = "e2-standard-2"
LABEL = ("persistbench", "download-worker")  # the label (key, value) of the VMs this backend makes
READY = "persistbench/ready"  # the guest attribute the startup script sets: the venv's python, or "failed: ..."
VM_ROOT = "/opt/persistbench"
READY_TIMEOUT_S = 900.0
POLL_S = 5.0
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_STOPPED = {"TERMINATED", "STOPPED", "SUSPENDED"}
_SETTLING = {"PROVISIONING", "STAGING", "STOPPING", "SUSPENDING", "REPAIRING", "PENDING"}


@dataclass(frozen=True)
class GcloudOptions:
    """``download --backend gcloud``'s options (None: the CLI's configured default, then ours)."""

    vm: str | None = None  # default: persistbench-download-<local user>
    zone: str | None = None
    project: str | None = None
    machine_type: str = DEFAULT_MACHINE_TYPE
    stop_when_done: bool = False
    gcloud: str = "gcloud"

    def __post_init__(self):
        if self.vm is not None and not _NAME.fullmatch(self.vm):
            raise UsageError(
                f"--vm {self.vm!r}: a Compute Engine name is 1-63 of a-z, 0-9 and -, starting with a letter"
            )


@dataclass(frozen=True)
class Vm:
    """One Compute Engine instance."""

    name: str
    zone: str
    project: str

    def where(self) -> list[str]:
        return [self.name, f"--zone={self.zone}", f"--project={self.project}"]

    def command(self, verb: str) -> str:
        """The gcloud command line that does ``verb`` (stop, delete, ...) to this VM."""
        return shlex.join(["gcloud", "compute", "instances", verb, *self.where()])


def resolve(opts: GcloudOptions) -> tuple[Gcloud, Vm]:
    """The CLI checked (on PATH, signed in) and the VM named: ``opts``' values, else the CLI's configured project
    and zone, else :data:`DEFAULT_ZONE`; the name ``persistbench-download-<user>`` unless given.

    Raises:
        GcloudError: gcloud missing, nobody signed in, or no project.
    """
    cli = Gcloud(opts.gcloud)
    if shutil.which(opts.gcloud) is None:
        cli.run("--version")  # raises the one-line "needs the Google Cloud CLI"
    if signed_in(cli) is None:
        raise GcloudError("gcloud is not signed in: run `gcloud auth login` (and `gcloud config set project ID`)")
    project = opts.project or cli.value("config", "get-value", "project")
    if not project:
        raise GcloudError("gcloud has no project: pass --project or run `gcloud config set project ID`")
    zone = opts.zone or cli.value("config", "get-value", "compute/zone") or DEFAULT_ZONE
    user = re.sub(r"[^a-z0-9-]", "-", getpass.getuser().lower()).strip("-")[:40] or "user"
    return cli, Vm(opts.vm or f"persistbench-download-{user}", zone, project)


def startup_script(spec: str) -> str:
    """The VM's startup script (run as root at every boot): Python's venv module, then a venv with ``spec``
    under :data:`VM_ROOT`, reported through the guest attribute :data:`READY` as ``ready <pins hash> <python>``
    (or ``failed: <the log's last line>``)."""
    log = "/var/log/persistbench-startup.log"
    url = f"http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/{READY}"
    return f"""#!/bin/bash
# persistbench download worker: a venv with yt-dlp, yt-dlp-ejs, imageio-ffmpeg and deno (the SSH backend's job).
report() {{ curl -s -X PUT --data "$1" -H "Metadata-Flavor: Google" {url}; }}
H={spec_hash(spec)}
V={VM_ROOT}/venv-$H
if ! "$V/bin/python" -c "import yt_dlp, imageio_ffmpeg" 2>/dev/null; then
  if ! {{ export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q python3-venv curl \\
         && rm -rf "$V" && python3 -m venv "$V" && "$V/bin/pip" install -q {spec}; }} > {log} 2>&1; then
    report "failed: $(tail -n 1 {log})"
    exit 1
  fi
fi
report "ready $H $V/bin/python"
"""


def status(cli: Gcloud, vm: Vm) -> tuple[str | None, dict]:
    """The VM's state (``RUNNING``, ``TERMINATED``, ...; None: no such VM) and its labels."""
    done = cli.run("compute", "instances", "describe", *vm.where(), "--format=json", check=False, timeout=120)
    if done.returncode != 0:
        if "was not found" in done.stderr:
            return None, {}
        raise GcloudError(f"gcloud compute instances describe {vm.name}: {error_line(done.stderr)}")
    try:
        described = json.loads(done.stdout)
        return str(described["status"]), dict(described.get("labels") or {})
    except (ValueError, KeyError, TypeError):
        raise GcloudError(f"gcloud compute instances describe {vm.name}: not the JSON of an instance") from None


def provision(cli: Gcloud, vm: Vm, machine_type: str, say: Callable[[str], None]) -> tuple[str, bool]:
    """Make ``vm`` run: created (with :func:`startup_script`) when missing, started when stopped. Returns what
    was done (``created``, ``started`` or ``reused``) and whether the VM is one of ours (its label), whose
    startup script reports. ``say`` prints a line for the user."""
    state, labels = status(cli, vm)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while state in _SETTLING:
        if time.monotonic() > deadline:
            raise GcloudError(f"{vm.name}: still {state} after {READY_TIMEOUT_S:.0f} s")
        say(f"VM {vm.name} is {state}; waiting")
        time.sleep(POLL_S)
        state, labels = status(cli, vm)
    ours = labels.get(LABEL[0]) == LABEL[1]
    if state is None:
        say(f"creating VM {vm.name} ({machine_type}, zone {vm.zone}, project {vm.project})")
        with tempfile.TemporaryDirectory(prefix="pb-gcloud-") as scratch:
            script = Path(scratch) / "startup-script.sh"
            script.write_text(startup_script(remote_spec()))
            cli.run(
                "compute",
                "instances",
                "create",
                *vm.where(),
                f"--machine-type={machine_type}",
                "--image-family=debian-12",
                "--image-project=debian-cloud",
                f"--labels={LABEL[0]}={LABEL[1]}",
                "--metadata=enable-guest-attributes=TRUE",
                f"--metadata-from-file=startup-script={script}",
                "--format=json",
                timeout=600,
            )
        return "created", True
    if state in _STOPPED:
        say(f"starting VM {vm.name} (zone {vm.zone})")
        cli.run("compute", "instances", "resume" if state == "SUSPENDED" else "start", *vm.where(), timeout=600)
        return "started", ours
    return "reused", ours


def ready_python(cli: Gcloud, vm: Vm, say: Callable[[str], None], wait: bool) -> str | None:
    """The interpreter the startup script prepared with this machine's pins, once it reports (waiting up to
    :data:`READY_TIMEOUT_S` when ``wait``); None when the VM reports another venv (other pins: the SSH
    backend then makes its own) or, without ``wait``, nothing.

    Raises:
        GcloudError: the startup script failed, or did not report in time.
    """
    expected = spec_hash(remote_spec())
    deadline = time.monotonic() + (READY_TIMEOUT_S if wait else 0)
    told = False
    while True:
        done = cli.run(
            "compute",
            "instances",
            "get-guest-attributes",
            *vm.where(),
            f"--query-path={READY}",
            "--format=value(value)",
            check=False,
            timeout=120,
        )
        value = done.stdout.strip() if done.returncode == 0 else ""
        if value.startswith("failed:"):
            raise GcloudError(
                f"{vm.name}: its startup script failed ({value[7:].strip()[:200]}); "
                f"its log: {vm.command('get-serial-port-output')}"
            )
        if value:
            word, pins, python = ([*value.split(" ", 2), "", ""])[:3]
            return python if word == "ready" and pins == expected and python else None
        if time.monotonic() >= deadline:
            if not wait:
                return None
            raise GcloudError(f"{vm.name}: its startup script did not report within {READY_TIMEOUT_S:.0f} s")
        if not told:
            say(f"waiting for {vm.name}'s startup script (installs yt-dlp and deno; a few minutes on a new VM)")
            told = True
        time.sleep(POLL_S)


def ssh_target(cli: Gcloud, vm: Vm, python: str | None) -> SshTarget:
    """The OpenSSH command line gcloud uses for ``vm``, after one real connection through gcloud (which makes and
    propagates the key and records the host key); an unknown or changed host key is refused from then on."""
    done = cli.run("compute", "ssh", *vm.where(), "--command=true", check=False, timeout=600)
    if done.returncode != 0:
        raise GcloudError(f"gcloud compute ssh {vm.name}: {error_line(done.stderr)}")
    line = cli.run("compute", "ssh", *vm.where(), "--dry-run", timeout=300).stdout.strip().splitlines()
    try:
        argv = shlex.split(line[-1]) if line else []
    except ValueError:
        argv = []
    argv = [a for a in argv if a not in ("-t", "-T", "-tt")]
    if len(argv) < 2 or Path(argv[0]).name != "ssh" or argv[-1].startswith("-"):
        raise GcloudError(f"gcloud compute ssh {vm.name} --dry-run: not an OpenSSH command line: {line[-1:]!r}")
    # ours before gcloud's: the first value of an option wins, and the key gcloud recorded must match from now on
    argv = [argv[0], "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=15", *argv[1:]]
    return SshTarget(f"VM {vm.name}", tuple(argv), python)


def stop(cli: Gcloud, vm: Vm) -> None:
    """Stop ``vm`` (its disk, and so its venv, stays; a stopped VM costs only its disk)."""
    cli.run("compute", "instances", "stop", *vm.where(), timeout=600)


@contextmanager
def session(opts: GcloudOptions, cli: Gcloud, vm: Vm, say: Callable[[str], None]) -> Iterator[SshTarget]:
    """The VM made ready (:func:`provision`, :func:`ready_python`) and reached (:func:`ssh_target`) for the
    ``with`` block; afterwards it is stopped (``opts.stop_when_done``) or left running, and ``say`` tells
    the user which, with the commands that stop and delete it."""
    action, ours = provision(cli, vm, opts.machine_type, say)
    try:
        python = ready_python(cli, vm, say, wait=ours)
        yield ssh_target(cli, vm, python)
    finally:
        if opts.stop_when_done:
            say(f"stopping VM {vm.name} (zone {vm.zone})")
            stop(cli, vm)
            say(f"VM {vm.name} ({action}) is stopped; its disk stays until you delete it: {vm.command('delete')}")
        else:
            say(
                f"VM {vm.name} ({action}, zone {vm.zone}, project {vm.project}) is still running and billed: "
                f"stop it with {vm.command('stop')}, delete it with {vm.command('delete')}"
            )
