"""Shared fixtures, built once per session: a small synthetic scene set and its reconstructed dataset, the
bundled sample, R2M-Bench's synthetic checkout and random-weight checkpoints of the model backends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from persistbench.recipes import load_recipes
from persistbench.reconstruct import clip_frames, reconstruct_case
from persistbench.synth import SynthConfig, generate

SMALL = SynthConfig(scenes=2, seed=3, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    generate(out, SMALL)
    return out


@pytest.fixture(scope="session")
def dataset_dir(synth_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    for recipe in load_recipes(synth_dir / "recipes.jsonl"):
        reconstruct_case(recipe, clip_frames(recipe, synth_dir / "sources" / f"{recipe.source.id}.mp4"), root)
    return root


@pytest.fixture(scope="session")
def sample_ds(tmp_path_factory) -> Path:
    """The bundled sample (8 cases: 4 dynamic, 4 static, 60 frames of 256x192) reconstructed."""
    from persistbench.download import DownloadOptions, download, resolve_recipes
    from persistbench.sources import SourceOptions

    out = tmp_path_factory.mktemp("sample")
    opts = DownloadOptions(output=out / "ds", sources=SourceOptions(cache=out / "cache"), progress=False)
    assert all(o.status == "done" for o in download(resolve_recipes(None, out / "cache"), opts))
    return out / "ds"


@pytest.fixture
def dataset_copy(dataset_dir, tmp_path) -> Path:
    """A private copy of the dataset that a test may damage."""
    return Path(shutil.copytree(dataset_dir, tmp_path / "ds"))


@pytest.fixture(scope="session")
def r2m_tree(tmp_path_factory) -> Path:
    """A synthetic R2M-Bench checkout (trajectories, images and the generated videos of each kind)."""
    from persistbench.suites.r2m import synth

    return synth.make(tmp_path_factory.mktemp("r2m") / "tree")


@pytest.fixture(scope="session")
def r2m(tmp_path_factory) -> Path:
    """A small synthetic checkout: one image, three trajectories of 41 poses, and its generated videos
    (``videos/<kind>/<T>/0001.mp4``, upstream's layout). Shared: tests copy it before damaging it."""
    from persistbench.suites.r2m import synth

    cfg = synth.R2MSynthConfig(cases=1, n_poses=41, size=(48, 64), pano_size=(128, 256))
    return synth.make(tmp_path_factory.mktemp("r2m-small") / "tree", cfg)


@pytest.fixture
def checkout(r2m, tmp_path) -> Path:
    """A private copy of :func:`r2m` (without its videos) that a test may damage."""
    return Path(shutil.copytree(r2m, tmp_path / "checkout", ignore=shutil.ignore_patterns("videos")))


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Backend name -> a checkpoint folder of its architecture with random weights (``tests/checkpoints.py``)."""
    pytest.importorskip("transformers")
    import checkpoints as build

    root = tmp_path_factory.mktemp("weights")
    return {
        "dinov2-reg-large": build.dinov2_reg(root / "dinov2-reg"),
        "dinov2-base": build.dinov2(root / "dinov2"),
        "dinov3-large": build.dinov3(root / "dinov3"),
        "sam2": build.sam2(root / "sam2"),
        "superpoint-lightglue": build.lightglue(root / "lightglue"),
        "boq": build.exported(root / "boq.pt2", 5),
        "mutualvpr": build.exported(root / "mutualvpr.pt2", 6),
    }
