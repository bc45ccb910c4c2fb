"""One recipe + one source clip -> one case of the dataset layout.

Frames are located in the clip by presentation timestamp (``start + t/fps``),
never by counting from the start of the file. Each frame is reprojected into
``view_0`` and ``center`` (RGB bilinear, mask nearest on the same maps) while
a small thread pool encodes and writes the previous frames, and ffmpeg
decodes the next ones in its own process, so the cores overlap; at most a
few frames are in flight, whatever the clip's length. The case is marked
complete (``data.db`` row, ``cases.jsonl`` record) only after every file is
in place; on any failure its directory is removed. It does not loop over
cases and does not download.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from persistbench import __version__
from persistbench.core.errors import PersistbenchError
from persistbench.geometry import sphere
from persistbench.io.limits import available_memory
from persistbench.io.names import remove_tree
from persistbench.io.video import decode_with_pts, frames_at, probe
from persistbench.suites.persistbench.build.recipes import (
    LIMITS,
    Recipe,
    decode_mask_columns,
    fingerprint_distance,
    mask_pixels,
)
from persistbench.suites.persistbench.dataset import CaseWriter
from persistbench.suites.persistbench.index import mark_complete
from persistbench.suites.persistbench.layout import VIEWS, CaseId, case_dir

IN_FLIGHT = 4  # decoded frames waiting for or in rendering at once (bounds memory)


class SourceChanged(PersistbenchError):
    """The clip's fingerprint differs from the recipe's beyond its tolerance."""


def view_rotations(recipe: Recipe, view: str) -> np.ndarray:
    """``(T, 3, 3)`` camera-to-world rotations of a view from the recipe's angles (degrees)."""
    a = recipe.views[view]
    return sphere.rotation_from_ypr(*(np.deg2rad(a[k]) for k in ("yaw_deg", "pitch_deg", "roll_deg")))


def clip_frames(recipe: Recipe, clip: str | os.PathLike) -> Iterator[np.ndarray]:
    """The recipe's frames from a clip, each the one nearest in time to ``start + t/fps``.

    Decoding starts a second before the first frame (input seek), so a full
    source video is not decoded from its beginning.
    """
    info = probe(clip)
    check_memory(recipe, info["width"], info["height"], clip)
    fps = info["fps"] or recipe.source.fps
    tolerance = 0.5 / fps + 1e-3
    seek = max(0.0, recipe.source.start - 1.0)
    return frames_at(decode_with_pts(clip, seek or None), recipe.frame_times(), tolerance, name=str(clip))


def memory_needed(recipe: Recipe, pano_width: int, pano_height: int) -> int:
    """Bytes one case holds at once: the panoramas and masks in flight, the views' maps and frames."""
    in_flight = len(VIEWS) * IN_FLIGHT + 2
    pano = pano_width * pano_height * (3 + 1)  # RGB frame and its decoded mask
    view = recipe.width * recipe.height
    maps = len(VIEWS) * 2 * view * 2 * 4  # per view and sampled size: two float32 maps
    return in_flight * pano + maps + len(VIEWS) * IN_FLIGHT * view * 4 + 16 * recipe.n_frames


def check_memory(recipe: Recipe, pano_width: int, pano_height: int, clip: object) -> None:
    """Refuse a clip larger than the recipe limits, or a case that would not fit in memory, before allocating."""
    if pano_width > LIMITS["source_width"] or pano_height > LIMITS["source_height"]:
        raise PersistbenchError(
            f"{clip}: {pano_width}x{pano_height} exceeds the source limit of {LIMITS['source_width']}x{LIMITS['source_height']}"
        )
    need, have = memory_needed(recipe, pano_width, pano_height), available_memory()
    if have is not None and need > have:
        raise PersistbenchError(
            f"{recipe.case_id}: needs about {need / 2**30:.1f} GiB, {have / 2**30:.1f} GiB available"
        )


def reconstruct_case(
    recipe: Recipe,
    frames: Iterable[np.ndarray],
    root: str | os.PathLike,
    frame_format: str = "png",
    accept_changed_source: bool = False,
) -> tuple[dict, dict]:
    """Render, write and mark complete one case.

    Args:
        recipe: a validated recipe.
        frames: the recipe's ``n_frames`` equirectangular RGB uint8 frames ``(H, W, 3)``
            in order (:func:`clip_frames`).
        root: dataset root.
        frame_format: ``png`` or ``jpg`` for the view frames (masks are always PNG).
        accept_changed_source: write the case even when the fingerprint differs.
    Returns:
        ``(row, record)``: its ``data.db`` row and ``cases.jsonl`` record.
    Raises:
        SourceChanged: the fingerprint differs (and not ``accept_changed_source``).
        PersistbenchError: too few frames, or a decoding error.
    """
    try:
        return _reconstruct(recipe, frames, Path(root), frame_format, accept_changed_source)
    except BaseException:
        remove_tree(root, case_dir(root, recipe.subset, recipe.case_id))
        raise


def _check_fingerprint(recipe: Recipe, t: int, pano: np.ndarray) -> None:
    fp = recipe.fingerprint
    distance = fingerprint_distance(fp, {t: pano})
    if distance > fp["tolerance"]:
        raise SourceChanged(
            f"{recipe.case_id}: source differs from the one the benchmark was built from (frame {t}: mean "
            f"difference {distance:.1f} > tolerance {fp['tolerance']:g}); --accept-changed-sources overrides"
        )


def _reconstruct(recipe: Recipe, frames: Iterable[np.ndarray], root: Path, frame_format: str, accept: bool):
    size = (recipe.height, recipe.width)
    k = sphere.intrinsics_from_fov(np.deg2rad(recipe.hfov_deg), recipe.width, recipe.height)
    rots = {v: view_rotations(recipe, v) for v in VIEWS}
    directory = case_dir(root, recipe.subset, recipe.case_id)
    remove_tree(root, directory)  # leftovers of an interrupted run
    writer = CaseWriter(root, recipe.subset, recipe.case_id, frame_format)
    n = recipe.n_frames
    vis0 = np.zeros(n, np.float64)
    vis1 = np.zeros(n, bool)
    fp_frames = set(recipe.fingerprint["frames"]) if not accept else set()
    # One thread per view renders and writes that view's frames in order, with
    # its own mappers (they are not thread-safe, and keep per-view pose caches).
    mappers: dict[tuple[str, tuple[int, int]], sphere.PerspectiveMapper] = {}

    def render(view: str, t: int, pano: np.ndarray, mask_t: np.ndarray) -> bool:
        r = rots[view][t]
        pano_size, mask_size = pano.shape[:2], mask_t.shape[::-1]  # the mask is transposed: (W, H)
        maps = {}
        for sz in {pano_size, mask_size}:
            if (view, sz) not in mappers:
                mappers[view, sz] = sphere.PerspectiveMapper(k, size, sz)
            maps[sz] = mappers[view, sz].maps(r)
        mask = sphere.remap_nearest(mask_t, maps[mask_size], transposed=True)
        writer.write_frame(view, t, sphere.remap_bilinear(pano, maps[pano_size]))
        writer.write_mask(view, t, mask)
        return bool(mask.any())

    # The render threads make hundreds of short GIL-releasing OpenCV calls per
    # frame; with the default 5 ms switch interval they convoy behind each other.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(5e-4)
    pools = {view: ThreadPoolExecutor(max_workers=1) for view in VIEWS}
    pending: deque[tuple[int, str, Future]] = deque()

    def collect(limit: int) -> None:
        while len(pending) > limit:
            i, view, f = pending.popleft()
            seen = f.result()
            if view == "center":
                vis1[i] = seen

    count = 0
    try:
        for t, pano in zip(range(n), frames):
            if t in fp_frames:
                _check_fingerprint(recipe, t, pano)
            mask_t = decode_mask_columns(recipe.masks[t])  # (W, H): the transposed mask
            for view in VIEWS:
                pending.append((t, view, pools[view].submit(render, view, t, pano, mask_t)))
            vis0[t] = sphere.visibility_of_pixels(
                *mask_pixels(recipe.masks[t]), mask_t.shape[::-1], rots["view_0"][t], k, size
            )
            count += 1
            collect(len(VIEWS) * IN_FLIGHT)
        collect(0)
    finally:
        for pool in pools.values():
            pool.shutdown(cancel_futures=True)
        sys.setswitchinterval(switch_interval)
    if count < n:
        raise PersistbenchError(f"{recipe.case_id}: source gave {count} frames, the recipe needs {n}")

    for view in VIEWS:
        writer.write_camera(view, sphere.pose_from_rotation(rots[view]), k)
    w = recipe.window
    writer.write_visibility(
        {
            # Rounded so that the bytes do not depend on the summation order of the platform's numpy.
            "view_0_visibility": np.round(vis0, 9),
            "view_1_visibility": vis1,
            "mode": w["mode"],
            "window_ratio": float(w["window_ratio"]),
            "window_move_ratio": float(w["window_move_ratio"]),
        }
    )
    writer.write_theta_phi(
        {
            f"{view}_{name}": np.asarray(recipe.views[view][key], np.float64)
            for view in VIEWS
            for name, key in (("theta", "yaw_deg"), ("phi", "pitch_deg"), ("roll", "roll_deg"))
        }
    )
    rel = f"{recipe.subset}/{recipe.case_id}"
    row = {
        "success": 1,
        "uid": recipe.case_id,
        "obj_id": CaseId.parse(recipe.case_id).obj_id,
        "output_dir": rel,
        "visibility_dict_path": f"{rel}/visibility_dict.npy",
        "fov": recipe.hfov_deg,
        "use_stationary": int(bool(w.get("use_stationary", False))),
        "overlap_mode": w["mode"],
        "window_ratio": float(w["window_ratio"]),
        "window_move_ratio": float(w["window_move_ratio"]),
        "object_dir": rel,
        "subset": recipe.subset,
        "n_frames": n,
        "width": recipe.width,
        "height": recipe.height,
        "source_id": recipe.source.id,
        "toolkit_version": __version__,
        "recipe_sha256": recipe.sha256,
    }
    record = {
        "uid": recipe.case_id,
        "subset": recipe.subset,
        "n_frames": n,
        "size": [recipe.width, recipe.height],  # cases.jsonl's form: [w, h]
        "fov": recipe.hfov_deg,
        "frame_format": frame_format,
        "recipe_sha256": recipe.sha256,
        "source": {"id": recipe.source.id, "start": recipe.source.start, "fps": recipe.source.fps},
        "files": dict(sorted(writer.files.items())),
        "toolkit_version": __version__,
    }
    mark_complete(root, row, record)
    return row, record
