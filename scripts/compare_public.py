"""Compare ``paper-v3`` results of this toolkit with the public toolkit's on the same predictions.

Both sides are folders of the public per-case form, ``<subset>__<case>/result.json``: ours is what
``persistbench score --protocol paper-v3`` writes under ``scores/paper-v3/public/``; theirs is the
public ``persistbench evaluate`` output folder. Every file is read as untrusted and checked by the
public aggregation's rules (:func:`persistbench.suites.persistbench.paper.from_public`). Prints, per
case and metric, the largest per-frame difference, the frames only one side scored and the
differences of the visible / invisible means, then the two summaries (overall and per group) side
by side. Exits 1 when a case is missing on one side or a difference exceeds ``--tolerance``.

Run: ``python scripts/compare_public.py RUN/scores/paper-v3/public PUBLIC_OUT [--tolerance 1e-6]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_json
from persistbench.suites.persistbench import paper


def read_side(folder: Path) -> dict[str, dict]:
    """uid -> record of every ``*/result.json`` below ``folder``."""
    out = {}
    for path in sorted(folder.glob("*/result.json")):
        record = paper.from_public(read_json(path), str(path))
        out[record["uid"] or path.parent.name] = record
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", type=Path)
    ap.add_argument("theirs", type=Path)
    ap.add_argument("--tolerance", type=float, default=1e-6, help="largest difference accepted (default 1e-6)")
    args = ap.parse_args(argv)
    try:
        ours, theirs = read_side(args.ours), read_side(args.theirs)
    except PersistbenchError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    if not ours or not theirs:
        print(f"Error: {args.ours if not ours else args.theirs}: no */result.json", file=sys.stderr)
        return 2
    bad = sorted(set(ours) ^ set(theirs))
    for uid in bad:
        print(f"only in {'ours' if uid in ours else 'theirs'}: {uid}")
    worst = 0.0
    print("| case | metric | frames | max frame diff | only one side | visible diff | invisible diff |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for uid in sorted(set(ours) & set(theirs)):
        for m, d in paper.compare(ours[uid], theirs[uid]).items():
            diffs = [d["max_frame_diff"], *(v for v in (d["visible_diff"], d["invisible_diff"]) if v is not None)]
            worst = max(worst, *diffs)
            bad += [f"{uid}/{m}"] if d["only_one"] else []
            cells = [f"{v:.3g}" if v is not None else "n/a" for v in (d["visible_diff"], d["invisible_diff"])]
            print(
                f"| {uid} | {m} | {d['frames']} | {d['max_frame_diff']:.3g} | {d['only_one']} | "
                + " | ".join(cells)
                + " |"
            )
    shared = sorted(set(ours) & set(theirs))
    a, b = paper.summarise([ours[u] for u in shared]), paper.summarise([theirs[u] for u in shared])
    print("\n| group | score | ours | theirs |\n| --- | --- | --- | --- |")
    for group in ("overall", *sorted(a["groups"])):
        sa, sb = (a if group == "overall" else a["groups"][group]), (b if group == "overall" else b["groups"][group])
        for key in sorted(sa["averages"]):
            print(f"| {group} | {key} | {_fmt(sa['averages'][key])} | {_fmt(sb['averages'].get(key))} |")
    print(f"\n{len(shared)} cases compared; largest difference {worst:.3g} (tolerance {args.tolerance:g})")
    return 1 if bad or worst > args.tolerance else 0


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.6f}"


if __name__ == "__main__":
    sys.exit(main())
