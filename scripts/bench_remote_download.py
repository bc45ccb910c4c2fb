"""The download backends side by side in one process: seconds a clip here (``local``) and through ``--backend ssh``.

    python scripts/bench_remote_download.py [--scenes 6] [--repeats 3]

Synthetic sources on a loopback HTTP server, ``download --download-only`` into a fresh cache each run, the
SSH backend against a real OpenSSH server on loopback started for the run (Debian's openssh-server; the
remote interpreter is this one). What the ratio measures is the backend's own cost per clip (a remote
interpreter started for the job, the round trips, the transfer and its checks). A real remote adds the
network between the machines. Medians of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the loopback sshd the tests use

from fakes.download_cli import download
from fakes.sshd import MISSING, sshd

from persistbench.io.serve import FileServer
from persistbench.suites.persistbench.synth import SynthConfig, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if MISSING:
        sys.exit("needs OpenSSH's server and client (apt-get install openssh-server)")
    work = Path(tempfile.mkdtemp(prefix="pb-bench-remote-"))
    (work / "sshd").mkdir()
    config = SynthConfig(scenes=args.scenes, seed=5, pano_size=(512, 256), view_size=(128, 96), n_frames=16, fps=8.0)
    with sshd(work / "sshd") as server, FileServer(work / "src") as files:
        generate(work / "src" / "http", config, base_url=f"{files.url}/http/sources")
        recipes = work / "src" / "http" / "recipes.jsonl"
        clips = len(recipes.read_text().splitlines())
        ssh = ["--backend", "ssh", "--remote", server.remote, "--ssh-key", str(server.key)]
        ssh += ["--known-hosts", str(server.known_hosts), "--remote-python", sys.executable]
        backends = {"local": [], "ssh": ssh}
        seconds: dict[str, list[float]] = {name: [] for name in backends}
        for i in range(args.repeats):
            for name, extra in backends.items():
                start = time.perf_counter()
                result = download(recipes, work / f"{name}-{i}", "--download-only", *extra)
                seconds[name].append(time.perf_counter() - start)
                if result.exit_code != 0:
                    sys.exit(result.output)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    for name, s in seconds.items():
        print(
            f"{name:6s} {median[name] / clips * 1000:6.0f} ms a clip (median of {[round(x, 2) for x in s]} s, {clips} clips)"
        )
    print(f"ssh / local: {median['ssh'] / median['local']:.2f}x")


if __name__ == "__main__":
    main()
