"""Issue 22, item 7: writers never follow a link planted inside their output to somewhere outside it.

Real symlinks, the real commands in a child process; the folder the link points to must stay untouched.
"""

from __future__ import annotations

import os

import pytest
from fakes.clirun import refused, run_cli

from persistbench.core.errors import PersistbenchError
from persistbench.io.names import child, confined
from persistbench.suites.wrop import synth as wrop_synth


def test_child_refuses_existing_links_that_leave_the_root(tmp_path):
    root, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    (root / "inner").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "scores").symlink_to(elsewhere)
    (root / "alias").symlink_to(root / "inner")
    with pytest.raises(
        PersistbenchError, match=r"scores: leads to .*elsewhere, outside .*run; links must stay inside it"
    ):
        child(root, "scores", "x.json")
    with pytest.raises(PersistbenchError, match="links must stay inside it"):
        confined(root, "scores")
    assert child(root, "alias", "x.json") == root / "alias" / "x.json"  # a link that stays inside is fine
    assert child(root, "new", "x.json") == root / "new" / "x.json"


@pytest.mark.slow
def test_score_does_not_write_through_a_linked_scores_folder(r2m, tmp_path):
    run = tmp_path / "run"
    assert run_cli("infer", "--dataset", r2m, "--model", "hold", "--output", run).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "scores").symlink_to(elsewhere)
    refused(run_cli("score", "--pred", run, "--metrics", "frame_psnr"), "scores", "links must stay inside it")
    assert list(elsewhere.iterdir()) == []


def test_r2m_fetch_does_not_write_images_through_a_link(r2m, tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "test_imgs").symlink_to(elsewhere)
    refused(
        run_cli("fetch", "--suite", "r2m", "--from", r2m, "--output", out), "test_imgs", "links must stay inside it"
    )
    assert list(elsewhere.iterdir()) == []


@pytest.mark.slow
def test_wrop_fetch_does_not_write_tars_through_a_link(tmp_path):
    corpus = tmp_path / "corpus"
    wrop_synth.make(corpus, wrop_synth.WropSynthConfig(samples=1))
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "train").symlink_to(elsewhere)
    refused(
        run_cli("fetch", "--suite", "wrop", "--from", corpus, "--output", out), "train", "links must stay inside it"
    )
    assert list(elsewhere.iterdir()) == []


def test_links_above_the_root_are_the_users_own(tmp_path):
    real = tmp_path / "real"
    (real / "scores").mkdir(parents=True)
    os.symlink(real, tmp_path / "alias")
    assert child(tmp_path / "alias", "scores", "x.json").parent.resolve() == (real / "scores").resolve()
