"""The ``persistbench`` command: argument parsing only; the work happens in the modules.

Heavy modules (numpy, cv2, torch) are imported inside the commands, so
``persistbench --help`` starts fast.
"""

from __future__ import annotations

import click

from . import __version__
from .errors import PersistbenchError


class _Group(click.Group):
    """Turns :class:`PersistbenchError` into a one-line ``Error: ...`` and exit code 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PersistbenchError as e:
            raise click.ClickException(str(e)) from None


def _size(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in value.lower().split("x"))
        if w <= 0 or h <= 0:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"{value!r} is not WIDTHxHEIGHT") from None
    return w, h


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="persistbench")
def main() -> None:
    """Benchmark visual memory of video and 4D models on reprojected 360-degree videos."""


@main.command()
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--scenes", default=4, show_default=True, type=click.IntRange(1), help="Scenes (even: dynamic, odd: static).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--base-url", default=None, help="Source URL prefix, e.g. http://127.0.0.1:8000 (default: relative file paths).")
@click.option("--pano-size", default="1024x512", show_default=True, callback=_size, help="Source clip size WxH (W = 2H).")
@click.option("--size", "view_size", default="256x192", show_default=True, callback=_size, help="Output view size WxH.")
@click.option("--hfov", default=90.0, show_default=True, type=click.FloatRange(1, 179, min_open=False), help="Horizontal field of view, degrees.")
@click.option("--frames", default=60, show_default=True, type=click.IntRange(2), help="Frames per scene.")
@click.option("--fps", default=10.0, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--speed", default=15.0, show_default=True, type=float, help="Angular speed of dynamic objects, degrees/s.")
@click.option("--radius", default=12.0, show_default=True, type=click.FloatRange(0.5, 45), help="Object angular radius, degrees.")
def synth(out, scenes, seed, base_url, pano_size, view_size, hfov, frames, fps, speed, radius) -> None:
    """Write procedural 360-degree scenes: source clips, recipes.jsonl and analytic truth.

    Example: persistbench synth --out synth --scenes 4 --seed 0
    """
    from .synth import SynthConfig, generate

    try:
        cfg = SynthConfig(scenes=scenes, seed=seed, pano_size=pano_size, view_size=view_size, hfov_deg=hfov,
                          n_frames=frames, fps=fps, speed_deg_s=speed, radius_deg=radius)  # fmt: skip
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    recipes = generate(out, cfg, base_url)
    click.echo(f"wrote {scenes} scenes: {recipes}")


@main.command()
@click.argument("root", type=click.Path(file_okay=False))
def verify(root) -> None:
    """Check a dataset against the layout contract; one line per problem.

    Example: persistbench verify reconstructed/
    """
    from .verify import verify_dataset

    problems, n = verify_dataset(root)
    for line in problems:
        click.echo(line)
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s) in {n} case(s) under {root}")
    click.echo(f"ok: {n} cases verified under {root}")
