"""The one exception type users see: a message that names the file or case and the problem."""

from __future__ import annotations


class PersistbenchError(Exception):
    """Bad input or environment; the CLI prints ``error: <message>`` and exits non-zero."""


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
