"""The oracle on 4 evenly spaced frames (a short run for the slow model-backend tests)."""

from persistbench.models.builtin import OracleModel


class ShortOracle(OracleModel):
    num_frames = 4
