"""A real OpenSSH server on loopback for the remote download backends' tests (Debian's openssh-server, which
.ci/run installs): a temporary host key, a user key and a free port, for this user only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
MISSING = SSHD is None or shutil.which("ssh") is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Sshd:
    user: str
    port: int
    key: Path  # the user's private key
    known_hosts: Path  # the server's real host key, for [127.0.0.1]:port
    wrong_known_hosts: Path  # another key for the same host
    host_pub: Path  # the server's public host key

    @property
    def remote(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"


@contextmanager
def sshd(d: Path) -> Iterator[Sshd]:
    """An sshd on 127.0.0.1 that lets this user in with a fresh key, its files under ``d``."""
    for name in ("host", "user", "other"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user.pub").read_text())
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    host_key = " ".join((d / "host.pub").read_text().split()[:2])
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    other_key = " ".join((d / "other.pub").read_text().split()[:2])
    (d / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {other_key}\n")
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    try:
        yield Sshd(user, port, d / "user", d / "known_hosts", d / "wrong_known_hosts", d / "host.pub")
    finally:
        proc.terminate()
        proc.wait()
