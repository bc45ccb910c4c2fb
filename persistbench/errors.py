"""The one exception type users see: a message that names the file or case and the problem."""

from __future__ import annotations


class PersistbenchError(Exception):
    """Bad input or environment; the CLI prints ``error: <message>`` and exits non-zero."""
