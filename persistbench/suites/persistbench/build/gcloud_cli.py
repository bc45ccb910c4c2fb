"""The user's Google Cloud CLI (``gcloud``), run without prompts: its one-line errors and its sign-in state.

Used by ``download --backend gcloud`` (:mod:`persistbench.suites.persistbench.build.gcloud`) and ``doctor``.
Output formats are the CLI's (Cloud SDK 578.0.0): ``auth list --format=value(account)`` prints nothing when
nobody is signed in, ``config get-value`` prints nothing on stdout when a value is unset, and a failure ends
with an ``ERROR: (gcloud.<command>) ...`` message on stderr.
"""

from __future__ import annotations

import subprocess

from persistbench.core.errors import PersistbenchError


class GcloudError(PersistbenchError):
    """The Google Cloud CLI is missing, signed out, or refused a command."""


class Gcloud:
    """The user's ``gcloud`` CLI, run without prompts."""

    def __init__(self, exe: str = "gcloud"):
        self.exe = exe

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        """``gcloud ARGS --quiet``; a failure (with ``check``) is one :class:`GcloudError` line: gcloud's ERROR."""
        try:
            done = subprocess.run(
                [self.exe, *args, "--quiet"], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except FileNotFoundError:
            raise GcloudError(
                f"the Google Cloud CLI ({self.exe}) is not on PATH: install it (https://cloud.google.com/sdk/docs/install)"
            ) from None
        except subprocess.TimeoutExpired:
            raise GcloudError(f"gcloud {' '.join(args[:3])}: no answer within {timeout:.0f} s") from None
        if check and done.returncode != 0:
            raise GcloudError(f"gcloud {' '.join(args[:3])}: {error_line(done.stderr)}")
        return done

    def value(self, *args: str) -> str:
        """The first line gcloud prints for ``args`` (empty when it prints nothing)."""
        out = self.run(*args, timeout=60).stdout.strip()
        return out.splitlines()[0].strip() if out else ""


def error_line(stderr: str) -> str:
    """gcloud's ``ERROR: (...)`` message as one line (with the indented lines that continue it)."""
    lines = stderr.strip().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ERROR:"):
            more = [x.strip() for x in lines[i + 1 :] if x.startswith((" ", "-"))]
            return " ".join([line.removeprefix("ERROR:").strip(), *more])[:400]
    return (" ".join(" ".join(lines[-3:]).split()) or "failed")[:400]


def signed_in(cli: Gcloud) -> str | None:
    """Who gcloud acts as: its active account, else the access token file it is configured with (None: neither)."""
    account = cli.value("auth", "list", "--filter=status:ACTIVE", "--format=value(account)")
    if account:
        return account
    token = cli.value("config", "get-value", "auth/access_token_file")
    return f"the access token in {token}" if token else None


def version(cli: Gcloud) -> str:
    """The first line of ``gcloud --version`` (``Google Cloud SDK 578.0.0``)."""
    return cli.value("--version")
