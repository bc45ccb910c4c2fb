"""What the suites' synthetic data generators share: the configuration from ``persistbench synth``'s
options and a JSON file (:func:`suite_config`, :func:`build_config`), and a procedural equirectangular
background (:func:`render_background`: sky, ground, a grid and landmarks) with the dot product it
renders with (:func:`dot3`). Each suite's generator is in its folder (``suites/<name>/synth.py``).
"""

from __future__ import annotations

import click
import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.core.options import FiniteFloat, Size, SuiteOption
from persistbench.geometry import sphere
from persistbench.io.files import read_json


def dot3(d: np.ndarray, v) -> np.ndarray:
    """``d . v`` over the last axis, written out: BLAS matrix products may round
    differently with memory alignment or thread count, and synth must be
    byte-reproducible."""
    v = np.asarray(v, d.dtype)
    return d[..., 0] * v[0] + d[..., 1] * v[1] + d[..., 2] * v[2]


def render_background(pano_size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Sky, ground, a 30-degree grid, soft noise and coloured landmark discs; ``(H, W, 3)`` uint8 for ``pano_size`` = (H, W)."""
    import cv2

    h, w = pano_size
    lon, lat = sphere.lonlat_from_equirect_xy(np.arange(w)[None, :], np.arange(h)[:, None], w, h)
    lon, lat = np.broadcast_arrays(lon, lat)
    s = np.sin(lat)[..., None]
    sky = (1 - s) * np.array([205, 222, 240]) + s * np.array([60, 110, 200])
    ground = (1 + s) * np.array([120, 140, 85]) - s * np.array([70, 60, 45])
    img = np.where(s > 0, sky, ground)
    noise = rng.normal(0, 14, (h // 16, w // 16, 3)).astype(np.float32)
    img += cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC)
    step, line = np.deg2rad(30), np.deg2rad(0.35)
    near_lat = np.abs((lat + step / 2) % step - step / 2) < line
    near_lon = (np.abs((lon + step / 2) % step - step / 2) * np.cos(lat) < line) & (np.abs(lat) < 1.3)
    img[near_lat | near_lon] *= 0.55
    dirs = sphere.direction_from_lonlat(lon, lat)
    for _ in range(12):
        c = sphere.direction_from_lonlat(rng.uniform(-np.pi, np.pi), rng.uniform(-1.2, 1.2))
        rad = np.deg2rad(rng.uniform(4, 9))
        ang = np.arccos(np.clip(dot3(dirs, c), -1, 1))
        color = rng.integers(30, 255, 3)
        img[ang < rad] = color
        img[(ang < rad) & (ang > 0.7 * rad)] = 255 - color
    return np.clip(img, 0, 255).round().astype(np.uint8)


# ---------------------------------------------------------------- scenes -> files


# ``persistbench synth``'s options as the suites share them: name -> (type, metavar)
_SYNTH_TYPES: dict[str, tuple[click.ParamType, str]] = {
    "scenes": (click.IntRange(1), "N"),
    "seed": (click.INT, "N"),
    "size": (Size(), "WxH"),
    "pano_size": (Size(), "WxH"),
    "hfov": (FiniteFloat(1, 179), "DEG"),
    "frames": (click.IntRange(2), "N"),
    "fps": (FiniteFloat(0, min_open=True), "FPS"),
    "speed": (FiniteFloat(-3600, 3600), "DEG/S"),
    "radius": (FiniteFloat(0.5, 45), "DEG"),
    "base_url": (click.STRING, "URL"),
}


def synth_option(name: str, help: str) -> SuiteOption:
    """The ``synth`` option ``name`` (``scenes``, ``seed``, ``size``, ``pano_size``, ``hfov``, ``frames``,
    ``fps``, ``speed``, ``radius``, ``base_url``) as a suite describes it; sizes are given ``WxH``."""
    kind, metavar = _SYNTH_TYPES[name]
    return SuiteOption(name, help, ("synth",), kind, metavar)


def suite_config(
    cls: type, suite: str, names: dict[str, str], config_file: str | None, options: dict, hw: tuple[str, ...] = ()
) -> object:
    """A suite's synth configuration from ``persistbench synth``'s options: ``names`` maps each option the
    suite takes to its configuration field; the options in ``hw``, ``WxH`` on the command line, are
    ``(h, w)`` in the configuration. Any other option is a usage error."""
    from persistbench.core.errors import UsageError

    given = {}
    for name, value in options.items():
        if name not in names:
            raise UsageError(f"--{name.replace('_', '-')}: does not apply to --suite {suite}")
        given[names[name]] = (value[1], value[0]) if name in hw else value
    return build_config(cls, config_file, given)


def build_config(cls: type, config_file: str | None, given: dict) -> object:
    """A synth configuration dataclass from a JSON file of its fields, overridden by ``given``; bad input is a usage error.

    Lists in the file become tuples (sizes); a field the class does not have is refused naming the file
    (or the option).
    """
    import dataclasses

    from persistbench.core.errors import UsageError

    fields = {f.name for f in dataclasses.fields(cls)}
    values: dict = {}
    if config_file:
        try:
            values = read_json(config_file)
        except PersistbenchError as e:
            raise UsageError(f"--config {e}") from None
        unknown = set(values) - fields if isinstance(values, dict) else {"<not an object>"}
        if unknown:
            raise UsageError(f"--config {config_file}: unknown fields {sorted(unknown)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    unknown = set(given) - fields
    if unknown:
        raise UsageError(f"{', '.join(sorted(unknown))}: not settable for this suite's synth ({cls.__name__})")
    try:
        return cls(**{**values, **given})
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
