"""The benchmark suites, each sealed in its folder: persistbench, r2m, wrop (nothing outside a suite's folder imports it)."""
