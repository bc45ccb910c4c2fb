"""The core every suite runs on: the suite and scorer interfaces, the registry of suites, protocols, the commands' work (infer, score, report, demo, doctor), the run layout and timing."""
