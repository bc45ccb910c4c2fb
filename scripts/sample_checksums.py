"""Write the checksums of the bundled sample's reconstructed frames, masks, cameras and visibility.

These files are deterministic functions of the recipes and the source clips (with the pinned
ffmpeg: decoding is exact and its colour conversion bit-exact, docs/data-format.md), so a fresh
reconstruction on any CPU must reproduce them. Regenerate only when the sample or the geometry
changes on purpose:

    python scripts/sample_checksums.py tests/data/sample_checksums.json
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from persistbench.io.files import dump_json, write_text
from persistbench.suites.persistbench.build.download import DownloadOptions, download, resolve_recipes
from persistbench.suites.persistbench.build.sources import SourceOptions
from persistbench.suites.persistbench.index import read_case_records

KEPT = ("/frames/", "/masks/", "camera_params.npy", "visibility_dict.npy", "theta_phi_values.npy")


def sample_checksums(output: Path, cache: Path) -> dict[str, str]:
    """Reconstruct the bundled sample into ``output``; return {relative path: sha256} of the kept files."""
    opts = DownloadOptions(output=output, sources=SourceOptions(cache=cache), progress=False)
    outcomes = download(resolve_recipes(None, cache), opts)
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        raise SystemExit(f"sample reconstruction failed: {failed}")
    return {
        path: digest
        for rec in read_case_records(output)
        for path, digest in rec["files"].items()
        if any(k in path for k in KEPT)
    }


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/sample_checksums.json")
    with tempfile.TemporaryDirectory() as tmp:
        sums = sample_checksums(Path(tmp) / "ds", Path(tmp) / "cache")
    write_text(target, dump_json({"files": sums}))
    print(f"{len(sums)} checksums -> {target}")


if __name__ == "__main__":
    main()
