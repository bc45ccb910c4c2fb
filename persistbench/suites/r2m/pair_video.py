"""One generated video's frames and what its pair metrics share: per-frame features, per-pair matches.

R2M-Bench's metrics compare pairs of frames of one video; a frame takes part in many pairs, so what
a metric needs of one frame (SIFT features, a DINOv2 descriptor, DINOv2 patch features) is computed
once and kept here, and the model backends run batched over the frames or pairs a call needs.
Frames are ``(H, W, 3)`` uint8 RGB at the video's resolution.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from persistbench.metrics import pair as pair_metrics

SSIM_CACHE_BYTES = 512 << 20  # the frames' SSIM shares kept at once (a 1080p frame's is about 200 MB)


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
    _grounded: dict = field(default_factory=dict)  # (a, b, params) -> upstream's object persistences
    _scene_objects: dict = field(default_factory=dict)  # (frame, concepts, keep, params) -> objects found
    judgments: list = field(default_factory=list)  # every judge Answer or JudgmentFailed, in order asked
    state_question: StateQuestion | None = None  # persistent_state's question (None: the protocol's shipped prompt)

    def backend(self, name: str):
        """The loaded backend ``name`` (once per process and options)."""
        from persistbench.backends import load

        return load(name, self.backends)

    def _resized(
        self, indices: list[int], size, preprocess: str = "pil-bilinear", crop: int | None = None
    ) -> np.ndarray:
        """``(N, h, w, 3)`` float32 [0, 1]: the frames ``indices`` as :func:`~persistbench.io.images.transformed`
        gives them."""
        from persistbench.io.images import transformed

        return transformed(np.stack([self.frames[i] for i in indices]), size, preprocess, crop)

    def ssim_values(self, pairs, window: int, data_range: float, k1: float, k2: float) -> list[float]:
        """SSIM of each pair (:func:`persistbench.metrics.pair.ssim`), each frame's share computed once while it is
        among the last :data:`SSIM_CACHE_BYTES` of them (the pairs visited in frame order)."""
        from collections import OrderedDict

        kept: OrderedDict[int, pair_metrics.SsimFrame] = OrderedDict()
        size = 0

        def frame(i: int) -> pair_metrics.SsimFrame:
            nonlocal size
            if i in kept:
                kept.move_to_end(i)
                return kept[i]
            f = kept[i] = pair_metrics.ssim_frame(self.frames[i], window)
            size += f.nbytes
            while size > SSIM_CACHE_BYTES and len(kept) > 2:
                size -= kept.popitem(last=False)[1].nbytes
            return f

        out = [0.0] * len(pairs)
        work = None
        for k in sorted(range(len(pairs)), key=lambda k: tuple(pairs[k])):
            a, b = pairs[k]
            fa, fb = frame(a), frame(b)
            if work is None or work[0].shape != fa.x.shape:
                work = [np.empty_like(fa.x) for _ in range(3)]
            out[k] = pair_metrics.ssim_of(fa, fb, window, data_range, k1, k2, work)
        return out

    def sift_ratios(self, pairs, ratio: float, ransac_px: float, confidence: float) -> list[tuple[float, float]]:
        """Both SIFT ratios (match, inlier) of each pair, matched once for the two metrics; the frames' features
        and the pairs' matches computed on as many threads as OpenCV may use in this process (OpenCV releases
        the GIL; each result is a function of its frames alone, so the threads change no number)."""
        import cv2

        params = (ratio, ransac_px, confidence)
        frames = sorted({i for p in pairs for i in p} - self._sift.keys())
        todo = list(dict.fromkeys((a, b) for a, b in pairs if (a, b, *params) not in self._sift_pairs))
        with ThreadPoolExecutor(max_workers=max(1, cv2.getNumThreads())) as pool:
            self._sift.update(zip(frames, pool.map(lambda i: pair_metrics.sift_frame(self.frames[i]), frames)))
            found = pool.map(lambda p: pair_metrics.sift_ratios(self._sift[p[0]], self._sift[p[1]], *params), todo)
            self._sift_pairs.update(((a, b, *params), r) for (a, b), r in zip(todo, found))
        return [self._sift_pairs[(a, b, *params)] for a, b in pairs]

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

    def object_persistence(self, pairs, p: dict) -> list[tuple[float, float]]:
        """Upstream's object family of each pair (:func:`persistbench.suites.r2m.objects.persistence`): ``(appearance,
        semantic)`` persistence, the objects of each frame found once per concept list."""
        from persistbench.suites.r2m import objects

        key = tuple(sorted(p.items()))
        texts: dict[str, np.ndarray | None] = {}
        for a, b in pairs:
            if (a, b, key) in self._grounded:
                continue
            anchors = self.scene_objects(a, p["text_prompt"], p["max_objects"], p)
            found = [self.scene_objects(b, f"{o.concept} .", p["max_candidates"], p) for o in anchors]
            for o in anchors:
                if o.concept not in texts:
                    texts[o.concept] = self.backend(p["clip"]).texts([o.concept])[0] if p["clip"] else None
            self._grounded[a, b, key] = objects.persistence(
                anchors,
                found,
                [texts[o.concept] for o in anchors],
                p["appearance_weight"],
                p["semantic_weight"],
                p["match_threshold"],
            )
        return [self._grounded[a, b, key] for a, b in pairs]

    def scene_objects(self, i: int, prompt: str, keep: int, p: dict) -> list:
        """The :class:`~persistbench.suites.r2m.objects.SceneObject` s of frame ``i`` for the concepts ``prompt``: boxes
        above the thresholds, suppressed, the first ``keep``, masked, embedded and ranked."""
        from persistbench.io.images import transformed
        from persistbench.suites.r2m import objects

        key = (i, prompt, keep, tuple(sorted(p.items())))
        if key in self._scene_objects:
            return self._scene_objects[key]
        frame = self.frames[i]
        h, w = frame.shape[:2]
        found = self.backend(p["detector"]).detect(
            frame, prompt, p["box_threshold"], p["text_threshold"], (p["detector_short_side"], p["detector_max_side"])
        )
        boxes = objects.cxcywh_to_xyxy(found.boxes, w, h)
        kept = objects.nms(boxes, found.scores, p["nms_iou"]) if len(boxes) else np.zeros(0, np.int64)
        kept = kept[:keep] if keep > 0 else kept
        masks, _ = self.backend(p["segmenter"])(frame, boxes[kept])
        parts = []
        for j, mask in zip(kept, masks):
            area = float(mask.sum()) / float(max(w * h, 1))
            box = objects.pixel_box(boxes[j], w, h)
            if area >= p["min_area_ratio"] and box is not None:
                parts.append(
                    (box, found.phrases[j], float(found.scores[j]), area, objects.masked_crop(frame, mask, box))
                )
        out = []
        if parts:
            size = p["feature_size"]
            crops = np.concatenate([transformed(c[None], size, "torchvision-bicubic", size) for *_, c in parts])
            feats = self.backend(p["features"]).embed(crops)
            feats /= np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
            clips = self.backend(p["clip"]).images([c for *_, c in parts]) if p["clip"] else [None] * len(parts)
            out = [
                objects.SceneObject(box, phrase, objects.clean_concept(phrase), score, area, f, c)
                for (box, phrase, score, area, _), f, c in zip(parts, feats, clips)
            ]
        self._scene_objects[key] = objects.ranked(out, keep)
        return self._scene_objects[key]

    def state_scores(self, pairs, p: dict) -> list[float | None]:
        """R2M ``persistent_state`` of each pair (the first ``pairs_per_kind`` when the protocol sets it): the
        judge's score in [1, 5] for :attr:`state_question` (None where it failed)."""
        from persistbench.backends.judge import JudgmentFailed
        from persistbench.io.images import resize_images

        pairs = list(pairs)[: p.get("pairs_per_kind") or None]
        judge, question = self.backend("judge"), self.state_question or StateQuestion.shipped(p["prompt"])
        h, w = next(iter(self.frames.values())).shape[:2]
        scale = min(1.0, p["max_side"] / max(h, w)) if p["max_side"] else 1.0
        size = (max(1, round(h * scale)), max(1, round(w * scale)))
        used = {i for pair in pairs for i in pair}
        small = {i: self.frames[i] if scale == 1.0 else resize_images(self.frames[i][None], size)[0] for i in used}
        reqs = [question.request((small[a], small[b]), p) for a, b in pairs]
        answers = judge.ask_many(reqs, [question.parse] * len(reqs))
        self.judgments += answers
        return [None if isinstance(x, JudgmentFailed) else float(x.value) for x in answers]


@dataclass(frozen=True)
class StateQuestion:
    """What the judge is asked for ``persistent_state`` and how its reply is read: the system and user prompts,
    whether the prompt comes before the two images, the reply's JSON (``extract``) and its score (``parse``),
    and how many invalid replies are asked again."""

    system: str
    user: str
    text_first: bool
    extract: Callable[[str], dict]
    parse: Callable[[dict], float]
    attempts: int

    @property
    def sha256(self) -> str:
        """What a protocol's ``prompt_sha256`` pins: sha256 of the system prompt, a NUL, the user prompt (UTF-8)."""
        import hashlib

        return hashlib.sha256(f"{self.system}\0{self.user}".encode()).hexdigest()

    @classmethod
    def shipped(cls, prompt: str) -> StateQuestion:
        """A question of ours: a prompt shipped with the protocols, its reply an integer score in ``<answer>``."""
        from persistbench.backends.judge import ATTEMPTS, SYSTEM_PROMPT, extract_json, prompt_template

        return cls(SYSTEM_PROMPT, prompt_template(prompt), False, extract_json, parse_state, ATTEMPTS)

    def request(self, images: tuple[np.ndarray, np.ndarray], p: dict):
        """The judge request for one pair's frames under the protocol section ``p``."""
        from persistbench.backends.judge import Request

        return Request(
            self.user,
            images,
            p["temperature"],
            p["max_tokens"],
            p["enable_thinking"],
            system=self.system,
            text_first=self.text_first,
            extract=self.extract,
            attempts=self.attempts,
        )


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
