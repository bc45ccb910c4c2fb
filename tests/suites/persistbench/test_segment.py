"""The default tracker follows the object where a prediction shows it and says lost where it does not."""

from __future__ import annotations

import numpy as np
import pytest

from persistbench.metrics import frame as metrics
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.segment import TemplateTracker


@pytest.mark.slow
def test_tracker_follows_the_object_and_reports_lost(dataset_dir):
    for case in Dataset(dataset_dir).cases():
        center, view0 = case.view("center"), case.view("view_0")
        vis = case.visibility()["view_0_visibility"]
        ref = int(np.argmax(vis > 0.7))
        gt_masks = [m > 0 for m in center.masks()]
        tracker = TemplateTracker()
        # The ground-truth target frames show the object everywhere: followed (IoU > 0.5) on every frame.
        tracked = tracker.track(np.stack(list(center.frames())), center.frame(ref), gt_masks[ref])
        for t, (got, want) in enumerate(zip(tracked, gt_masks)):
            assert got is not None, (case.case_id, t)
            assert metrics.iou(got, want) > 0.5, (case.case_id, t)
        # The input view while it looks away holds no object: lost, not a guess.
        away = [t for t in range(case.n_frames) if vis[t] == 0]
        assert away
        lost = tracker.track(np.stack([view0.frame(t) for t in away]), center.frame(ref), gt_masks[ref])
        assert all(m is None for m in lost), case.case_id


@pytest.mark.slow
def test_tracker_is_deterministic_and_rejects_an_empty_reference(dataset_dir):
    case = Dataset(dataset_dir).cases()[0]
    frames = np.stack(list(case.view("center").frames()))
    ref_mask = case.view("center").mask(0) > 0
    a = TemplateTracker().track(frames, frames[0], ref_mask)
    b = TemplateTracker().track(frames, frames[0], ref_mask)
    assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="empty"):
        TemplateTracker().track(frames, frames[0], np.zeros_like(ref_mask))


def test_tracker_places_a_shifted_object_exactly_on_synthetic_frames():
    """A textured patch moved by known integer offsets over a noise background is found at exactly that place;
    a frame without it is lost."""
    rng = np.random.default_rng(0)
    background = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)
    patch = rng.integers(0, 256, (16, 20, 3), dtype=np.uint8)
    offsets = [(10, 12), (30, 50), (60, 90)]
    frames, masks = [], []
    for y, x in offsets:
        frame, mask = background.copy(), np.zeros((96, 128), bool)
        frame[y : y + 16, x : x + 20], mask[y : y + 16, x : x + 20] = patch, True
        frames.append(frame)
        masks.append(mask)
    tracked = TemplateTracker().track(np.stack([*frames, background]), frames[0], masks[0])
    assert all(np.array_equal(got, want) for got, want in zip(tracked[:3], masks))
    assert tracked[3] is None
