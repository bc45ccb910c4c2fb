"""Bounds on what untrusted videos and images may make the toolkit decode and hold.

A 52 KB H.264 file can declare 4096 x 4096 frames and 20,000 of them: sizes
are checked from the container's header before a frame is decoded, and the
memory a step keeps is checked against what the machine has before it
allocates (docs/data-format.md, threat model).
"""

from __future__ import annotations

from persistbench.core.errors import PersistbenchError

MAX_SIDE = 8192
MAX_PIXELS = 3840 * 2160  # one 4K UHD frame
MAX_FRAMES = 2000  # frames of one video a case keeps in memory (WROP: 60-frame clips)


def check_frame_size(where: object, height: int, width: int) -> None:
    """Refuse frames larger than :data:`MAX_SIDE` a side or :data:`MAX_PIXELS` in all, naming ``where``."""
    if not (0 < height <= MAX_SIDE and 0 < width <= MAX_SIDE) or height * width > MAX_PIXELS:
        raise PersistbenchError(
            f"{where}: {width}x{height} frames, more than the {MAX_SIDE} a side and {MAX_PIXELS} pixels allowed"
        )


def check_asked_size(where: object, width: int, height: int, asked: tuple[int, int] | None) -> None:
    """Refuse a prediction whose frames are not the ``(w, h)`` its ``case.json`` says were asked for (never
    resized); ``asked`` None (a layout without one) checks nothing. Then :func:`check_frame_size`."""
    if asked is not None and (width, height) != tuple(asked):
        raise PersistbenchError(
            f"{where}: {width}x{height} frames, the case asked for {asked[0]}x{asked[1]} (case.json)"
        )
    check_frame_size(where, height, width)


def available_memory() -> int | None:
    """Bytes the system can still give (``MemAvailable``), or None where that is unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(where: object, need: int) -> None:
    """Refuse a step that would keep ``need`` bytes when the machine has less available."""
    have = available_memory()
    if have is not None and need > have:
        raise PersistbenchError(f"{where}: needs about {need / 2**30:.1f} GiB, {have / 2**30:.1f} GiB available")
