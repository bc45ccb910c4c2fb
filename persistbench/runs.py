"""A run's records: ``run.json`` (:class:`RunRecord`) and each case's ``case.json``, read as untrusted input."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .errors import PersistbenchError
from .files import read_json
from .layout import RunLayout


@dataclass
class RunRecord:
    """``run.json`` of a run ``infer`` made; its JSON form is :meth:`to_json` (keys sorted when written).

    ``protocol`` is the model's sampling (``num_frames``, ``resolution``, ``sampling``: the suite's rule);
    ``dataset`` the root it ran on and its fingerprint, which ``score`` checks.
    """

    model: str
    config: dict
    device: str
    oracle: bool
    protocol: dict
    dataset: dict
    toolkit_version: str
    model_class: str
    started: str | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        out = asdict(self)
        if out["started"] is None:
            del out["started"]
        return out

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def differs(self, other: RunRecord) -> str | None:
        """What makes ``other`` (a run already on disk) a different run than this one, or None."""
        for key in ("model", "config", "protocol"):
            if getattr(other, key) != getattr(self, key):
                return f"a different {key} ({getattr(other, key)!r} there)"
        if (other.dataset or {}).get("fingerprint") != self.dataset["fingerprint"]:
            return "a different dataset (fingerprint differs)"
        return None


def case_record(run: RunLayout, subset: str, case_id: str) -> dict | None:
    """The case's ``case.json`` when the case is complete (it is written last), else None."""
    try:
        info = read_json(run.case_json(subset, case_id))
    except PersistbenchError:
        return None
    return info if isinstance(info, dict) and info.get("uid") == case_id else None


def read_run_info(run: RunLayout) -> dict | None:
    """``run.json`` as a dictionary (None when the folder has none: predictions made by another toolkit);
    anything else is refused naming the file."""
    if not run.run_json.exists():
        return None
    info = read_json(run.run_json)
    if not isinstance(info, dict):
        raise PersistbenchError(f"{run.run_json}: must hold a JSON object")
    return info
