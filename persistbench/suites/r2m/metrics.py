"""R2M-Bench's pair metrics: one value per ``(a, b)`` pair of frames of one generated video, registered in
:data:`persistbench.metrics.registry.METRICS` when this module is imported (by the suite's scoring).

Each function takes the video's :class:`~persistbench.suites.r2m.pair_video.PairVideo` (per-frame work
shared by the pairs), the pairs and its protocol section; the arithmetic is in
:mod:`persistbench.metrics.pair` and :mod:`persistbench.suites.r2m.objects`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from persistbench.metrics import pair as pair_metrics
from persistbench.metrics.registry import MetricSpec, register
from persistbench.suites.r2m.pair_video import PairVideo


@dataclass(frozen=True, kw_only=True)
class PairMetric(MetricSpec):
    """``function(video: PairVideo, pairs, params) -> list[float]``: one value per ``(a, b)`` pair of one video."""

    kind: ClassVar[str] = "pair"


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


def _model_pair(**spec) -> PairMetric:
    """A pair metric computed by the model backends its protocol section names; higher is better."""
    return PairMetric(higher_is_better=True, **spec)


SPECS: tuple[PairMetric, ...] = (
    PairMetric(
        name="frame_psnr",
        family="appearance",
        higher_is_better=True,
        value_range=(0.0, 100.0),
        function=_pair_psnr,
        params="frame_psnr",
    ),
    PairMetric(
        name="frame_ssim",
        family="appearance",
        higher_is_better=True,
        value_range=(-1.0, 1.0),
        function=_pair_ssim,
        params="frame_ssim",
    ),
    PairMetric(
        name="frame_lpips",
        family="appearance",
        higher_is_better=False,
        value_range=(0.0, math.inf),
        function=_pair_lpips,
        params="frame_lpips",
        backend="lpips",
    ),
    PairMetric(
        name="sift_match_ratio",
        family="geometric",
        higher_is_better=True,
        value_range=(0.0, 1.0),
        function=_sift_match,
        params="sift",
    ),
    PairMetric(
        name="sift_inlier_ratio",
        family="geometric",
        higher_is_better=True,
        value_range=(0.0, 1.0),
        function=_sift_inlier,
        params="sift",
    ),
    _model_pair(
        name="lightglue_match_ratio",
        family="geometric",
        value_range=(0.0, 1.0),
        function=_lightglue_match,
        params="lightglue",
        backend_keys=("backend",),
    ),
    _model_pair(
        name="lightglue_inlier_ratio",
        family="geometric",
        value_range=(0.0, 1.0),
        function=_lightglue_inlier,
        params="lightglue",
        backend_keys=("backend",),
    ),
    _model_pair(
        name="scene_identity",
        family="scene_identity",
        value_range=(-1.0, 1.0),
        function=_scene_identity,
        params="scene_identity",
        backend_keys=("backend",),
    ),
    _model_pair(
        name="scene_identity_boq",
        family="scene_identity",
        value_range=(-1.0, 1.0),
        function=_place,
        params="boq",
        backend_keys=("backend",),
    ),
    _model_pair(
        name="scene_identity_mutualvpr",
        family="scene_identity",
        value_range=(-1.0, 1.0),
        function=_place,
        params="mutualvpr",
        backend_keys=("backend",),
    ),
    _model_pair(
        name="object_consistency",
        family="object",
        value_range=(-1.0, 1.0),
        function=_object,
        params="object_consistency",
        backend_keys=("segmenter", "features"),
    ),
    *(
        _model_pair(
            name=name,
            family="object",
            value_range=(0.0, 1.0),
            function=function,
            params="object_persistence",
            backend_keys=("detector", "segmenter", "features", "clip"),
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
    ),
)
register(*SPECS)
