"""Downloading sources on another machine over SSH (``download --backend ssh --remote USER@HOST[:PORT]``).

For when YouTube throttles or blocks this machine's address: yt-dlp runs on the remote machine with the
same job as locally (:mod:`persistbench.suites.persistbench.build.ytdl_job`, whose source is sent to the remote interpreter, so
the two cannot drift apart), the clip comes back over the same connection, is checked (size, sha256, then
the decode-and-cover check of the local cache) and enters the local cache; reconstruction stays local.

OpenSSH's own client is used (not a Python SSH library): it reads the user's ``~/.ssh/config``, agent,
keys and ``known_hosts`` as every other tool does, refuses an unknown or changed host key
(``StrictHostKeyChecking=yes``, ``BatchMode=yes``: never a prompt), and its ``ControlMaster`` lets every
worker of a run share one connection. Credentials stay with the user's SSH setup and are never written
into outputs; a cookies file is copied next to the job (mode 600) and removed after it.

On the remote, ``~/.cache/persistbench-remote/`` holds a venv with this machine's yt-dlp, yt-dlp-ejs and
imageio-ffmpeg versions and deno (made once; or ``--remote-python`` names an interpreter that has them) and one folder per job, keyed by
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
import time
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.io.files import parse_json, read_bounded
from persistbench.suites.persistbench.build.ytdl_job import VIDEO_SUFFIXES

MAX_COOKIES_BYTES = 16 << 20  # a browser's whole cookie jar in Netscape format is a few hundred KB
MAX_CLIP_BYTES = 2 << 30  # one case's range of a source (a 30 s 8K 360-degree range is about 200 MB)
MAX_ANSWER_BYTES = 64 << 20  # the job's one-line JSON answer (a yt-dlp message can be long)
MAX_MESSAGE_CHARS = 300  # of a remote's error message, on screen

REMOTE_HOME = ".cache/persistbench-remote"
DENO = "2.9.8"  # PyPI's deno wheel puts the binary in the venv's bin/, where yt-dlp's job finds it
_TARGET = re.compile(
    r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?"
)


class RemoteError(PersistbenchError):
    """The remote machine cannot be used: unreachable, refused, host key unknown or changed, no Python."""


@dataclass(frozen=True)
class SshTarget:
    """A remote machine as the SSH backend reaches it.

    Attributes:
        label: how messages name it (``USER@HOST[:PORT]``, or a VM's name).
        argv: the OpenSSH command line up to the remote command: client, options, then the destination last.
            It must never prompt (``BatchMode``) and must check the host key.
        python: a remote interpreter with yt-dlp and imageio-ffmpeg (None: a venv made there once).
    """

    label: str
    argv: tuple[str, ...]
    python: str | None = None


@dataclass(frozen=True)
class SshOptions:
    """``download --backend ssh``'s options: where and how to reach the remote machine."""

    remote: str  # USER@HOST[:PORT]
    key: str | None = None  # an identity file (default: the agent and ~/.ssh as configured)
    known_hosts: str | None = None  # a known_hosts file (default: the user's)
    python: str | None = None  # a remote interpreter with yt-dlp and imageio-ffmpeg (default: a venv made there)
    ssh: str = "ssh"  # the OpenSSH client

    def __post_init__(self):
        m = _TARGET.fullmatch(self.remote)
        if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
            raise UsageError(f"--remote {self.remote!r}: expected USER@HOST[:PORT]")

    def target(self) -> SshTarget:
        """The command line that reaches ``remote``: never a prompt, an unknown or changed host key refused."""
        m = _TARGET.fullmatch(self.remote)
        host = m.group("host").strip("[]")
        argv = [self.ssh, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=15"]
        if m.group("port"):
            argv += ["-p", m.group("port")]
        if self.key:
            argv += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        argv.append(f"{m.group('user')}@{host}" if m.group("user") else host)
        return SshTarget(self.remote, tuple(argv), self.python)


def spec_hash(spec: str) -> str:
    """The short hash that names a venv made for ``spec`` (a new venv when the pins change)."""
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def remote_spec() -> str:
    """pip's requirements for a remote venv: this machine's yt-dlp, its YouTube solver scripts and imageio-ffmpeg,
    and deno (:data:`DENO`) as the JavaScript runtime YouTube extraction needs."""
    from importlib.metadata import version

    pins = {name: version(name) for name in ("yt-dlp", "yt-dlp-ejs", "imageio-ffmpeg")} | {"deno": DENO}
    return " ".join(shlex.quote(f"{k}=={v}") for k, v in sorted(pins.items()))


class SshHost:
    """One remote machine, reached with OpenSSH's client through a shared master connection."""

    def __init__(self, target: SshTarget):
        self.target = target
        control = Path(tempfile.gettempdir()) / f"pb-ssh-{os.getuid()}"
        control.mkdir(mode=0o700, exist_ok=True)
        # one master connection per command line: another key or known_hosts file never rides on a verified one
        tag = hashlib.sha256(json.dumps(target.argv).encode()).hexdigest()[:10]
        shared = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/{tag}-%C", "-o", "ControlPersist=60"]
        shared += ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR"]
        # ssh takes the first value given for an option: the target's own options come first and win
        self.argv = [*target.argv[:-1], *shared, target.argv[-1]]
        self._python: str | None = None

    def run(self, command: str, data: bytes | None = None, timeout: float = 3600) -> bytes:
        """``command`` run by the remote shell; its stdout. One-line :class:`RemoteError` when the connection
        fails, :class:`PersistbenchError` when the command does."""
        try:
            done = subprocess.run(
                [*self.argv, command],
                input=data,
                capture_output=True,
                timeout=timeout,
            )
        except FileNotFoundError:
            raise RemoteError(f"the SSH backend needs OpenSSH's client ({self.target.argv[0]}) on PATH") from None
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{self.target.label}: no answer within {timeout:.0f} s") from None
        err = done.stderr.decode(errors="replace").strip()
        if done.returncode == 255:  # ssh's own failure: the connection, not the command
            raise RemoteError(f"{self.target.label}: {_ssh_reason(err)}")
        if done.returncode != 0:
            raise PersistbenchError(f"{self.target.label}: {command.split()[0]} exited {done.returncode}: {err[-300:]}")
        return done.stdout

    def python(self) -> str:
        """The remote interpreter that runs jobs: ``--remote-python`` checked, or the venv made once."""
        if self._python:
            return self._python
        check = "import yt_dlp, imageio_ffmpeg"
        if self.target.python:
            py = shlex.quote(self.target.python)
            try:
                self.run(f"{py} -c {shlex.quote(check)}", timeout=120)
            except RemoteError:
                raise
            except PersistbenchError:  # the interpreter ran and could not import them
                raise RemoteError(
                    f"{self.target.label}: {self.target.python} cannot import yt_dlp and imageio_ffmpeg"
                ) from None
            self._python = self.target.python
            return self._python
        spec = remote_spec()
        venv = f"$HOME/{REMOTE_HOME}/venv-{spec_hash(spec)}"
        script = (
            f'V="{venv}"; if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c {shlex.quote(check)} 2>/dev/null; then '
            f'python3 -m venv "$V" && "$V/bin/pip" install -q {spec} >&2; fi && echo "$V/bin/python"'
        )
        try:
            self._python = self.run(script, timeout=1800).decode().strip().splitlines()[-1]
        except RemoteError:
            raise
        except PersistbenchError as e:
            raise RemoteError(f"{self.target.label}: cannot prepare a venv with {spec}: {e}".splitlines()[0]) from None
        return self._python

    def js_runtime(self) -> str | None:
        """The JavaScript runtime yt-dlp finds on the remote machine for YouTube (None: none there)."""
        from persistbench.suites.persistbench.build import ytdl_job

        out = self.run(f"{shlex.quote(self.python())} - --js-runtime", data=Path(ytdl_job.__file__).read_bytes())
        found = json.loads(out.decode().splitlines()[-1])
        return found[0] if found else None

    def download(self, job: dict, local_dir: Path, cookies: str | None) -> Path:
        """Run ``job`` (its ``outtmpl`` and ``cookies`` are set here) on the remote machine and bring the clip back
        into ``local_dir``, checked against the remote's size and sha256. Raises :class:`PersistbenchError`
        with yt-dlp's message (``.message``) when the download failed there."""
        from persistbench.suites.persistbench.build import ytdl_job

        folder = job_folder(job)
        job = {**job, "outtmpl": f"~/{folder}/clip.%(ext)s", "result": f"~/{folder}/result.json"}
        q = shlex.quote
        make = f"mkdir -p {q(folder)} && chmod 700 {q(folder)}"  # in the job's own command: one round trip less
        if cookies:
            upload = f"{make} && umask 077 && cat > {q(folder)}/cookies.txt"
            self.run(upload, data=read_bounded(cookies, MAX_COOKIES_BYTES), timeout=300)
            job["cookies"] = f"~/{folder}/cookies.txt"
        try:
            py = q(self.python())
            done = f"[ -s {q(folder)}/result.json ]"
            command = f"{make} && if {done}; then cat {q(folder)}/result.json; else {py} - {q(json.dumps(job))}; fi"
            result = job_answer(self.run(command, data=Path(ytdl_job.__file__).read_bytes()), self.target.label)
        finally:
            if cookies:
                self.run(f"rm -f {q(folder)}/cookies.txt", timeout=120)
        if not result["ok"]:
            self.forget(folder)
            raise RemoteDownloadFailed(result["message"])
        remote_path = result["path"]
        if Path(remote_path).suffix not in VIDEO_SUFFIXES:  # the remote's answer is not trusted to name files here
            raise PersistbenchError(f"{self.target.label}: the download there is not a video file: {remote_path!r}")
        local = local_dir / ("clip" + Path(remote_path).suffix)
        try:  # exactly the declared size: a remote that sends more is cut off; no partial file is left
            self.receive(f"cat {q(remote_path)}", local, result["size"])
        except BaseException:
            local.unlink(missing_ok=True)
            raise
        size, digest = local.stat().st_size, _sha256(local)
        if size != result["size"] or digest != result["sha256"]:
            local.unlink()
            raise PersistbenchError(
                f"{self.target.label}: {remote_path} came back as {size} bytes, sha256 {digest[:12]}...; "
                f"it is {result['size']} bytes, sha256 {result['sha256'][:12]}... there (transfer cut off?)"
            )
        self.forget(folder)
        return local

    def receive(self, command: str, local: Path, size: int, timeout: float = 3600) -> None:
        """``command``'s stdout written to ``local``, refused past ``size`` bytes (the process is killed)."""
        try:
            proc = subprocess.Popen([*self.argv, command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise RemoteError(f"the SSH backend needs OpenSSH's client ({self.target.argv[0]}) on PATH") from None
        deadline, got = time.monotonic() + timeout, 0
        try:
            with open(local, "wb") as out:
                while chunk := proc.stdout.read1(1 << 20):
                    got += len(chunk)
                    if got > size:
                        raise PersistbenchError(
                            f"{self.target.label}: sent more than the {size} bytes it declared for {local.name}; refused"
                        )
                    if time.monotonic() > deadline:
                        raise RemoteError(f"{self.target.label}: the transfer took over {timeout:.0f} s")
                    out.write(chunk)
            err = proc.stderr.read(64 << 10).decode(errors="replace").strip()
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code == 255:
            raise RemoteError(f"{self.target.label}: {_ssh_reason(err)}")
        if code != 0:
            raise PersistbenchError(f"{self.target.label}: {command.split()[0]} exited {code}: {err[-300:]}")

    def forget(self, folder: str) -> None:
        """Remove a job's remote folder once its clip is safe here."""
        self.run(f"rm -rf {shlex.quote(folder)}", timeout=120)


def job_answer(stdout: bytes, label: str) -> dict:
    """The job's answer, its last line, read as untrusted: ``{"ok": true, "path": text, "size": int in
    [0, MAX_CLIP_BYTES], "sha256": 64 hex}`` or ``{"ok": false, "message": text}`` (cut to
    :data:`MAX_MESSAGE_CHARS`, saying how much was cut); anything else is one line naming the remote."""
    lines = stdout[-MAX_ANSWER_BYTES:].strip().splitlines()
    where = f"{label}: the download job's answer"
    try:
        answer = parse_json(lines[-1] if lines else b"", where)
    except PersistbenchError as e:
        raise RemoteError(f"{str(e)[:MAX_MESSAGE_CHARS]}; check the remote's interpreter (--remote-python)") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        raise RemoteError(f"{where}: not a result object with ok true or false")
    if not answer["ok"]:
        message = answer.get("message")
        if not isinstance(message, str) or not message.strip():
            message = "no message"
        first = " ".join(message.split())
        cut = len(first) - MAX_MESSAGE_CHARS
        return {
            "ok": False,
            "message": first[:MAX_MESSAGE_CHARS] + (f" ... ({cut} more characters cut)" if cut > 0 else ""),
        }
    path, size, digest = answer.get("path"), answer.get("size"), answer.get("sha256")
    if not (isinstance(path, str) and 0 < len(path) <= 4096):
        raise RemoteError(f"{where}: path: must be text")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_CLIP_BYTES:
        raise RemoteError(f"{where}: size: must be an integer in [0, {MAX_CLIP_BYTES}]")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise RemoteError(f"{where}: sha256: must be 64 hex digits")
    return {"ok": True, "path": path, "size": size, "sha256": digest}


def job_folder(job: dict) -> str:
    """The remote folder of ``job`` (relative to the remote home): one per URL, format and range."""
    key = hashlib.sha256(json.dumps({k: job[k] for k in ("url", "format", "range")}, sort_keys=True).encode())
    return f"{REMOTE_HOME}/clips/{key.hexdigest()[:24]}"


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
    return (text or "the connection failed or was cut (ssh exited 255); run again: clips already here are kept")[
        :MAX_MESSAGE_CHARS
    ]


@functools.lru_cache(maxsize=4)
def host(target: SshTarget) -> SshHost:
    """One :class:`SshHost` per target in a process (its interpreter checked once)."""
    return SshHost(target)
