"""Downloading sources on another machine over SSH (``download --backend ssh --remote USER@HOST[:PORT]``).

For when YouTube throttles or blocks this machine's address: yt-dlp runs on the remote machine with the
same job as locally (:mod:`persistbench.io.ytdl_job`, whose source is sent to the remote interpreter, so
the two cannot drift apart), the clip comes back over the same connection, is checked (size, sha256, then
the decode-and-cover check of the local cache) and enters the local cache; reconstruction stays local.

OpenSSH's own client is used (not a Python SSH library): it reads the user's ``~/.ssh/config``, agent,
keys and ``known_hosts`` as every other tool does, refuses an unknown or changed host key
(``StrictHostKeyChecking=yes``, ``BatchMode=yes``: never a prompt), and its ``ControlMaster`` lets every
worker of a run share one connection. Credentials stay with the user's SSH setup and are never written
into outputs; a cookies file is copied next to the job (mode 600) and removed after it.

On the remote, ``~/.cache/persistbench-remote/`` holds a venv with the pinned yt-dlp and imageio-ffmpeg
(made once; or ``--remote-python`` names an interpreter that has them) and one folder per job, keyed by
the job's hash: a clip downloaded there is kept until it has been brought back, so a transfer cut off
restarts from the remote copy instead of downloading from the source again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError, UsageError

REMOTE_HOME = ".cache/persistbench-remote"
_TARGET = re.compile(
    r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?"
)


class RemoteError(PersistbenchError):
    """The remote machine cannot be used: unreachable, refused, host key unknown or changed, no Python."""


@dataclass(frozen=True)
class SshOptions:
    """Where and how to reach the remote machine."""

    remote: str  # USER@HOST[:PORT]
    key: str | None = None  # an identity file (default: the agent and ~/.ssh as configured)
    known_hosts: str | None = None  # a known_hosts file (default: the user's)
    python: str | None = None  # a remote interpreter with yt-dlp and imageio-ffmpeg (default: a venv made there)
    ssh: str = "ssh"  # the OpenSSH client

    def __post_init__(self):
        m = _TARGET.fullmatch(self.remote)
        if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
            raise UsageError(f"--remote {self.remote!r}: expected USER@HOST[:PORT]")


def _pins() -> dict[str, str]:
    """The remote venv's packages: this machine's yt-dlp and imageio-ffmpeg versions."""
    from importlib.metadata import version

    return {"yt-dlp": version("yt-dlp"), "imageio-ffmpeg": version("imageio-ffmpeg")}


class SshHost:
    """One remote machine, reached with OpenSSH's client through a shared master connection."""

    def __init__(self, opts: SshOptions):
        m = _TARGET.fullmatch(opts.remote)
        self.opts, self.host = opts, m.group("host").strip("[]")
        target = f"{m.group('user')}@{self.host}" if m.group("user") else self.host
        control = Path(tempfile.gettempdir()) / f"pb-ssh-{os.getuid()}"
        control.mkdir(mode=0o700, exist_ok=True)
        self.argv = [opts.ssh, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=15"]
        # one master connection per options: another key or known_hosts file never rides on a verified one
        tag = hashlib.sha256(repr((opts.key, opts.known_hosts, opts.ssh)).encode()).hexdigest()[:10]
        self.argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/{tag}-%C", "-o", "ControlPersist=60"]
        self.argv += ["-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR"]
        if m.group("port"):
            self.argv += ["-p", m.group("port")]
        if opts.key:
            self.argv += ["-i", opts.key, "-o", "IdentitiesOnly=yes"]
        if opts.known_hosts:
            self.argv += ["-o", f"UserKnownHostsFile={opts.known_hosts}"]
        self.argv.append(target)
        self._python: str | None = None

    def run(self, command: str, data: bytes | None = None, timeout: float = 3600, out=None) -> bytes:
        """``command`` run by the remote shell; its stdout (or written to ``out``). One-line :class:`RemoteError`
        when the connection fails, :class:`PersistbenchError` when the command does."""
        try:
            done = subprocess.run(
                [*self.argv, command],
                input=data,
                stdout=out if out is not None else subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
            )
        except FileNotFoundError:
            raise RemoteError(f"--backend ssh needs OpenSSH's client ({self.opts.ssh}) on PATH") from None
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{self.opts.remote}: no answer within {timeout:.0f} s") from None
        err = done.stderr.decode(errors="replace").strip()
        if done.returncode == 255:  # ssh's own failure: the connection, not the command
            raise RemoteError(f"{self.opts.remote}: {_ssh_reason(err)}")
        if done.returncode != 0:
            raise PersistbenchError(f"{self.opts.remote}: {command.split()[0]} exited {done.returncode}: {err[-300:]}")
        return done.stdout if out is None else b""

    def python(self) -> str:
        """The remote interpreter that runs jobs: ``--remote-python`` checked, or the venv made once."""
        if self._python:
            return self._python
        check = "import yt_dlp, imageio_ffmpeg"
        if self.opts.python:
            py = shlex.quote(self.opts.python)
            try:
                self.run(f"{py} -c {shlex.quote(check)}", timeout=120)
            except RemoteError:
                raise
            except PersistbenchError:  # the interpreter ran and could not import them
                raise RemoteError(
                    f"{self.opts.remote}: {self.opts.python} cannot import yt_dlp and imageio_ffmpeg"
                ) from None
            self._python = self.opts.python
            return self._python
        pins = _pins()
        venv = f"$HOME/{REMOTE_HOME}/venv-yt-dlp-{pins['yt-dlp']}"
        spec = " ".join(shlex.quote(f"{k}=={v}") for k, v in sorted(pins.items()))
        script = (
            f'V="{venv}"; if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c {shlex.quote(check)} 2>/dev/null; then '
            f'python3 -m venv "$V" && "$V/bin/pip" install -q {spec} >&2; fi && echo "$V/bin/python"'
        )
        try:
            self._python = self.run(script, timeout=1800).decode().strip().splitlines()[-1]
        except RemoteError:
            raise
        except PersistbenchError as e:
            raise RemoteError(f"{self.opts.remote}: cannot prepare a venv with {spec}: {e}".splitlines()[0]) from None
        return self._python

    def download(self, job: dict, local_dir: Path, cookies: str | None) -> Path:
        """Run ``job`` (its ``outtmpl`` and ``cookies`` are set here) on the remote machine and bring the clip back
        into ``local_dir``, checked against the remote's size and sha256. Raises :class:`PersistbenchError`
        with yt-dlp's message (``.message``) when the download failed there."""
        from persistbench.io import ytdl_job

        key = hashlib.sha256(json.dumps({k: job[k] for k in ("url", "format", "range")}, sort_keys=True).encode())
        folder = f"{REMOTE_HOME}/clips/{key.hexdigest()[:24]}"
        job = {**job, "outtmpl": f"~/{folder}/clip.%(ext)s", "result": f"~/{folder}/result.json"}
        q = shlex.quote
        self.run(f"mkdir -p {q(folder)} && chmod 700 {q(folder)}", timeout=120)
        if cookies:
            self.run(f"umask 077 && cat > {q(folder)}/cookies.txt", data=Path(cookies).read_bytes(), timeout=300)
            job["cookies"] = f"~/{folder}/cookies.txt"
        try:
            py = q(self.python())
            command = f"if [ -s {q(folder)}/result.json ]; then cat {q(folder)}/result.json; else {py} - {q(json.dumps(job))}; fi"
            result = json.loads(self.run(command, data=Path(ytdl_job.__file__).read_bytes()).decode().splitlines()[-1])
        finally:
            if cookies:
                self.run(f"rm -f {q(folder)}/cookies.txt", timeout=120)
        if not result.get("ok"):
            raise RemoteDownloadFailed(str(result.get("message", "no message")))
        remote_path = result["path"]
        local = local_dir / ("clip" + Path(remote_path).suffix)
        with open(local, "wb") as out:
            self.run(f"cat {q(remote_path)}", out=out)
        size, digest = local.stat().st_size, _sha256(local)
        if size != result["size"] or digest != result["sha256"]:
            local.unlink()
            raise PersistbenchError(
                f"{self.opts.remote}: {remote_path} came back as {size} bytes, sha256 {digest[:12]}...; "
                f"it is {result['size']} bytes, sha256 {result['sha256'][:12]}... there (transfer cut off?)"
            )
        self.forget(folder)
        return local

    def forget(self, folder: str) -> None:
        """Remove a job's remote folder once its clip is safe here."""
        self.run(f"rm -rf {shlex.quote(folder)}", timeout=120)


class RemoteDownloadFailed(PersistbenchError):
    """yt-dlp failed on the remote machine; the message is its own."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ssh_reason(stderr: str) -> str:
    """One line for ssh's own failure."""
    text = " ".join(stderr.split())
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "Host key verification failed" in stderr:
        return "its host key is unknown or changed (Host key verification failed): check it and add it to known_hosts"
    if "Permission denied" in stderr:
        return "authentication refused (Permission denied): load your key into ssh-agent or pass --ssh-key"
    for pattern in ("Connection refused", "Connection timed out", "No route to host", "Could not resolve hostname"):
        if pattern in stderr:
            return f"unreachable ({pattern})"
    return (text or "ssh failed")[:300]


@functools.lru_cache(maxsize=4)
def host(opts: SshOptions) -> SshHost:
    """One :class:`SshHost` per options in a process (its venv checked once)."""
    return SshHost(opts)
