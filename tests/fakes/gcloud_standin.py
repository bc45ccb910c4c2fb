"""A stand-in for Google Cloud's ``gcloud`` CLI, for ``download --backend gcloud``'s tests: it records every call
and answers the commands the backend runs in the CLI's own formats (read from the Cloud SDK's source, 578.0.0:
``surface/compute/ssh.py``, ``command_lib/util/ssh/ssh.py``, ``surface/auth/list.py``,
``surface/config/get.py``, ``api_lib/compute/client_adapter.py``), with a loopback sshd as the VM.

Run as ``python gcloud_standin.py ARGS`` with ``GCLOUD_STANDIN`` naming a folder that holds ``config.json``
(``account``, ``project``, ``zone``, ``python`` (the VM's interpreter), ``ready_after`` (guest-attribute queries
before the startup script reports), ``report`` (what it reports instead of ``ready <pins> <python>``) and ``ssh`` (``user``, ``port``, ``key``)); it writes ``calls.jsonl`` (one argv
per call), ``state.json`` (the VMs) and ``startup-script.sh`` (the last one a create sent) there, and keeps
gcloud's known-hosts file (``google_compute_known_hosts``) there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HOME = Path(os.environ["GCLOUD_STANDIN"])
CONFIG = json.loads((HOME / "config.json").read_text())
STATE = HOME / "state.json"


def fail(command: str, *lines: str, code: int = 1) -> None:
    print(f"ERROR: (gcloud.{command}) " + "\n".join(lines), file=sys.stderr)
    sys.exit(code)


def flags(args: list[str]) -> tuple[list[str], dict[str, str]]:
    positional, named = [], {}
    for a in args:
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            named[key] = value
        else:
            positional.append(a)
    return positional, named


def vms() -> dict:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def save(state: dict) -> None:
    STATE.write_text(json.dumps(state))


def ssh(name: str, vm: dict, named: dict) -> None:
    """``compute ssh``: the OpenSSH command line gcloud builds, printed (``--dry-run``) or run."""
    if vm["status"] != "RUNNING":
        fail("compute.ssh", f"Instance [{name}] in zone [{named['zone']}] is not running.")
    known = HOME / "google_compute_known_hosts"
    alias = f"compute.{vm['id']}"
    strict = "yes" if known.exists() and alias in known.read_text() else "no"
    s = CONFIG["ssh"]
    argv = [shutil.which("ssh"), "-T" if "command" in named else "-t", "-i", s["key"]]
    for option in (
        "CheckHostIP=no",
        "HashKnownHosts=no",
        f"HostKeyAlias={alias}",
        "IdentitiesOnly=yes",
        f"StrictHostKeyChecking={strict}",
        f"UserKnownHostsFile={known}",
    ):
        argv += ["-o", option]
    argv += ["-p", str(s["port"]), f"{s['user']}@127.0.0.1"]  # the port as an --ssh-flag would put it
    if "command" in named:
        argv += ["--", *named["command"].split(" ")]
    if "dry-run" in named:
        print(" ".join(f'"{a}"' if " " in a else a for a in argv))
        return
    code = subprocess.run(argv).returncode  # stdin and stdout inherited, as gcloud's _Exec does
    if code == 255:
        fail("compute.ssh", f"[{argv[0]}] exited with return code [255].", code=255)
    sys.exit(code)


def main(args: list[str]) -> None:
    with open(HOME / "calls.jsonl", "a") as log:
        log.write(json.dumps(args) + "\n")
    args = [a for a in args if a != "--quiet"]
    positional, named = flags(args)
    if "version" in named:
        print("Google Cloud SDK 578.0.0")
        return
    if positional[:2] == ["auth", "list"]:
        if CONFIG.get("account"):
            print(CONFIG["account"])
        return
    if positional[:2] == ["config", "get-value"]:
        value = CONFIG.get({"project": "project", "compute/zone": "zone"}.get(positional[2], "unset"))
        print(value) if value else print("(unset)", file=sys.stderr)
        return
    if positional[0] == "compute":
        name = positional[-1]
        state = vms()
        vm = state.get(name)
        if positional[1] == "ssh":
            if vm is None:
                fail("compute.ssh", "Could not fetch resource:", f" - The resource '{name}' was not found")
            return ssh(name, vm, named)
        verb = positional[2]
        where = f"projects/{named['project']}/zones/{named['zone']}/instances/{name}"
        if verb == "create":
            if vm is not None:
                fail(
                    "compute.instances.create", "Could not fetch resource:", f" - The resource '{where}' already exists"
                )
            key, _, script = named["metadata-from-file"].partition("=")
            assert key == "startup-script", key
            text = Path(script).read_text()
            (HOME / "startup-script.sh").write_text(text)
            label = dict(x.split("=", 1) for x in named["labels"].split(","))
            pins = re.search(r"^H=([0-9a-f]+)$", text, re.M).group(1)
            state[name] = {"id": 4242 + len(state), "status": "RUNNING", "labels": label, "pins": pins, "queries": 0}
            save(state)
            print(json.dumps([{"name": name, "status": "RUNNING"}]))
            return
        if vm is None:
            fail(f"compute.instances.{verb}", "Could not fetch resource:", f" - The resource '{where}' was not found")
        if verb == "describe":
            print(json.dumps({"name": name, "status": vm["status"], "labels": vm["labels"], "zone": named["zone"]}))
        elif verb in ("start", "resume", "stop"):
            vm["status"] = "TERMINATED" if verb == "stop" else "RUNNING"
            save(state)
        elif verb == "get-guest-attributes":
            vm["queries"] += 1
            save(state)
            if vm["queries"] <= CONFIG.get("ready_after", 0):
                fail("compute.instances.get-guest-attributes", "The resource was not found")
            print(CONFIG.get("report") or f"ready {vm['pins']} {CONFIG['python']}")
        else:
            fail("compute", f"the stand-in does not know {verb}")


if __name__ == "__main__":
    main(sys.argv[1:])
