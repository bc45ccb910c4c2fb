"""Geometry: conventions, pixel-exact reprojection, agreement with py360convert, visibility."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistbench.geometry import sphere
from persistbench.suites.persistbench.synth import analytic_visibility, object_mask

PANO = (1024, 2048)  # (h, w), as every size
VIEW = (300, 400)
K = sphere.intrinsics_from_fov(np.deg2rad(90.0), VIEW[1], VIEW[0])


def direction_pano(pano_size):
    """Float32 panorama whose pixels hold their own unit direction (DESIGN section 3 formula); ``pano_size`` = (h, w)."""
    h, w = pano_size
    lon = ((np.arange(w) + 0.5) / w - 0.5) * 2 * np.pi
    lat = (0.5 - (np.arange(h) + 0.5) / h) * np.pi
    lon, lat = np.meshgrid(lon, lat)
    d = np.stack([np.cos(lat) * np.sin(lon), -np.sin(lat), np.cos(lat) * np.cos(lon)], -1)
    return d.astype(np.float32)


def analytic_rays(r, k, size):
    """World direction of every pixel centre of a camera, float64 ``(h, w, 3)``; ``size`` = (h, w)."""
    h, w = size
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    cam = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], -1)
    return cam @ r.T


def pixel_error(directions, r, k, size):
    """Distance in pixels between where ``directions`` project and each pixel's centre; ``size`` = (h, w)."""
    h, w = size
    cam = directions.astype(np.float64) @ r  # R^T d
    u = cam[..., 0] / cam[..., 2] * k[0, 0] + k[0, 2]
    v = cam[..., 1] / cam[..., 2] * k[1, 1] + k[1, 2]
    uu, vv = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    return np.hypot(u - uu, v - vv)


# ------------------------------------------------------------------ conventions


def test_optical_axis_is_direction_of_yaw_pitch():
    for yaw, pitch, roll in [(0, 0, 0), (0.7, 0.3, 0.2), (-2.5, -1.2, 1.0), (np.pi, 0.1, -0.4)]:
        r = sphere.rotation_from_ypr(yaw, pitch, roll)
        np.testing.assert_allclose(r @ [0, 0, 1], sphere.direction_from_lonlat(yaw, pitch), atol=1e-12)


def test_pitch_up_looks_up_and_yaw_right_looks_right():
    # y is down, so looking up means a negative y component.
    assert sphere.rotation_from_ypr(0, 0.5)[1, 2] < 0
    assert sphere.rotation_from_ypr(0.5, 0)[0, 2] > 0


def test_equirect_pixel_centres_follow_design_formula():
    w, h = 64, 32
    lon, lat = sphere.lonlat_from_equirect_xy(0, 0, w, h)
    assert lon == pytest.approx((0.5 / w - 0.5) * 2 * np.pi)
    assert lat == pytest.approx((0.5 - 0.5 / h) * np.pi)
    x, y = sphere.equirect_xy_from_lonlat(0.0, 0.0, w, h)
    assert (x, y) == pytest.approx((w / 2 - 0.5, h / 2 - 0.5))


def test_intrinsics_follow_design_formula():
    k = sphere.intrinsics_from_fov(np.deg2rad(90), 640, 480)
    assert k[0, 0] == pytest.approx(320.0) and k[1, 1] == pytest.approx(320.0)
    assert (k[0, 2], k[1, 2]) == (320.0, 240.0)
    assert sphere.hfov_from_intrinsics(k) == pytest.approx(np.pi / 2)


angles = st.tuples(st.floats(-np.pi, np.pi), st.floats(-np.pi / 2 + 1e-3, np.pi / 2 - 1e-3), st.floats(-np.pi, np.pi))


@given(angles)
@settings(max_examples=200, deadline=None)
def test_rotation_round_trip(ypr):
    r = sphere.rotation_from_ypr(*ypr)
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
    back = sphere.ypr_from_rotation(r)
    np.testing.assert_allclose(sphere.rotation_from_ypr(*back), r, atol=1e-9)
    np.testing.assert_allclose(np.cos(np.subtract(back, ypr)), 1.0, atol=1e-9)


@given(st.floats(-np.pi, np.pi), st.floats(-np.pi, np.pi))
@settings(max_examples=100, deadline=None)
def test_rotation_gimbal_lock_round_trip(yaw, roll):
    r = sphere.rotation_from_ypr(yaw, np.pi / 2, roll)
    np.testing.assert_allclose(sphere.rotation_from_ypr(*sphere.ypr_from_rotation(r)), r, atol=1e-9)


@given(st.floats(-np.pi, np.pi), st.floats(-np.pi / 2, np.pi / 2))
@settings(max_examples=100, deadline=None)
def test_direction_round_trip(lon, lat):
    back = sphere.lonlat_from_direction(sphere.direction_from_lonlat(lon, lat))
    d0, d1 = sphere.direction_from_lonlat(lon, lat), sphere.direction_from_lonlat(*back)
    np.testing.assert_allclose(d0, d1, atol=1e-12)


# ------------------------------------------------------------------ reprojection accuracy

POSES = [
    *[tuple(a) for a in np.random.default_rng(0).uniform([-np.pi, -1.3, -np.pi], [np.pi, 1.3, np.pi], (6, 3))],
    (np.pi, 0.0, 0.0),
    (-np.pi, 0.2, 0.1),
    (np.deg2rad(179.9), -0.1, 0.0),  # the seam
    (0.3, np.deg2rad(89), 0.0),
    (-1.0, np.deg2rad(-89), 0.5),
    (2.0, np.deg2rad(89), -1.0),  # the poles
]


@pytest.mark.parametrize("ypr", POSES, ids=[f"y{np.rad2deg(p[0]):.0f}_p{np.rad2deg(p[1]):.0f}" for p in POSES])
def test_reprojection_lands_within_a_hundredth_of_a_pixel(ypr):
    pano = direction_pano(PANO)
    r = sphere.rotation_from_ypr(*ypr)
    out = sphere.equirect_to_perspective(pano, r, K, VIEW)
    rays = analytic_rays(r, K, VIEW)
    _, lat = sphere.lonlat_from_direction(rays)
    # Beyond the outermost row centres the panorama holds no data (latitude clamps).
    covered = np.abs(lat) <= (0.5 - 0.5 / PANO[0]) * np.pi
    assert covered.mean() > 0.9
    err = pixel_error(out, r, K, VIEW)[covered]
    assert err.max() < 0.01, f"max error {err.max():.4f} px"


def test_pan_reuses_maps_and_stays_exact():
    """Poses that share pitch and roll reuse one set of base maps, shifted in longitude."""
    pano = direction_pano(PANO)
    mapper = sphere.PerspectiveMapper(K, VIEW, PANO)
    for yaw in (-3.1, -1.0, 0.0, 0.5, np.pi, 3.0):
        r = sphere.rotation_from_ypr(yaw, 0.3, 0.1)
        out = sphere.remap_bilinear(pano, mapper.maps(r))
        assert pixel_error(out, r, K, VIEW).max() < 0.01
    assert len(mapper._base) == 1


@pytest.mark.slow
def test_half_resolution_maps_stay_within_a_hundredth_of_a_pixel():
    """Large views away from the poles get upsampled half-resolution maps: still within 0.01 px."""
    pano_size, view = (1920, 3840), (768, 1024)
    k = sphere.intrinsics_from_fov(np.deg2rad(90), view[1], view[0])
    pano = direction_pano(pano_size)
    mapper = sphere.PerspectiveMapper(k, view, pano_size)
    rng = np.random.default_rng(4)
    for ypr in [(0.0, 0.0, 0.0), (np.pi, 0.1, 0.0), *rng.uniform([-np.pi, -0.4, -0.3], [np.pi, 0.4, 0.3], (4, 3))]:
        r = sphere.rotation_from_ypr(*ypr)
        out = sphere.remap_bilinear(pano, mapper.maps(r))
        assert pixel_error(out, r, k, view).max() < 0.01
    assert mapper.stats["coarse"] >= 4, mapper.stats
    # Near a pole the estimate rejects the coarse grid and the maps are computed directly.
    before = mapper.stats["exact"]
    mapper.maps(sphere.rotation_from_ypr(0.3, 1.3, 0.0))
    assert mapper.stats["exact"] == before + 1


def test_maps_do_not_depend_on_history():
    """A pose gives the same maps whether its (pitch, roll) was cached by another pose or not."""
    poses = [(0.3, 0.2, 0.1), (1.7, 0.2, 0.1), (-2.0, -0.4, 0.0)]
    warm = sphere.PerspectiveMapper(K, VIEW, PANO)
    for p in poses:
        warm.maps(sphere.rotation_from_ypr(*p))
    for p in poses:
        fresh = sphere.PerspectiveMapper(K, VIEW, PANO).maps(sphere.rotation_from_ypr(*p))
        for a, b in zip(warm.maps(sphere.rotation_from_ypr(*p)), fresh):
            assert np.array_equal(a, b)


def test_uint8_path_matches_float_path():
    rng = np.random.default_rng(1)
    import cv2

    pano = cv2.GaussianBlur(rng.integers(0, 256, (*PANO, 3), dtype=np.uint8), (0, 0), 2)
    r = sphere.rotation_from_ypr(2.9, 0.4, 0.1)
    a = sphere.equirect_to_perspective(pano, r, K, VIEW).astype(np.float64)
    b = sphere.equirect_to_perspective(pano.astype(np.float32), r, K, VIEW)
    # Both paths sample at coordinates rounded to 1/32 pixel (OpenCV's float kernel too): they
    # differ by at most 1/32 px per axis times the steepest gradient, plus half a grey level.
    steepest = max(np.abs(np.diff(pano.astype(np.float64), axis=i)).max() for i in (0, 1))
    assert np.abs(a - b).max() <= 0.5 + 2 * steepest / 32
    assert np.abs(a - b).mean() < 0.3


def test_integer_remap_is_the_same_at_every_simd_level(tmp_path):
    """The fixed-point kernel gives the same bytes with OpenCV's SIMD dispatch restricted to SSE2."""
    import subprocess
    import sys

    code = (
        "import numpy as np, hashlib; from persistbench.geometry import sphere; rng = np.random.default_rng(5);"
        "img = rng.integers(0, 256, (64, 128, 3), np.uint8); mx = rng.uniform(-1, 129, (40, 50));"
        "my = rng.uniform(-1, 65, (40, 50)); h = hashlib.sha256();"
        "[h.update(sphere.remap(img, mx, my, b, nearest=n).tobytes()) for b in ('wrap', 'replicate', 'constant')"
        " for n in (False, True)]; print(h.hexdigest())"
    )
    low = "AVX512_SKX,AVX512_ICL,AVX512_COMMON,AVX2,FMA3,AVX,SSE4_2,SSE4_1,POPCNT,SSSE3"
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        for env in (os.environ, {**os.environ, "OPENCV_CPU_DISABLE": low})
    ]
    assert runs[0] == runs[1] and len(runs[0]) == 65


def test_mask_remap_is_nearest_neighbour():
    rng = np.random.default_rng(2)
    mask = (rng.random(PANO) > 0.5).astype(np.uint8)
    r = sphere.rotation_from_ypr(-1.0, 0.3, 0.0)
    maps = sphere.equirect_to_perspective_maps(r, K, VIEW, PANO)
    out = sphere.remap_nearest(mask, maps)
    x = np.floor(maps[0] + 0.5).astype(int) % PANO[1]
    y = np.floor(maps[1] + 0.5).astype(int)
    exact_tie = (np.abs(maps[0] % 1 - 0.5) < 1e-3) | (np.abs(maps[1] % 1 - 0.5) < 1e-3)
    assert (out == mask[y, x])[~exact_tie].all()


def test_transposed_mask_paths_agree():
    """COCO's column-major (W, H) layout gives the same reprojection and visibility."""
    rng = np.random.default_rng(3)
    mask = (rng.random(PANO) > 0.7).astype(np.uint8)
    for ypr in [(np.pi, 0.0, 0.0), (-1.0, 1.4, 0.3), (2.0, -1.5, 0.0)]:
        r = sphere.rotation_from_ypr(*ypr)
        maps = sphere.equirect_to_perspective_maps(r, K, VIEW, PANO)
        np.testing.assert_array_equal(
            sphere.remap_nearest(mask.T.copy(), maps, transposed=True), sphere.remap_nearest(mask, maps)
        )
        got = sphere.visibility_fraction(mask.T.copy(), r, K, VIEW, transposed=True)
        assert got == pytest.approx(sphere.visibility_fraction(mask, r, K, VIEW), rel=1e-12)  # summation order


@pytest.mark.parametrize("ypr", [(0.4, 0.2, 0.0), (-2.0, -0.5, 0.3), (3.0, 0.9, -0.7), (1.0, -1.3, 0.0)])
def test_agrees_with_py360convert(ypr):
    """py360convert's e2p at our conventions.

    Mapping between the conventions: its ``u_deg``, ``v_deg`` and
    ``in_rot_deg`` are our yaw, pitch and roll in degrees (+ right, + up),
    and its field of view is the pair (hfov, vfov) with our
    vfov = 2 atan(tan(hfov/2) h / w). Its panorama columns and rows sample
    the same longitudes and latitudes as ours. Its pixel grid is
    ``linspace(-tan, +tan, w)``: edge pixel centres sit on the frustum edge,
    where ours sit half a pixel inside (COLMAP). That offset grows from 0 at
    the centre to 0.5 px at the border in each axis, so the disagreement
    averages about 0.38 px and peaks near 0.75 px in the corners.
    """
    py360convert = pytest.importorskip("py360convert")
    pano = direction_pano((512, 1024))
    h, w = VIEW
    hfov = 90.0
    vfov = np.rad2deg(2 * np.arctan(np.tan(np.deg2rad(hfov) / 2) * h / w))
    r = sphere.rotation_from_ypr(*ypr)
    yaw, pitch, roll = np.rad2deg(ypr)
    theirs = py360convert.e2p(pano, (hfov, vfov), yaw, pitch, (h, w), in_rot_deg=roll, mode="bilinear")
    err = pixel_error(theirs, r, K, VIEW)
    assert err.mean() <= 0.75, f"mean {err.mean():.3f} px"
    assert err.max() < 0.8, "beyond the half-pixel grid offset: the conventions disagree"
    ours = pixel_error(sphere.equirect_to_perspective(pano, r, K, VIEW), r, K, VIEW)
    assert ours.mean() < 0.01


# ------------------------------------------------------------------ perspective -> equirect


def test_perspective_to_equirect_inverts_equirect_to_perspective():
    pano = direction_pano((512, 1024))
    r = sphere.rotation_from_ypr(1.2, -0.3, 0.2)
    view = sphere.equirect_to_perspective(pano, r, K, VIEW)
    back, covered = sphere.perspective_to_equirect(view, r, K, (512, 1024))
    assert 0.05 < covered.mean() < 0.5
    # Covered pixels project inside the image, in front of the camera.
    cam = pano[covered].astype(np.float64) @ r
    assert (cam[:, 2] > 0).all()
    u = cam[:, 0] / cam[:, 2] * K[0, 0] + K[0, 2]
    assert (u >= -1e-6).all() and (u <= VIEW[1] + 1e-6).all()
    # Inside the footprint the round trip returns the panorama (two bilinear samplings).
    import cv2

    inner = cv2.erode(covered.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    a, b = back[inner].astype(np.float64), pano[inner].astype(np.float64)
    angle = np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, -1))
    assert np.degrees(angle).max() < 0.02
    assert not back[~covered].any()


# ------------------------------------------------------------------ visibility


def cap_mask(center, radius, pano_size=PANO):
    h, w = pano_size
    lon, lat = sphere.lonlat_from_equirect_xy(np.arange(w)[None, :], np.arange(h)[:, None], w, h)
    dirs = sphere.direction_from_lonlat(*np.broadcast_arrays(lon, lat))
    return object_mask(dirs.astype(np.float32), center, radius)


@pytest.mark.parametrize(
    "obj_lonlat,view_ypr",
    [
        ((0.0, 0.0), (0.9, 0.0, 0.0)),
        ((1.0, 0.5), (0.3, 0.2, 0.3)),
        ((3.1, -0.2), (-2.5, 0.1, 0.0)),
        ((0.0, 1.3), (0.5, 0.7, 0.0)),
        ((-0.5, 0.0), (-0.5 + 0.75, 0.55, 0.4)),
    ],
)
def test_visibility_matches_analytic_integral(obj_lonlat, view_ypr):
    center = sphere.direction_from_lonlat(*obj_lonlat)
    radius = np.deg2rad(12)
    r = sphere.rotation_from_ypr(*view_ypr)
    got = sphere.visibility_fraction(cap_mask(center, radius), r, K, VIEW)
    want = analytic_visibility(center, radius, r, K, VIEW, n=400)
    assert 0.02 < want < 0.98, "case must be a partial overlap"
    assert got == pytest.approx(want, abs=0.01)


def test_visibility_is_zero_behind_and_one_inside():
    center = sphere.direction_from_lonlat(0.2, 0.1)
    mask = cap_mask(center, np.deg2rad(10))
    assert sphere.visibility_fraction(mask, sphere.rotation_from_ypr(0.2 + np.pi, -0.1), K, VIEW) == 0.0
    assert sphere.visibility_fraction(mask, sphere.rotation_from_ypr(0.2, 0.1), K, VIEW) == 1.0
    assert sphere.visibility_fraction(np.zeros_like(mask), sphere.rotation_from_ypr(0.2, 0.1), K, VIEW) == 0.0
