"""Masked LPIPS against the lpips package's own outputs (random-initialised backbone: no weights needed)."""

from __future__ import annotations

import numpy as np
import pytest

from persistbench.backends import lpips as metrics

lpips = pytest.importorskip("lpips", reason='the lpips extra: pip install -e ".[lpips]"')
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def scorer():
    torch.manual_seed(0)
    return metrics.Lpips(random_backbone=True)


def batch(seed=0, n=3, h=64, w=80):
    rng = np.random.default_rng(seed)
    a = rng.random((n, h, w, 3))
    b = np.clip(a + rng.normal(0, 0.2, a.shape), 0, 1)
    return a, b


def test_masked_lpips_is_the_package_map_averaged_over_the_mask(scorer):
    a, b = batch()
    masks = np.zeros(a.shape[:3], bool)
    masks[0, 10:30, 20:50] = True
    masks[1, -1, :] = True  # a border row
    masks[2, 0, 0] = True  # one pixel
    got = scorer(a, b, masks)
    to = lambda x: torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2) * 2 - 1  # noqa: E731
    with torch.no_grad():
        ref_map = scorer.model(to(a), to(b))[:, 0].double().numpy()  # lpips' own spatial map
    for i in range(3):
        assert got[i] == pytest.approx(ref_map[i][masks[i]].mean(), abs=1e-6)
    assert np.isnan(scorer(a[:1], b[:1], np.zeros((1, 64, 80), bool))[0])


def test_unmasked_lpips_equals_the_package_call(scorer):
    a, b = batch(1)
    to = lambda x: torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2) * 2 - 1  # noqa: E731
    reference = lpips.LPIPS(net="alex", version="0.1", pretrained=True, pnet_rand=True, verbose=False)
    reference.load_state_dict(scorer.model.state_dict())  # the same random backbone
    with torch.no_grad():
        want = reference(to(a), to(b)).reshape(-1).double().numpy()
    np.testing.assert_allclose(scorer(a, b), want, atol=1e-6)
    assert scorer(a, a).max() == pytest.approx(0.0, abs=1e-6)


def test_missing_weights_say_what_fixes_them(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(metrics.LpipsUnavailable, match=r"alexnet-owt-7be5be79\.pth.*--weights lpips=FILE"):
        metrics.Lpips()


@pytest.mark.slow
def test_backbone_weights_load_from_a_file(tmp_path, scorer):
    import torchvision

    torch.manual_seed(1)
    alexnet = torchvision.models.alexnet(weights=None)
    path = tmp_path / metrics.ALEXNET_FILE
    torch.save(alexnet.state_dict(), path)
    loaded = metrics.Lpips(weights=str(path))
    assert torch.equal(loaded.model.net.slice1[0].weight, alexnet.features[0].weight)
    bad = tmp_path / "bad.pth"
    torch.save({"x": torch.zeros(1)}, bad)
    with pytest.raises(metrics.LpipsUnavailable, match="not torchvision AlexNet weights"):
        metrics.Lpips(weights=str(bad))


@pytest.mark.slow
def test_allow_download_checks_the_hash_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """A mirror (loopback) serving a file that is not the real AlexNet is refused by its sha256 prefix."""
    import torchvision

    from persistbench.io.serve import FileServer

    served = tmp_path / "mirror"
    served.mkdir()
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), served / metrics.ALEXNET_FILE)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    with pytest.raises(metrics.LpipsUnavailable, match="not found.*--allow-download"):
        metrics.Lpips()  # without allow_download nothing is fetched
    with FileServer(served) as server:
        monkeypatch.setenv("PERSISTBENCH_ALEXNET_URL", f"{server.url}/{metrics.ALEXNET_FILE}")
        with pytest.raises(metrics.LpipsUnavailable, match="could not be downloaded.*hash"):
            metrics.Lpips(allow_download=True)
        assert [path for path, _ in server.requests if path.endswith(metrics.ALEXNET_FILE)]
    assert not list((tmp_path / "home").rglob("*.pth*"))


@pytest.mark.slow
def test_r2m_pair_lpips_is_the_package_call_on_each_pairs_frames(tmp_path):
    """R2M-Bench's ``frame_lpips``: full uint8 frames of one video, in bounded batches of pairs, on the ``lpips``
    backend loaded from a weights file like every backend."""
    import torchvision

    from persistbench.backends import BackendOptions, load
    from persistbench.metrics.registry import METRICS
    from persistbench.suites.r2m.pair_video import PairVideo

    torch.manual_seed(2)
    path = tmp_path / metrics.ALEXNET_FILE
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    opts = BackendOptions(device="cpu", weights=(("lpips", str(path)),))
    rng = np.random.default_rng(4)
    frames = {i: rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for i in range(20)}
    pairs = [(i, (3 * i + 1) % 20) for i in range(20)]  # 20 pairs: two batches
    got = METRICS["frame_lpips"].function(PairVideo(frames, opts), pairs, {})
    to = lambda x: torch.from_numpy(x.astype(np.float32) / 255.0).permute(0, 3, 1, 2) * 2 - 1  # noqa: E731
    reference = lpips.LPIPS(net="alex", version="0.1", pretrained=True, pnet_rand=True, verbose=False)
    reference.load_state_dict(load("lpips", opts).model.state_dict())
    with torch.no_grad():
        a = np.stack([frames[i] for i, _ in pairs])
        b = np.stack([frames[j] for _, j in pairs])
        want = reference(to(a), to(b)).reshape(-1).double().numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
