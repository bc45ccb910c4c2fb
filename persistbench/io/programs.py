"""Programs outside Python the toolkit looks for: a JavaScript runtime yt-dlp can use for YouTube."""

from __future__ import annotations

import shutil
import subprocess


def js_runtime() -> tuple[str, str] | None:
    """``(name, path)`` of a JavaScript runtime yt-dlp can use for YouTube: deno, or node >= 22."""
    deno = shutil.which("deno")
    if deno:
        return "deno", deno
    node = shutil.which("node")
    if node:
        try:
            out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
            if int(out.strip().lstrip("v").split(".")[0]) >= 22:
                return "node", node
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
    return None
