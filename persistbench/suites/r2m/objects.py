"""R2M-Bench's object family as upstream defines it (``src/metrics/object_identity.py`` at 88e0cd9): pure parts.

For a pair of frames (a, b): objects are mined on frame a (open-vocabulary boxes for a fixed list of
concepts, non-maximum suppression, one box-prompted mask each); each object's concept is detected again
on frame b, independently; every candidate is scored against the anchor by appearance (cosine of
DINOv2 embeddings of the masked crops, mapped to [0, 1]) and semantics (the detector's confidence,
averaged with CLIP's image-text similarity of the candidate to the concept when CLIP is used); the best
candidate is a match when its weighted score reaches the threshold. ``object_appearance_persistence``
and ``object_semantic_persistence`` are the means over the anchors of the matched scores, 0 for an
anchor without a match (and 0 when frame a has no object).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

DEFAULT_CONCEPTS = (
    "object . furniture . building . vehicle . plant . person . animal . sign . door . window . chair . table . "
    "sofa . bed . cabinet . lamp . screen . picture . shelf . tree . road . wall . floor ."
)  # upstream's DEFAULT_TEXT_PROMPT: a list of generic words, not upstream's prose


@dataclass(frozen=True)
class SceneObject:
    """An object found on a frame: its pixel box ``(x0, y0, x1, y1)`` (integers, inclusive), phrase and concept,
    the detector's score, the mask's share of the image, and its embeddings (L2-normalised; ``clip`` None
    without CLIP)."""

    box: tuple[int, int, int, int]
    phrase: str
    concept: str
    box_score: float
    area_ratio: float
    feature: np.ndarray
    clip: np.ndarray | None


def clean_concept(text: str) -> str:
    """A detector phrase as a compact concept: lower case, parenthesised parts and characters other than
    ``a-z0-9 /_-`` removed, spaces collapsed, outer spaces and full stops stripped; ``object`` if empty."""
    text = re.sub(r"\([^)]*\)", " ", text.lower())
    text = re.sub(r"[^a-z0-9 /_-]+", " ", text)
    return re.sub(r"\s+", " ", text).strip(" .") or "object"


def cxcywh_to_xyxy(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    """``(N, 4)`` float32 pixel boxes ``(x0, y0, x1, y1)`` of ``(cx, cy, w, h)`` image fractions, x clamped to
    ``[0, width - 1]`` and y to ``[0, height - 1]``."""
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    half_w, half_h = np.float32(0.5) * b[:, 2], np.float32(0.5) * b[:, 3]
    out = np.stack(
        [
            (b[:, 0] - half_w) * width,
            (b[:, 1] - half_h) * height,
            (b[:, 0] + half_w) * width,
            (b[:, 1] + half_h) * height,
        ],
        axis=1,
    ).astype(np.float32)
    out[:, 0::2] = np.clip(out[:, 0::2], 0, width - 1)
    out[:, 1::2] = np.clip(out[:, 1::2], 0, height - 1)
    return out


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices of ``boxes`` (``(N, 4)`` ``x0, y0, x1, y1``) kept by greedy non-maximum suppression, by decreasing
    score (ties in index order): a box goes when its IoU with a kept box exceeds ``iou_threshold`` (torchvision's
    ``nms``)."""
    b = np.asarray(boxes, np.float32)
    order = np.argsort(-np.asarray(scores, np.float32), kind="stable")
    areas = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    suppressed = np.zeros(len(b), bool)
    keep = []
    for i in order:
        if suppressed[i]:
            continue
        keep.append(i)
        w = np.clip(np.minimum(b[i, 2], b[:, 2]) - np.maximum(b[i, 0], b[:, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[:, 3]) - np.maximum(b[i, 1], b[:, 1]), 0, None)
        inter = w * h
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return np.asarray(keep, np.int64)


def pixel_box(box: np.ndarray, width: int, height: int) -> tuple[int, int, int, int] | None:
    """A float box rounded to whole pixels (Python's ``round``) and clamped into the image; None when empty."""
    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(width - 1, x1), min(height - 1, y1)
    return None if x1 <= x0 or y1 <= y0 else (x0, y0, x1, y1)


def masked_crop(image: np.ndarray, mask: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The box's pixels of ``image`` (``(H, W, 3)`` uint8), white (255) outside ``mask`` when the mask covers any
    of them."""
    x0, y0, x1, y1 = box
    crop = image[y0 : y1 + 1, x0 : x1 + 1].copy()
    inside = mask[y0 : y1 + 1, x0 : x1 + 1]
    if inside.any():
        crop[~inside] = 255
    return crop


def ranked(objects: list[SceneObject], keep: int) -> list[SceneObject]:
    """``objects`` by decreasing ``box_score * max(area_ratio, 1e-6)`` (stable), the first ``keep`` (all if 0)."""
    out = sorted(objects, key=lambda o: o.box_score * max(o.area_ratio, 1e-6), reverse=True)
    return out[:keep] if keep > 0 else out


def _unit(x: float) -> float:
    return float(max(0.0, min(1.0, x)))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity in float32, as torch's ``cosine_similarity`` of two embeddings."""
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    norm = max(float(np.linalg.norm(a)) * float(np.linalg.norm(b)), 1e-8)
    return float(np.dot(a, b)) / norm


def persistence(
    anchors: list[SceneObject],
    candidates: list[list[SceneObject]],
    concept_text: list[np.ndarray | None],
    appearance_weight: float,
    semantic_weight: float,
    match_threshold: float,
) -> tuple[float, float]:
    """``(appearance persistence, semantic persistence)`` of a pair, each rounded to 6 decimals: ``candidates[i]``
    are anchor ``i``'s concept's detections on frame b, ``concept_text[i]`` its concept's CLIP text embedding
    (None without CLIP: the semantic score is then the detector's confidence)."""
    if not anchors:
        return 0.0, 0.0
    weight = max(appearance_weight + semantic_weight, 1e-8)
    appearance, semantic = [], []
    for anchor, found, text in zip(anchors, candidates, concept_text):
        best, best_score = None, -float("inf")
        for cand in found:
            app = _unit((_cosine(anchor.feature, cand.feature) + 1.0) * 0.5)
            sem = _unit(cand.box_score)
            if text is not None and cand.clip is not None:
                sem = 0.5 * sem + 0.5 * _unit((_cosine(cand.clip, text) + 1.0) * 0.5)
            score = (appearance_weight * app + semantic_weight * sem) / weight
            if score > best_score:
                best, best_score = (app, sem), score
        matched = best is not None and best_score >= match_threshold
        appearance.append(round(best[0], 6) if matched else 0.0)
        semantic.append(round(best[1], 6) if matched else 0.0)
    return round(float(np.mean(appearance)), 6), round(float(np.mean(semantic)), 6)
