"""The metric registry: one :class:`MetricSpec` per metric, the single place that knows a metric.

A spec says what the metric is called, its family, whether higher is better, the range its values
take, what it needs (a ground-truth mask, a frame pair, weights, an optional extra), its function
and the protocol section its parameters come from. Parameters live only in the protocol file
(``persistbench/data/protocols/*.json``): a function gets that section as keyword arguments.

Three kinds, each a keyword-only spec class:

* ``frame`` (:class:`FrameMetric`): ``fn(batch: FrameBatch, params) -> list[float]``, one value per predicted frame
  against the ground truth (PersistBench);
* ``pair`` (:class:`PairMetric`): ``fn(video: PairVideo, pairs, params) -> list[float]``, one value per ``(a, b)`` pair
  of frames of one generated video (R2M-Bench), with per-frame work shared by the pairs;
* ``tracked`` (:class:`TrackedMetric`): ``fn(case: paper_metrics.Tracked, params) -> list[float]``, one value per predicted
  frame of a case whose object was matched, tracked and judged by model backends (PersistBench
  ``paper-v3``).

CLI choices, report ordering and the demo table come from :data:`METRICS`. Adding a metric: a pure
function (``metrics/frame.py`` or ``metrics/pair.py``), a spec here, its parameters in the protocol,
a test against a reference implementation; see docs/architecture.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from persistbench.metrics import frame as metrics
from persistbench.metrics import pair as pair_metrics
from persistbench.metrics import paper as paper_metrics
from persistbench.metrics.pair_video import PairVideo


@dataclass(frozen=True, kw_only=True)
class MetricSpec:
    """One metric: its name, family, direction, value range, function and what it needs (keyword-only; one of the
    three kinds below)."""

    kind: ClassVar[str]
    name: str
    family: str
    higher_is_better: bool
    value_range: tuple[float, float]
    function: Callable
    params: str | None = None  # the protocol section holding the parameters
    needs: frozenset[str] = frozenset()  # "gt_mask", "pred_mask", "pair", "weights", "extra:<x>", "backend:<name>"
    rate: bool = False  # a 0/1 value per frame: intervals are Wilson's
    backend_keys: tuple[str, ...] = ()  # the keys of its protocol section that name model backends

    def backends(self, params: dict) -> list[str]:
        """The model backends (:data:`persistbench.backends.BACKENDS`) computing it under ``params`` loads (a key
        set to null names none)."""
        return [params[k] for k in self.backend_keys if params[k] is not None]

    @property
    def optional_backends(self) -> tuple[str, ...]:
        """The backends it always needs (``needs`` ``backend:<name>``): where one cannot run, the metric is
        recorded unavailable with the reason and the rest is scored."""
        return tuple(sorted(n.removeprefix("backend:") for n in self.needs if n.startswith("backend:")))


@dataclass(frozen=True, kw_only=True)
class FrameMetric(MetricSpec):
    """``function(batch: FrameBatch, params) -> list[float]``: one value per predicted frame against the truth."""

    kind: ClassVar[str] = "frame"


@dataclass(frozen=True, kw_only=True)
class PairMetric(MetricSpec):
    """``function(video: PairVideo, pairs, params) -> list[float]``: one value per ``(a, b)`` pair of one video."""

    kind: ClassVar[str] = "pair"


@dataclass(frozen=True, kw_only=True)
class TrackedMetric(MetricSpec):
    """``function(case: Tracked, params) -> list[float]``: one value per frame of a matched, tracked case."""

    kind: ClassVar[str] = "tracked"


@dataclass
class FrameBatch:
    """What frame metrics get for one case: ``N`` predicted frames and their ground truth at the evaluation size."""

    preds: np.ndarray  # (N, H, W, 3) uint8
    refs: np.ndarray  # (N, H, W, 3) uint8
    ref_masks: np.ndarray  # (N, H, W) bool
    pred_masks: list[np.ndarray]  # N (H, W) bool: the model's or the tracker's (empty where lost)
    scale: float  # sqrt of the mean non-empty reference mask area, pixels
    backends: object = None  # a backends.BackendOptions: how the metrics' backends are loaded
    maps: dict = field(default_factory=dict)  # per-frame maps a metric made, kept for the same frames under other masks

    def with_masks(self, ref_masks: np.ndarray) -> FrameBatch:
        """The same frames under other reference masks, sharing the maps computed so far (WROP's two regions)."""
        return replace(self, ref_masks=ref_masks)


# ---------------------------------------------------------------- frame metrics (PersistBench)


def _psnr(b: FrameBatch, p: dict) -> list[float]:
    return [metrics.masked_psnr(x, y, m, p["cap_db"]) for x, y, m in zip(b.preds, b.refs, b.ref_masks)]


def _ssim(b: FrameBatch, p: dict) -> list[float]:
    kw = {
        "sigma": p["sigma"],
        "window": p["window"],
        "k1": p["k1"],
        "k2": p["k2"],
        "sample_covariance": p["covariance"] == "sample",
    }
    return [metrics.masked_ssim(x, y, m, **kw) for x, y, m in zip(b.preds, b.refs, b.ref_masks)]


def _lpips(b: FrameBatch, p: dict) -> list[float]:
    from persistbench.backends import load

    network = load("lpips", b.backends)
    if "lpips" not in b.maps:  # the network runs once per frame whatever the masks
        b.maps["lpips"] = network.maps(b.preds, b.refs)
    return list(network.reduce(b.maps["lpips"], b.ref_masks))


def _iou(b: FrameBatch, p: dict) -> list[float]:
    return [metrics.iou(x, y) for x, y in zip(b.pred_masks, b.ref_masks)]


def _presence(b: FrameBatch, p: dict) -> list[float]:
    return [metrics.presence(x) for x in b.pred_masks]


def _continuity(b: FrameBatch, p: dict) -> list[float]:
    return [metrics.continuity(x, y, b.scale) for x, y in zip(b.pred_masks, b.ref_masks)]


# ---------------------------------------------------------------- pair metrics (R2M-Bench)


def _pair_psnr(v: PairVideo, pairs, p: dict) -> list[float]:
    return [pair_metrics.psnr(v.frames[a], v.frames[b], p["cap_db"]) for a, b in pairs]


def _pair_ssim(v: PairVideo, pairs, p: dict) -> list[float]:
    return v.ssim_values(pairs, p["window"], p["data_range"], p["k1"], p["k2"])


def _pair_lpips(v: PairVideo, pairs, p: dict) -> list[float]:
    out: list[float] = []
    for start in range(0, len(pairs), 16):  # bounded batches: a 480p pair batch of 16 is ~60 MB
        chunk = pairs[start : start + 16]
        a = np.stack([v.frames[i] for i, _ in chunk])
        b = np.stack([v.frames[j] for _, j in chunk])
        out += [float(x) for x in v.backend("lpips")(a, b)]
    return out


def _sift(v: PairVideo, pairs, p: dict) -> list[tuple[float, float]]:
    """Both SIFT ratios of each pair, matched once for the two metrics that report them."""
    return v.sift_ratios(pairs, p["ratio"], p["ransac_px"], p["confidence"])


def _sift_match(v: PairVideo, pairs, p: dict) -> list[float]:
    return [m for m, _ in _sift(v, pairs, p)]


def _sift_inlier(v: PairVideo, pairs, p: dict) -> list[float]:
    return [i for _, i in _sift(v, pairs, p)]


# ---------------------------------------------------------------- tracked metrics (PersistBench paper-v3)


def _permanence(t: paper_metrics.Tracked, p: dict) -> list[float]:
    return paper_metrics.object_permanence(t)


def _motion(t: paper_metrics.Tracked, p: dict) -> list[float]:
    return paper_metrics.motion_continuity(t.ref_masks, t.pred_masks, t.start)


def _appearance(t: paper_metrics.Tracked, p: dict) -> list[float]:
    return list(t.similarity)


def _descriptor_cosine(v: PairVideo, pairs, backend: str, size, preprocess: str, crop=None) -> list[float]:
    emb = v.embeddings([i for pair in pairs for i in pair], backend, size, preprocess, crop)
    return [pair_metrics.cosine(emb[a], emb[b]) for a, b in pairs]


def _scene_identity(v: PairVideo, pairs, p: dict) -> list[float]:
    return _descriptor_cosine(v, pairs, p["backend"], p["short_side"], p["preprocess"], p["crop"])


def _place(v: PairVideo, pairs, p: dict) -> list[float]:
    return _descriptor_cosine(v, pairs, p["backend"], p["size"], p["preprocess"])


def _lightglue(v: PairVideo, pairs, p: dict) -> list[tuple[float, float]]:
    """Both LightGlue ratios of each pair, matched once for the two metrics that report them."""
    found = v.matches(pairs, p["backend"], p["long_side"], p["max_keypoints"], p["keypoint_threshold"], p["threshold"])
    return [
        pair_metrics.keypoint_ratios(
            m.keypoints_a, m.keypoints_b, m.points_a, m.points_b, p["ransac_px"], p["confidence"]
        )
        for m in found
    ]


def _lightglue_match(v: PairVideo, pairs, p: dict) -> list[float]:
    return [m for m, _ in _lightglue(v, pairs, p)]


def _lightglue_inlier(v: PairVideo, pairs, p: dict) -> list[float]:
    return [i for _, i in _lightglue(v, pairs, p)]


def _object(v: PairVideo, pairs, p: dict) -> list[float | None]:
    return v.object_scores(pairs, p)


def _object_appearance(v: PairVideo, pairs, p: dict) -> list[float]:
    return [a for a, _ in v.object_persistence(pairs, p)]


def _object_semantic(v: PairVideo, pairs, p: dict) -> list[float]:
    return [s for _, s in v.object_persistence(pairs, p)]


def _state(v: PairVideo, pairs, p: dict) -> list[float | None]:
    return v.state_scores(pairs, p)


def _model_pair(*, extras: tuple[str, ...], **spec) -> PairMetric:
    """An R2M-Bench pair metric computed by model backends (``extras``: the optional extras they need);
    higher is better."""
    return PairMetric(
        higher_is_better=True, needs=frozenset({"pair", "weights", *(f"extra:{e}" for e in extras)}), **spec
    )


_MASK = frozenset({"gt_mask"})
_PAIR = frozenset({"pair"})
METRICS: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        FrameMetric(
            name="psnr",
            family="appearance",
            higher_is_better=True,
            value_range=(0.0, 100.0),
            function=_psnr,
            params="psnr",
            needs=_MASK,
        ),
        FrameMetric(
            name="ssim",
            family="appearance",
            higher_is_better=True,
            value_range=(-1.0, 1.0),
            function=_ssim,
            params="ssim",
            needs=_MASK,
        ),
        FrameMetric(
            name="lpips",
            family="appearance",
            higher_is_better=False,
            value_range=(0.0, math.inf),
            function=_lpips,
            params="lpips",
            needs=frozenset({"gt_mask", "weights", "backend:lpips"}),
        ),
        FrameMetric(
            name="iou",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_iou,
            needs=frozenset({"gt_mask", "pred_mask"}),
        ),
        FrameMetric(
            name="presence",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_presence,
            needs=frozenset({"pred_mask"}),
            rate=True,
        ),
        FrameMetric(
            name="continuity",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_continuity,
            params="continuity",
            needs=frozenset({"gt_mask", "pred_mask"}),
        ),
        PairMetric(
            name="frame_psnr",
            family="appearance",
            higher_is_better=True,
            value_range=(0.0, 100.0),
            function=_pair_psnr,
            params="frame_psnr",
            needs=_PAIR,
        ),
        PairMetric(
            name="frame_ssim",
            family="appearance",
            higher_is_better=True,
            value_range=(-1.0, 1.0),
            function=_pair_ssim,
            params="frame_ssim",
            needs=_PAIR,
        ),
        PairMetric(
            name="frame_lpips",
            family="appearance",
            higher_is_better=False,
            value_range=(0.0, math.inf),
            function=_pair_lpips,
            params="frame_lpips",
            needs=frozenset({"pair", "weights", "backend:lpips"}),
        ),
        PairMetric(
            name="sift_match_ratio",
            family="geometric",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_sift_match,
            params="sift",
            needs=_PAIR,
        ),
        PairMetric(
            name="sift_inlier_ratio",
            family="geometric",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_sift_inlier,
            params="sift",
            needs=_PAIR,
        ),
        _model_pair(
            name="lightglue_match_ratio",
            family="geometric",
            value_range=(0.0, 1.0),
            function=_lightglue_match,
            params="lightglue",
            backend_keys=("backend",),
            extras=("vision",),
        ),
        _model_pair(
            name="lightglue_inlier_ratio",
            family="geometric",
            value_range=(0.0, 1.0),
            function=_lightglue_inlier,
            params="lightglue",
            backend_keys=("backend",),
            extras=("vision",),
        ),
        _model_pair(
            name="scene_identity",
            family="scene_identity",
            value_range=(-1.0, 1.0),
            function=_scene_identity,
            params="scene_identity",
            backend_keys=("backend",),
            extras=("vision",),
        ),
        _model_pair(
            name="scene_identity_boq",
            family="scene_identity",
            value_range=(-1.0, 1.0),
            function=_place,
            params="boq",
            backend_keys=("backend",),
            extras=("vision",),
        ),
        _model_pair(
            name="scene_identity_mutualvpr",
            family="scene_identity",
            value_range=(-1.0, 1.0),
            function=_place,
            params="mutualvpr",
            backend_keys=("backend",),
            extras=("vision",),
        ),
        _model_pair(
            name="object_consistency",
            family="object",
            value_range=(-1.0, 1.0),
            function=_object,
            params="object_consistency",
            backend_keys=("segmenter", "features"),
            extras=("vision",),
        ),
        *(
            _model_pair(
                name=name,
                family="object",
                value_range=(0.0, 1.0),
                function=function,
                params="object_persistence",
                backend_keys=("detector", "segmenter", "features", "clip"),
                extras=("vision",),
            )
            for name, function in (
                ("object_appearance_persistence", _object_appearance),
                ("object_semantic_persistence", _object_semantic),
            )
        ),
        _model_pair(
            name="persistent_state",
            family="persistent_state",
            value_range=(1.0, 5.0),
            function=_state,
            params="persistent_state",
            backend_keys=("backend",),
            extras=("judge",),
        ),
        TrackedMetric(
            name="object_permanence",
            family="paper",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_permanence,
            params="object_permanence",
            needs=frozenset({"gt_mask", "weights", "extra:vision", "extra:judge"}),
            rate=True,
        ),
        TrackedMetric(
            name="motion_continuity",
            family="paper",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_motion,
            needs=frozenset({"gt_mask", "weights"}),
        ),
        TrackedMetric(
            name="appearance_preservation",
            family="paper",
            higher_is_better=True,
            value_range=(-1.0, 1.0),
            function=_appearance,
            params="appearance_preservation",
            needs=frozenset({"gt_mask", "weights", "extra:vision"}),
        ),
    )
}


def order(names: Sequence[str]) -> list[str]:
    """``names`` in registry order (the order of tables and charts); unknown names last, sorted."""
    known = list(METRICS)
    return sorted(names, key=lambda m: (known.index(m) if m in known else len(known), m))


def families(names: Sequence[str]) -> dict[str, list[str]]:
    """Family -> its metrics among ``names``, both in registry order."""
    out: dict[str, list[str]] = {}
    for m in order(names):
        out.setdefault(METRICS[m].family, []).append(m)
    return out
