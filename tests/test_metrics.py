"""Metrics against independent references: scikit-image for PSNR and SSIM, hand-computed masks for the rest."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from persistbench.metrics import frame as metrics


def skimage_ssim_map(a, b):
    _, s = structural_similarity(
        a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0, channel_axis=-1, full=True
    )
    return s


def random_pair(rng, h=64, w=80, smooth=False):
    import cv2

    a = rng.random((h, w, 3))
    b = np.clip(a + rng.normal(0, 0.1, a.shape), 0, 1)
    if smooth:  # flat, low-variance regions: where float32 SSIM would lose digits
        a, b = (cv2.GaussianBlur(x, (0, 0), 4) for x in (a, b))
    return a, b


def masks(rng, h=64, w=80):
    blob = np.zeros((h, w), bool)
    blob[20:35, 30:52] = True
    corner = np.zeros((h, w), bool)
    corner[:9, -7:] = True  # touches two borders
    edge = np.zeros((h, w), bool)
    edge[-1, 10:60] = True  # one row on the border
    single = np.zeros((h, w), bool)
    single[0, 0] = True  # one pixel, in the corner
    inner = np.zeros((h, w), bool)
    inner[31, 40] = True
    scattered = rng.random((h, w)) > 0.97
    return {"blob": blob, "corner": corner, "edge": edge, "single": single, "inner": inner, "scattered": scattered}


@pytest.mark.parametrize("smooth", [False, True])
def test_masked_ssim_equals_scikit_image(smooth):
    rng = np.random.default_rng(0)
    a, b = random_pair(rng, smooth=smooth)
    full = skimage_ssim_map(a, b)
    np.testing.assert_allclose(metrics.ssim_map(a, b), full, atol=1e-9)
    for name, m in masks(rng).items():
        want = full[m].mean()
        assert metrics.masked_ssim(a, b, m) == pytest.approx(want, abs=1e-6), name
    assert np.isnan(metrics.masked_ssim(a, b, np.zeros(a.shape[:2], bool)))
    assert metrics.masked_ssim(a, a, masks(rng)["blob"]) == pytest.approx(1.0, abs=1e-12)


def test_masked_psnr_equals_scikit_image():
    rng = np.random.default_rng(1)
    a, b = random_pair(rng)
    for name, m in masks(rng).items():
        want = peak_signal_noise_ratio(b[m], a[m], data_range=1.0)
        assert metrics.masked_psnr(a, b, m) == pytest.approx(want, abs=1e-6), name
    assert metrics.masked_psnr(a, a, masks(rng)["blob"]) == 100.0
    assert np.isnan(metrics.masked_psnr(a, b, np.zeros(a.shape[:2], bool)))
    # uint8 input is scaled by 1/255.
    a8, b8 = (np.round(x * 255).astype(np.uint8) for x in (a, b))
    m = masks(rng)["blob"]
    assert metrics.masked_psnr(a8, b8, m) == pytest.approx(
        peak_signal_noise_ratio(b8[m], a8[m], data_range=255), abs=1e-6
    )


def test_iou_presence_continuity_on_constructed_masks():
    ref = np.zeros((100, 100), bool)
    ref[10:30, 10:30] = True  # 20 x 20, centroid (20, 20)
    pred = np.roll(ref, 5, axis=1)  # shifted 5 px right: overlap 15 x 20
    assert metrics.iou(pred, ref) == pytest.approx(300 / 500)
    assert metrics.iou(np.zeros_like(ref), np.zeros_like(ref)) == 1.0
    assert metrics.iou(np.zeros_like(ref), ref) == 0.0
    assert metrics.presence(pred) == 1.0 and metrics.presence(np.zeros_like(ref)) == 0.0
    assert metrics.centroid(ref) == (20.0, 20.0)
    scale = np.sqrt(400.0)
    assert metrics.continuity(pred, ref, scale) == pytest.approx(np.exp(-5 / 20))
    diag = np.roll(np.roll(ref, 3, axis=0), 4, axis=1)  # a 3-4-5 shift
    assert metrics.continuity(diag, ref, scale) == pytest.approx(np.exp(-5 / 20))
    assert metrics.continuity(ref, ref, scale) == 1.0
    assert np.isnan(metrics.continuity(np.zeros_like(ref), ref, scale))
