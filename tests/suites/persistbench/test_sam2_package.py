"""paper-v3's tracker, the ``sam2`` package (backend ``sam2-package``): its checkpoint is read as tensors only,
and it gives the masks the package gives when driven as the public toolkit's model server drives it."""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest
from PIL import Image

from persistbench.backends import BACKENDS, BackendOptions, BackendUnavailable, check_backend
from persistbench.backends.weights import resolve

torch = pytest.importorskip("torch")
pytest.importorskip("sam2", reason="the sam2 package: pip install -e '.[sam2]'")


def _frames(n: int = 3, h: int = 96, w: int = 128) -> list[np.ndarray]:
    """JPEG-decoded frames of a red square moving right over a gradient, and the first frame's mask."""
    out = []
    for t in range(n):
        f = np.zeros((h, w, 3), np.uint8)
        f[..., 1] = np.linspace(30, 160, w, dtype=np.uint8)[None]
        f[30:60, 20 + 8 * t : 60 + 8 * t] = (210, 40, 40)
        buf = io.BytesIO()
        Image.fromarray(f).save(buf, "JPEG", quality=95)
        out.append(buf.getvalue())
    mask = np.zeros((h, w), bool)
    mask[30:60, 20:60] = True
    return out, mask


def _decoded(jpegs: list[bytes]) -> list[np.ndarray]:
    return [np.asarray(Image.open(io.BytesIO(j)).convert("RGB")) for j in jpegs]


@pytest.mark.slow
def test_the_checkpoint_is_read_as_tensors_only(checkpoints, tmp_path):
    from persistbench.backends.sam2_video import read_checkpoint

    sd, config = read_checkpoint(checkpoints["sam2-package"])
    assert config == "configs/sam2.1/sam2.1_hiera_t.yaml" and all(isinstance(v, torch.Tensor) for v in sd.values())

    (tmp_path / "text.pt").write_text("not a checkpoint")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "nomodel.pt")
    torch.save({"model": {"x": torch.zeros(2)}}, tmp_path / "other.pt")
    with zipfile.ZipFile(tmp_path / "code.pt", "w") as z:  # a pickle that would run a program when unpickled
        z.writestr("code/data.pkl", pickle.dumps(_Exploit()))
        z.writestr("code/version", "3\n")
    cases = {
        "text.pt": "not a SAM 2 checkpoint (a torch zip file",
        "nomodel.pt": "no 'model' state dict of tensors",
        "other.pt": "not a SAM 2.1 Hiera checkpoint",
        "code.pt": "not loadable as tensors only",
    }
    for name, why in cases.items():
        with pytest.raises(BackendUnavailable) as e:
            read_checkpoint(tmp_path / name)
        assert str(e.value).startswith(f"{tmp_path / name}: ") and why in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    assert not (tmp_path / "pwned").exists()


class _Exploit:
    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_missing_weights_say_which_file_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendUnavailable) as e:
        check_backend("sam2-package", BackendOptions())
    assert "facebook/sam2.1-hiera-large/sam2.1_hiera_large.pt is not in the Hugging Face cache" in str(e.value)
    assert "--weights sam2-package=FILE.pt" in str(e.value)
    with pytest.raises(BackendUnavailable, match="no such file"):
        resolve(BACKENDS["sam2-package"], str(tmp_path / "absent.pt"), False)


@pytest.mark.slow
def test_masks_are_the_packages_as_the_public_model_server_runs_it(checkpoints, tmp_path):
    """The public server writes JPEG files, the package reads them with PIL and thresholds logits at 0; our
    backend gets the decoded frames. A further JPEG pass of the same frames changes the masks, so equal masks
    mean equal inputs."""
    from sam2.build_sam import build_sam2_video_predictor

    from persistbench.backends.sam2_video import Sam2PackageTracker

    jpegs, mask = _frames()
    for i, j in enumerate(jpegs):
        (tmp_path / f"{i}.jpg").write_bytes(j)
    predictor = build_sam2_video_predictor(
        "configs/sam2.1/sam2.1_hiera_t.yaml", str(checkpoints["sam2-package"]), device="cpu"
    )
    with torch.no_grad():
        state = predictor.init_state(video_path=str(tmp_path))
        predictor.add_new_mask(state, 0, 1, mask.astype(np.uint8) * 255)
        want = {i: (logits[0] > 0.0)[0].numpy() for i, _, logits in predictor.propagate_in_video(state)}

    tracker = Sam2PackageTracker(resolve(BACKENDS["sam2-package"], str(checkpoints["sam2-package"]), False), "cpu")
    got = tracker.track(_decoded(jpegs), mask)
    assert len(got) == len(jpegs) and all(g.dtype == bool and g.shape == mask.shape for g in got)
    assert all(np.array_equal(got[i], want[i]) for i in range(len(jpegs)))
    assert tracker.provenance()["sam2_config"] == "configs/sam2.1/sam2.1_hiera_t.yaml"
    assert tracker.provenance()["fill_holes"] is False  # this package build has no CUDA extension

    again = [io.BytesIO() for _ in jpegs]
    for buf, frame in zip(again, _decoded(jpegs), strict=True):
        Image.fromarray(frame).save(buf, "JPEG", quality=95)
    other = tracker.track(_decoded([b.getvalue() for b in again]), mask)
    assert not all(np.array_equal(a, b) for a, b in zip(other, got, strict=True))
