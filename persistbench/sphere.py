"""Equirectangular <-> perspective geometry (DESIGN.md section 3).

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
    "remap_bilinear",
    "remap_nearest",
    "equirect_to_perspective",
    "perspective_to_equirect",
    "visibility_fraction",
    "visibility_of_pixels",
]

TWO_PI = 2.0 * np.pi


def rotation_from_ypr(yaw, pitch, roll=0.0) -> np.ndarray:
    """Camera-to-world rotation ``R_y(yaw) R_x(pitch) R_z(roll)``.

    Args:
        yaw, pitch, roll: radians, scalars or broadcastable arrays of shape ``S``.
    Returns:
        ``S + (3, 3)`` float64 rotation matrices (orthonormal, det +1).
    """
    yaw, pitch, roll = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (yaw, pitch, roll)))
    cy, sy = np.cos(yaw), np.sin(yaw)
    cp, sp = np.cos(pitch), np.sin(pitch)
    cr, sr = np.cos(roll), np.sin(roll)
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
    pitch = np.arctan2(-r[..., 1, 2], np.hypot(r[..., 1, 0], r[..., 1, 1]))
    locked = np.hypot(r[..., 0, 2], r[..., 2, 2]) < 1e-12
    yaw = np.where(locked, np.arctan2(-r[..., 2, 0], r[..., 0, 0]), np.arctan2(r[..., 0, 2], r[..., 2, 2]))
    roll = np.where(locked, 0.0, np.arctan2(r[..., 1, 0], r[..., 1, 1]))
    return yaw, pitch, roll


def direction_from_lonlat(lon, lat) -> np.ndarray:
    """Unit direction ``(cos lat sin lon, -sin lat, cos lat cos lon)``; shape ``S + (3,)``."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, np.float64), np.asarray(lat, np.float64))
    cl = np.cos(lat)
    return np.stack([cl * np.sin(lon), -np.sin(lat), cl * np.cos(lon)], axis=-1)


def lonlat_from_direction(d) -> tuple[np.ndarray, np.ndarray]:
    """``(lon, lat)`` in radians of directions ``(..., 3)`` (need not be unit)."""
    d = np.asarray(d, np.float64)
    lon = np.arctan2(d[..., 0], d[..., 2])
    lat = np.arctan2(-d[..., 1], np.hypot(d[..., 0], d[..., 2]))
    return lon, lat


def intrinsics_from_fov(hfov: float, width: int, height: int) -> np.ndarray:
    """``(3, 3)`` float64 pinhole intrinsics for horizontal field of view ``hfov`` (radians)."""
    if not 0.0 < hfov < np.pi:
        raise ValueError(f"horizontal field of view must be in (0, pi) radians, got {hfov}")
    f = (width / 2.0) / np.tan(hfov / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def hfov_from_intrinsics(k: np.ndarray) -> float:
    """Horizontal field of view (radians) of intrinsics ``k`` with ``cx = w/2``."""
    return float(2.0 * np.arctan(k[0, 2] / k[0, 0]))


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


def _aligned_empty(shape: tuple[int, ...], dtype=np.float32, align: int = 64) -> np.ndarray:
    """An uninitialised array whose data starts on an ``align``-byte boundary.

    OpenCV's vectorised kernels handle unaligned heads with scalar code that
    can round differently in the last bit, so buffers are aligned to keep
    the maps a function of the pose alone, wherever the allocator puts them.
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + align, np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset : offset + n].view(dtype).reshape(shape)


class PerspectiveMapper:
    """Equirectangular -> perspective remap maps for one camera size.

    The camera rays depend only on the intrinsics and the output size, so
    they are computed once; :meth:`maps` then costs a few vectorised passes
    per rotation, run over bands of rows small enough to stay in cache.

    Yaw only shifts equirectangular longitude, so the maps of the last few
    (pitch, roll) pairs are kept, and a rotation that repeats one of them (a
    pan, a still camera) costs one shift and wrap instead. An instance reuses scratch buffers and is
    not thread-safe: use one per thread.

    Args:
        k: ``(3, 3)`` intrinsics of the perspective view.
        size: ``(height, width)`` of the perspective view in pixels.
        pano_size: ``(pano_h, pano_w)`` of the equirectangular source.
    """

    band_rows = 32
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
        xn = (np.arange(self.width) + 0.5 - k[0, 2]) / k[0, 0]
        yn = (np.arange(self.height) + 0.5 - k[1, 2]) / k[1, 1]
        # Normalised image coordinates of every pixel: the ray is (xn, yn, 1).
        self._xn, self._yn = (_aligned_empty((self.height, self.width)) for _ in range(2))
        self._xn[:], self._yn[:] = np.meshgrid(xn, yn)
        self._buf = [_aligned_empty((self.band_rows, self.width)) for _ in range(6)]
        # (pitch, roll) -> maps at yaw 0 of the last rotations seen.
        self._base: OrderedDict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def _phase(self, ax: np.ndarray, ay: np.ndarray, norm: np.ndarray, scale: float, out: np.ndarray) -> None:
        """``atan2(ay, ax) * scale - 0.5`` into ``out``, the angle in ``[0, 2 pi)`` exact to float32.

        OpenCV's ``phase`` is vectorised but only accurate to ~2e-4 rad. One
        correction step makes it exact to float32 rounding at a fraction of
        ``np.arctan2``'s cost: rotating ``(ax, ay)`` back by the estimate
        leaves the residual angle ``e`` with ``sin e = (ay cos a - ax sin a) / norm``,
        and ``sin e = e`` to 1e-11 at that size. ``norm`` is ``|(ax, ay)|``.
        """
        import cv2

        n = ax.shape[0]
        c, s = (b[:n] for b in self._buf[4:6])
        cv2.phase(ax, ay, angle=out)
        cv2.polarToCart(None, out, x=c, y=s)
        np.multiply(ay, c, out=c)
        np.multiply(ax, s, out=s)
        np.subtract(c, s, out=c)
        cv2.divide(c, norm, dst=c)  # OpenCV gives 0 for 0/0: the exact pole ray
        cv2.addWeighted(out, scale, c, scale, -0.5, dst=out)

    def maps(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Remap maps for camera-to-world rotation ``r`` ``(3, 3)``.

        Returns:
            ``(map_x, map_y)``, each a read-only ``(h, w)`` float32 array of
            equirectangular coordinates in OpenCV's remap convention (they may
            be shared with the mapper's cache); ``map_x`` in
            ``[-0.5, pano_w - 0.5]`` (wrap it), ``map_y`` clamped to
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
        map_x = np.add(base[0], np.float32(yaw % TWO_PI * self.pano_w / TWO_PI))
        np.subtract(map_x, np.float32(self.pano_w), out=map_x, where=map_x >= np.float32(self.pano_w - 0.5))
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
                map_x, map_y = _upsample2(cx, self.width, self.height), _upsample2(cy, self.width, self.height)
                np.clip(map_y, 0.0, self.pano_h - 1, out=map_y)
                return map_x, map_y
        self.stats["exact"] += 1
        return self._exact(r)

    def _exact(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import cv2

        neg_r = -np.asarray(r, np.float64)
        map_x = _aligned_empty((self.height, self.width))
        map_y = _aligned_empty((self.height, self.width))
        for y0 in range(0, self.height, self.band_rows):
            band = slice(y0, y0 + self.band_rows)
            xn, yn = self._xn[band], self._yn[band]
            n = xn.shape[0]
            nx, ny, nz, horiz = (b[:n] for b in self._buf[:4])
            for i, out in enumerate((nx, ny, nz)):
                cv2.addWeighted(xn, neg_r[i, 0], yn, neg_r[i, 1], neg_r[i, 2], dst=out)
            cv2.magnitude(nx, nz, magnitude=horiz)
            # lon + pi = atan2(-x, -z) in [0, 2pi) -> x_e = (lon + pi) W / 2pi - 0.5.
            self._phase(nz, nx, horiz, self.pano_w / TWO_PI, map_x[band])
            # pi/2 - lat = angle from the up axis (-y) in [0, pi] -> y_e = (pi/2 - lat) H / pi - 0.5.
            norm = cv2.magnitude(ny, horiz, magnitude=nx)
            self._phase(ny, horiz, norm, self.pano_h / np.pi, map_y[band])
        np.clip(map_y, 0.0, self.pano_h - 1, out=map_y)
        return map_x, map_y


def _interpolation_error(c: np.ndarray) -> float:
    """Estimated largest error of bilinear upsampling of grid ``c`` by 2: max |second difference| / 8."""
    import cv2

    k = np.array([[1, -2, 1]], np.float32)
    dx = cv2.filter2D(c, -1, k)[:, 1:-1]
    dy = cv2.filter2D(c, -1, k.T)[1:-1]
    return max(cv2.minMaxLoc(np.abs(dx))[1], cv2.minMaxLoc(np.abs(dy))[1]) / 8


def _upsample2(c: np.ndarray, w: int, h: int) -> np.ndarray:
    """Bilinear upsampling by 2 of a ``(h/2 + 2, w/2 + 2)`` grid whose node j lies at
    full-resolution coordinate 2j - 1.

    Pixel centres fall at 1/4 and 3/4 of a coarse cell, so the weights are
    exact in binary floating point. OpenCV's 2x resize of the inner nodes gives
    every pixel but the outermost rows and columns, which need the nodes beyond
    the border and are done here.
    """
    import cv2

    out = _aligned_empty((h, w))
    cv2.resize(c[1:-1, 1:-1], (w, h), dst=out, interpolation=cv2.INTER_LINEAR)
    q, t3 = np.float32(0.25), np.float32(0.75)
    edge = c[[0, 1, -2, -1]]
    tmp = np.empty((4, w), np.float32)  # the two outer node rows at each end, upsampled along x
    tmp[:, 0::2] = q * edge[:, :-2] + t3 * edge[:, 1:-1]
    tmp[:, 1::2] = t3 * edge[:, 1:-1] + q * edge[:, 2:]
    out[0] = q * tmp[0] + t3 * tmp[1]
    out[-1] = t3 * tmp[2] + q * tmp[3]
    rows = np.empty((h, 2), np.float32)  # the border columns, from the rows
    for j, (a, b, wa, wb) in enumerate(((0, 1, q, t3), (-2, -1, t3, q))):
        col = wa * c[:, a] + wb * c[:, b]
        rows[0::2, j] = q * col[:-2] + t3 * col[1:-1]
        rows[1::2, j] = t3 * col[1:-1] + q * col[2:]
    out[:, 0], out[:, -1] = rows[:, 0], rows[:, 1]
    return out


@lru_cache(maxsize=16)
def _mapper(k_key: tuple, size: tuple[int, int], pano_size: tuple[int, int]) -> PerspectiveMapper:
    return PerspectiveMapper(np.array(k_key).reshape(3, 3), size, pano_size)


def equirect_to_perspective_maps(
    r: np.ndarray, k: np.ndarray, size: tuple[int, int], pano_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Remap maps ``(map_x, map_y)`` ``(h, w)`` float32 for rotation ``r``, intrinsics ``k``.

    ``size`` and ``pano_size`` are ``(height, width)``. The per-camera rays are
    cached, so calling this once per frame only pays for the rotation.
    """
    key = tuple(float(v) for v in np.asarray(k, np.float64).ravel())
    return _mapper(key, tuple(size), tuple(pano_size)).maps(r)


def remap_bilinear(pano: np.ndarray, maps: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Sample ``pano`` ``(H, W[, C])`` at ``maps`` with bilinear weights.

    Wraps in longitude (x) and clamps in latitude (y, via the clamped map).
    uint8 images use OpenCV's fixed-point kernel (weights in 1/32 pixel);
    float32 images are interpolated with exact weights.
    """
    import cv2

    return cv2.remap(pano, maps[0], maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP)


def remap_nearest(mask: np.ndarray, maps: tuple[np.ndarray, np.ndarray], transposed: bool = False) -> np.ndarray:
    """Sample ``mask`` ``(H, W)`` at ``maps`` with nearest neighbour (same wrap/clamp).

    With ``transposed``, ``mask`` is given as its ``(W, H)`` transpose (COCO's
    column-major layout, see :func:`persistbench.recipes.decode_mask_columns`);
    the maps swap roles and the result is the same.
    """
    import cv2

    map_x, map_y = (maps[1], maps[0]) if transposed else maps
    return cv2.remap(mask, map_x, map_y, cv2.INTER_NEAREST, borderMode=cv2.BORDER_WRAP)


def equirect_to_perspective(pano: np.ndarray, r: np.ndarray, k: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Render the perspective view ``(h, w[, C])`` of ``pano`` for rotation ``r`` (bilinear)."""
    return remap_bilinear(pano, equirect_to_perspective_maps(r, k, size, pano.shape[:2]))


@lru_cache(maxsize=8)
def _pano_trig(pano_w: int, pano_h: int) -> tuple[np.ndarray, ...]:
    """``(sin lon, cos lon)`` per column and ``(sin lat, cos lat)`` per row of pixel centres."""
    lon, lat = lonlat_from_equirect_xy(np.arange(pano_w), np.arange(pano_h), pano_w, pano_h)
    return np.sin(lon), np.cos(lon), np.sin(lat), np.cos(lat)


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
    import cv2

    pano_h, pano_w = pano_size
    h, w = image.shape[:2]
    cx, cy, cz = _camera_coords(r, pano_w, pano_h)
    k = np.asarray(k, np.float64)
    front = cz > 1e-9
    np.maximum(cz, np.float32(1e-9), out=cz)
    map_x = cx / cz * np.float32(k[0, 0]) + np.float32(k[0, 2] - 0.5)
    map_y = cy / cz * np.float32(k[1, 1]) + np.float32(k[1, 2] - 0.5)
    covered = front & (map_x >= -0.5) & (map_x < w - 0.5) & (map_y >= -0.5) & (map_y < h - 0.5)
    # Keep coordinates inside int16 range for OpenCV; pixels outside are masked anyway.
    np.clip(map_x, -2.0, w + 1.0, out=map_x)
    np.clip(map_y, -2.0, h + 1.0, out=map_y)
    interp = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
    canvas = cv2.remap(image, map_x, map_y, interp, borderMode=cv2.BORDER_REPLICATE)
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
