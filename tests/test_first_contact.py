"""What a new user meets first (issue 38): every required option, a wrong output folder, the figures' colours."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import matplotlib.colors
import numpy as np
import pytest
from click.testing import CliRunner
from fakes.clirun import refused, run_cli

from persistbench.cli import main
from persistbench.io.files import sha256_file

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    return [(name, main.get_command(ctx, name)) for name in main.list_commands(ctx)]


def _valid(param: click.Parameter, folder: str) -> list[str]:
    """A value ``param`` accepts, so that only the missing one is refused."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return [str(kind.choices[0])]
    if isinstance(kind, (click.IntRange, click.FloatRange)) or kind in (click.INT, click.FLOAT):
        return [str(getattr(kind, "min", None) or 1)]
    return [folder]


REQUIRED = [
    (name, p.name)
    for name, command in _commands()
    for p in command.params
    if p.required and isinstance(p, click.Option)
]


def test_every_command_has_been_walked():
    assert {"infer", "synth", "fetch", "pack", "arena", "score"} <= {name for name, _ in REQUIRED}


@pytest.mark.parametrize(("command_name", "missing"), REQUIRED)
def test_a_missing_required_option_is_clicks_own_line(command_name, missing, tmp_path):
    """Each required option left out, every other one given a valid value: click's ``Missing option``, exit 2."""
    command = dict(_commands())[command_name]
    args: list[str] = [command_name]
    for p in command.params:
        if isinstance(p, click.Option) and p.required and p.name != missing:
            args += [p.opts[0], *_valid(p, str(tmp_path))]
        if isinstance(p, click.Argument) and p.required:
            args.append(str(tmp_path))
    result = CliRunner().invoke(main, args)
    opt = next(p for p in command.params if p.name == missing).opts[0]
    assert result.exit_code == 2, result.output
    assert f"Missing option '{opt}'" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


# ---------------------------------------------------------------- no command destroys its input


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sample_copy(sample_ds, tmp_path) -> Path:
    return Path(shutil.copytree(sample_ds, tmp_path / "ds"))


@pytest.mark.slow
def test_infer_into_its_dataset_is_refused_and_changes_nothing(sample_copy, tmp_path):
    before = _tree(sample_copy)
    for output in (sample_copy, sample_copy / "runs" / "hold", tmp_path):
        result = run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", output, "--no-progress")
        refused(result, str(output), "--output", "the dataset it reads")
    assert _tree(sample_copy) == before
    assert not (sample_copy / "runs").exists()
    assert run_cli("verify", sample_copy).returncode == 0


@pytest.mark.slow
def test_a_folder_of_another_kind_is_refused(sample_copy, tmp_path):
    run = tmp_path / "runs" / "hold"
    assert (
        run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", run, "--no-progress").returncode == 0
    )
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(sample_copy / "cases.jsonl", other / "cases.jsonl")
    run_before, other_before = _tree(run), _tree(other)
    refused(
        run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", other), "holds a persistbench dataset"
    )
    refused(run_cli("download", "--output", run, "--no-progress"), "holds a run, not a persistbench dataset")
    refused(run_cli("synth", "--output", other), "holds a persistbench dataset, not synthetic data")
    refused(run_cli("fetch", "--output", run), "holds a run")
    refused(run_cli("pack", sample_copy, "--output", run), "holds a run")
    refused(run_cli("pack", sample_copy, "--output", sample_copy / "dist"), "lies inside the dataset")
    refused(run_cli("score", "--pred", sample_copy), "holds a persistbench dataset, not a run")
    refused(run_cli("report", run, "--output", run / "run.json"), "not a .html file")
    refused(run_cli("package", "--pred", run, "--output", run / "run.json"), "not a .zip file")
    refused(run_cli("arena", run, sample_copy, "-o", run / "study"), "lies inside the run")
    assert _tree(run) == run_before and _tree(other) == other_before


@pytest.mark.slow
def test_download_rebuilds_a_completed_case_whose_files_are_gone(sample_ds, sample_copy):
    """A case marked complete whose folder was replaced is redone, not skipped on trust."""
    victim = next(p for p in sorted((sample_copy / "dynamic").iterdir()) if p.is_dir())
    shutil.rmtree(victim / "center")
    assert run_cli("verify", sample_copy).returncode != 0
    cache = sample_ds.parent / "cache"
    result = run_cli("download", "--output", sample_copy, "--cache", cache, "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done 1" in result.stdout, result.stdout
    assert _tree(sample_copy / "dynamic") == _tree(sample_ds / "dynamic")
    assert run_cli("verify", sample_copy).returncode == 0


# ---------------------------------------------------------------- one colour per run, in every figure


def _case(values: list[float] | None) -> dict:
    n = 6
    return {
        "frame_indices": list(range(n)),
        "visible": [True, True, False, False, False, False],
        "invisible": [False, False, True, True, True, True],
        "metrics": {"psnr": [20.0] * n, **({"continuity": values} if values is not None else {})},
    }


def test_memory_curves_keep_each_runs_colour_when_a_run_has_no_values_in_a_panel():
    """The first run has no continuity: the others keep their colours there, and the panel names it."""
    from persistbench.core.report import name_runs
    from persistbench.suites.persistbench.report import curves_figure

    decaying, flat = [1.0, 1.0, 0.8, 0.6, 0.4, 0.2], [1.0] * 6
    runs = name_runs(
        [
            {"name": "hold", "path": Path("runs/hold"), "results": {"cases": [_case(None)]}},
            {"name": "reproject", "path": Path("runs/reproject"), "results": {"cases": [_case(decaying)]}},
            {"name": "oracle", "path": Path("runs/oracle"), "results": {"cases": [_case(flat)]}},
        ]
    )
    colours = {r["name"]: r["colour"] for r in runs}
    assert len(set(colours.values())) == 3
    fig = curves_figure(runs, ["psnr", "continuity"])
    main_axes = [ax for ax in fig.axes if ax.get_title()]
    for ax in main_axes:
        for line in ax.get_lines():
            assert line.get_color() == colours[line.get_label()], (ax.get_title(), line.get_label())
    continuity = next(ax for ax in main_axes if ax.get_title() == "continuity")
    lines = {line.get_label(): line for line in continuity.get_lines()}
    assert set(lines) == {"reproject", "oracle"}
    assert list(lines["reproject"].get_ydata()) == decaying[2:]  # the decaying curve is reproject's
    assert any("no data: hold" in t.get_text() for t in continuity.texts)
    legend = fig.legends[0]
    assert {t.get_text(): h.get_color() for t, h in zip(legend.get_texts(), legend.legend_handles)} == colours


def test_bars_are_in_the_runs_colours_and_same_named_runs_differ():
    from persistbench.core.report import name_runs
    from persistbench.suites.persistbench.report import bar_figure

    block = {"visible": {"psnr": {"mean": 30.0}}, "invisible": {"psnr": {"mean": 20.0}}}
    runs = name_runs(
        [
            {"name": "hold", "path": Path("a/hold"), "summary": {"subsets": {"all": block}}},
            {"name": "hold", "path": Path("b/hold"), "summary": {"subsets": {"all": {}}}},
        ]
    )
    assert [r["name"] for r in runs] == ["a/hold", "b/hold"]
    fig = bar_figure(runs, "all", ["psnr"])
    ax = fig.axes[0]
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours[0] == colours[2] == runs[0]["colour"] and colours[1] == colours[3] == runs[1]["colour"]
    assert any("no data: b/hold" in t.get_text() for t in ax.texts)


# ---------------------------------------------------------------- extras and what doctor says


def _without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment in which ``modules`` do not import (as without their extra)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    return {"PYTHONPATH": str(site)}


@pytest.mark.slow
def test_arena_without_its_extra_is_one_line_naming_the_install(sample_copy, tmp_path):
    run = tmp_path / "runs" / "hold"
    assert (
        run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", run, "--no-progress").returncode == 0
    )
    result = run_cli("arena", run, run, "-o", tmp_path / "study", env=_without(tmp_path, "uvicorn"))
    refused(result, "uvicorn", 'pip install -e ".[arena]"')
    assert not (tmp_path / "study").exists()
    doctor = run_cli("doctor", "--for", "arena", env=_without(tmp_path, "uvicorn"))
    assert doctor.returncode == 1 and "MISSING  uvicorn" in doctor.stdout, doctor.stdout


@pytest.mark.slow
def test_doctor_for_download_lists_what_download_uses():
    out = run_cli("doctor", "--for", "download").stdout
    assert "JavaScript runtime" in out and "yt-dlp release date" in out
    assert "backend judge" not in out and "LPIPS" not in out and "matplotlib" not in out


@pytest.mark.slow
def test_doctor_names_a_node_that_is_too_old(tmp_path):
    """A node 20 on PATH (and no deno): doctor names it, its version, the minimum and the fix."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text("#!/bin/sh\necho v20.11.1\n")
    node.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "persistbench"), "doctor", "--for", "download"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    if "deno at" in result.stdout:
        pytest.skip("a deno beside this interpreter answers first")
    assert f"node 20.11.1 at {node}, older than the 22" in result.stdout, result.stdout
    assert "pip install deno" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        (["--modle", "hold"], "--model"),
        (["--model", "hold", "--resme"], "--resume"),
        (["--model", "hold", "--no-progres", "--limit", "2"], "--no-progress"),
        (["--model", "hold", "--tsks", "a"], "--tasks"),
    ],
)
def test_a_mistyped_option_is_no_such_option_with_the_closest_name(typo, meant, sample_ds, tmp_path):
    result = CliRunner().invoke(main, ["infer", "--dataset", str(sample_ds), "-o", str(tmp_path / "r"), *typo])
    assert result.exit_code == 2, result.output
    assert f"No such option '{typo[0] if typo[0] != '--model' else typo[2]}'" in result.output, result.output
    assert meant in result.output.splitlines()[-1], result.output
    assert not (tmp_path / "r").exists()


BROKEN_MODEL = """
from persistbench.models import BaseModel


class Broken(BaseModel):
    num_frames = 4
    resolution = (32, 48)

    def predict(self, inp):
        return deep_inside(inp)


def deep_inside(inp):
    raise ValueError("shape mismatch in layer 3")
"""


@pytest.mark.slow
def test_a_model_that_raises_keeps_its_traceback_in_the_record_and_a_log(sample_ds, tmp_path):
    (tmp_path / "broken.py").write_text(BROKEN_MODEL)
    run = tmp_path / "run"
    args = ["infer", "--model", f"{tmp_path / 'broken.py'}:Broken", "--dataset", sample_ds, "--limit", "1"]
    line = refused(run_cli(*args, "--output", run, "--no-progress"), "model raised ValueError", "traceback: ")
    log = Path(line.split("traceback: ")[1].rstrip(")").split(")")[0])
    assert log.parent == run / ".state" / "logs" and "in deep_inside" in log.read_text()
    record = json.loads(next((run / ".state" / "records").glob("*.json")).read_text())
    assert "in deep_inside" in record["reason"]
    debug = run_cli("--debug", *args, "--output", tmp_path / "run2", "--no-progress")
    assert debug.returncode == 1 and "in deep_inside" in debug.stderr, debug.stderr
    debug = run_cli(*args, "--output", tmp_path / "run3", "--no-progress", env={"PERSISTBENCH_DEBUG": "1"})
    assert "in deep_inside" in debug.stderr


@pytest.mark.slow
def test_a_bad_model_leaves_no_run_folder(sample_ds, tmp_path):
    refused(run_cli("infer", "--model", "nope.py:X", "--dataset", sample_ds, "-o", tmp_path / "r"), "no such file")
    refused(run_cli("infer", "--model", "holdd", "--dataset", sample_ds, "-o", tmp_path / "r"), "unknown model")
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def hold_run(sample_ds, tmp_path_factory) -> Path:
    """``hold``'s predictions of the bundled sample."""
    run = tmp_path_factory.mktemp("hold") / "hold"
    assert run_cli("infer", "--model", "hold", "--dataset", sample_ds, "-o", run, "--no-progress").returncode == 0
    return run


@pytest.mark.slow
def test_a_requested_metric_computed_for_no_case_fails_the_command(hold_run, tmp_path):
    run = Path(shutil.copytree(hold_run, tmp_path / "hold"))
    env = _without(tmp_path, "torch")
    line = refused(
        run_cli("score", "--pred", run, "--metrics", "lpips,psnr", "--no-progress", env=env), "could not be computed"
    )
    assert line.startswith("Error: lpips") and "torch" in line
    assert run_cli("score", "--pred", run, "--metrics", "psnr", "--no-progress", env=env).returncode == 0


@pytest.mark.slow
def test_run_json_says_how_the_model_inputs_were_resized(sample_ds, hold_run):
    """The sampling note is made from the resize the request runs (PIL bilinear), not written by hand."""
    from persistbench.core.case import CaseRef
    from persistbench.core.suites import open_suite
    from persistbench.geometry.sampling import crop_box, crop_resize

    info = json.loads((hold_run / "run.json").read_text())
    assert "bilinear resize (PIL, antialiased)" in info["sampling"]["rule"]
    assert "area" not in info["sampling"]["rule"]
    suite = open_suite(sample_ds)
    case = suite.cases()[0]
    req = suite.request(CaseRef(case.subset, case.case_id), 3, (48, 80), False)
    first = next(iter(suite.case(case.subset, case.case_id).view("view_0").frames()))
    box = crop_box(first.shape[:2], (48, 80))
    pil = crop_resize(first, box, (48, 80), rgb="pil-bilinear")
    area = crop_resize(first, box, (48, 80), rgb="area")
    got = np.round(req.fields["input_frames"][0] * 255).astype(np.uint8)
    assert np.array_equal(got, pil) and not np.array_equal(got, area)


@pytest.mark.slow
def test_a_dataset_grown_in_place_keeps_its_runs_valid_for_the_cases_they_predicted(sample_ds, tmp_path):
    cache, ds, run = sample_ds.parent / "cache", tmp_path / "ds", tmp_path / "run"
    assert run_cli("download", "--limit", "4", "--output", ds, "--cache", cache, "--no-progress").returncode == 0
    assert run_cli("infer", "--model", "hold", "--dataset", ds, "-o", run, "--no-progress").returncode == 0
    first = _tree(run)
    assert run_cli("download", "--output", ds, "--cache", cache, "--no-progress").returncode == 0  # all 8 now
    refused(run_cli("score", "--pred", run, "--no-progress"), "--allow-partial")  # 4 of 8 predicted: said so
    partial = run_cli("score", "--pred", run, "--allow-partial", "--no-progress")
    assert partial.returncode == 0, partial.stderr
    resumed = run_cli("infer", "--model", "hold", "--dataset", ds, "-o", run, "--resume", "--no-progress")
    assert resumed.returncode == 0 and "done 4, skipped 4" in resumed.stdout, resumed.stdout + resumed.stderr
    assert all(_tree(run)[p] == digest for p, digest in first.items() if not p.startswith(("run.json", ".state")))
    assert run_cli("score", "--pred", run, "--no-progress").returncode == 0
    case_json = sorted(run.glob("*/*/case.json"))[0]  # a case predicted on other content than the dataset's now
    record = json.loads(case_json.read_text())
    case_json.write_text(json.dumps({**record, "case_sha256": "0" * 64}))
    shutil.copy(sample_ds / "cases.jsonl", ds / "cases.jsonl")  # any change of the fingerprint
    (ds / "cases.jsonl").write_text((ds / "cases.jsonl").read_text() + "\n")
    refused(run_cli("score", "--pred", run, "--no-progress"), "1 case(s) changed", record["uid"])


# ---------------------------------------------------------------- help that says what the code does


def test_help_texts_agree_with_the_code():
    from persistbench.models.registry import MODELS

    infer_help = CliRunner().invoke(main, ["infer", "--help"], terminal_width=400).output
    assert all(name in infer_help for name in MODELS)
    assert "default: 1, in this process" in infer_help
    synth_help = CliRunner().invoke(main, ["synth", "--help"], terminal_width=400).output
    assert "The benchmark (default: the first registered suite)" in synth_help and "--no-progress" in synth_help
    assert "recognised from the dataset root" not in synth_help
    assert "-o, --output" in CliRunner().invoke(main, ["report", "--help"], terminal_width=400).output


def test_a_model_that_cannot_run_on_a_suite_is_refused_once(r2m, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["infer", "--model", "oracle", "--dataset", str(r2m), "-o", str(out)])
    assert result.exit_code == 2 and "copies the ground truth, and R2M-Bench has none" in result.output
    assert not out.exists()


@pytest.mark.slow
def test_paper_v3_names_every_backend_it_lacks_at_once(hold_run, tmp_path):
    run = Path(shutil.copytree(hold_run, tmp_path / "hold"))
    empty = tmp_path / "hf"
    env = {"HF_HOME": str(empty), "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "torch")}
    line = refused(run_cli("score", "--pred", run, "--protocol", "paper-v3", env=env), "backends cannot run")
    assert "sam2-package" in line and "dinov3-large" in line and "judge" in line


SLOW_MODEL = """
import time

from persistbench.models import ModelOutput
from persistbench.models.builtin import HoldModel


class Slow(HoldModel):
    def predict(self, sample):
        time.sleep(0.5)
        return super().predict(sample)
"""


@pytest.mark.slow
def test_ctrl_c_says_what_was_done_and_how_to_go_on(sample_ds, tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    run = tmp_path / "run"
    args = [sys.executable, "-m", "persistbench", "infer", "--model", f"{tmp_path / 'slow.py'}:Slow"]
    args += ["--dataset", str(sample_ds), "-o", str(run), "--no-progress"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((run / ".state" / "records").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "Aborted!" not in err, err
    assert "interrupted: infer finished" in err and "of 8 case(s), which are kept" in err, err
    assert "run the same command again with --resume" in err
    resumed = run_cli(*args[3:], "--resume")
    assert resumed.returncode == 0 and "skipped 0" not in resumed.stdout, resumed.stdout + resumed.stderr


@pytest.mark.slow
def test_a_new_users_walk_through_meets_no_surprise(tmp_path):
    """scripts/walkthrough.py: the README's flows on the bundled sample, a first day's mistakes included."""
    spec = importlib.util.spec_from_file_location("walkthrough", ROOT / "scripts" / "walkthrough.py")
    walkthrough = sys.modules["walkthrough"] = importlib.util.module_from_spec(spec)  # its dataclass needs it
    spec.loader.exec_module(walkthrough)
    assert walkthrough.walk(tmp_path, echo=lambda line: None) == []
    broken = walkthrough.Step(["infer", "--model", "hold", "--dataset", "nowhere", "-o", "x"], refused="unknown model")
    result = run_cli(*broken.args)
    assert "not one Error: line" in walkthrough.check(broken, result, tmp_path, *walkthrough.known_names())


@pytest.mark.slow
def test_the_report_says_where_the_psnr_cap_rules_and_draws_sheets_of_the_runs_named(hold_run, tmp_path):
    a = Path(shutil.copytree(hold_run, tmp_path / "a" / "hold"))
    b = Path(shutil.copytree(hold_run, tmp_path / "b" / "hold"))
    for run in (a, b):
        assert run_cli("score", "--pred", run, "--metrics", "psnr,ssim", "--no-progress").returncode == 0
    again = run_cli("score", "--pred", a, "--metrics", "psnr,ssim", "--no-progress")
    assert "scored again: 8 case(s)" in again.stdout
    html, home, cache = tmp_path / "r.html", tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    env = {"HOME": str(home), "MPLCONFIGDIR": "", "XDG_CACHE_HOME": "", "PERSISTBENCH_CACHE": str(cache)}
    assert run_cli("report", a, b, "-o", html, "--sheets", "b/hold", env=env).returncode == 0
    assert not list(home.iterdir()) and (cache / "matplotlib").is_dir()  # matplotlib's caches: the project's
    text = html.read_text()
    assert "Contact sheets (b/hold)" in text and "Contact sheets (a/hold)" not in text
    assert "score the PSNR cap (100 dB), which dominates its visible PSNR mean" in text


def test_the_demo_into_a_used_folder_says_which_output_to_pass(tmp_path):
    (tmp_path / "persistbench-demo").mkdir()
    (tmp_path / "persistbench-demo" / "report.html").write_text("an earlier demo")
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    line = refused(result, "--output persistbench-demo-2")
    assert "a finished demo" in line


@pytest.mark.slow
def test_recipe_redirects_stay_on_the_server_asked(tmp_path):
    """Issue 39: a redirect to another server or to ftp:// is refused in one line, a loop too; one within the
    server is followed and its final URL recorded."""
    from http.server import BaseHTTPRequestHandler

    from fakes.loopback import LoopbackServer

    from persistbench.io import web
    from persistbench.suites.persistbench.build.download import resolve_recipes

    recipes = (ROOT / "persistbench" / "data" / "sample" / "recipes.jsonl").read_bytes()

    class Other(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(recipes)))
            self.end_headers()
            self.wfile.write(recipes)

        def log_message(self, *args):
            pass

    with LoopbackServer(Other) as other:

        class Redirects(Other):
            def do_GET(self):
                where = {
                    "/away": other.url + "/r.jsonl",
                    "/ftp": "ftp://127.0.0.1/r.jsonl",
                    "/loop": "/loop",
                    "/same": "/r.jsonl",
                }.get(self.path)
                if where is None:
                    return super().do_GET()
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()

        with LoopbackServer(Redirects) as server:
            assert web.request(server.url + "/same", 1 << 20).url == server.url + "/r.jsonl"
            source = resolve_recipes(server.url + "/same", tmp_path / "cache")
            assert source.final_url == server.url + "/r.jsonl" and source.path.read_bytes() == recipes
            for path, needle in (("/away", "another server"), ("/ftp", "another server"), ("/loop", "HTTP 302")):
                result = run_cli("download", "--recipes", server.url + path, "--dry-run", "--cache", tmp_path / "c")
                refused(result, "cannot fetch recipes", needle)
