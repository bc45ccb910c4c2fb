"""Issue 24 (part): upstream's object family and persistent-state question, each against an independent
computation on the same features (random-weight backends, tests/fakes/checkpoints.py).

The reference side here is written from upstream's rules with the architectures' own tools: torchvision's
transforms on PIL images and its ``nms``, transformers' models called directly, torch's ``cosine_similarity``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fakes.judge_server import JudgeServer, completion

from persistbench.backends import BackendOptions, JudgeOptions
from persistbench.backends.judge import BadReply
from persistbench.core.protocol import shipped_path
from persistbench.suites.r2m import objects, upstream_state
from persistbench.suites.r2m.pair_video import PairVideo, StateQuestion

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")

PARAMS = {  # upstream's, small: the random detector's every box kept
    **json.loads(shipped_path("r2m-v2").read_text())["object_persistence"],
    "detector_short_side": 64,
    "detector_max_side": 128,
    "feature_size": 28,
    "box_threshold": 0.3,
    "text_threshold": 0.25,
    "max_objects": 4,
    "max_candidates": 3,
    "min_area_ratio": 0.01,
    "match_threshold": 0.6,
}


def _frames() -> dict[int, np.ndarray]:
    import cv2

    rng = np.random.default_rng(11)
    a = cv2.GaussianBlur(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), (0, 0), 1.5)
    b = np.roll(a, 5, axis=1)
    b[10:30, 20:40] = 255 - b[10:30, 20:40]
    return {0: a, 1: b, 2: a[::-1].copy()}


def _opts(checkpoints) -> BackendOptions:
    return BackendOptions("cpu", tuple((k, str(v)) for k, v in sorted(checkpoints.items())), False, 4)


class Reference:
    """Upstream's ``GroundedSamObjectEvaluator`` rebuilt from its rules on the raw models."""

    def __init__(self, checkpoints, p: dict):
        from transformers import (
            AutoTokenizer,
            CLIPModel,
            Dinov2Model,
            GroundingDinoForObjectDetection,
            Sam2Model,
            Sam2Processor,
        )

        self.p = p
        self.gd = GroundingDinoForObjectDetection.from_pretrained(checkpoints["grounding-dino"]).eval()
        self.tok = AutoTokenizer.from_pretrained(checkpoints["grounding-dino"])
        self.sam = Sam2Model.from_pretrained(checkpoints["sam2-image"]).eval()
        self.sam_proc = Sam2Processor.from_pretrained(checkpoints["sam2-image"])
        self.dino = Dinov2Model.from_pretrained(checkpoints["dinov2-base"]).eval()
        self.clip = CLIPModel.from_pretrained(checkpoints["clip-vit-b32"]).eval()
        self.clip_tok = AutoTokenizer.from_pretrained(checkpoints["clip-vit-b32"])
        T = tv.transforms
        n = p["feature_size"]
        self.dino_t = T.Compose(
            [
                T.Resize(n, T.InterpolationMode.BICUBIC),
                T.CenterCrop(n),
                T.ToTensor(),
                T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
            ]
        )
        c = self.clip.config.vision_config.image_size
        mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
        self.clip_t = T.Compose(
            [T.Resize(c, T.InterpolationMode.BICUBIC), T.CenterCrop(c), T.ToTensor(), T.Normalize(mean, std)]
        )

    def predict(self, image, caption):
        """groundingdino.util.inference.predict, with its RandomResize([short], max_size) and phrases."""
        from PIL import Image

        caption = caption.lower().strip()
        caption = caption if caption.endswith(".") else caption + "."
        h, w = image.shape[:2]
        size, max_size = self.p["detector_short_side"], self.p["detector_max_side"]
        if max(h, w) / min(h, w) * size > max_size:
            size = int(round(max_size * min(h, w) / max(h, w)))
        oh, ow = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
        T = tv.transforms
        x = T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])(
            Image.fromarray(image).resize((ow, oh), Image.BILINEAR)
        )[None]
        text = self.tok([caption], return_tensors="pt")
        with torch.no_grad():
            out = self.gd(pixel_values=x, **text)
        ids = text["input_ids"][0].tolist()
        logits = out.logits[0, :, : len(ids)].sigmoid()
        keep = logits.max(dim=1)[0] > self.p["box_threshold"]
        phrases = []
        for row in logits[keep]:
            posmap = row > self.p["text_threshold"]
            posmap[0:1] = False
            phrases.append(
                self.tok.decode([ids[i] for i in posmap.nonzero(as_tuple=True)[0].tolist()]).replace(".", "")
            )
        return out.pred_boxes[0][keep], logits[keep].max(dim=1)[0], phrases

    def detect(self, image, prompt, max_keep):
        from PIL import Image

        h, w = image.shape[:2]
        boxes, logits, phrases = self.predict(image, prompt)
        if len(boxes) == 0:
            return []
        cx, cy, bw, bh = boxes.unbind(-1)
        xyxy = torch.stack([(cx - 0.5 * bw) * w, (cy - 0.5 * bh) * h, (cx + 0.5 * bw) * w, (cy + 0.5 * bh) * h], -1)
        xyxy[:, 0::2] = xyxy[:, 0::2].clamp(0, w - 1)
        xyxy[:, 1::2] = xyxy[:, 1::2].clamp(0, h - 1)
        keep = tv.ops.nms(xyxy, logits, self.p["nms_iou"])[:max_keep]
        xyxy, logits, phrases = xyxy[keep], logits[keep], [phrases[int(i)] for i in keep]
        masks = []
        for box in xyxy.numpy().astype(np.float32):  # one box at a time, as upstream asks
            inputs = self.sam_proc(images=image, input_boxes=[[box.tolist()]], return_tensors="pt")
            with torch.no_grad():
                out = self.sam(**inputs, multimask_output=False)
            masks.append(self.sam_proc.post_process_masks(out.pred_masks, inputs["original_sizes"])[0][0, 0].numpy())
        found = []
        for idx, mask in enumerate(masks):
            area = float(mask.sum() / float(max(w * h, 1)))
            if area < self.p["min_area_ratio"]:
                continue
            x0, y0, x1, y1 = [int(round(v)) for v in xyxy[idx].tolist()]
            x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w - 1, x1), min(h - 1, y1)
            if x1 <= x0 or y1 <= y0:
                continue
            crop = image[y0 : y1 + 1, x0 : x1 + 1].copy()
            if mask[y0 : y1 + 1, x0 : x1 + 1].any():
                crop[~mask[y0 : y1 + 1, x0 : x1 + 1]] = 255
            with torch.no_grad():
                feat = self.dino(pixel_values=self.dino_t(Image.fromarray(crop))[None]).pooler_output
                clip = self.clip.get_image_features(pixel_values=self.clip_t(Image.fromarray(crop))[None]).pooler_output
            text = re.sub(r"[^a-z0-9 /_-]+", " ", re.sub(r"\([^)]*\)", " ", phrases[idx].lower()))
            concept = re.sub(r"\s+", " ", text).strip(" .") or "object"
            found.append(
                (
                    float(logits[idx]),
                    area,
                    concept,
                    torch.nn.functional.normalize(feat, dim=-1),
                    torch.nn.functional.normalize(clip, dim=-1),
                )
            )
        found.sort(key=lambda o: o[0] * max(o[1], 1e-6), reverse=True)
        return found[:max_keep]

    def score_pair(self, a, b):
        p = self.p
        anchors = self.detect(a, p["text_prompt"], p["max_objects"])
        if not anchors:
            return 0.0, 0.0
        app_scores, sem_scores = [], []
        for _, _, concept, feat, _ in anchors:
            with torch.no_grad():
                tokens = self.clip_tok([concept], return_tensors="pt", truncation=True, max_length=77)
                text = torch.nn.functional.normalize(self.clip.get_text_features(**tokens).pooler_output, dim=-1)
            best, best_score = None, -float("inf")
            for score, _, _, cfeat, cclip in self.detect(b, f"{concept} .", p["max_candidates"]):
                app = max(0.0, min(1.0, (float(torch.nn.functional.cosine_similarity(feat, cfeat, dim=-1)) + 1) * 0.5))
                sim = max(0.0, min(1.0, (float(torch.nn.functional.cosine_similarity(cclip, text, dim=-1)) + 1) * 0.5))
                sem = 0.5 * max(0.0, min(1.0, score)) + 0.5 * sim
                total = (p["appearance_weight"] * app + p["semantic_weight"] * sem) / max(
                    p["appearance_weight"] + p["semantic_weight"], 1e-8
                )
                if total > best_score:
                    best, best_score = (app, sem), total
            ok = best is not None and best_score >= p["match_threshold"]
            app_scores.append(round(best[0], 6) if ok else 0.0)
            sem_scores.append(round(best[1], 6) if ok else 0.0)
        return round(float(np.mean(app_scores)), 6), round(float(np.mean(sem_scores)), 6)


@pytest.mark.slow
def test_object_persistence_is_upstreams_on_the_same_models(checkpoints):
    frames = _frames()
    pairs = [(0, 1), (0, 2), (1, 0)]
    ours = PairVideo(frames, _opts(checkpoints)).object_persistence(pairs, PARAMS)
    ref = Reference(checkpoints, PARAMS)
    theirs = [ref.score_pair(frames[a], frames[b]) for a, b in pairs]
    assert np.allclose(ours, theirs, atol=2e-6), (ours, theirs)
    assert len({x for pair in ours for x in pair}) > 1  # something was found and compared
    assert ours == PairVideo(frames, _opts(checkpoints)).object_persistence(pairs, PARAMS)  # deterministic


def test_object_pure_parts_follow_upstreams_rules():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 10, 9]], np.float32)
    scores = np.array([0.5, 0.9, 0.3, 0.9], np.float32)
    ref = tv.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.6).tolist()
    assert objects.nms(boxes, scores, 0.6).tolist() == ref
    b = torch.tensor([[0.5, 0.5, 1.2, 0.2], [0.3, 0.7, 0.1, 0.3]])  # float32, as upstream's boxes
    cx, cy, bw, bh = b.unbind(-1)
    ref = torch.stack([(cx - 0.5 * bw) * 64, (cy - 0.5 * bh) * 48, (cx + 0.5 * bw) * 64, (cy + 0.5 * bh) * 48], -1)
    ref[:, 0::2], ref[:, 1::2] = ref[:, 0::2].clamp(0, 63), ref[:, 1::2].clamp(0, 47)
    assert objects.cxcywh_to_xyxy(b.numpy(), 64, 48).tolist() == ref.tolist()
    assert objects.clean_concept(" Red (big) BALL.[SEP] ") == "red ball sep"
    assert objects.clean_concept("..") == "object"
    assert objects.pixel_box(np.array([2.5, 3.5, 2.4, 9.0]), 64, 48) is None  # round half to even: 2 <= 2
    e = np.eye(3, dtype=np.float32)
    anchor = objects.SceneObject((0, 0, 1, 1), "a", "a", 0.9, 0.1, e[0], None)
    near = objects.SceneObject((0, 0, 1, 1), "a", "a", 0.8, 0.1, e[0], None)
    far = objects.SceneObject((0, 0, 1, 1), "a", "a", 0.2, 0.1, e[1], None)
    assert objects.persistence([anchor], [[far, near]], [None], 0.5, 0.5, 0.5) == (1.0, 0.8)
    assert objects.persistence([anchor, anchor], [[far], []], [None, None], 0.5, 0.5, 0.35) == (0.25, 0.1)
    assert objects.persistence([anchor], [[far]], [None], 0.5, 0.5, 0.36) == (0.0, 0.0)
    assert objects.persistence([], [], [], 0.5, 0.5, 0.5) == (0.0, 0.0)


# ---------------------------------------------------------------- the persistent-state question


@pytest.mark.parametrize(
    "text, score",
    [
        ('{"score": 4.5, "reason": "x"}', 4.5),
        ('```json\n{"score": 3}\n```', 3.0),
        ('Thinking {not json} then {"scene_relation": "same", "score": "2.5"}', 2.5),
        ('{"score": 9}', 5.0),
        ('{"score": -3}', 1.0),
        ('{"score": true}', 1.0),
        ('{"a": {"b": 1}, "score": 2}', 2.0),
        ('{"reason": "no score"} {"score": 4}', 4.0),
        ('truncated {"score": 3.5, "reason": "cut', 3.5),
        ('} {"score": 4} ', 4.0),  # a stray closing brace: no object is found after it, the pattern finds it
        ('{"score": "high"} "score": 2', 2.0),
        ("I cannot rate these.", None),
        ('{"score": null}', None),
        ('{"score": NaN}', None),  # Python's json takes NaN (and upstream would clamp it to 5.0); we ask again
    ],
)
def test_state_replies_are_read_as_upstream_reads_them(text, score):
    if score is None:
        with pytest.raises(BadReply):
            upstream_state.reply(text)
    else:
        assert upstream_state.score(upstream_state.reply(text)) == score


def test_upstreams_question_is_sent_as_upstream_sends_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    replies = iter(["no score at all", "still none", '{"score": 2}'])
    question = StateQuestion("SYSTEM TEXT", "USER TEXT", True, upstream_state.reply, upstream_state.score, 4)
    frames = {0: np.full((24, 32, 3), 10, np.uint8), 1: np.full((24, 32, 3), 200, np.uint8)}
    p = {"max_side": None, "temperature": 0.0, "max_tokens": 4096, "enable_thinking": None, "pairs_per_kind": 10}
    with JudgeServer(lambda n, body: completion(next(replies))) as server:
        opts = BackendOptions("cpu", (), False, 4, JudgeOptions(server.url, "judge-x"))
        video = PairVideo(frames, opts, state_question=question)
        assert video.state_scores([(0, 1)], p) == [2.0]
    body = server.requests[0]
    assert len(server.requests) == 3  # two replies without a score asked again
    system, user = body["messages"]
    assert system["role"] == "system" and system["content"] == [{"type": "text", "text": "SYSTEM TEXT"}]
    assert [c["type"] for c in user["content"]] == ["text", "image_url", "image_url"]
    assert user["content"][0]["text"] == "USER TEXT"
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.0 and "chat_template_kwargs" not in body
