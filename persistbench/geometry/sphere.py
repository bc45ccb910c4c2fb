"""Equirectangular <-> perspective geometry (docs/data-format.md, "Geometry conventions").

Conventions (COLMAP/OpenCV style), used by every function here:

* World axes: x right, y down, z forward. The direction of longitude ``lon``
  (0 at the panorama centre, + to the right) and latitude ``lat`` (+ up) is
  ``d = (cos lat sin lon, -sin lat, cos lat cos lon)``.
* An equirectangular image is ``pano_h x pano_w`` with ``pano_w = 2 pano_h``.
  Pixel ``(u, v)`` covers ``[u, u+1) x [v, v+1)``; its centre ``(u+0.5, v+0.5)``
  has ``lon = ((u+0.5)/W - 0.5) 2 pi`` and ``lat = (0.5 - (v+0.5)/H) pi``.
  Sampling wraps in longitude and clamps in latitude.
* A view with yaw, pitch, roll (radians here, degrees on disk) has the
  camera-to-world rotation ``R = R_y(yaw) R_x(pitch) R_z(roll)``; its optical
  axis ``R e_z`` is ``d(yaw, pitch)``. Cameras only rotate: translation is 0.
* Intrinsics: ``fx = fy = (w/2) / tan(hfov/2)``, ``cx = w/2``, ``cy = h/2``;
  camera pixel ``(u, v)`` has its centre at ``(u+0.5, v+0.5)``.
* Remap maps are in OpenCV's ``remap`` convention, where the centre of pixel
  ``u`` is at coordinate ``u`` (the continuous coordinate minus 0.5).

Angles are radians throughout this module; shapes are given per function.
Nothing here touches files.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

from persistbench.geometry import portable

__all__ = [
    "rotation_from_ypr",
    "ypr_from_rotation",
    "direction_from_lonlat",
    "lonlat_from_direction",
    "intrinsics_from_fov",
    "hfov_from_intrinsics",
    "pose_from_rotation",
    "equirect_xy_from_lonlat",
    "lonlat_from_equirect_xy",
    "PerspectiveMapper",
    "equirect_to_perspective_maps",
    "remap",
    "remap_bilinear",
    "remap_nearest",
    "equirect_to_perspective",
    "perspective_to_equirect",
    "visibility_fraction",
    "visibility_of_pixels",
]

TWO_PI = 2.0 * np.pi


def _hypot(a, b) -> np.ndarray:
    """``sqrt(a^2 + b^2)`` from correctly rounded operations (``np.hypot`` is libm's, CPU-dependent)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(a * a + b * b)


def rotation_from_ypr(yaw, pitch, roll=0.0) -> np.ndarray:
    """Camera-to-world rotation ``R_y(yaw) R_x(pitch) R_z(roll)``.

    Args:
        yaw, pitch, roll: radians, scalars or broadcastable arrays of shape ``S``.
    Returns:
        ``S + (3, 3)`` float64 rotation matrices (orthonormal, det +1).
    """
    yaw, pitch, roll = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (yaw, pitch, roll)))
    sy, cy = portable.sincos(yaw)
    sp, cp = portable.sincos(pitch)
    sr, cr = portable.sincos(roll)
    # Product R_y @ R_x @ R_z written out.
    r = np.empty(yaw.shape + (3, 3))
    r[..., 0, 0] = cy * cr + sy * sp * sr
    r[..., 0, 1] = -cy * sr + sy * sp * cr
    r[..., 0, 2] = sy * cp
    r[..., 1, 0] = cp * sr
    r[..., 1, 1] = cp * cr
    r[..., 1, 2] = -sp
    r[..., 2, 0] = -sy * cr + cy * sp * sr
    r[..., 2, 1] = sy * sr + cy * sp * cr
    r[..., 2, 2] = cy * cp
    return r


def ypr_from_rotation(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`rotation_from_ypr`.

    Args:
        r: ``(..., 3, 3)`` rotation matrices.
    Returns:
        ``(yaw, pitch, roll)`` in radians, each of shape ``...``; yaw and roll
        in ``(-pi, pi]``, pitch in ``[-pi/2, pi/2]``. At pitch = +-pi/2
        (gimbal lock) roll is folded into yaw and returned as 0.
    """
    r = np.asarray(r, np.float64)
    pitch = portable.atan2(-r[..., 1, 2], _hypot(r[..., 1, 0], r[..., 1, 1]))
    locked = _hypot(r[..., 0, 2], r[..., 2, 2]) < 1e-12
    yaw = np.where(locked, portable.atan2(-r[..., 2, 0], r[..., 0, 0]), portable.atan2(r[..., 0, 2], r[..., 2, 2]))
    roll = np.where(locked, 0.0, portable.atan2(r[..., 1, 0], r[..., 1, 1]))
    return yaw, pitch, roll


def direction_from_lonlat(lon, lat) -> np.ndarray:
    """Unit direction ``(cos lat sin lon, -sin lat, cos lat cos lon)``; shape ``S + (3,)``."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, np.float64), np.asarray(lat, np.float64))
    slat, clat = portable.sincos(lat)
    slon, clon = portable.sincos(lon)
    return np.stack([clat * slon, -slat, clat * clon], axis=-1)


def lonlat_from_direction(d) -> tuple[np.ndarray, np.ndarray]:
    """``(lon, lat)`` in radians of directions ``(..., 3)`` (need not be unit)."""
    d = np.asarray(d, np.float64)
    lon = portable.atan2(d[..., 0], d[..., 2])
    lat = portable.atan2(-d[..., 1], _hypot(d[..., 0], d[..., 2]))
    return lon, lat


def intrinsics_from_fov(hfov: float, width: int, height: int) -> np.ndarray:
    """``(3, 3)`` float64 pinhole intrinsics for horizontal field of view ``hfov`` (radians)."""
    if not 0.0 < hfov < np.pi:
        raise ValueError(f"horizontal field of view must be in (0, pi) radians, got {hfov}")
    f = (width / 2.0) / float(portable.tan(hfov / 2.0))
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def hfov_from_intrinsics(k: np.ndarray) -> float:
    """Horizontal field of view (radians) of intrinsics ``k`` with ``cx = w/2``."""
    return float(2.0 * portable.atan(k[0, 2] / k[0, 0]))


def pose_from_rotation(r: np.ndarray) -> np.ndarray:
    """``(..., 4, 4)`` camera-to-world poses with rotation ``r`` and zero translation."""
    r = np.asarray(r, np.float64)
    pose = np.zeros(r.shape[:-2] + (4, 4))
    pose[..., :3, :3] = r
    pose[..., 3, 3] = 1.0
    return pose


def equirect_xy_from_lonlat(lon, lat, pano_w: int, pano_h: int) -> tuple[np.ndarray, np.ndarray]:
    """Equirectangular remap coordinates (pixel centre at integers) of ``lon, lat``."""
    x = (np.asarray(lon) / TWO_PI + 0.5) * pano_w - 0.5
    y = (0.5 - np.asarray(lat) / np.pi) * pano_h - 0.5
    return x, y


def lonlat_from_equirect_xy(x, y, pano_w: int, pano_h: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`equirect_xy_from_lonlat`."""
    lon = ((np.asarray(x, np.float64) + 0.5) / pano_w - 0.5) * TWO_PI
    lat = (0.5 - (np.asarray(y, np.float64) + 0.5) / pano_h) * np.pi
    return lon, lat


class PerspectiveMapper:
    """Equirectangular -> perspective remap maps for one camera size.

    The camera rays depend only on the intrinsics and the output size, so
    they are computed once; :meth:`maps` then costs a few vectorised passes
    per rotation. Every step is an IEEE-754 operation NumPy rounds the same
    way on every CPU (trigonometry from :mod:`persistbench.geometry.portable`), so the
    maps, and the pixels :func:`remap` samples with them, are the same bytes
    on every machine.

    Yaw only shifts equirectangular longitude, so the maps of the last few
    (pitch, roll) pairs are kept, and a rotation that repeats one of them (a
    pan, a still camera) costs one shift and wrap instead. Not thread-safe:
    use one per thread.

    Args:
        k: ``(3, 3)`` intrinsics of the perspective view.
        size: ``(height, width)`` of the perspective view in pixels.
        pano_size: ``(pano_h, pano_w)`` of the equirectangular source.
    """

    cached_poses = 4
    # Half-resolution maps are used when their estimated interpolation error, in
    # view pixels and doubled for safety, stays below this (the promise is 0.01).
    coarse_tolerance = 0.01

    def __init__(self, k: np.ndarray, size: tuple[int, int], pano_size: tuple[int, int], coarse: bool = True):
        self.height, self.width = (int(s) for s in size)
        self.pano_h, self.pano_w = (int(s) for s in pano_size)
        k = np.asarray(k, np.float64)
        self._coarse = None
        if coarse and self.width % 2 == 0 and self.height % 2 == 0 and min(self.width, self.height) >= 64:
            # Node j of the coarse grid sits at full-resolution coordinate 2j - 1 (one node
            # beyond each border), so every pixel centre lies inside a coarse cell.
            kc = np.array([[k[0, 0] / 2, 0, (k[0, 2] + 2) / 2], [0, k[1, 1] / 2, (k[1, 2] + 2) / 2], [0, 0, 1]])
            self._coarse = PerspectiveMapper(kc, (self.height // 2 + 2, self.width // 2 + 2), pano_size, coarse=False)
            # View pixels per equirect pixel where view pixels are smallest in angle (the
            # corners): a pixel at radius r from the principal point spans 1 / (f (1 + r^2/f^2)).
            corner2 = max((u - k[0, 2]) ** 2 + (v - k[1, 2]) ** 2 for u in (0, self.width) for v in (0, self.height))
            f = min(k[0, 0], k[1, 1])
            self._view_px_per_pano_px = (TWO_PI / self.pano_w) * f * (1 + corner2 / f**2)
        self.stats = {"coarse": 0, "exact": 0}  # how maps were made, for benchmarks
        # Normalised image coordinates of every pixel centre: the ray is (xn, yn, 1).
        self._xn = ((np.arange(self.width) + 0.5 - k[0, 2]) / k[0, 0])[None, :]
        self._yn = ((np.arange(self.height) + 0.5 - k[1, 2]) / k[1, 1])[:, None]
        # (pitch, roll) -> maps at yaw 0 of the last rotations seen.
        self._base: OrderedDict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def maps(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Remap maps for camera-to-world rotation ``r`` ``(3, 3)``.

        Returns:
            ``(map_x, map_y)``, each a read-only ``(h, w)`` float64 array of
            equirectangular coordinates in OpenCV's remap convention (they may
            be shared with the mapper's cache); ``map_x`` in
            ``[-0.5, pano_w - 0.5)`` (wrap it), ``map_y`` clamped to
            ``[0, pano_h - 1]``.
        """
        yaw, pitch, roll = (float(a) for a in ypr_from_rotation(r))
        key = (pitch, roll)
        base = self._base.pop(key, None)
        if base is None:
            # Always shift from yaw 0, so the maps of a pose never depend on which poses came before.
            base = self._compute(rotation_from_ypr(0.0, pitch, roll))
            for m in base:
                m.flags.writeable = False
        self._base[key] = base  # most recent last
        while len(self._base) > self.cached_poses:
            self._base.popitem(last=False)
        map_x = base[0] + yaw % TWO_PI * self.pano_w / TWO_PI
        np.subtract(map_x, self.pano_w, out=map_x, where=map_x >= self.pano_w - 0.5)
        map_x.flags.writeable = False
        return map_x, base[1]

    def _compute(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Maps for ``r``: from the half-resolution grid where that is provably as exact, else directly.

        Bilinear interpolation over a 2-pixel cell errs by about an eighth of
        the coarse grid's largest second difference. Far from the poles and the
        seam the maps are smooth and that is ~1e-3 equirect pixels; near them it
        grows and the maps are computed at full resolution. The choice depends
        on the pose alone, so outputs stay deterministic.
        """
        if self._coarse is not None:
            cx, cy = self._coarse._exact(r)
            error = max(_interpolation_error(cx), _interpolation_error(cy)) * self._view_px_per_pano_px
            if 2 * error <= self.coarse_tolerance:
                self.stats["coarse"] += 1
                map_x, map_y = _upsample2(cx), _upsample2(cy)
                np.clip(map_y, 0.0, self.pano_h - 1, out=map_y)
                return map_x, map_y
        self.stats["exact"] += 1
        return self._exact(r)

    def _exact(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = np.asarray(r, np.float64)
        x, y, z = (r[i, 0] * self._xn + r[i, 1] * self._yn + r[i, 2] for i in range(3))
        horiz = np.sqrt(x * x + z * z)
        # lon = atan2(x, z) in (-pi, pi] -> x_e = (lon + pi) W / 2pi - 0.5.
        map_x = (portable.atan2(x, z) + np.pi) * (self.pano_w / TWO_PI) - 0.5
        # pi/2 - lat = angle from the up axis (-y) in [0, pi] -> y_e = (pi/2 - lat) H / pi - 0.5.
        map_y = portable.atan2(horiz, -y) * (self.pano_h / np.pi) - 0.5
        np.subtract(map_x, self.pano_w, out=map_x, where=map_x >= self.pano_w - 0.5)
        np.clip(map_y, 0.0, self.pano_h - 1, out=map_y)
        return map_x, map_y


def _interpolation_error(c: np.ndarray) -> float:
    """Estimated largest error of bilinear upsampling of grid ``c`` by 2: max |second difference| / 8."""
    dx = c[:, :-2] - 2 * c[:, 1:-1] + c[:, 2:]
    dy = c[:-2] - 2 * c[1:-1] + c[2:]
    return max(float(np.abs(dx).max()), float(np.abs(dy).max())) / 8


def _upsample2(c: np.ndarray) -> np.ndarray:
    """Bilinear upsampling by 2 of a ``(h/2 + 2, w/2 + 2)`` grid whose node j lies at
    full-resolution coordinate 2j - 1, to ``(h, w)``.

    Pixel centres fall at 1/4 and 3/4 of a coarse cell, so the weights are
    exact in binary floating point.
    """
    q, t3 = 0.25, 0.75

    def along(a: np.ndarray, axis: int) -> np.ndarray:
        lo, mid, hi = (np.take(a, range(s, a.shape[axis] - 2 + s), axis=axis) for s in range(3))
        out = np.empty_like(mid, shape=tuple(2 * n if i == axis else n for i, n in enumerate(mid.shape)))
        even = [slice(None)] * a.ndim
        odd = list(even)
        even[axis], odd[axis] = slice(0, None, 2), slice(1, None, 2)
        out[tuple(even)] = q * lo + t3 * mid
        out[tuple(odd)] = t3 * mid + q * hi
        return out

    return along(along(c, 1), 0)


@lru_cache(maxsize=16)
def _mapper(k_key: tuple, size: tuple[int, int], pano_size: tuple[int, int]) -> PerspectiveMapper:
    return PerspectiveMapper(np.array(k_key).reshape(3, 3), size, pano_size)


def equirect_to_perspective_maps(
    r: np.ndarray, k: np.ndarray, size: tuple[int, int], pano_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Remap maps ``(map_x, map_y)`` ``(h, w)`` float64 for rotation ``r``, intrinsics ``k``.

    ``size`` and ``pano_size`` are ``(height, width)``. The per-camera rays are
    cached, so calling this once per frame only pays for the rotation.
    """
    key = tuple(float(v) for v in np.asarray(k, np.float64).ravel())
    return _mapper(key, tuple(size), tuple(pano_size)).maps(r)


def remap(image: np.ndarray, map_x: np.ndarray, map_y: np.ndarray, border: str, nearest: bool = False) -> np.ndarray:
    """Sample ``image`` ``(H, W[, C])`` at ``(map_x, map_y)`` ``(h, w)`` (OpenCV's remap convention).

    For integer images, coordinates are rounded to 1/32 pixel first
    (``floor(32 x + 0.5)``) and OpenCV's fixed-point kernel interpolates with
    integer weights, so the results are the same bytes on every CPU (OpenCV's
    float-map path rounds differently with each SIMD level). Float images are
    interpolated at the float32 coordinates (exact weights, not bit-identical
    across CPUs). ``nearest`` takes the pixel whose centre is nearest
    (``floor(x + 0.5)``). ``border`` is ``"wrap"``, ``"replicate"`` or ``"constant"``
    (0). Coordinates must lie within +-1000 pixels of the image.
    """
    import cv2

    mode = {"wrap": cv2.BORDER_WRAP, "replicate": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}[border]
    if np.asarray(image).dtype.kind == "f" and not nearest:
        xs, ys = (np.asarray(m, np.float32) for m in (map_x, map_y))
        return cv2.remap(image, xs, ys, cv2.INTER_LINEAR, borderMode=mode, borderValue=0)
    scale = 1 if nearest else 32
    fx = np.floor(np.asarray(map_x, np.float64) * scale + 0.5).astype(np.int32)
    fy = np.floor(np.asarray(map_y, np.float64) * scale + 0.5).astype(np.int32)
    if nearest:
        xy, table, interp = np.stack([fx, fy], axis=-1), None, cv2.INTER_NEAREST
    else:
        xy, interp = np.stack([fx >> 5, fy >> 5], axis=-1), cv2.INTER_LINEAR
        table = (((fy & 31) << 5) | (fx & 31)).astype(np.uint16)
    return cv2.remap(image, xy.astype(np.int16), table, interp, borderMode=mode, borderValue=0)


def remap_bilinear(pano: np.ndarray, maps: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Sample ``pano`` ``(H, W[, C])`` at ``maps`` bilinearly (see :func:`remap`).

    Wraps in longitude (x) and clamps in latitude (y, via the clamped map).
    """
    return remap(pano, maps[0], maps[1], "wrap")


def remap_nearest(mask: np.ndarray, maps: tuple[np.ndarray, np.ndarray], transposed: bool = False) -> np.ndarray:
    """Sample ``mask`` ``(H, W)`` at ``maps`` with nearest neighbour (same wrap/clamp).

    With ``transposed``, ``mask`` is given as its ``(W, H)`` transpose (COCO's
    column-major layout, see :func:`persistbench.suites.persistbench.build.recipes.decode_mask_columns`);
    the maps swap roles and the result is the same.
    """
    map_x, map_y = (maps[1], maps[0]) if transposed else maps
    return remap(mask, map_x, map_y, "wrap", nearest=True)


def equirect_to_perspective(pano: np.ndarray, r: np.ndarray, k: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Render the perspective view ``(h, w[, C])`` of ``pano`` for rotation ``r`` (bilinear)."""
    return remap_bilinear(pano, equirect_to_perspective_maps(r, k, size, pano.shape[:2]))


@lru_cache(maxsize=8)
def _pano_trig(pano_w: int, pano_h: int) -> tuple[np.ndarray, ...]:
    """``(sin lon, cos lon)`` per column and ``(sin lat, cos lat)`` per row of pixel centres."""
    lon, lat = lonlat_from_equirect_xy(np.arange(pano_w), np.arange(pano_h), pano_w, pano_h)
    return (*portable.sincos(lon), *portable.sincos(lat))


def _camera_coords(r: np.ndarray, pano_w: int, pano_h: int, rows=slice(None), cols=slice(None)):
    """Camera-frame coordinates ``R^T d`` of equirect pixel centres, as 3 float32 arrays.

    With ``rows``/``cols`` index arrays of equal length it returns those pixels
    only (1-D); with slices, the full ``(pano_h, pano_w)`` grid.
    """
    slon, clon, slat, clat = _pano_trig(pano_w, pano_h)
    slon, clon, slat, clat = slon[cols], clon[cols], slat[rows], clat[rows]
    grid = isinstance(rows, slice)
    out = []
    for a, b, c in np.asarray(r, np.float64).T:  # rows of R^T
        horiz = a * slon + c * clon  # depends on the column only
        if grid:
            out.append((clat[:, None] * horiz[None, :] - (b * slat)[:, None]).astype(np.float32))
        else:
            out.append(clat * horiz - b * slat)
    return out


def perspective_to_equirect(
    image: np.ndarray,
    r: np.ndarray,
    k: np.ndarray,
    pano_size: tuple[int, int],
    nearest: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Paint a perspective image back onto an equirectangular canvas.

    Every canvas pixel whose direction lies in front of the camera and
    projects inside the image is sampled from it (inverse mapping, so the
    canvas has no holes inside the footprint).

    Args:
        image: ``(h, w[, C])`` perspective frame.
        r: ``(3, 3)`` camera-to-world rotation; ``k``: ``(3, 3)`` intrinsics.
        pano_size: ``(pano_h, pano_w)`` of the canvas.
        nearest: nearest-neighbour sampling (masks) instead of bilinear.
    Returns:
        ``(canvas, covered)``: canvas ``(pano_h, pano_w[, C])`` of ``image``'s
        dtype, zero outside the footprint, and ``covered`` ``(pano_h, pano_w)`` bool.
    """
    pano_h, pano_w = pano_size
    h, w = image.shape[:2]
    cx, cy, cz = _camera_coords(r, pano_w, pano_h)
    k = np.asarray(k, np.float64)
    front = cz > 1e-9
    np.maximum(cz, np.float32(1e-9), out=cz)
    map_x = cx / cz * np.float32(k[0, 0]) + np.float32(k[0, 2] - 0.5)
    map_y = cy / cz * np.float32(k[1, 1]) + np.float32(k[1, 2] - 0.5)
    covered = front & (map_x >= -0.5) & (map_x < w - 0.5) & (map_y >= -0.5) & (map_y < h - 0.5)
    # Keep coordinates inside the fixed-point range; pixels outside are masked anyway.
    np.clip(map_x, -2.0, w + 1.0, out=map_x)
    np.clip(map_y, -2.0, h + 1.0, out=map_y)
    canvas = remap(image, map_x, map_y, "replicate", nearest=nearest)
    canvas[~covered] = 0
    return canvas, covered


def visibility_fraction(
    mask: np.ndarray, r: np.ndarray, k: np.ndarray, size: tuple[int, int], transposed: bool = False
) -> float:
    """Fraction of an object's solid angle that a perspective view sees.

    Args:
        mask: ``(pano_h, pano_w)`` equirectangular object mask (nonzero = object),
            or with ``transposed`` its ``(pano_w, pano_h)`` transpose.
        r: ``(3, 3)`` camera-to-world rotation; ``k``: ``(3, 3)`` intrinsics.
        size: ``(height, width)`` of the view.
    Returns:
        See :func:`visibility_of_pixels`.
    """
    import cv2

    points = cv2.findNonZero(np.ascontiguousarray(mask, dtype=np.uint8))
    points = np.zeros((0, 2), np.int32) if points is None else points.reshape(-1, 2)  # (column, row) of the array
    a, b = points[:, 0], points[:, 1]
    rows, cols = (a, b) if transposed else (b, a)
    pano_h, pano_w = mask.shape[::-1] if transposed else mask.shape
    return visibility_of_pixels(rows, cols, (pano_h, pano_w), r, k, size)


def visibility_of_pixels(
    rows: np.ndarray, cols: np.ndarray, pano_size: tuple[int, int], r: np.ndarray, k: np.ndarray, size: tuple[int, int]
) -> float:
    """Visibility fraction of the object made of equirectangular pixels ``(rows, cols)``.

    Args:
        rows, cols: ``(N,)`` pixel indices of the object in a ``pano_size`` = ``(pano_h, pano_w)`` panorama.
        r: ``(3, 3)`` camera-to-world rotation; ``k``: ``(3, 3)`` intrinsics; ``size``: ``(height, width)``.
    Returns:
        Sum of ``cos(lat)`` over the pixels whose centre direction projects
        inside the image with ``z > 0``, divided by the sum over all of them;
        a float in ``[0, 1]`` (0.0 for no pixels).
    """
    if len(rows) == 0:
        return 0.0
    pano_h, pano_w = pano_size
    weight = _pano_trig(pano_w, pano_h)[3][rows]
    cx, cy, cz = _camera_coords(r, pano_w, pano_h, rows, cols)
    k = np.asarray(k, np.float64)
    h, w = size
    front = cz > 0
    z = np.where(front, cz, 1.0)
    u = cx / z * k[0, 0] + k[0, 2]
    v = cy / z * k[1, 1] + k[1, 2]
    inside = front & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    return float(weight[inside].sum() / weight.sum())
