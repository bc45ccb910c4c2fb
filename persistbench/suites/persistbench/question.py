"""paper-v3's question to its judge: two tagged crops (the reference object, REF, and a frame) and the public
prompt; the reply read as the public toolkit reads it. Shared by the scorer (:mod:`.paper`) and the judge's
calibration battery (:mod:`.battery`)."""

from __future__ import annotations

import ast
import json
import re

import numpy as np

from persistbench.backends.judge import BadReply, Request, prompt_template


def unit_uint8(frame: np.ndarray) -> np.ndarray:
    """A uint8 frame as the public toolkit hands it to the judge: through float32 [0, 1] and back, truncated."""
    return np.clip(frame.astype(np.float32) / 255.0 * 255.0, 0, 255).astype(np.uint8)


def padded_crop(frame: np.ndarray, mask: np.ndarray, padding: float) -> np.ndarray:
    """The mask's tight box widened by ``round(padding * extent)`` pixels per side (the whole frame when empty)."""
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return frame
    h, w = mask.shape
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()) + 1, int(ys.min()), int(ys.max()) + 1
    px, py = int(round(max(1, x1 - x0) * padding)), int(round(max(1, y1 - y0) * padding))
    return frame[max(0, y0 - py) : min(h, y1 + py), max(0, x0 - px) : min(w, x1 + px)]


def tagged(image: np.ndarray, tag: str) -> np.ndarray:
    """``image`` with ``tag`` written in a boxed label at its top left, in the colours that contrast with
    what the label covers (the public toolkit's label geometry, so that the judge sees the same pixels)."""
    import cv2

    out = image.copy()
    font = cv2.FONT_HERSHEY_SIMPLEX
    scale = max(0.35, min(out.shape[:2]) / 384.0)
    thick = max(1, int(round(scale * 2)))
    (tw, th), _ = cv2.getTextSize(tag, font, scale, thick)
    px, py = max(8, int(round(scale * 12))), max(6, int(round(scale * 10)))
    m = max(8, int(round(scale * 10)))
    x1, y1 = m + tw + 2 * px, m + th + 2 * py
    under = out[m:y1, m:x1]
    dark = (float(under.mean()) if under.size else 0.0) > 127
    bg, fg, border = ((0, 0, 0), (255, 255, 255), (0, 255, 255)) if dark else ((255, 255, 255), (0, 0, 0), (255, 0, 0))
    cv2.rectangle(out, (m, m), (x1, y1), bg, thickness=-1)
    cv2.rectangle(out, (m, m), (x1, y1), border, thickness=thick)
    cv2.putText(out, tag, (m + px, y1 - py), font, scale, fg, thick, cv2.LINE_AA)
    return out


def judge_image(frame: np.ndarray, mask: np.ndarray, tag: str, params: dict) -> np.ndarray:
    import cv2

    crop = padded_crop(unit_uint8(frame), mask, params["crop_padding"])
    h, w = params["crop_size"]
    return tagged(cv2.resize(crop, (w, h), interpolation=cv2.INTER_AREA), tag)


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BRACES = re.compile(r"\{.*\}", re.DOTALL)


def _dict_of(text: str) -> dict | None:
    """``text`` as a non-empty dict: JSON, else a Python literal (``ast.literal_eval`` evaluates literals
    only); None when it is neither."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        try:
            obj = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return obj if isinstance(obj, dict) and obj else None


def reply_object(text: str) -> dict:
    """A permanence reply read as the public toolkit reads it (``_parse_response``): the first
    ``<answer>`` block, else the span from the first ``{`` to the last ``}`` of the whole reply, each as
    JSON or as a Python-literal dict."""
    tagged = _ANSWER.search(text)
    obj = _dict_of(tagged.group(1).strip()) if tagged else None
    if obj is None:
        braces = _BRACES.search(text)
        obj = _dict_of(braces.group(0)) if braces else None
    if obj is None:
        raise BadReply("no JSON object or Python dict in the reply (a refusal?)")
    return obj


def permanence_request(ref: tuple[np.ndarray, np.ndarray], frame: tuple[np.ndarray, np.ndarray], tag: str, cfg: dict):
    """The judge's permanence question about frame ``tag``: is the object of the ``(frame, mask)`` ``ref``
    (cropped around its mask, tagged REF) visible in ``frame`` (cropped around its mask, tagged ``tag``)?
    ``cfg`` is the protocol's configuration (its ``object_permanence`` and ``judge`` sections)."""
    params, jcfg = cfg["object_permanence"], cfg["judge"]
    ref_source = f"a crop from the ground-truth frame at the same time step as {tag}"
    images = (judge_image(*ref, "REF", params), judge_image(*frame, tag, params))
    prompt = prompt_template(params["prompt"]).format(frame_tag=tag, ref_source=ref_source)
    return Request(
        prompt, images, jcfg["temperature"], jcfg["max_tokens"], jcfg["enable_thinking"], extract=reply_object
    )


def parse_seen(tag: str):
    """The parser of a permanence reply about frame ``tag``: its ``visible`` boolean for that tag."""

    def parse(obj: dict) -> bool:
        if obj.get("tag") == tag and isinstance(obj.get("visible"), bool):
            return obj["visible"]
        items = obj.get("frame_assessments")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("tag") == tag and isinstance(item.get("visible"), bool):
                return item["visible"]
        for key, seen in (("visible_tags", True), ("not_visible_tags", False)):
            listed = obj.get(key)
            if isinstance(listed, list) and tag in listed:
                return seen
        if "visible" in obj and not isinstance(obj["visible"], bool):
            raise BadReply(f"visible is {obj['visible']!r}, not a boolean")
        raise BadReply(f"no judgment for {tag}")

    return parse
