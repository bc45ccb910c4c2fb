"""persistbench: does a video or 4D model remember what it no longer sees?

The command line (``persistbench --help``) is a thin layer over the modules
here; see DESIGN.md for the architecture and on-disk contracts.
"""

__version__ = "0.1.0"
