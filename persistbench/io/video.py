"""Video decoding and encoding through the ffmpeg binary that imageio-ffmpeg ships.

Frames are RGB uint8 ``(H, W, 3)`` arrays, streamed one at a time so a long
or large clip is never held in memory. This module knows nothing of cases.
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import check_regular

# x264 settings of every clip this toolkit writes; recorded next to the clips.
H264_SETTINGS = {"codec": "libx264", "crf": 16, "preset": "medium", "pix_fmt": "yuv420p", "threads": 1}
# Predictions written as video: x264's RGB encoder at crf 0 is lossless (decodes to the same bytes).
LOSSLESS_SETTINGS = {"codec": "libx264rgb", "crf": 0, "preset": "ultrafast", "pix_fmt": "rgb24", "threads": 1}


# swscale's colour conversion picks SIMD code per CPU, and it rounds differently unless asked not to;
# x264 makes the choices it would make on any CPU. Together, the same frames give the same bytes everywhere.
BITEXACT_SCALING = ("-sws_flags", "accurate_rnd+bitexact+full_chroma_int")


def ffmpeg_exe() -> str:
    """Path of the ffmpeg binary (imageio-ffmpeg's, or ``IMAGEIO_FFMPEG_EXE``)."""
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


_STREAM_RE = re.compile(r"Stream #\d+:\d+.*?: Video: [^\n]*?, (\d+)x(\d+)(?=[,\s\[]|$)[^\n]*")
# One line of ffmpeg's log with ``-loglevel level+...``: an optional ``[context @ 0x...]``, the level, the message.
_LOG_RE = re.compile(rb"^(?:\[([^\]]*)\] )?\[(\w+)\] ?(.*?)\r?\n?$")
_FAILURE_LEVELS = (b"error", b"fatal", b"panic")
_FPS_RE = re.compile(r"([\d.]+)(k?) (?:fps|tbr)")
_DURATION_RE = re.compile(r"Duration: (\d+):(\d+):([\d.]+)")


def _is_url(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an ffmpeg input URL (``http://...``, ``subfile,,...``: a member of an archive read in place)."""
    return isinstance(path, str) and (path.startswith("subfile,") or "://" in path)


def _input(path: str | os.PathLike) -> list[str]:
    """ffmpeg's input arguments; a URL may nest ``subfile`` over ``file``/``http(s)`` (ffmpeg allows only
    ``file`` inside another protocol unless told)."""
    if _is_url(path):
        return ["-protocol_whitelist", "subfile,file,http,https,tcp,tls", "-i", str(path)]
    return ["-i", str(path)]


def _unreadable(path: str | os.PathLike, stderr: str, default: str) -> PersistbenchError:
    """``<path>: not a readable video: <ffmpeg's last line>`` (``default`` when it printed none)."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip() and "output file" not in x]
    return PersistbenchError(f"{path}: not a readable video: {lines[-1] if lines else default}")


def probe(path: str | os.PathLike) -> dict:
    """``{width, height, fps, duration}`` of a video's first video stream (duration in seconds, 0 if unknown).

    Reads the container header only (``ffmpeg -i``), decoding nothing.
    """
    if not _is_url(path):
        check_regular(path, "video file")
    res = subprocess.run(
        [ffmpeg_exe(), "-nostdin", "-hide_banner", *_input(path)], capture_output=True, text=True, errors="replace"
    )
    stream = _STREAM_RE.search(res.stderr)
    if stream is None:
        raise _unreadable(path, res.stderr, "no video stream")
    fps = _FPS_RE.search(stream.group(0))
    duration = _DURATION_RE.search(res.stderr)
    return {
        "width": int(stream.group(1)),
        "height": int(stream.group(2)),
        "fps": float(fps.group(1)) * (1000 if fps.group(2) else 1) if fps else 0.0,
        "duration": int(duration.group(1)) * 3600 + int(duration.group(2)) * 60 + float(duration.group(3))
        if duration
        else 0.0,
    }


def count_frames(path: str | os.PathLike) -> int:
    """Frames of a video's first video stream as its container lists them (packets, read without decoding):
    the count an index-based reader such as decord reports."""
    if not _is_url(path):
        check_regular(path, "video file")
    cmd = [ffmpeg_exe(), "-nostdin", "-hide_banner", *_input(path), "-map", "0:v:0", "-c", "copy", "-f", "null"]
    res = subprocess.run(
        [*cmd, "-progress", "pipe:1", "-nostats", "-"], capture_output=True, text=True, errors="replace"
    )
    counts = [line.removeprefix("frame=") for line in res.stdout.splitlines() if line.startswith("frame=")]
    if res.returncode != 0 or not counts or not counts[-1].strip().isdigit():
        raise _unreadable(path, res.stderr, "no frame count")
    return int(counts[-1])


def read_frames(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Decode every frame of a video as RGB uint8 ``(H, W, 3)``, in presentation order."""
    for _, frame in decode_with_pts(path, threads=0):
        yield frame


_SHOWINFO_RE = re.compile(rb"\bn:\s*\d+\s+pts:\s*-?\d+\s+pts_time:(-?[0-9.eE+-]+)")


def decode_with_pts(
    path: str | os.PathLike, seek: float | None = None, threads: int = 1
) -> Iterator[tuple[float, np.ndarray]]:
    """Decode frames with their presentation time, in presentation order.

    Times are seconds on the file's own timeline (``-copyts``): a clip cut
    from a longer video keeps the source's timestamps, and a cut that starts
    at an earlier keyframe than asked shows up as earlier times instead of
    shifting every frame. ``seek`` skips decoding before that time (frames
    before it are dropped). ``threads`` is ffmpeg's decoder thread count: one
    by default, as the decoder runs beside the caller's own work and frame
    threading costs more CPU per frame (0 lets ffmpeg choose). The frame
    size is the one ffmpeg reports for its output stream (after any
    rotation), read from the decoding process itself: no separate probe.

    Yields:
        ``(pts_seconds, frame)`` with ``frame`` RGB uint8 ``(H, W, 3)``.
    Raises:
        PersistbenchError: naming the file, when ffmpeg fails or reports a
        decode error (damaged frames are never passed on).
    """
    if not _is_url(path):
        check_regular(path, "video file")
    # -xerror: a decode error stops ffmpeg with a failing exit status; the log's levels say which lines are errors.
    # -nostats: no progress lines ending in a carriage return, so every log line starts with its context.
    cmd = [ffmpeg_exe(), "-nostdin", "-nostats", "-hide_banner", "-loglevel", "level+info", "-xerror", "-copyts"]
    cmd += ["-threads", str(threads)]
    if seek:
        cmd += ["-ss", f"{seek:.6f}"]
    cmd += [
        *_input(path),
        "-map",
        "0:v:0",
        "-vf",
        "showinfo",
        *BITEXACT_SCALING,
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-fps_mode",
        "passthrough",
        "-",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    times: queue.Queue = queue.Queue()
    sizes: queue.Queue = queue.Queue()
    errors: list[str] = []

    def read_log() -> None:  # the output stream's size comes first; showinfo logs each frame before stdout has it
        output = False
        for line in proc.stderr:
            parsed = _LOG_RE.match(line)
            context, level, message = parsed.groups() if parsed else (None, b"info", line)
            if context and context.startswith(b"Parsed_showinfo"):
                if m := _SHOWINFO_RE.search(message):
                    times.put(float(m.group(1)))
            elif level in _FAILURE_LEVELS:
                errors.append(message.decode(errors="replace").strip())
            elif message.startswith(b"Output #0"):
                output = True
            elif output and (stream := _STREAM_RE.search(message.decode(errors="replace"))):
                sizes.put((int(stream.group(2)), int(stream.group(1)), 3))
                output = False
        sizes.put(None)
        times.put(None)

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    shape = sizes.get()
    size = shape[0] * shape[1] * 3 if shape else 0
    finished = shape is None  # no output stream: ffmpeg failed, reported below
    try:
        while not finished:
            buf = proc.stdout.read(size)
            if len(buf) < size:
                finished = True
                break
            t = times.get()
            if t is None:
                raise PersistbenchError(f"{path}: decoder gave a frame without a timestamp")
            yield t, np.frombuffer(buf, np.uint8).reshape(shape)
    finally:
        if not finished:
            proc.kill()
        proc.stdout.close()
        code = proc.wait()
        reader.join()
        proc.stderr.close()
    if shape is None:
        raise PersistbenchError(f"{path}: not a readable video: {errors[-1] if errors else 'no video stream'}")
    if code != 0 or errors:  # a decode error means damaged frames: never pass them on
        raise PersistbenchError(f"{path}: decoding failed: {errors[-1] if errors else f'ffmpeg exit {code}'}")


def frames_at(
    stream: Iterable[tuple[float, np.ndarray]], times: Iterable[float], tolerance: float, name: str = "source"
) -> Iterator[np.ndarray]:
    """Pick, for each wanted time, the frame whose presentation time is nearest.

    Args:
        stream: ``(pts_seconds, frame)`` in increasing time (:func:`decode_with_pts`).
        times: wanted times in seconds, increasing.
        tolerance: largest allowed ``|pts - time|``, e.g. half a source frame.
        name: what to call the stream in errors.
    Raises:
        PersistbenchError: when no frame lies within ``tolerance`` of a wanted time.
    """
    it = iter(stream)
    prev = None
    cur = next(it, None)
    first = cur[0] if cur else None
    for want in times:
        while cur is not None and cur[0] <= want:
            prev, cur = cur, next(it, None)
        near = min((c for c in (prev, cur) if c is not None), key=lambda c: abs(c[0] - want), default=None)
        if near is None or abs(near[0] - want) > tolerance:
            if first is None:
                why = "it has no frames"
            elif want < first:
                why = f"it starts at {first:.3f} s"
            elif cur is None:
                why = f"it ends at {prev[0]:.3f} s"
            else:
                why = f"it jumps from {prev[0]:.3f} s to {cur[0]:.3f} s"
            raise PersistbenchError(f"{name}: no frame at {want:.3f} s: {why}")
        yield near[1]


def encode_video(
    path: str | os.PathLike, frames: Iterable[np.ndarray], fps: float, settings: dict = H264_SETTINGS
) -> dict:
    """Encode RGB uint8 frames to an H.264 MP4, atomically and byte-reproducibly.

    Args:
        path: output ``.mp4``; written under a temporary name, renamed when ffmpeg succeeds.
        frames: ``(H, W, 3)`` uint8 arrays of one size (even width and height for yuv420p).
        fps: frame rate.
        settings: codec, crf, preset, pix_fmt and threads (default :data:`H264_SETTINGS`).
    Returns:
        The encoder settings used (``settings`` plus ``fps``).
    """
    from persistbench.io.files import atomic_path

    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("no frames to encode")
    h, w = first.shape[:2]
    s = settings
    with atomic_path(path) as tmp:
        cmd = [
            ffmpeg_exe(),
            "-nostdin",
            "-y",
            "-v",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-s",
            f"{w}x{h}",
            "-framerate",
            repr(float(fps)),
            "-i",
            "-",
            *BITEXACT_SCALING,
            "-c:v",
            s["codec"],
            "-x264-params",
            "cpu-independent=1",
            "-preset",
            s["preset"],
            "-crf",
            str(s["crf"]),
            "-pix_fmt",
            s["pix_fmt"],
            "-threads",
            str(s["threads"]),
            "-map_metadata",
            "-1",
            "-fflags",
            "+bitexact",
            "-flags:v",
            "+bitexact",
            "-movflags",
            "+faststart",
            "-f",
            "mp4",
            str(tmp),
        ]
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
