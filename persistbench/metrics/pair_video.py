"""One generated video's frames and what its pair metrics share: per-frame features, per-pair matches.

R2M-Bench's metrics compare pairs of frames of one video; a frame takes part in many pairs, so what
a metric needs of one frame (SIFT features, a DINOv2 descriptor, DINOv2 patch features) is computed
once and kept here, and the model backends run batched over the frames or pairs a call needs.
Frames are ``(H, W, 3)`` uint8 RGB at the video's resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from persistbench.metrics import pair as pair_metrics


def short_side_size(height: int, width: int, short: int) -> tuple[int, int]:
    """``(h, w)`` with the shorter side ``short`` pixels and the aspect kept (rounded)."""
    scale = short / min(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def torchvision_short_side(height: int, width: int, short: int) -> tuple[int, int]:
    """``(h, w)`` that torchvision's ``Resize(short)`` gives a PIL image: the shorter side ``short``, the longer
    ``int(short * longer / shorter)`` (truncated)."""
    if width <= height:
        return int(short * height / width), short
    return short, int(short * width / height)


def centre_crop(images: np.ndarray, size: int) -> np.ndarray:
    """``(N, size, size, ...)``: torchvision's ``CenterCrop(size)`` of ``(N, h, w, ...)`` images (offsets
    ``int(round((h - size) / 2))``; never larger than the image)."""
    h, w = images.shape[1:3]
    top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
    return images[:, top : top + size, left : left + size]


@dataclass
class PairVideo:
    """The decoded frames of one generated video and their caches, shared by all pairs and metrics."""

    frames: dict[int, np.ndarray]  # frame number -> (H, W, 3) uint8: the frames the pairs use
    backends: object = None  # a backends.BackendOptions: how the metrics' backends are loaded
    _sift: dict = field(default_factory=dict)
    _sift_pairs: dict = field(default_factory=dict)  # (a, b, params) -> both SIFT ratios
    _embeddings: dict = field(default_factory=dict)
    _patches: dict = field(default_factory=dict)
    _matches: dict = field(default_factory=dict)
    _objects: dict = field(default_factory=dict)
    judgments: list = field(default_factory=list)  # every judge Answer or JudgmentFailed, in order asked

    def backend(self, name: str):
        """The loaded backend ``name`` (once per process and options)."""
        from persistbench.backends import load

        return load(name, self.backends)

    def _resized(
        self, indices: list[int], size, preprocess: str = "pil-bilinear", crop: int | None = None
    ) -> np.ndarray:
        """``(N, h, w, 3)`` float32 [0, 1]: the frames resized to a shorter side of ``size`` pixels (an int) or to
        ``size`` = ``[h, w]``. ``preprocess`` ``pil-bilinear``: PIL bilinear, the shorter side's partner rounded;
        ``torchvision-bicubic``: torchvision's ``Resize(size, BICUBIC)`` on PIL images (the partner truncated),
        then ``CenterCrop(crop)`` when ``crop`` is given (upstream's DINOv2, BoQ and MutualVPR transforms)."""
        from persistbench.io.images import resize_images

        stack = np.stack([self.frames[i] for i in indices])
        tv = preprocess == "torchvision-bicubic"
        if isinstance(size, int):
            hw = (torchvision_short_side if tv else short_side_size)(*stack.shape[1:3], size)
        else:
            hw = tuple(size)
        out = resize_images(stack, hw, bicubic=tv)
        if crop is not None:
            out = centre_crop(out, crop)
        return out.astype(np.float32) / 255.0

    def sift_ratios(self, a: int, b: int, ratio: float, ransac_px: float, confidence: float) -> tuple[float, float]:
        """Both SIFT ratios of the pair ``(a, b)`` (match, inlier), matched once for the two metrics."""
        key = (a, b, ratio, ransac_px, confidence)
        if key not in self._sift_pairs:
            self._sift_pairs[key] = pair_metrics.sift_ratios(
                self.sift_frame(a), self.sift_frame(b), ratio, ransac_px, confidence
            )
        return self._sift_pairs[key]

    def sift_frame(self, i: int) -> pair_metrics.SiftFrame:
        if i not in self._sift:
            self._sift[i] = pair_metrics.sift_frame(self.frames[i])
        return self._sift[i]

    def embeddings(
        self, indices: list[int], backend: str, size, preprocess: str = "pil-bilinear", crop: int | None = None
    ) -> dict[int, np.ndarray]:
        """Frame -> ``(D,)`` global descriptor (a ViT's class token, a place-recognition descriptor) of the
        frame resized to a shorter side of ``size`` pixels (an int) or to ``size`` = ``[h, w]`` (see
        :meth:`_resized` for ``preprocess`` and ``crop``)."""
        key = (size if isinstance(size, int) else tuple(size), preprocess, crop)
        missing = sorted({i for i in indices if (i, backend, key) not in self._embeddings})
        if missing:
            for i, e in zip(missing, self.backend(backend).embed(self._resized(missing, size, preprocess, crop))):
                self._embeddings[i, backend, key] = e
        return {i: self._embeddings[i, backend, key] for i in indices}

    def patch_features(self, indices: list[int], backend: str, short: int) -> dict[int, np.ndarray]:
        """Frame -> ``(gh, gw, C)`` patch features at a shorter side of ``short`` pixels."""
        missing = sorted({i for i in indices if (i, backend, short) not in self._patches})
        if missing:
            for i, f in zip(missing, self.backend(backend)(self._resized(missing, short))):
                self._patches[i, backend, short] = f
        return {i: self._patches[i, backend, short] for i in indices}

    def matches(
        self, pairs, backend: str, long_side: int, max_keypoints: int, keypoint_threshold: float, threshold: float
    ) -> list:
        """Each pair's :class:`~persistbench.backends.matcher.Matches` (the matcher's arguments), the new ones
        batched."""
        key = (backend, long_side, max_keypoints, keypoint_threshold, threshold)
        missing = sorted({(a, b) for a, b in pairs if (a, b, key) not in self._matches})
        if missing:
            found = self.backend(backend)([(self.frames[a], self.frames[b]) for a, b in missing], *key[1:])
            for pair, m in zip(missing, found):
                self._matches[(*pair, key)] = m
        return [self._matches[a, b, key] for a, b in pairs]

    def object_scores(self, pairs, p: dict) -> list[float | None]:
        """R2M ``object_consistency`` of each pair (see :func:`pair_metrics.object_score`): objects detected
        on frame a by segmenting under each point of a grid, followed to frame b, compared by features."""
        tracker = self.backend(p["segmenter"])
        key = tuple(sorted(p.items()))
        for a, b in pairs:
            if (a, b, key) in self._objects:  # a pair of several kinds is segmented once
                continue
            fa, fb = self.frames[a], self.frames[b]
            masks = tracker.follow_points([fa, fb], pair_metrics.point_grid(*fa.shape[:2], p["grid"]))
            kept = pair_metrics.detected(masks[:, 0], p["min_area"], p["max_area"], p["overlap"])
            feats = self.patch_features([a, b], p["features"], p["short_side"])
            self._objects[a, b, key] = pair_metrics.object_score(feats[a], feats[b], masks[kept, 0], masks[kept, 1])
        return [self._objects[a, b, key] for a, b in pairs]

    def state_scores(self, pairs, p: dict) -> list[float | None]:
        """R2M ``persistent_state`` of each pair: the judge's score in [1, 5] (None where it failed)."""
        from persistbench.backends.judge import JudgmentFailed, Request, prompt_template
        from persistbench.io.images import resize_images

        judge, prompt = self.backend("judge"), prompt_template(p["prompt"])
        h, w = next(iter(self.frames.values())).shape[:2]
        scale = min(1.0, p["max_side"] / max(h, w))
        size = (max(1, round(h * scale)), max(1, round(w * scale)))
        small = {i: resize_images(self.frames[i][None], size)[0] for i in {i for pair in pairs for i in pair}}
        reqs = [
            Request(prompt, (small[a], small[b]), p["temperature"], p["max_tokens"], p["enable_thinking"])
            for a, b in pairs
        ]
        answers = judge.ask_many(reqs, [parse_state] * len(reqs))
        self.judgments += answers
        return [None if isinstance(x, JudgmentFailed) else float(x.value) for x in answers]


def parse_state(obj: dict) -> int:
    """A persistent-state reply's ``score``: an integer in [1, 5] (a bool, a fraction or text is refused)."""
    from persistbench.backends.judge import BadReply

    score = obj.get("score")
    if (
        isinstance(score, bool)
        or not isinstance(score, (int, float))
        or not math.isfinite(score)
        or score != int(score)
    ):
        raise BadReply(f"score is {score!r}, not an integer")
    if not 1 <= score <= 5:
        raise BadReply(f"score {score} is outside [1, 5]")
    return int(score)
