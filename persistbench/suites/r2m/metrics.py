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


def _pair(name: str, family: str, value_range: tuple[float, float], function, params: str, **spec) -> PairMetric:
    """A pair metric whose parameters are the protocol section ``params``; higher is better unless ``spec`` says."""
    spec.setdefault("higher_is_better", True)
    return PairMetric(name=name, family=family, value_range=value_range, function=function, params=params, **spec)


UNIT, COSINE = (0.0, 1.0), (-1.0, 1.0)
NAMED = {"backend_keys": ("backend",)}  # the protocol section's "backend" names the model backend
OBJECTS = {"backend_keys": ("detector", "segmenter", "features", "clip")}
SPECS: tuple[PairMetric, ...] = (
    _pair("frame_psnr", "appearance", (0.0, 100.0), _pair_psnr, "frame_psnr"),
    _pair("frame_ssim", "appearance", COSINE, _pair_ssim, "frame_ssim"),
    _pair(
        "frame_lpips",
        "appearance",
        (0.0, math.inf),
        _pair_lpips,
        "frame_lpips",
        higher_is_better=False,
        backend="lpips",
    ),
    _pair("sift_match_ratio", "geometric", UNIT, _sift_match, "sift"),
    _pair("sift_inlier_ratio", "geometric", UNIT, _sift_inlier, "sift"),
    _pair("lightglue_match_ratio", "geometric", UNIT, _lightglue_match, "lightglue", **NAMED),
    _pair("lightglue_inlier_ratio", "geometric", UNIT, _lightglue_inlier, "lightglue", **NAMED),
    _pair("scene_identity", "scene_identity", COSINE, _scene_identity, "scene_identity", **NAMED),
    _pair("scene_identity_boq", "scene_identity", COSINE, _place, "boq", **NAMED),
    _pair("scene_identity_mutualvpr", "scene_identity", COSINE, _place, "mutualvpr", **NAMED),
    _pair(
        "object_consistency", "object", COSINE, _object, "object_consistency", backend_keys=("segmenter", "features")
    ),
    _pair("object_appearance_persistence", "object", UNIT, _object_appearance, "object_persistence", **OBJECTS),
    _pair("object_semantic_persistence", "object", UNIT, _object_semantic, "object_persistence", **OBJECTS),
    _pair("persistent_state", "persistent_state", (1.0, 5.0), _state, "persistent_state", **NAMED),
)
register(*SPECS)
