"""The one exception type users see: a message that names the file or case and the problem."""

from __future__ import annotations


class PersistbenchError(Exception):
    """Bad input or environment; the CLI prints ``error: <message>`` and exits non-zero."""


class ForeignError(PersistbenchError):
    """Code that is not ours raised (a model's ``predict`` or constructor, a backend's loader): the message is
    one line, ``details`` its traceback, kept in the case's record and log and shown with ``--debug``."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


def foreign(message: str) -> ForeignError:
    """A :class:`ForeignError` with ``message``'s first line and the traceback being handled now."""
    import traceback

    return ForeignError(message.splitlines()[0] if message else message, traceback.format_exc())


def debugging() -> bool:
    """Whether tracebacks are shown (``persistbench --debug`` or ``PERSISTBENCH_DEBUG=1``)."""
    import os

    return os.environ.get("PERSISTBENCH_DEBUG", "") not in ("", "0")


class Interrupted(PersistbenchError):
    """Ctrl-C during a stage: ``done`` of ``total`` cases were finished and are kept."""

    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__(f"interrupted: {stage} finished {done} of {total} case(s), which are kept")
        self.stage, self.done, self.total = stage, done, total


class UsageError(PersistbenchError):
    """The command was called in a way that cannot work (e.g. on a folder without cases); exit code 2."""


def os_error_line(e: OSError) -> str:
    """One line for an operating-system error, naming the path (or host) it is about."""
    where = e.filename if e.filename is not None else None
    what = e.strerror or str(e) or type(e).__name__
    if where is None:
        return what
    other = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
    return f"{where}{other}: {what}"
