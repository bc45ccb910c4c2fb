"""One source download as yt-dlp runs it, here or on a remote machine: a JSON job in, a file or a message out.

This module imports nothing of persistbench (the standard library, yt-dlp and imageio-ffmpeg only), so
that the SSH backend can send its source to a remote interpreter and run the very same code there
(``python - JOB_JSON`` with this file on stdin prints the result as one JSON line). A job holds the URL,
the output template, the format selector, the time range (``null``: the whole file), the cookies file,
proxy, rate limit and sleep interval.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".mov")  # what yt-dlp may write a clip as


MIN_NODE = 22  # the oldest Node.js major release yt-dlp's YouTube extraction runs on


def node_version(node: str) -> str | None:
    """``node --version`` without its ``v`` (``20.11.0``), or None when it does not answer."""
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.lstrip("v") or None


def js_runtime() -> tuple[str, str] | None:
    """``(name, path)`` of a JavaScript runtime yt-dlp can use for YouTube: deno, or node >= 22, on ``PATH`` or
    beside this interpreter (a venv with PyPI's ``deno``)."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    deno = shutil.which("deno", path=path)
    if deno:
        return "deno", deno
    node = shutil.which("node", path=path)
    version = node_version(node) if node else None
    try:
        if version and int(version.split(".")[0]) >= MIN_NODE:
            return "node", node
    except ValueError:
        pass
    return None


def ydl_params(job: dict, logger, hooks: list) -> dict:
    """yt-dlp's parameters for ``job``."""
    import imageio_ffmpeg
    import yt_dlp

    params = {
        "format": job["format"],
        "outtmpl": job["outtmpl"],
        "ffmpeg_location": job.get("ffmpeg") or imageio_ffmpeg.get_ffmpeg_exe(),
        "enable_file_urls": True,
        "noplaylist": True,
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "logger": logger,
        "progress_hooks": hooks,
        "retries": 2,
        "socket_timeout": 30,
        "cachedir": False,
        "overwrites": True,
        "continuedl": False,
    }
    for key, name in (("cookies", "cookiefile"), ("proxy", "proxy"), ("rate_limit", "ratelimit")):
        if job.get(key):
            params[name] = job[key]
    if job.get("sleep_interval"):
        params["sleep_interval"] = job["sleep_interval"]
    if job.get("range") is not None:
        t0, t1 = job["range"]
        params["download_ranges"] = yt_dlp.utils.download_range_func(None, [(t0, t1)])
        # Keep the source's timestamps: frames are located by presentation time,
        # and a cut that starts at an earlier keyframe than asked must not shift them.
        params["external_downloader_args"] = {"ffmpeg_i": ["-copyts"]}
    runtime = js_runtime()
    if runtime:
        params["js_runtimes"] = {runtime[0]: {"path": runtime[1]}}
    return params


class Log:
    """Collects yt-dlp's messages instead of printing them."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def debug(self, msg: str) -> None:
        pass

    def info(self, msg: str) -> None:
        pass

    def warning(self, msg: str) -> None:
        pass

    def error(self, msg: str) -> None:
        self.errors.append(msg)


def run(job: dict, hooks: list | None = None) -> dict:
    """Download ``job``: ``{"ok": true, "path", "size", "sha256"}`` or ``{"ok": false, "message"}`` (yt-dlp's
    last error, without its traceback)."""
    import yt_dlp
    from yt_dlp.postprocessor.ffmpeg import FFmpegPostProcessor

    job = {**job, **{k: os.path.expanduser(job[k]) for k in ("outtmpl", "cookies", "result") if job.get(k)}}
    log = Log()
    params = ydl_params(job, log, hooks or [])
    # yt-dlp's FFmpegFD.available() ignores the ffmpeg_location parameter and
    # reads this context variable (as yt-dlp's own CLI sets it).
    FFmpegPostProcessor._ffmpeg_location.set(params["ffmpeg_location"])
    try:
        with yt_dlp.YoutubeDL(params) as ydl:
            ydl.extract_info(job["url"], download=True)
    except yt_dlp.utils.DownloadError as e:
        message = (log.errors[-1] if log.errors else str(e)).replace("ERROR: ", "")
        return {"ok": False, "message": re.sub(r"\s*\(caused by .*$", "", message, flags=re.S).strip()}
    out = Path(job["outtmpl"]).parent
    stem = Path(job["outtmpl"]).name.split(".")[0]
    clips = sorted(p for p in out.iterdir() if p.stem == stem and p.suffix in VIDEO_SUFFIXES)
    if not clips:
        return {"ok": False, "message": "the download produced no file"}
    h = hashlib.sha256()
    with open(clips[0], "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    result = {"ok": True, "path": str(clips[0]), "size": clips[0].stat().st_size, "sha256": h.hexdigest()}
    if job.get("result"):  # kept beside the clip until it is fetched: a cut transfer restarts from here
        Path(job["result"]).write_text(json.dumps(result))
    return result


if __name__ == "__main__":  # on a remote machine: python - JOB_JSON < ytdl_job.py (or --js-runtime)
    print(json.dumps(js_runtime() if sys.argv[1] == "--js-runtime" else run(json.loads(sys.argv[1]))), flush=True)
