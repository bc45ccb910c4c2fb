"""One recipe + its source frames -> one case of the dataset layout.

The caller supplies the equirectangular frames already located in time
(frame ``t`` of the recipe's sampling); this module reprojects them into
``view_0`` and ``center``, computes visibility and writes the case through
:mod:`persistbench.layout`, marking it complete last. It does not loop
over cases and does not download.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from . import __version__, sphere
from .errors import PersistbenchError
from .layout import VIEWS, CaseId, CaseWriter, mark_complete
from .recipes import Recipe, decode_mask


def view_rotations(recipe: Recipe, view: str) -> np.ndarray:
    """``(T, 3, 3)`` camera-to-world rotations of a view from the recipe's angles (degrees)."""
    a = recipe.views[view]
    return sphere.rotation_from_ypr(*(np.deg2rad(a[k]) for k in ("yaw_deg", "pitch_deg", "roll_deg")))


def reconstruct_case(
    recipe: Recipe, frames: Iterable[np.ndarray], root: str | os.PathLike, frame_format: str = "png"
) -> dict:
    """Render and write one case; return its ``cases.jsonl`` record.

    Args:
        recipe: a validated recipe.
        frames: the recipe's ``n_frames`` equirectangular RGB uint8 frames ``(H, W, 3)``, in order.
        root: dataset root.
        frame_format: ``png`` or ``jpg`` for the view frames (masks are always PNG).
    Raises:
        PersistbenchError: when fewer frames than the recipe needs arrive.
    """
    size = (recipe.width, recipe.height)
    k = sphere.intrinsics_from_fov(np.deg2rad(recipe.hfov_deg), *size)
    rots = {v: view_rotations(recipe, v) for v in VIEWS}
    writer = CaseWriter(root, recipe.subset, recipe.case_id, frame_format)
    n = recipe.n_frames
    vis0 = np.zeros(n, np.float64)
    vis1 = np.zeros(n, bool)
    count = 0
    for t, pano in zip(range(n), frames):
        mask_e = decode_mask(recipe.masks[t])
        pano_size = (pano.shape[1], pano.shape[0])
        mask_size = (mask_e.shape[1], mask_e.shape[0])
        for view in VIEWS:
            r = rots[view][t]
            maps = sphere.equirect_to_perspective_maps(r, k, size, pano_size)
            writer.write_frame(view, t, sphere.remap_bilinear(pano, maps))
            if mask_size != pano_size:
                maps = sphere.equirect_to_perspective_maps(r, k, size, mask_size)
            mask = sphere.remap_nearest(mask_e, maps)
            writer.write_mask(view, t, mask)
            if view == "center":
                vis1[t] = bool(mask.any())
        vis0[t] = sphere.visibility_fraction(mask_e, rots["view_0"][t], k, size)
        count += 1
    if count < n:
        raise PersistbenchError(f"{recipe.case_id}: source gave {count} frames, the recipe needs {n}")

    for view in VIEWS:
        writer.write_camera(view, sphere.pose_from_rotation(rots[view]), k)
    w = recipe.window
    writer.write_visibility({
        "view_0_visibility": vis0, "view_1_visibility": vis1, "mode": w["mode"],
        "window_ratio": float(w["window_ratio"]), "window_move_ratio": float(w["window_move_ratio"]),
    })  # fmt: skip
    writer.write_theta_phi({
        f"{view}_{name}": np.asarray(recipe.views[view][key], np.float64)
        for view in VIEWS for name, key in (("theta", "yaw_deg"), ("phi", "pitch_deg"), ("roll", "roll_deg"))
    })  # fmt: skip
    rel = f"{recipe.subset}/{recipe.case_id}"
    row = {
        "success": 1, "uid": recipe.case_id, "obj_id": CaseId.parse(recipe.case_id).obj_id, "output_dir": rel,
        "visibility_dict_path": f"{rel}/visibility_dict.npy", "fov": recipe.hfov_deg,
        "use_stationary": int(bool(w.get("use_stationary", False))), "overlap_mode": w["mode"],
        "window_ratio": float(w["window_ratio"]), "window_move_ratio": float(w["window_move_ratio"]),
        "object_dir": rel, "subset": recipe.subset, "n_frames": n, "width": size[0], "height": size[1],
        "source_id": recipe.source.id, "toolkit_version": __version__,
    }  # fmt: skip
    record = {
        "uid": recipe.case_id, "subset": recipe.subset, "n_frames": n, "size": list(size), "fov": recipe.hfov_deg,
        "frame_format": frame_format,
        "source": {"id": recipe.source.id, "start": recipe.source.start, "fps": recipe.source.fps},
        "files": dict(sorted(writer.files.items())), "toolkit_version": __version__,
    }  # fmt: skip
    mark_complete(root, row, record)
    return record
