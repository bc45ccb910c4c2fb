"""What the tests run against besides the package: loopback servers and stand-ins for the services a user's run
reaches (the Hub, YouTube, a judge, an SSH host, gcloud and its Compute API), the public toolkit, random-weight
checkpoints, and helpers that run the real command."""

import shutil
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/
ROOT = TESTS.parent  # the repository
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")  # Debian's (.ci/run installs it)
