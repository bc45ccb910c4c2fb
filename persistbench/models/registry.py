"""Which models run by name: the built-ins (name -> ``module:Class``) and the entry point group of installed
ones. Nothing here imports a model, so the command line can list them without numpy."""

from __future__ import annotations

ENTRY_POINT_GROUP = "persistbench.models"

BUILTINS = {
    "hold": "persistbench.models.builtin:HoldModel",
    "reproject": "persistbench.models.builtin:ReprojectModel",
    "warp": "persistbench.models.builtin:WarpModel",
    "flow": "persistbench.models.builtin:FlowModel",
    "oracle": "persistbench.models.builtin:OracleModel",
}
