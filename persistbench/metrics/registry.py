"""The metric registry: one :class:`MetricSpec` per metric, the single place that knows a metric.

A spec says what the metric is called, its family, whether higher is better, the range its values
take, the model backends it loads, its function and the protocol section its parameters come from.
Parameters live only in the protocol file (``persistbench/data/protocols/*.json``): a function gets
that section as keyword arguments.

The frame metrics (:class:`FrameMetric`: ``fn(batch: FrameBatch, params) -> list[float]``, one value
per predicted frame against the ground truth) are here, shared by the suites with ground truth. A
suite with metrics of its own kind defines a :class:`MetricSpec` subclass and calls :func:`register`
when its scoring module is imported (R2M-Bench's pair metrics, PersistBench's paper-v3 tracked
metrics). Report ordering and families come from :data:`METRICS`. Adding a metric: a pure function
(``metrics/frame.py`` or ``metrics/pair.py``), a spec, its parameters in the protocol, a test
against a reference implementation; see docs/architecture.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from persistbench.metrics import frame as metrics


@dataclass(frozen=True, kw_only=True)
class MetricSpec:
    """One metric: its name, family, direction, value range, function and the backends it loads (keyword-only;
    each kind of metric is a subclass that says what its function takes)."""

    kind: ClassVar[str]
    name: str
    family: str
    higher_is_better: bool
    value_range: tuple[float, float]
    function: Callable
    params: str | None = None  # the protocol section holding the parameters
    rate: bool = False  # a 0/1 value per frame: intervals are Wilson's
    backend: str | None = None  # a backend it always loads: where it cannot, the metric is recorded unavailable
    backend_keys: tuple[str, ...] = ()  # the keys of its protocol section that name the backends it loads

    def backends(self, params: dict) -> list[str]:
        """The model backends (:data:`persistbench.backends.BACKENDS`) its protocol section ``params`` names (a key
        set to null names none): they follow the protocol's ``models`` rule, not :attr:`backend`'s."""
        return [params[k] for k in self.backend_keys if params[k] is not None]


@dataclass(frozen=True, kw_only=True)
class FrameMetric(MetricSpec):
    """``function(batch: FrameBatch, params) -> list[float]``: one value per predicted frame against the truth."""

    kind: ClassVar[str] = "frame"


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
        ),
        FrameMetric(
            name="ssim",
            family="appearance",
            higher_is_better=True,
            value_range=(-1.0, 1.0),
            function=_ssim,
            params="ssim",
        ),
        FrameMetric(
            name="lpips",
            family="appearance",
            higher_is_better=False,
            value_range=(0.0, math.inf),
            function=_lpips,
            params="lpips",
            backend="lpips",
        ),
        FrameMetric(
            name="iou",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_iou,
        ),
        FrameMetric(
            name="presence",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_presence,
            rate=True,
        ),
        FrameMetric(
            name="continuity",
            family="localisation",
            higher_is_better=True,
            value_range=(0.0, 1.0),
            function=_continuity,
            params="continuity",
        ),
    )
}


def register(*specs: MetricSpec) -> None:
    """Add a suite's metrics to :data:`METRICS` (after those registered before); a name taken by another spec is
    an error."""
    for spec in specs:
        if METRICS.get(spec.name, spec) != spec:
            raise ValueError(f"metric {spec.name}: registered twice")
        METRICS[spec.name] = spec


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
