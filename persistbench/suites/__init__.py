"""The benchmark suites, each sealed in its folder (nothing outside a suite's folder imports it).

The built-in ones are named here, as ``module:attr`` (nothing is imported to list them); the core's registry
(:mod:`persistbench.core.suites`) adds those of installed packages.
"""

BUILTIN: dict[str, str] = {
    "persistbench": "persistbench.suites.persistbench.suite:PersistBench",
    "r2m": "persistbench.suites.r2m.suite:R2MBench",
    "wrop": "persistbench.suites.wrop.suite:Wrop",
}
BUILTIN_COMMANDS: dict[str, str] = {  # suites' own commands
    "download": "persistbench.suites.persistbench.commands:download",
    "pack": "persistbench.suites.persistbench.commands:pack",
    "package": "persistbench.suites.persistbench.commands:package",
    "leaderboard": "persistbench.suites.persistbench.commands:leaderboard",
}
