"""Which models run by name: the built-ins (name -> ``module:Class``) and the entry point group of installed
ones, as a :class:`~persistbench.core.registry.Registry`. Nothing here imports a model, so the command line can
list them without numpy."""

from __future__ import annotations

from persistbench.core.registry import Registry

MODELS: Registry = Registry(
    "model",
    {
        "hold": "persistbench.models.builtin:HoldModel",
        "reproject": "persistbench.models.builtin:ReprojectModel",
        "warp": "persistbench.models.builtin:WarpModel",
        "flow": "persistbench.models.builtin:FlowModel",
        "oracle": "persistbench.models.builtin:OracleModel",
    },
    "persistbench.models",
    option="--model",
)
