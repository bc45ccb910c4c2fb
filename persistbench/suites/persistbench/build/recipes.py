"""Recipe schema (version 1): one JSON object per line, one case per recipe.

The schema is documented in ``docs/recipes.md``. :func:`load_recipes`
validates a whole file and reports every problem with its line number and
field; masks are COCO run-length encodings (column-major, as pycocotools
writes them), validated before pycocotools ever sees them. Nothing here
downloads.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import open_regular, parse_json
from persistbench.io.names import name_problem
from persistbench.suites.persistbench.layout import SUBSETS, VIEWS, CaseId

VERSION = 1
# Calibrated with scripts/calibrate_fingerprint.py (docs/recipes.md, "Fingerprints"): at 64x32, re-encodes
# of a clip (CRF 23-36, half and double size, VP9/WebM, 4:4:4) lie at most 1.2 levels from it and other
# clips of the same generator at least 14.2; the tolerance sits between with a wide margin on both sides.
FINGERPRINT_SIZE = (32, 64)  # (height, width) of a thumbnail; recipes record it as [w, h]
FINGERPRINT_TOLERANCE = 6.0  # largest mean absolute thumbnail difference, 8-bit levels

# Bounds on every size a recipe declares (docs/recipes.md, "Limits"): a recipe is untrusted input,
# and these keep what one case may allocate within reach of a workstation.
MAX_FILE_BYTES = 1 << 30  # a recipes file, wherever it comes from (local, http(s), hf://)
MAX_RECIPES = 100_000  # cases in one file: 50 times the benchmark's 2,000
MAX_LINE_BYTES = 64 << 20  # one recipe's line (its RLE masks are the bulk)
MAX_ERRORS = 100  # problems listed before the rest are counted
LIMITS = {
    "n_frames": 100_000,  # frames per case
    "output_side": 8192,  # pixels, view width or height
    "source_width": 16384,  # pixels: a 16K equirectangular source
    "source_height": 8192,
    "fps": 1000.0,
    "start": 10**6,  # seconds
    "fingerprint_frames": 64,
    "fingerprint_side": 256,
}
_URL_RE = re.compile(r"^(https?|file)://", re.IGNORECASE)


class RecipeError(PersistbenchError):
    """One or more invalid recipes; the message holds one ``file:line: field: problem`` per line."""


# ---------------------------------------------------------------- masks (COCO RLE)


def rle_counts(counts: str) -> list[int]:
    """Decode the compressed COCO counts string into run lengths.

    Each count is a little-endian sequence of 5-bit groups stored as
    ``chr(group + 48)``, bit 0x20 meaning "more groups follow" and bit 0x10
    of the last group the sign; counts from the third on are stored as the
    difference to the count two before.

    Raises:
        ValueError: for a character outside the alphabet, a truncated count
        or a negative run length.
    """
    out: list[int] = []
    pos = 0
    while pos < len(counts):
        value = shift = 0
        while True:
            if pos >= len(counts):
                raise ValueError("truncated run length")
            c = ord(counts[pos]) - 48
            if not 0 <= c < 64:
                raise ValueError(f"invalid character {counts[pos]!r}")
            pos += 1
            value |= (c & 0x1F) << shift
            shift += 5
            if not c & 0x20:
                if c & 0x10:
                    value -= 1 << shift
                break
        if len(out) > 2:
            value += out[-2]
        if value < 0:
            raise ValueError("negative run length")
        out.append(value)
    return out


def encode_mask(mask: np.ndarray) -> dict:
    """COCO RLE ``{"size": [h, w], "counts": str}`` of a ``(h, w)`` mask (nonzero = object)."""
    from pycocotools import mask as coco

    rle = coco.encode(np.asfortranarray((np.asarray(mask) > 0).astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def check_rle(rle: Any, most: tuple[int, int] | None = None) -> str | None:
    """Why ``rle`` is not a valid COCO RLE mask (at most ``most`` = (h, w) when given), or None when it is."""
    if not isinstance(rle, dict) or set(rle) != {"size", "counts"}:
        return "must be an object with exactly 'size' and 'counts'"
    size, counts = rle["size"], rle["counts"]
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)):
        return "'size' must be [height, width] with positive integers"
    if most is not None and (size[0] > most[0] or size[1] > most[1]):
        return f"'size' {size} exceeds the limit of {list(most)}"
    if not isinstance(counts, str):
        return "'counts' must be a compressed RLE string"
    try:
        runs = rle_counts(counts)
    except ValueError as e:
        return f"bad RLE: {e}"
    if sum(runs) != size[0] * size[1]:
        return f"bad RLE: run lengths sum to {sum(runs)}, expected {size[0] * size[1]}"
    return None


def decode_mask_columns(rle: dict) -> np.ndarray:
    """Decode a COCO RLE into its column-major layout: a C-contiguous ``(w, h)`` uint8 0/1 array.

    That is the transpose of the ``(h, w)`` mask, the order COCO's runs are in,
    so decoding writes each run as one slice and needs no transpose; the
    ``transposed=True`` paths of :mod:`persistbench.geometry.sphere` take it as it is.
    """
    problem = check_rle(rle)
    if problem:
        raise ValueError(problem)
    h, w = rle["size"]
    flat = np.zeros(h * w, np.uint8)
    pos = 0
    for i, run in enumerate(rle_counts(rle["counts"])):
        if i % 2:  # odd runs are foreground
            flat[pos : pos + run] = 1
        pos += run
    return flat.reshape(w, h)


def mask_pixels(rle: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of a COCO RLE mask's foreground pixels, straight from its runs (no full decode)."""
    problem = check_rle(rle)
    if problem:
        raise ValueError(problem)
    runs = np.asarray(rle_counts(rle["counts"]), np.int64)
    ends = np.cumsum(runs)
    starts, stops = (ends - runs)[1::2], ends[1::2]
    lengths = stops - starts
    # Column-major flat indices of every foreground pixel: each run's start plus 0 .. length - 1.
    flat = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    h = rle["size"][0]
    return flat % h, flat // h


def decode_mask(rle: dict) -> np.ndarray:
    """Decode a COCO RLE to a ``(h, w)`` uint8 mask of 0/1 (C-contiguous)."""
    return np.ascontiguousarray(decode_mask_columns(rle).T)


# ---------------------------------------------------------------- source fingerprint


def thumbnail(frame: np.ndarray, size: tuple[int, int] = FINGERPRINT_SIZE) -> np.ndarray:
    """Area-downscaled RGB uint8 thumbnail ``(*size, 3)`` of a frame; ``size`` = (h, w)."""
    import cv2

    return cv2.resize(frame, (size[1], size[0]), interpolation=cv2.INTER_AREA)


def make_fingerprint(
    frames: dict[int, np.ndarray],
    tolerance: float = FINGERPRINT_TOLERANCE,
    thumb_size: tuple[int, int] = FINGERPRINT_SIZE,
) -> dict:
    """Fingerprint of a source clip from its decoded frames at a few indices.

    Args:
        frames: frame index (in the recipe's sampling) -> RGB uint8 frame.
        tolerance: largest mean absolute thumbnail difference (8-bit levels)
            still taken as the same source.
        thumb_size: (height, width) of the thumbnails (recorded as ``size: [w, h]``).
    """
    from persistbench.io.images import encode_image

    idx = sorted(frames)
    thumbs = [base64.b64encode(encode_image(thumbnail(frames[i], thumb_size), "png")).decode("ascii") for i in idx]
    size = [thumb_size[1], thumb_size[0]]
    return {"frames": idx, "size": size, "thumbnails": thumbs, "tolerance": float(tolerance)}


def fingerprint_distance(fingerprint: dict, frames: dict[int, np.ndarray]) -> float:
    """Largest mean absolute difference (8-bit levels) between stored and given thumbnails.

    Compares the fingerprint frames that ``frames`` holds (0.0 when none).
    """
    import cv2

    worst = 0.0
    size = (fingerprint["size"][1], fingerprint["size"][0])  # the recipe's [w, h]
    for i, b64 in zip(fingerprint["frames"], fingerprint["thumbnails"]):
        if i not in frames:
            continue
        stored = cv2.cvtColor(
            cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
        )
        diff = np.abs(stored.astype(np.int16) - thumbnail(frames[i], size).astype(np.int16))
        worst = max(worst, float(diff.mean()))
    return worst


# ---------------------------------------------------------------- schema


@dataclass(frozen=True)
class Source:
    id: str
    url: str  # absolute: http(s):// or file://
    start: float  # seconds
    fps: float
    n_frames: int
    width: int
    height: int


@dataclass(frozen=True)
class Recipe:
    """One validated recipe. Angles are degrees, as on disk."""

    line: int
    sha256: str  # content_sha256: a changed recipe is a different case
    case_id: str
    subset: str
    source: Source
    width: int
    height: int
    hfov_deg: float
    views: dict[str, dict[str, np.ndarray]]  # view -> {"yaw_deg","pitch_deg","roll_deg"} (T,) float64
    obj_id: str
    masks: list[dict]  # COCO RLE per frame
    window: dict
    fingerprint: dict

    @property
    def n_frames(self) -> int:
        return self.source.n_frames

    def frame_times(self) -> list[float]:
        """Source time in seconds of each frame: ``start + t / fps``."""
        s = self.source
        return [s.start + t / s.fps for t in range(s.n_frames)]


class _Checker:
    """Collects ``field: problem`` messages for one recipe line."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, field: str, problem: str) -> None:
        self.errors.append(f"{field}: {problem}")

    def name(self, field: str, value: str) -> bool:
        """Check an identifier that becomes a path component against the one name rule."""
        problem = name_problem(value)
        if problem:
            self.fail(field, problem)
        return problem is None

    def get(self, obj: Any, key: str, field: str, kind: type | tuple, optional: bool = False) -> Any:
        if not isinstance(obj, dict):
            return None
        if key not in obj:
            if not optional:
                self.fail(field, "missing field")
            return None
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            self.fail(field, f"expected {' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(field, "must be finite")
            return None
        return value

    def per_frame(self, obj: Any, key: str, field: str, n: int | None, optional: bool = False) -> np.ndarray | None:
        values = self.get(obj, key, field, list, optional)
        if values is None:
            return None
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            self.fail(field, "must be a list of finite numbers")
            return None
        if n is not None and len(values) != n:
            self.fail(field, f"has {len(values)} values, expected n_frames = {n}")
            return None
        return np.asarray(values, np.float64)


def content_sha256(obj: dict) -> str:
    """sha256 of a recipe's canonical JSON without ``source.url``: what the case is, not where it is fetched."""
    source = {k: v for k, v in obj["source"].items() if k != "url"}
    return hashlib.sha256(recipe_line({**obj, "source": source}).encode()).hexdigest()


def resolve_url(url: str, base_dir: str | os.PathLike) -> str:
    """``http(s)://`` and ``file://`` URLs as they are; a relative path against ``base_dir`` as ``file://``."""
    if _URL_RE.match(url):
        return url
    return (Path(base_dir) / url).resolve().as_uri()


def _parse_one(obj: Any, base_dir: Path, c: _Checker, line: int) -> Recipe | None:
    if not isinstance(obj, dict):
        c.fail("recipe", "must be a JSON object")
        return None
    version = c.get(obj, "version", "version", int)
    if version is not None and version != VERSION:
        c.fail("version", f"unknown version {version} (this toolkit reads version {VERSION})")
        return None
    case_id = c.get(obj, "case_id", "case_id", str)
    if case_id is not None and c.name("case_id", case_id):
        try:
            CaseId.parse(case_id)
        except PersistbenchError:
            c.fail("case_id", "must look like <Category>_<source id>_<clip>_obj_<object id>")
    subset = c.get(obj, "subset", "subset", str)
    if subset is not None and subset not in SUBSETS:
        c.fail("subset", f"must be one of {', '.join(SUBSETS)}")

    src = c.get(obj, "source", "source", dict)
    s = {
        k: c.get(src, k, f"source.{k}", t)
        for k, t in [
            ("id", str),
            ("url", str),
            ("start", (int, float)),
            ("fps", (int, float)),
            ("n_frames", int),
            ("width", int),
            ("height", int),
        ]
    }
    for k, most in (
        ("fps", LIMITS["fps"]),
        ("n_frames", LIMITS["n_frames"]),
        ("width", LIMITS["source_width"]),
        ("height", LIMITS["source_height"]),
    ):
        if s[k] is not None and not 0 < s[k] <= most:
            c.fail(f"source.{k}", f"must be positive and at most {most:g}")
            s[k] = None
    if s["start"] is not None and not 0 <= s["start"] <= LIMITS["start"]:
        c.fail("source.start", f"must lie in [0, {LIMITS['start']}] seconds")
    if s["id"] is not None:
        c.name("source.id", s["id"])
    n = s["n_frames"]

    out = c.get(obj, "output", "output", dict)
    width, height = c.get(out, "width", "output.width", int), c.get(out, "height", "output.height", int)
    hfov = c.get(out, "hfov_deg", "output.hfov_deg", (int, float))
    if hfov is not None and not 0 < hfov < 180:
        c.fail("output.hfov_deg", "must be in (0, 180)")
    for name, v in (("width", width), ("height", height)):
        if v is not None and (not 0 < v <= LIMITS["output_side"] or v % 2):
            c.fail(f"output.{name}", f"must be a positive even number, at most {LIMITS['output_side']}")

    views_obj = c.get(obj, "views", "views", dict)
    views: dict[str, dict[str, np.ndarray]] = {}
    for view in VIEWS:
        v = c.get(views_obj, view, f"views.{view}", dict)
        if v is None:
            continue
        angles = {k: c.per_frame(v, k, f"views.{view}.{k}", n) for k in ("yaw_deg", "pitch_deg")}
        roll = c.per_frame(v, "roll_deg", f"views.{view}.roll_deg", n, optional=True)
        angles["roll_deg"] = roll if roll is not None or n is None else np.zeros(n)
        pitch = angles["pitch_deg"]
        if pitch is not None and np.any(np.abs(pitch) > 90):
            c.fail(f"views.{view}.pitch_deg", "must lie in [-90, 90]")
        views[view] = angles

    o = c.get(obj, "object", "object", dict)
    obj_id = c.get(o, "id", "object.id", (str, int))
    if obj_id is not None and not c.name("object.id", str(obj_id)):
        obj_id = None
    masks = c.get(o, "masks", "object.masks", list)
    if masks is not None:
        if n is not None and len(masks) != n:
            c.fail("object.masks", f"has {len(masks)} masks, expected n_frames = {n}")
        bounds = (LIMITS["source_height"], LIMITS["source_width"])
        bad = next(((i, p) for i, rle in enumerate(masks) if (p := check_rle(rle, bounds))), None)
        if bad:
            c.fail(f"object.masks[{bad[0]}]", bad[1])
        elif len({tuple(m["size"]) for m in masks}) > 1:  # every mask is well-formed here
            c.fail("object.masks", "all masks must have the same size")
    if obj_id is not None and case_id is not None and str(obj_id) != case_id.rsplit("_obj_", 1)[-1]:
        c.fail("object.id", f"{obj_id!r} does not match the case id's object id")

    window = c.get(obj, "window", "window", dict)
    if window is not None:
        c.get(window, "mode", "window.mode", str)
        for k in ("window_ratio", "window_move_ratio"):
            value = c.get(window, k, f"window.{k}", (int, float))
            if value is not None and not 0 <= value <= 1:
                c.fail(f"window.{k}", "must lie in [0, 1]")
        c.get(window, "use_stationary", "window.use_stationary", bool)

    fp = c.get(obj, "fingerprint", "fingerprint", dict)
    if fp is not None:
        frames = c.get(fp, "frames", "fingerprint.frames", list)
        thumbs = c.get(fp, "thumbnails", "fingerprint.thumbnails", list)
        c.get(fp, "size", "fingerprint.size", list)
        c.get(fp, "tolerance", "fingerprint.tolerance", (int, float))
        if frames is not None and thumbs is not None and len(frames) != len(thumbs):
            c.fail("fingerprint.thumbnails", "needs one thumbnail per fingerprint frame")
        if frames is not None and n is not None and not all(isinstance(i, int) and 0 <= i < n for i in frames):
            c.fail("fingerprint.frames", "must be frame indices in [0, n_frames)")
        if frames is not None and len(frames) > LIMITS["fingerprint_frames"]:
            c.fail("fingerprint.frames", f"at most {LIMITS['fingerprint_frames']} frames")
        size = fp.get("size")
        side = LIMITS["fingerprint_side"]
        if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and 0 < v <= side for v in size)):
            c.fail("fingerprint.size", f"must be [width, height], positive integers at most {side}")

    if c.errors:
        return None
    return Recipe(
        line=line,
        sha256=content_sha256(obj),
        case_id=case_id,
        subset=subset,
        source=Source(
            s["id"], resolve_url(s["url"], base_dir), float(s["start"]), float(s["fps"]), n, s["width"], s["height"]
        ),
        width=width,
        height=height,
        hfov_deg=float(hfov),
        views=views,
        obj_id=str(obj_id),
        masks=masks,
        window=window,
        fingerprint=fp,
    )


def parse_recipes(
    lines: Iterable[tuple[int, str | None]] | str, origin: str, base_dir: str | os.PathLike
) -> list[Recipe]:
    """Validate JSON Lines recipes, read one line at a time: ``(line number, text)`` pairs (text None for a
    line longer than :data:`MAX_LINE_BYTES`; :func:`numbered_lines` reads a file so), or a whole text;
    ``origin`` names the file in error messages.

    Blank lines are skipped. Relative source URLs resolve against ``base_dir``. Memory stays that of the
    recipes kept, whatever the file holds: at most :data:`MAX_RECIPES` of them, each line at most
    :data:`MAX_LINE_BYTES`.

    Raises:
        RecipeError: listing the problems as ``origin:line: field: problem`` (the first
            :data:`MAX_ERRORS`, then how many more).
    """
    if isinstance(lines, str):
        lines = enumerate(lines.splitlines(), 1)
    recipes: list[Recipe] = []
    errors: list[str] = []
    more = 0
    seen: dict[str, int] = {}
    for line_no, line in lines:
        if line is not None and not line.strip():
            continue
        if len(errors) >= MAX_ERRORS:
            more += 1
            continue
        if line is None or len(line) > MAX_LINE_BYTES:
            errors.append(f"{origin}:{line_no}: a line of more than {MAX_LINE_BYTES >> 20} MiB")
            continue
        if len(recipes) >= MAX_RECIPES:
            raise RecipeError(f"{origin}:{line_no}: more than {MAX_RECIPES} recipes in one file")
        try:
            obj = parse_json(line, f"{origin}:{line_no}")
        except PersistbenchError as e:
            errors.append(str(e))
            continue
        c = _Checker()
        recipe = _parse_one(obj, Path(base_dir), c, line_no)
        errors.extend(f"{origin}:{line_no}: {m}" for m in c.errors)
        if recipe is None:
            continue
        if recipe.case_id in seen:
            errors.append(f"{origin}:{line_no}: case_id: duplicate of line {seen[recipe.case_id]}")
            continue
        seen[recipe.case_id] = line_no
        recipes.append(recipe)
    if errors:
        raise RecipeError("\n".join(errors + ([f"{origin}: and {more} more line(s) not checked"] if more else [])))
    if not recipes:
        raise RecipeError(f"{origin}: no recipes")
    return recipes


def load_recipes(path: str | os.PathLike, origin: str | None = None) -> list[Recipe]:
    """Read and validate a local recipes file (see :func:`parse_recipes`); errors name ``origin``
    (e.g. the URL it was fetched from) or the path."""
    path = Path(path)
    try:
        with open_regular(path) as raw:
            size = os.fstat(raw.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise RecipeError(
                    f"{origin or path}: {size} bytes, more than the {MAX_FILE_BYTES >> 20} MiB a recipes file may have"
                )
            return parse_recipes(numbered_lines(raw), origin or str(path), path.parent)
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(f"{origin or path}: cannot read recipes: {e}") from None
    except PersistbenchError as e:
        if isinstance(e, RecipeError):
            raise
        raise RecipeError(f"{origin or path}: cannot read recipes: {e}") from None


def numbered_lines(raw: BinaryIO, chunk: int = 1 << 20) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` of each non-blank line of ``raw`` (UTF-8), read a chunk at a time: blank lines
    are skipped at C speed (a file of them costs neither memory nor minutes) and a line longer than
    :data:`MAX_LINE_BYTES` is given as ``None`` without being kept."""
    line_no, pending, skipping = 1, b"", False  # pending: the start of line `line_no`, not ended yet
    while True:
        data = raw.read(chunk)
        if not data:
            if pending.strip() and not skipping:
                yield line_no, pending.decode("utf-8")
            return
        if skipping:  # the rest of a line too long to keep: drop it up to its end
            end = data.find(b"\n")
            if end < 0:
                continue
            data, skipping, line_no = data[end + 1 :], False, line_no + 1
        data, start = pending + data, 0
        last = data.rfind(b"\n")
        for m in _CONTENT.finditer(data, 0, last + 1 if last >= 0 else 0):
            line_no += data.count(b"\n", start, m.start())
            start = m.start()
            yield line_no, m.group().decode("utf-8")
        line_no += data.count(b"\n", start, last + 1) if last >= 0 else 0
        pending = data[last + 1 :]
        if len(pending) > MAX_LINE_BYTES:
            yield line_no, None
            pending, skipping = b"", True


_CONTENT = re.compile(rb"[^\n]*[^\s][^\n]*")  # a line with something on it (its newline not included)


def recipe_line(obj: dict) -> str:
    """One canonical JSON Lines record (compact, keys sorted)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
