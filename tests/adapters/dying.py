"""Models whose worker process dies mid-case (tests of the executors' retries); otherwise ``hold``."""

import os
import signal
import time
from pathlib import Path

from persistbench.models import ModelInput, ModelOutput
from persistbench.models.builtin import HoldModel


class KilledOnce(HoldModel):
    """The first case to arrive (in any worker) claims ``<marker>/claim``, writes its process id to
    ``<marker>/pid`` and waits to be killed from outside; once ``<marker>/killed`` exists it is hold."""

    def __init__(self, marker: str, device: str = "cpu"):
        super().__init__(device=device)
        self.marker = Path(marker)

    def predict(self, sample: ModelInput) -> ModelOutput:
        if not (self.marker / "killed").exists():
            try:
                os.close(os.open(self.marker / "claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return super().predict(sample)
            (self.marker / "pid.tmp").write_text(str(os.getpid()))
            os.replace(self.marker / "pid.tmp", self.marker / "pid")
            time.sleep(120)
        return super().predict(sample)


class DiesOn(HoldModel):
    """Kills its own process whenever it is given the case ``uid`` (a case no worker survives)."""

    def __init__(self, uid: str, device: str = "cpu"):
        super().__init__(device=device)
        self.uid = uid

    def predict(self, sample: ModelInput) -> ModelOutput:
        if sample.uid == self.uid:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().predict(sample)
