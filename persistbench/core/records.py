"""What every suite's per-case scores record holds (:class:`CaseScores`, subclassed by each suite with its values)
and how a record merges into an earlier one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from persistbench.core.protocol import Protocol
from persistbench.metrics.registry import order


@dataclass
class CaseScores:
    """What every suite's per-case scores record holds (suites subclass it with their values); JSON: :meth:`to_json`."""

    unavailable: dict[str, str]  # metric -> why it was not computed (a backend that cannot run here)
    protocol: str
    protocol_sha256: str
    requested: list[str]  # the metrics asked for, in registry order
    prediction_sha256: str  # identity of what was scored (for --resume and merging)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict):
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    @staticmethod
    def common(protocol: Protocol, wanted, unavailable: dict[str, str], prediction_sha256: str) -> dict:
        """The fields every suite's record holds, as keyword arguments (``requested`` in registry order;
        ``unavailable``: why each metric of ``wanted`` that was not computed was not)."""
        return {
            "unavailable": {m: unavailable[m] for m in order(wanted) if m in unavailable},
            "protocol": protocol.name,
            "protocol_sha256": protocol.sha256,
            "requested": order(wanted),
            "prediction_sha256": prediction_sha256,
        }


def keep_unavailable(new: dict, old: dict, metrics) -> list[str]:
    """Merging a record into an earlier one: the metrics of ``metrics`` that ``old`` recorded unavailable and
    ``new`` did not ask for, their reasons copied into ``new["unavailable"]`` (registry order); returns them."""
    before = old.get("unavailable") or {}
    kept = [m for m in before if m not in new["requested"] and m in metrics]
    reasons = {**new["unavailable"], **{m: before[m] for m in kept}}
    new["unavailable"] = {m: reasons[m] for m in order(list(reasons))}
    return kept
