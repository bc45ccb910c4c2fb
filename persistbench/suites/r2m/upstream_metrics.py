"""Our R2M-Bench metrics as upstream names and rounds them (``AMAP-ML/R2MBench`` at commit 88e0cd9).

Upstream's evaluators round each pair value before storing it (``compute_psnr_ssim``: PSNR to 4
decimals, SSIM to 6; ``KeypointMatcher``: the match ratio to 4; the others to 6) and each video's
revisit, baseline and short means to 6 (``eval_gpu_metrics._aggregate``); its persistent-state
script stores the judge's integer scores and its summary averages them unrounded. Under a protocol
whose ``rounding`` is :data:`ROUNDING`, our values and means are rounded the same way, so that our
NMR is upstream's to the last digit; our result files name the metrics by :data:`UPSTREAM`'s keys.
"""

from __future__ import annotations

from dataclasses import dataclass

ROUNDING = "upstream-88e0cd9"


@dataclass(frozen=True)
class UpstreamMetric:
    """How upstream stores one of our metrics: its key, the result family folder, and the decimals of a pair
    value and of a video's mean (None: unrounded)."""

    key: str
    family: str
    value_digits: int | None
    mean_digits: int | None


# our metric -> upstream's; metrics not here (SIFT, our object_consistency) have no upstream counterpart
UPSTREAM: dict[str, UpstreamMetric] = {
    "frame_psnr": UpstreamMetric("psnr", "appearance", 4, 6),
    "frame_ssim": UpstreamMetric("ssim", "appearance", 6, 6),
    "frame_lpips": UpstreamMetric("lpips", "appearance", 6, 6),
    "scene_identity": UpstreamMetric("dino_similarity", "scene_identity", 6, 6),
    "scene_identity_boq": UpstreamMetric("boq_similarity", "scene_identity", 6, 6),
    "scene_identity_mutualvpr": UpstreamMetric("mvpr_similarity", "scene_identity", 6, 6),
    "lightglue_match_ratio": UpstreamMetric("match_ratio", "geometric", 4, 6),
    "lightglue_inlier_ratio": UpstreamMetric("ransac_inlier_ratio", "geometric", 6, 6),
    "object_appearance_persistence": UpstreamMetric("object_appearance_persistence", "object", 6, 6),
    "object_semantic_persistence": UpstreamMetric("object_semantic_persistence", "object", 6, 6),
    "persistent_state": UpstreamMetric("state_score", "persistent_state", None, None),
}
OURS = {u.key: m for m, u in UPSTREAM.items()}  # upstream's key -> our metric


def rounded(value: float | None, digits: int | None) -> float | None:
    """``value`` rounded as upstream rounds it (Python's ``round``), None and ``digits`` None left as they are."""
    return value if value is None or digits is None else round(value, digits)


def value_digits(metric: str, rounding: str | None) -> int | None:
    """The decimals a pair value of ``metric`` keeps under a protocol's ``rounding`` (None: all)."""
    return UPSTREAM[metric].value_digits if rounding == ROUNDING and metric in UPSTREAM else None


def mean_digits(metric: str, rounding: str | None) -> int | None:
    """The decimals a video's mean of ``metric`` keeps under a protocol's ``rounding`` (None: all)."""
    return UPSTREAM[metric].mean_digits if rounding == ROUNDING and metric in UPSTREAM else None
