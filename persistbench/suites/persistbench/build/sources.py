"""Source clips: yt-dlp downloads of only the time range a case needs, and their cache.

A cache entry is keyed by source id, time range and format selector, and is
shared by every case that needs the same clip. An entry exists only once
the download has been decoded end to end and covers the range: downloads go
to a temporary directory and are renamed into place after that check, so an
interrupted or truncated download is never taken for a complete one. A
per-entry file lock lets parallel workers and shards share the cache.

This module does not reproject.
"""

from __future__ import annotations

import glob
import os
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import file_lock, write_json
from persistbench.io.names import child, remove_tree
from persistbench.io.video import decode_with_pts, ffmpeg_exe, probe
from persistbench.suites.persistbench.build import ytdl_job
from persistbench.suites.persistbench.build.recipes import Recipe
from persistbench.suites.persistbench.build.remote import RemoteDownloadFailed, RemoteError, SshTarget, host
from persistbench.suites.persistbench.build.source_errors import explain
from persistbench.suites.persistbench.build.throttle import Throttle
from persistbench.suites.persistbench.build.ytdl_job import VIDEO_SUFFIXES
from persistbench.suites.persistbench.layout import CacheLayout

YOUTUBE_HOSTS = ("youtube.com", "youtu.be", "youtube-nocookie.com")
RATE_LIMIT_ATTEMPTS = 8  # rate-limited downloads are retried this often (slowing down), whatever --retries says


class SourceUnavailable(PersistbenchError):
    """The source cannot be had (404, private, removed, not in --sources-dir): no retry helps."""


class RateLimited(PersistbenchError):
    """The host asks this machine to slow down (HTTP 429 and its YouTube forms)."""


@dataclass(frozen=True)
class SourceOptions:
    """How sources are obtained.

    Attributes:
        cache: cache directory for downloaded ranges.
        sources_dir: directory of already-downloaded full clips named ``<source id>.<ext>``;
            when given, nothing is downloaded.
        retries: further attempts after a transient failure.
        backoff: seconds before the first retry; doubles each time.
        pad: seconds of source kept before and after the frames a case needs.
        cookies: a cookies.txt file for yt-dlp; proxy: a proxy URL for yt-dlp.
        rate_limit: the most bytes a second yt-dlp downloads (None: no limit).
        remote: download on this machine over SSH (:mod:`.remote`; a VM of :mod:`.gcloud`) instead of here.
        sleep_interval: seconds yt-dlp waits before each download.
        progress: show a per-source download bar on stderr.
    """

    cache: Path
    sources_dir: Path | None = None
    retries: int = 3
    backoff: float = 1.0
    pad: float = 1.0
    cookies: str | None = None
    proxy: str | None = None
    rate_limit: int | None = None
    sleep_interval: float = 0.0
    remote: SshTarget | None = None
    progress: bool = False


def is_youtube(url: str) -> bool:
    host = (urllib.parse.urlparse(url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in YOUTUBE_HOSTS)


def require_js_runtime(found: str | tuple[str, str] | None, where: str | None = None) -> None:
    """Fail early, saying what to install, when YouTube extraction is impossible on this machine or on the
    remote machine ``where`` (``found``: the runtime there, None when there is none)."""
    if found is None and where is None:
        raise PersistbenchError(
            "YouTube sources need a JavaScript runtime for yt-dlp: install deno (https://deno.com) "
            "or Node.js >= 22 and put it on PATH, or pass --sources-dir with the clips"
        )
    if found is None:
        raise PersistbenchError(
            f"{where}: YouTube sources need a JavaScript runtime for yt-dlp there: install deno or Node.js >= 22 "
            "on it, or leave out --remote-python (the venv made there includes deno)"
        )


def needed_range(recipe: Recipe, pad: float) -> tuple[float, float]:
    """Seconds ``(t0, t1)`` of the source a case needs, padded by ``pad`` on both sides."""
    s = recipe.source
    return max(0.0, s.start - pad), s.start + (s.n_frames - 1) / s.fps + pad


def ranged(url: str) -> bool:
    """Whether only a time range is downloaded. ``file://`` sources are local: yt-dlp
    copies them whole, since its ffmpeg range downloader does not take file URLs."""
    return not url.lower().startswith("file:")


def cache_stem(recipe: Recipe, opts: SourceOptions) -> Path:
    """Cache entry path without suffix: ``<cache>/<source id>/<t0>-<t1>_h<height>`` (``full_h...`` unranged)."""
    t0, t1 = needed_range(recipe, opts.pad)
    span = f"{t0:.3f}-{t1:.3f}" if ranged(recipe.source.url) else "full"
    return CacheLayout(opts.cache).clip_stem(recipe.source.id, span, recipe.source.height)


def cached_clip(recipe: Recipe, opts: SourceOptions) -> Path | None:
    """The cache entry for ``recipe``'s clip, if it is complete."""
    return _existing(cache_stem(recipe, opts))


def _existing(stem: Path) -> Path | None:
    hits = [p for p in sorted(glob.glob(glob.escape(str(stem)) + ".*")) if Path(p).suffix in VIDEO_SUFFIXES]
    return Path(hits[0]) if hits else None


def check_clip(path: Path, t0: float, t1: float, tolerance: float) -> None:
    """Decode a clip end to end; it must cover ``[t0, t1]`` seconds within ``tolerance``.

    Raises:
        PersistbenchError: naming the file, when it does not decode or falls short.
    """
    first = last = None
    for t, _ in decode_with_pts(path):
        first = t if first is None else first
        last = t
    if first is None:
        raise PersistbenchError(f"{path}: no video frames (empty or truncated download)")
    if first > t0 + tolerance or last < t1 - tolerance:
        raise PersistbenchError(f"{path}: covers {first:.3f}-{last:.3f} s, needs {t0:.3f}-{t1:.3f} s (truncated?)")


def local_clip(recipe: Recipe, sources_dir: Path) -> Path:
    """The clip for ``recipe`` in ``sources_dir``, named ``<source id>.<ext>``."""
    hit = _existing(child(sources_dir, recipe.source.id))
    if hit is None:
        raise SourceUnavailable(f"{recipe.case_id}: no clip named {recipe.source.id}.* in {sources_dir}")
    return hit


def job(recipe: Recipe, opts: SourceOptions, out_dir: str, t0: float, t1: float) -> dict:
    """The yt-dlp job of ``recipe``'s clip (:mod:`persistbench.suites.persistbench.build.ytdl_job`): video only, the best format not
    above the recipe's source resolution, only ``[t0, t1]`` seconds unless the source is a local file;
    ``out_dir`` is where the clip is written, on the machine that runs the job."""
    height = recipe.source.height
    return {
        "url": recipe.source.url,
        "format": f"bv[height<=?{height}]/bv*[height<=?{height}]/b[height<=?{height}]",
        "outtmpl": f"{out_dir}/clip.%(ext)s",
        "range": [t0, t1] if ranged(recipe.source.url) else None,
        "cookies": opts.cookies,
        "proxy": opts.proxy,
        "rate_limit": opts.rate_limit,
        "sleep_interval": opts.sleep_interval,
    }


def failure(recipe: Recipe, message: str) -> PersistbenchError:
    """The error of a download that yt-dlp reported as ``message``: unavailable (no retry helps), rate-limited
    (slow down and retry) or another failure (retried)."""
    problem = explain(message)
    if problem.permanent:
        return SourceUnavailable(f"{recipe.case_id}: source {recipe.source.url} unavailable: {problem.line(message)}")
    if problem.kind == "rate_limited":
        return RateLimited(f"{recipe.case_id}: download of {recipe.source.url}: {problem.line(message)}")
    return PersistbenchError(f"{recipe.case_id}: download of {recipe.source.url} failed: {message}")


def _download_remote(recipe: Recipe, opts: SourceOptions, tmp: Path, t0: float, t1: float) -> Path:
    """The clip downloaded on ``opts.remote`` and brought back into ``tmp`` (size and sha256 checked)."""
    try:
        return host(opts.remote).download(job(recipe, opts, "", t0, t1), tmp, opts.cookies)
    except RemoteDownloadFailed as e:
        raise failure(recipe, str(e)) from None
    except RemoteError as e:  # the machine, not the source: no case can be had through it
        raise PersistbenchError(f"{recipe.case_id}: {e}") from None


def _download_once(recipe: Recipe, opts: SourceOptions, tmp: Path, t0: float, t1: float) -> Path:
    """The clip downloaded here, into ``tmp``."""
    hooks = []
    bar = None
    if opts.progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"  {recipe.source.id}", unit="B", unit_scale=True, leave=False)

        def hook(d: dict) -> None:
            if d.get("downloaded_bytes") is not None:
                bar.total = d.get("total_bytes") or d.get("total_bytes_estimate") or bar.total
                bar.n = d["downloaded_bytes"]
                bar.refresh()

        hooks.append(hook)
    try:
        result = ytdl_job.run({**job(recipe, opts, str(tmp), t0, t1), "ffmpeg": ffmpeg_exe()}, hooks)
    finally:
        if bar is not None:
            bar.close()
    if not result["ok"]:
        raise failure(recipe, result["message"])
    return Path(result["path"])


def fetch(recipe: Recipe, opts: SourceOptions) -> Path:
    """A decoded-and-checked clip holding the frames ``recipe`` needs.

    From ``opts.sources_dir`` when given, else from the cache, else downloaded
    with yt-dlp (time range only) with retries and backoff.

    Raises:
        SourceUnavailable: the source cannot be had.
        PersistbenchError: the download kept failing or is not a usable video.
    """
    if opts.sources_dir is not None:
        return local_clip(recipe, opts.sources_dir)
    stem = cache_stem(recipe, opts)
    hit = _existing(stem)
    if hit is not None:
        return hit
    t0, t1 = needed_range(recipe, opts.pad)
    # Inner frames must be there; the padding may be cut short at the ends of a video.
    times = recipe.frame_times()
    first, last = times[0], times[-1]
    with file_lock(stem.parent / f".{stem.name}.lock"):
        hit = _existing(stem)
        if hit is not None:
            return hit
        throttle = Throttle(opts.cache, opts.backoff)
        failures = limited = 0
        while True:
            tmp = stem.parent / f".tmp-{stem.name}-{os.getpid()}"
            remove_tree(opts.cache, tmp)
            tmp.mkdir(parents=True)
            throttle.wait()
            try:
                clip = (_download_remote if opts.remote else _download_once)(recipe, opts, tmp, t0, t1)
                try:
                    check_clip(clip, first, last, tolerance=0.5 / max(probe(clip)["fps"], 1e-3) + 1e-3)
                except PersistbenchError as e:
                    reason = str(e).split(": ", 1)[-1]  # drop the temporary path
                    raise PersistbenchError(
                        f"{recipe.case_id}: download of {recipe.source.url} is not a complete video: {reason}"
                    ) from None
                final = stem.parent / (stem.name + clip.suffix)
                os.replace(clip, final)
                write_json(stem.parent / (stem.name + ".json"), {"url": recipe.source.url, "range": [t0, t1]})
                throttle.recover()
                return final
            except SourceUnavailable:
                raise
            except RateLimited:  # slow the whole run down and try again, more often than other failures
                limited += 1
                throttle.slow_down()
                if limited >= max(RATE_LIMIT_ATTEMPTS, opts.retries + 1):
                    raise
            except PersistbenchError:
                failures += 1
                if failures > opts.retries:
                    raise
                time.sleep(opts.backoff * 2 ** (failures - 1))
            finally:
                remove_tree(opts.cache, tmp)
