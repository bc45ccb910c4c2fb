"""Shared fixtures, built once per run: a small synthetic scene set and its reconstructed dataset, the
bundled sample, R2M-Bench's synthetic checkouts and random-weight checkpoints of the model backends.

Under pytest-xdist (``-n 2``) the workers share them: the first worker to need one builds it, in place,
under a file lock in the run's common temporary folder; the others wait for it and reuse it. Tests
copy a shared tree before damaging it.

The fast tier: a test that takes seconds (it builds shared data, starts a cluster or a server, runs a whole
chain) is marked ``@pytest.mark.slow`` where it is defined (``pytestmark`` for a whole module);
``pytest -m "not slow"`` runs the rest.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from persistbench.executors.base import limit_threads
from persistbench.suites.persistbench.build.recipes import load_recipes
from persistbench.suites.persistbench.build.reconstruct import clip_frames, reconstruct_case
from persistbench.suites.persistbench.synth import SynthConfig, generate


def pytest_configure(config):
    """Each xdist worker takes its share of the cores for numpy's BLAS, OpenCV and torch (and so do the
    commands its tests start): two workers that each start a thread per core slow each other down."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        limit_threads(max(1, (os.cpu_count() or 1) // workers))


SMALL = SynthConfig(scenes=2, seed=3, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)


def shared(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """The folder ``name`` built once for the whole run by ``build(folder)`` (which returns the path to hand
    out, inside ``folder``), whatever the number of xdist workers: built in place under a lock, marked
    complete last, rebuilt when an earlier attempt died halfway."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, common to its workers
    root, done = base / f"shared-{name}", base / f"shared-{name}.done"
    with open(base / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            done.write_text(str(build(root).relative_to(root)))
    return root / done.read_text()


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    def build(out: Path) -> Path:
        generate(out, SMALL)
        return out

    return shared(tmp_path_factory, "synth", build)


@pytest.fixture(scope="session")
def dataset_dir(synth_dir, tmp_path_factory) -> Path:
    def build(root: Path) -> Path:
        for recipe in load_recipes(synth_dir / "recipes.jsonl"):
            reconstruct_case(recipe, clip_frames(recipe, synth_dir / "sources" / f"{recipe.source.id}.mp4"), root)
        return root

    return shared(tmp_path_factory, "dataset", build)


@pytest.fixture(scope="session")
def sample_ds(tmp_path_factory) -> Path:
    """The bundled sample (8 cases: 4 dynamic, 4 static, 60 frames of 256x192) reconstructed."""
    from persistbench.suites.persistbench.build.download import DownloadOptions, download, resolve_recipes
    from persistbench.suites.persistbench.build.sources import SourceOptions

    def build(out: Path) -> Path:
        opts = DownloadOptions(output=out / "ds", sources=SourceOptions(cache=out / "cache"), progress=False)
        assert all(o.status == "done" for o in download(resolve_recipes(None, out / "cache"), opts))
        return out / "ds"

    return shared(tmp_path_factory, "sample", build)


@pytest.fixture
def dataset_copy(dataset_dir, tmp_path) -> Path:
    """A private copy of the dataset that a test may damage."""
    return Path(shutil.copytree(dataset_dir, tmp_path / "ds"))


@pytest.fixture(scope="session")
def r2m_tree(tmp_path_factory) -> Path:
    """A synthetic R2M-Bench checkout (trajectories, images and the generated videos of each kind)."""
    from persistbench.suites.r2m import synth

    return shared(tmp_path_factory, "r2m", lambda out: synth.make(out / "tree"))


@pytest.fixture(scope="session")
def r2m(tmp_path_factory) -> Path:
    """A small synthetic checkout: one image, three trajectories of 41 poses, and its generated videos
    (``videos/<kind>/<T>/0001.mp4``, upstream's layout). Shared: tests copy it before damaging it."""
    from persistbench.suites.r2m import synth

    cfg = synth.R2MSynthConfig(cases=1, n_poses=41, size=(48, 64), pano_size=(128, 256))
    return shared(tmp_path_factory, "r2m-small", lambda out: synth.make(out / "tree", cfg))


@pytest.fixture
def checkout(r2m, tmp_path) -> Path:
    """A private copy of :func:`r2m` (without its videos) that a test may damage."""
    return Path(shutil.copytree(r2m, tmp_path / "checkout", ignore=shutil.ignore_patterns("videos")))


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Backend name -> a checkpoint folder of its architecture with random weights (``tests/fakes/checkpoints.py``)."""
    pytest.importorskip("transformers")
    from fakes import checkpoints as build

    def make(root: Path) -> Path:
        build.dinov2_reg(root / "dinov2-reg")
        build.dinov2(root / "dinov2")
        build.dinov3(root / "dinov3")
        build.sam2(root / "sam2")
        build.lightglue(root / "lightglue")
        build.exported(root / "boq.pt2", 5)
        build.exported(root / "mutualvpr.pt2", 6)
        build.grounding_dino(root / "grounding-dino")
        build.sam2_image(root / "sam2-image")
        build.clip(root / "clip")
        if importlib.util.find_spec("sam2"):
            build.sam2_package(root / "sam2-package.pt")
        return root

    root = shared(tmp_path_factory, "weights", make)
    return {
        "dinov2-reg-large": root / "dinov2-reg",
        "dinov2-base": root / "dinov2",
        "dinov3-large": root / "dinov3",
        "sam2": root / "sam2",
        "superpoint-lightglue": root / "lightglue",
        "boq": root / "boq.pt2",
        "mutualvpr": root / "mutualvpr.pt2",
        "grounding-dino": root / "grounding-dino",
        "sam2-image": root / "sam2-image",
        "clip-vit-b32": root / "clip",
        **({"sam2-package": root / "sam2-package.pt"} if (root / "sam2-package.pt").is_file() else {}),
    }


@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    """A real OpenSSH server on loopback (tests/fakes/sshd.py) for one test module, as the download backends' remote."""
    from fakes.sshd import sshd

    with sshd(tmp_path_factory.mktemp("sshd")) as running:
        yield running


@pytest.fixture(scope="module")
def served_recipes(tmp_path_factory):
    """Two small synthetic scenes whose sources a loopback HTTP server serves: (recipes.jsonl, the server)."""
    from persistbench.io.serve import FileServer

    root = tmp_path_factory.mktemp("sources")
    config = SynthConfig(scenes=2, seed=11, pano_size=(512, 256), view_size=(128, 96), n_frames=16, fps=8.0)
    with FileServer(root) as server:
        generate(root / "http", config, base_url=f"{server.url}/http/sources")
        yield root / "http" / "recipes.jsonl", server


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    """The demo, run once for the whole test run (every xdist worker reads it; the tests change only copies)."""
    pytest.importorskip("matplotlib", reason='the report extra: pip install -e ".[report]"')
    from click.testing import CliRunner

    from persistbench.cli import main

    def build(root: Path) -> Path:
        result = CliRunner().invoke(main, ["demo", "--out", str(root / "demo"), "--no-progress"])
        assert result.exit_code == 0, result.output
        (root / "output.txt").write_text(result.output)
        return root / "demo"

    out = shared(tmp_path_factory, "demo", build)
    return out, (out.parent / "output.txt").read_text()
