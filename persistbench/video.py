"""Video decoding and encoding through the ffmpeg binary that imageio-ffmpeg ships.

Frames are RGB uint8 ``(H, W, 3)`` arrays, streamed one at a time so a long
or large clip is never held in memory. This module knows nothing of cases.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .errors import PersistbenchError

# x264 settings of every clip this toolkit writes; recorded next to the clips.
H264_SETTINGS = {"codec": "libx264", "crf": 16, "preset": "medium", "pix_fmt": "yuv420p", "threads": 1}


def ffmpeg_exe() -> str:
    """Path of the ffmpeg binary (imageio-ffmpeg's, or ``IMAGEIO_FFMPEG_EXE``)."""
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def probe(path: str | os.PathLike) -> dict:
    """``{width, height, fps, duration}`` of a video file (duration in seconds, 0 if unknown)."""
    import imageio_ffmpeg

    if not Path(path).is_file():
        raise PersistbenchError(f"{path}: no such video file")
    try:
        gen = imageio_ffmpeg.read_frames(str(path))
        meta = next(gen)
        gen.close()
    except (RuntimeError, StopIteration, OSError) as e:
        raise PersistbenchError(f"{path}: not a readable video: {str(e).strip().splitlines()[-1] if str(e) else e}") from None
    width, height = meta["size"]
    return {"width": int(width), "height": int(height), "fps": float(meta["fps"]), "duration": float(meta.get("duration") or 0.0)}


def read_frames(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Decode every frame of a video as RGB uint8 ``(H, W, 3)``, in presentation order."""
    info = probe(path)
    shape = (info["height"], info["width"], 3)
    cmd = [ffmpeg_exe(), "-nostdin", "-v", "error", "-i", str(path), "-map", "0:v:0", "-f", "rawvideo",
           "-pix_fmt", "rgb24", "-fps_mode", "passthrough", "-"]  # fmt: skip
    errlog = tempfile.TemporaryFile()  # a file, not a pipe: a chatty ffmpeg cannot block
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errlog)
    size = shape[0] * shape[1] * 3
    finished = False
    try:
        while True:
            buf = proc.stdout.read(size)
            if len(buf) < size:
                finished = True
                break
            yield np.frombuffer(buf, np.uint8).reshape(shape)
    finally:
        if not finished:  # the consumer stopped early
            proc.kill()
        proc.stdout.close()
        code = proc.wait()
        errlog.seek(0)
        err = errlog.read().decode(errors="replace").strip()
        errlog.close()
    if code != 0 or err:
        raise PersistbenchError(f"{path}: decoding failed: {err.splitlines()[-1] if err else f'ffmpeg exit {code}'}")


def encode_video(path: str | os.PathLike, frames: Iterable[np.ndarray], fps: float) -> dict:
    """Encode RGB uint8 frames to an H.264 MP4, atomically and byte-reproducibly.

    Args:
        path: output ``.mp4``; written under a temporary name, renamed when ffmpeg succeeds.
        frames: ``(H, W, 3)`` uint8 arrays of one size (even width and height).
        fps: frame rate.
    Returns:
        The encoder settings used (:data:`H264_SETTINGS` plus ``fps``).
    """
    from .layout import atomic_path

    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("no frames to encode")
    h, w = first.shape[:2]
    s = H264_SETTINGS
    with atomic_path(path) as tmp:
        cmd = [ffmpeg_exe(), "-nostdin", "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
               "-s", f"{w}x{h}", "-framerate", repr(float(fps)), "-i", "-",
               "-c:v", s["codec"], "-preset", s["preset"], "-crf", str(s["crf"]), "-pix_fmt", s["pix_fmt"],
               "-threads", str(s["threads"]), "-map_metadata", "-1", "-fflags", "+bitexact",
               "-flags:v", "+bitexact", "-movflags", "+faststart", "-f", "mp4", str(tmp)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            for frame in itertools.chain([first], it):
                if frame.shape != first.shape or frame.dtype != np.uint8:
                    raise ValueError(f"frame of shape {frame.shape} {frame.dtype}, expected {first.shape} uint8")
                proc.stdin.write(np.ascontiguousarray(frame).tobytes())
            proc.stdin.close()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        err = proc.stderr.read().decode(errors="replace").strip()
        if proc.wait() != 0:
            raise PersistbenchError(f"{path}: ffmpeg failed: {err.splitlines()[-1] if err else 'no message'}")
    return {**s, "fps": float(fps)}

