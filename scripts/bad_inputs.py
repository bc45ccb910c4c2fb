"""Feed the real commands a catalogue of bad inputs and print, per group, how each was handled.

For every input the command must be refused (exit non-zero, or the named case failed) or, where an
input must be accepted safely (a report that shows a payload as text), handled as the row says;
print no traceback and name the file (or case, host) on one line; write nothing outside its output,
leave no partial or temporary file; finish within ``LIMIT_S`` and stay under ``MEMORY_MB`` of
resident memory (its own and its children's).

    python scripts/bad_inputs.py                 # every group, about 15 minutes on 2 cores
    python scripts/bad_inputs.py --group judge   # the groups whose name contains "judge"
    python scripts/bad_inputs.py -v              # every row, not only those that fail

Rounds: the first (recipes, PersistBench datasets and runs, protocols, outputs, models) and the
second (issue 22: device files, malformed JSON, R2M-Bench checkouts and runs, WROP corpora and runs,
sizes, hangs, judges, reports, symlinked outputs, resume, decoding paths, options) and the third (issue 39:
the submission gate, recipes as a stream, the Hub, the arena's merged votes and store, links and layouts;
each command under 1 GiB of peak RSS).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bad_input_cases import (
    fixtures,
    harness,
    json_files,
    pb_cases,
    r2m_cases,
    report_cases,
    round1,
    round3,
    runtime_cases,
    wrop_cases,
)

GROUPS = {
    "recipes": lambda fx, w: round1.recipe_cases(w),
    "datasets": lambda fx, w: round1.dataset_cases(w, fx.ds, fx.run),
    "runs": lambda fx, w: round1.run_cases(w, fx.ds, fx.run),
    "protocols": lambda fx, w: round1.protocol_cases(w, fx.ds, fx.run),
    "outputs": lambda fx, w: round1.environment_cases(w, fx.ds),
    "models": lambda fx, w: round1.model_cases(w, fx.ds),
    "json files": json_files.cases,
    "r2m": r2m_cases.cases,
    "wrop": wrop_cases.cases,
    "persistbench runs": pb_cases.cases,
    "report": report_cases.cases,
    "judge": runtime_cases.judge_cases,
    "hangs": runtime_cases.hang_cases,
    "symlinked outputs": runtime_cases.output_cases,
    "decoding paths": runtime_cases.path_cases,
    "options": runtime_cases.option_cases,
    "submission gate": round3.submission_cases,
    "recipes as a stream": round3.recipes_cases,
    "hub": round3.hub_cases,
    "arena merge and store": round3.arena_cases,
    "links and layouts": round3.layout_cases,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--group", action="append", default=[], help="only the catalogue parts whose name contains this"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every row")
    args = parser.parse_args()
    harness.VERBOSE = args.verbose
    chosen = {k: v for k, v in GROUPS.items() if not args.group or any(g in k for g in args.group)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fx = fixtures.build(tmp)
        for name, step in chosen.items():
            print(f"- {name}", flush=True)
            work = tmp / f"work-{name.replace(' ', '-')}"
            work.mkdir()
            step(fx, work)
    print(harness.table(harness.ROWS))
    failed = [r for r in harness.ROWS if not r.ok]
    print(f"{len(harness.ROWS) - len(failed)} of {len(harness.ROWS)} rows clean")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
