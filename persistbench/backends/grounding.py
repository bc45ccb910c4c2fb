"""Open-vocabulary box detection: Grounding DINO through ``transformers``, read as the original's ``predict``.

The original package (``IDEA-Research/GroundingDINO``, ``groundingdino.util.inference``) lower-cases
the caption and ends it with a full stop, resizes the image as its ``RandomResize([800],
max_size=1333)`` does (PIL bilinear), normalises it with ImageNet's statistics, keeps the queries
whose best token score (sigmoid of the logits) exceeds ``box_threshold``, and names each kept box by
the caption tokens whose score exceeds ``text_threshold`` (the first token never), decoded and with
full stops removed. ``transformers``' ``GroundingDinoForObjectDetection`` is the same network (its
checkpoints are converted from the original's), so the same weights give the same boxes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device
from persistbench.backends.features import IMAGENET_MEAN, IMAGENET_STD

MAX_TEXT_TOKENS = 256  # the original's max_text_len: token scores past it are never read


def caption_of(text: str) -> str:
    """The original's ``preprocess_caption``: lower case, stripped, ending with a full stop."""
    text = text.lower().strip()
    return text if text.endswith(".") else text + "."


def resized_size(height: int, width: int, size: int = 800, max_size: int = 1333) -> tuple[int, int]:
    """``(h, w)`` of the original's ``RandomResize([size], max_size)``: the shorter side ``size`` unless the longer
    would pass ``max_size`` (then ``round(max_size * short / long)``), the other side truncated."""
    short, long = float(min(height, width)), float(max(height, width))
    if long / short * size > max_size:
        size = int(round(max_size * short / long))
    if (width <= height and width == size) or (height <= width and height == size):
        return height, width
    if width < height:
        return int(size * height / width), size
    return size, int(size * width / height)


@dataclass(frozen=True)
class Detections:
    """Boxes ``(N, 4)`` float32 as ``(cx, cy, w, h)`` fractions of the image, their scores ``(N,)`` (the best
    token's probability) and their phrases."""

    boxes: np.ndarray
    scores: np.ndarray
    phrases: tuple[str, ...]


class GroundingDetector:
    """A Grounding DINO checkpoint folder (model, tokenizer) as the original's ``predict``."""

    def __init__(self, weights, device: str):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import AutoTokenizer, GroundingDinoForObjectDetection

        self.torch, self.device, self.weights = torch, device, weights
        self.model = GroundingDinoForObjectDetection.from_pretrained(
            weights.folder, use_safetensors=True, local_files_only=True
        )
        self.model = self.model.to(device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(weights.folder, local_files_only=True)

    def pixels(self, image: np.ndarray, size: tuple[int, int] = (800, 1333)):
        """``(1, 3, h, w)`` float32: ``image`` (``(H, W, 3)`` uint8 RGB) resized (:func:`resized_size` with ``size`` =
        ``(shorter side, longest side)``) and normalised as the original."""
        from persistbench.io.images import resize_images

        torch = self.torch
        resized = resize_images(image[None], resized_size(*image.shape[:2], *size))[0]
        x = torch.from_numpy(resized.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
        mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        return (x - mean) / std

    def token_scores(
        self, image: np.ndarray, caption: str, size: tuple[int, int] = (800, 1333)
    ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """``(probabilities (Q, T), boxes (Q, 4), token ids)`` of every query for the caption's ``T`` tokens."""
        torch = self.torch
        text = self.tokenizer([caption], return_tensors="pt", truncation=True, max_length=MAX_TEXT_TOKENS)
        pixels = self.pixels(image, size).to(self.device)
        with torch.no_grad():
            out = self.model(
                pixel_values=pixels,
                pixel_mask=torch.ones(pixels.shape[0], *pixels.shape[2:], dtype=torch.long, device=self.device),
                input_ids=text["input_ids"].to(self.device),
                token_type_ids=text["token_type_ids"].to(self.device),
                attention_mask=text["attention_mask"].to(self.device),
            )
        ids = text["input_ids"][0].tolist()
        probs = out.logits[0, :, : len(ids)].float().sigmoid().cpu().numpy()
        return probs, out.pred_boxes[0].float().cpu().numpy(), ids

    def detect(
        self,
        image: np.ndarray,
        text: str,
        box_threshold: float,
        text_threshold: float,
        size: tuple[int, int] = (800, 1333),
    ) -> Detections:
        """The boxes of ``image`` (``(H, W, 3)`` uint8 RGB) for the caption ``text``, as the original's ``predict``
        (``size``: the resize's shorter and longest side, the original's 800 and 1333)."""
        probs, boxes, ids = self.token_scores(image, caption_of(text), size)
        best = probs.max(axis=1) if probs.shape[1] else np.zeros(len(probs), np.float32)
        kept = np.flatnonzero(best > box_threshold)
        phrases = []
        for q in kept:
            on = probs[q] > text_threshold
            on[:1] = False
            on[MAX_TEXT_TOKENS - 1 :] = False  # the original's right_idx
            tokens = [ids[i] for i in np.flatnonzero(on)]
            phrases.append(self.tokenizer.decode(tokens).replace(".", ""))
        return Detections(boxes[kept].astype(np.float32), best[kept].astype(np.float32), tuple(phrases))


def load(spec: BackendSpec, opts: BackendOptions) -> GroundingDetector:
    """The backend ``spec`` as :class:`GroundingDetector` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return GroundingDetector(*weights_and_device(spec, opts))
