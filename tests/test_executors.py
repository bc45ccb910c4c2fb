"""Executors: serial, local processes and Ray give the same bytes; dead workers are replaced and their case
retried (a bounded number of times); every stage takes --shard and --aggregate-only; records and timings."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.infer import InferOptions, infer
from persistbench.core.report import build_report
from persistbench.core.score import ScoreOptions, score
from persistbench.executors import ExecutorOptions, ProcessExecutor, Selection, Shard, read_records
from persistbench.suites.persistbench.build.download import DownloadOptions, download, resolve_recipes
from persistbench.suites.persistbench.build.sources import SourceOptions
from persistbench.suites.r2m.synth import R2MSynthConfig
from persistbench.suites.r2m.synth import make as make_r2m
from persistbench.suites.wrop.synth import WropSynthConfig
from persistbench.suites.wrop.synth import make as make_wrop

ADAPTERS = Path(__file__).parent / "adapters" / "dying.py"
R2M_METRICS = ("frame_psnr", "frame_ssim", "sift_match_ratio")
WROP_METRICS = ("psnr", "ssim")


def digests(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every output file: not the executor's records (timings), not run.json (its
    start time)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".state" not in p.parts and p.name != "run.json"
    }


def cli(*args, code: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@contextlib.contextmanager
def killer(marker: Path):
    """Kill (SIGKILL) the process that writes its id to ``marker/pid``, once, from a thread of this process;
    yields the list of killed process ids."""
    killed: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if (marker / "pid").exists():
                pid = (marker / "pid").read_text()
                (marker / "killed").touch()
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()


# ---------------------------------------------------------------- the interface


def test_selection_and_options():
    items = [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5)]
    subset_of = lambda it: it[0]  # noqa: E731
    assert Selection(subset="a").apply(items, subset_of) == [("a", 1), ("a", 3), ("a", 4)]
    assert Selection(limit=4, shard=Shard(1, 2)).apply(items) == [("b", 2), ("a", 4)]
    shards = [Selection(shard=Shard(k, 3)).apply(items) for k in range(3)]
    assert sorted(x for s in shards for x in s) == sorted(items)  # every item exactly once
    assert ExecutorOptions().resolved == "serial" and ExecutorOptions(workers=2).resolved == "processes"
    for bad in ({"gpus_per_task": 1.0}, {"ray_address": "auto", "kind": "processes"}, {"kind": "serial", "workers": 2}):
        with pytest.raises(UsageError):
            ExecutorOptions(**bad)
    args = ("infer", "--model", "hold", "--dataset", ".", "--output", "x", "--gpus-per-task", "1")
    assert "--gpus-per-task need --executor ray" in cli(*args, code=2)


@pytest.mark.slow
def test_processes_give_the_serial_bytes_and_records_say_where_time_went(sample_ds, tmp_path):
    serial, procs = tmp_path / "serial", tmp_path / "procs"
    a = infer(InferOptions(dataset=sample_ds, output=serial, model="reproject"), progress=False)
    b = infer(
        InferOptions(dataset=sample_ds, output=procs, model="reproject"), executor=ProcessExecutor(2), progress=False
    )
    assert a.ok and b.ok and b.executor == "processes" and len(b) == 8
    assert digests(serial) == digests(procs)
    records = read_records(procs / ".state")
    assert len(records) == 8 and {r["stage"] for r in records} == {"infer"}
    assert all(set(r["phases"]) == {"decode", "model", "write"} and r["attempts"] == 1 for r in records)
    assert len({r["worker"] for r in records}) == 2  # two processes shared the cases
    assert all(sum(r["phases"].values()) <= r["seconds"] + 1e-6 for r in records)
    assert score(
        ScoreOptions(pred=procs, dataset=sample_ds, metrics=("psnr",)), None, ProcessExecutor(2), progress=False
    ).ok
    page = build_report([procs], tmp_path / "report.html").read_text()
    timing = page[page.index("Where the time went") : page.index("</table>", page.index("Where the time went"))]
    assert "<td>infer</td><td>8</td>" in timing and "<td>score</td><td>8</td>" in timing
    assert all(phase in timing for phase in ("decode", "model", "write", "metrics"))


@pytest.mark.slow
def test_a_killed_process_worker_is_replaced_and_its_case_retried(sample_ds, tmp_path):
    clean = infer(InferOptions(dataset=sample_ds, output=tmp_path / "clean", model="hold"), progress=False)
    marker = tmp_path / "marker"
    marker.mkdir()
    opts = InferOptions(
        dataset=sample_ds, output=tmp_path / "killed", model=f"{ADAPTERS}:KilledOnce", config={"marker": str(marker)}
    )
    with killer(marker):
        result = infer(opts, executor=ProcessExecutor(2), progress=False)
    assert clean.ok and result.ok and result.retries == 1 and "retried 1" in result.text()
    assert digests(tmp_path / "clean") == digests(tmp_path / "killed")


@pytest.mark.slow
def test_a_case_that_kills_every_worker_fails_after_the_retries_and_the_rest_runs(sample_ds, tmp_path):
    victim = sorted(p.name for p in sample_ds.glob("*/*") if p.is_dir())[0]
    opts = InferOptions(dataset=sample_ds, output=tmp_path / "r", model=f"{ADAPTERS}:DiesOn", config={"uid": victim})
    result = infer(opts, executor=ProcessExecutor(2, max_retries=1), progress=False)
    [failed] = result.failed
    assert failed.key.endswith(victim) and failed.attempts == 2 and "died (signal SIGKILL)" in failed.reason
    assert "on each of 2 attempts" in failed.reason and result.count("done") == 7
    marked = {r["key"]: r for r in read_records(tmp_path / "r" / ".state")}
    assert marked[failed.key]["status"] == "failed" and marked[failed.key]["attempts"] == 2


@pytest.mark.slow
def test_a_case_that_raises_is_not_retried(dataset_copy, tmp_path):
    victim = next(dataset_copy.glob("*/*/view_0/frames/frame_0000.png"))
    victim.write_bytes(b"not a png")
    result = infer(InferOptions(dataset=dataset_copy, output=tmp_path / "r", model="hold"), progress=False)
    [failed] = result.failed
    assert failed.attempts == 1 and result.retries == 0 and "frame_0000.png" in failed.reason


# ---------------------------------------------------------------- every stage sharded, then --aggregate-only


@pytest.mark.slow
def test_every_stage_takes_shards_then_aggregate_only(synth_dir, dataset_dir, tmp_path):
    recipes = synth_dir / "recipes.jsonl"
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    common = ("--no-progress", "--recipes", recipes, "--cache", tmp_path / "cache")
    cli("download", *common, "--output", whole / "ds")
    for k in (1, 0):
        assert "shard" in cli("download", *common, "--output", parts / "ds", "--shard", f"{k}/2")
    assert "done 2" in cli("download", *common, "--output", parts / "ds", "--aggregate-only")
    assert digests(whole / "ds") == digests(parts / "ds")

    infer_args = ("infer", "--no-progress", "--model", "reproject", "--dataset", dataset_dir)
    cli(*infer_args, "--output", whole / "run")
    cli(*infer_args, "--output", parts / "run", "--shard", "0/2")
    assert "done 1, skipped 0, failed 1" in cli(*infer_args, "--output", parts / "run", "--aggregate-only", code=1)
    cli(*infer_args, "--output", parts / "run", "--shard", "1/2")
    assert "done 2, skipped 0, failed 0" in cli(*infer_args, "--output", parts / "run", "--aggregate-only")
    assert digests(whole / "run") == digests(parts / "run")

    cli("pack", dataset_dir, "--output", whole / "dist", "--no-progress", "--shard-size", "100KB")
    for k in (0, 1):
        cli(
            "pack",
            dataset_dir,
            "--output",
            parts / "dist",
            "--no-progress",
            "--shard-size",
            "100KB",
            "--shard",
            f"{k}/2",
        )
    assert not (parts / "dist").exists() and (parts / ".dist.pack").is_dir()
    cli("pack", dataset_dir, "--output", parts / "dist", "--no-progress", "--shard-size", "100KB", "--aggregate-only")
    assert digests(whole / "dist") == digests(parts / "dist") and not (parts / ".dist.pack").exists()

    cli("fetch", "--from", whole / "dist", "--output", whole / "fetched", "--no-progress")
    for k in (0, 1, 2):
        cli("fetch", "--from", whole / "dist", "--output", parts / "fetched", "--no-progress", "--shard", f"{k}/3")
    assert not (parts / "fetched" / "fetch.json").exists()
    cli("fetch", "--from", whole / "dist", "--output", parts / "fetched", "--no-progress", "--aggregate-only")
    assert digests(whole / "fetched") == digests(parts / "fetched")


@pytest.mark.slow
def test_an_interrupted_pack_keeps_its_staged_pairs(dataset_dir, tmp_path):
    from persistbench.suites.persistbench.dist.pack import pack, staging_dir

    out = tmp_path / "dist"
    pack(dataset_dir, out, 100_000, shard=Shard(0, 2))  # what a killed pack leaves: some pairs staged
    staged = sorted(p for p in staging_dir(out).glob("*/*/*") if p.is_dir())
    again = pack(dataset_dir, out, 100_000)
    assert again.count("skipped") == len(staged) == 1 and again.count("done") == 1 and again.value.root == out


# ---------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_home(tmp_path_factory) -> Path:
    """The home folder of the module's Ray session, which must stay empty (no ~/.ray)."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def ray_executor(ray_home):
    pytest.importorskip("ray")
    from persistbench.executors.ray import RayExecutor

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(ray_home))
        for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
            mp.delenv(name, raising=False)
        with RayExecutor(num_cpus=2) as ex:  # one local cluster for the module
            yield ex


@pytest.mark.slow
def test_ray_gives_the_serial_bytes_on_the_bundled_sample(ray_executor, ray_home, sample_ds, tmp_path):
    opts = DownloadOptions(output=tmp_path / "ds", sources=SourceOptions(cache=tmp_path / "cache"), progress=False)
    result = download(resolve_recipes(None, tmp_path / "cache"), opts, ray_executor)
    assert result.ok and result.executor == "ray" and result.count("done") == 8
    assert digests(tmp_path / "ds") == digests(sample_ds)
    for name, ex in (("serial", None), ("ray", ray_executor)):
        run = tmp_path / name / "run"  # the run's name is in its results
        assert infer(InferOptions(dataset=sample_ds, output=run, model="hold"), executor=ex, progress=False).ok
        assert score(
            ScoreOptions(pred=run, dataset=sample_ds, metrics=("psnr", "ssim", "iou")), None, ex, progress=False
        ).ok
    assert digests(tmp_path / "serial") == digests(tmp_path / "ray")
    workers = {r["worker"] for r in read_records(tmp_path / "ray" / "run" / ".state")}
    assert len(workers) == 2 and all(int(w.split(":")[1]) != os.getpid() for w in workers)
    assert not list(ray_home.iterdir())  # a local Ray's token and files stay out of ~ (no ~/.ray)


@pytest.mark.slow
def test_ray_gives_the_serial_bytes_on_r2m_and_wrop(ray_executor, tmp_path):
    tree = make_r2m(tmp_path / "r2m", R2MSynthConfig(cases=1))
    corpus = tmp_path / "wrop"
    make_wrop(corpus, WropSynthConfig(samples=2))
    for dataset, model, metrics in ((tree, "warp", R2M_METRICS), (corpus, "flow", WROP_METRICS)):
        for name, ex in (("serial", None), ("ray", ray_executor)):
            run = tmp_path / name / dataset.name
            assert infer(InferOptions(dataset=dataset, output=run, model=model), executor=ex, progress=False).ok
            opts = ScoreOptions(pred=run, dataset=dataset, metrics=metrics)
            assert score(opts, None, ex, allow_partial=True, progress=False).value is not None
        assert digests(tmp_path / "serial" / dataset.name) == digests(tmp_path / "ray" / dataset.name)


@pytest.mark.slow
def test_a_killed_ray_worker_is_retried_and_the_output_is_identical(ray_executor, sample_ds, tmp_path):
    clean = infer(InferOptions(dataset=sample_ds, output=tmp_path / "clean", model="hold"), progress=False)
    marker = tmp_path / "marker"
    marker.mkdir()
    opts = InferOptions(
        dataset=sample_ds, output=tmp_path / "killed", model=f"{ADAPTERS}:KilledOnce", config={"marker": str(marker)}
    )
    with killer(marker) as killed:
        result = infer(opts, executor=ray_executor, progress=False)
    assert killed and int(killed[0]) != os.getpid()  # a Ray worker's process, not the driver
    assert clean.ok and result.ok and result.retries == 1 and "retried 1" in result.text()
    assert [r["attempts"] for r in read_records(tmp_path / "killed" / ".state")].count(2) == 1
    assert digests(tmp_path / "clean") == digests(tmp_path / "killed")


@pytest.mark.slow
def test_a_ray_case_that_kills_every_worker_is_reported_after_the_retries(
    ray_executor, sample_ds, tmp_path, monkeypatch
):
    monkeypatch.setattr(ray_executor, "max_retries", 1)
    victim = sorted(p.name for p in sample_ds.glob("*/*") if p.is_dir())[0]
    opts = InferOptions(dataset=sample_ds, output=tmp_path / "r", model=f"{ADAPTERS}:DiesOn", config={"uid": victim})
    result = infer(opts, Selection(limit=3), ray_executor, progress=False)
    [failed] = result.failed
    assert failed.attempts == 2 and "Ray worker died" in failed.reason and result.count("done") == 2


@pytest.fixture
def fresh_workers(ray_executor):
    """The module's Ray executor with no idle workers before and after the test (one started with other
    settings would hold the cluster's CPUs)."""
    ray_executor.release_workers()
    yield ray_executor
    ray_executor.release_workers()


@pytest.mark.slow
def test_ray_workers_in_another_folder_see_the_drivers_paths(fresh_workers, sample_ds, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fresh_workers, "worker_setup", functools.partial(os.chdir, elsewhere))
    opts = InferOptions(dataset=sample_ds, output=Path("runs/rel"), model="hold")
    result = infer(opts, Selection(limit=2), fresh_workers, progress=False)
    assert result.ok and len(list((tmp_path / "runs" / "rel").glob("*/*/case.json"))) == 2
    assert not any(elsewhere.iterdir())


@pytest.mark.slow
def test_the_cli_runs_on_ray(fresh_workers, dataset_dir, tmp_path):
    args = ("--no-progress", "--model", "hold", "--dataset", dataset_dir, "--output", tmp_path / "run")
    out = cli("infer", *args, "--executor", "ray", "--cpus-per-task", "0.5")
    assert "done 2, skipped 0, failed 0" in out
    out = cli("score", "--no-progress", "--pred", tmp_path / "run", "--metrics", "psnr", "--executor", "ray")
    assert "scores:" in out


def test_a_worker_without_the_drivers_folder_fails_each_case_saying_what_to_share(tmp_path):
    from persistbench.executors.base import take_job

    job = take_job(lambda key, item: None, str(tmp_path / "not-on-this-node"))
    outcome = job("case", None)
    assert outcome.status == "failed" and "not-on-this-node does not exist on this worker" in outcome.reason
    assert "mounted at the same path on every node" in outcome.reason


@pytest.mark.slow
def test_the_slurm_script_runs_each_stage_as_an_array_then_aggregates(synth_dir, tmp_path):
    script = Path(__file__).parent.parent / "scripts" / "slurm_array.sh"
    env = {
        **os.environ,
        "SHARED": str(tmp_path / "shared"),
        "RECIPES": str(synth_dir / "recipes.jsonl"),
        "MODEL": "reproject",
        "PERSISTBENCH": str(Path(sys.executable).parent / "persistbench"),
        "SLURM_CPUS_PER_TASK": "1",
    }
    for stage in ("download", "infer", "score"):
        for k in (1, 0):
            task = {**env, "SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": "2"}
            done = subprocess.run(["bash", str(script), stage], env=task, capture_output=True, text=True)
            assert done.returncode == 0 and "done 1, skipped 0, failed 0" in done.stdout, done.stdout + done.stderr
        done = subprocess.run(["bash", str(script), f"{stage}-aggregate"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    summary = tmp_path / "shared" / "runs" / "reproject" / "scores" / "classic-v1" / "summary.json"
    assert json.loads(summary.read_text())["partial"] is False


def _ray_orphans() -> set[int]:
    """Ray's per-node agents left without a parent (what a killed local Ray leaves behind)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, rest = stat.read_text().split(") ", 1)
        except OSError:
            continue
        if rest.split()[1] == "1" and (stat.parent / "cmdline").read_bytes().startswith(b"ray::"):
            found.add(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_a_killed_ray_driver_is_resumed_by_a_rerun(ray_executor, sample_ds, tmp_path):
    clean = tmp_path / "clean" / "run"
    assert infer(InferOptions(dataset=sample_ds, output=clean, model="reproject"), progress=False).ok
    run = tmp_path / "ray" / "run"
    cmd = [sys.executable, "-m", "persistbench", "infer", "--no-progress", "--model", "reproject"]
    cmd += ["--dataset", str(sample_ds), "--output", str(run), "--executor", "ray", "--resume"]
    before = _ray_orphans()
    try:
        driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while driver.poll() is None and not list(run.glob("*/*/case.json")):
            time.sleep(0.01)
        driver.send_signal(signal.SIGKILL)  # the driver, with its local Ray, mid-run
        driver.wait()
        time.sleep(3)  # its workers die with its Ray; one may finish the case it was writing
        finished = len(list(run.glob("*/*/case.json")))
        assert 1 <= finished < 8
        rerun = subprocess.run(cmd, capture_output=True, text=True)
        assert rerun.returncode == 0 and f"done {8 - finished}, skipped {finished}, failed 0" in rerun.stdout
    finally:
        for pid in _ray_orphans() - before:
            os.kill(pid, signal.SIGKILL)
    assert digests(clean) == digests(run)


@pytest.mark.slow
def test_r2m_and_wrop_fetch_take_shards_then_aggregate_only(tmp_path):
    tree = make_r2m(tmp_path / "src" / "r2m", R2MSynthConfig(cases=1))
    corpus = tmp_path / "src" / "wrop"  # beside the outputs: an output inside its source is refused
    make_wrop(corpus, WropSynthConfig(samples=1))
    for suite, source in (("r2m", tree), ("wrop", corpus)):
        common = ("fetch", "--suite", suite, "--from", source, "--no-progress", "--output")
        cli(*common, tmp_path / suite / "whole")
        for k in (0, 1):
            assert "shard" in cli(*common, tmp_path / suite / "parts", "--shard", f"{k}/2")
        assert not (tmp_path / suite / "parts" / "persistbench_fetch.json").exists()
        cli(*common, tmp_path / suite / "parts", "--aggregate-only")
        assert digests(tmp_path / suite / "whole") == digests(tmp_path / suite / "parts")


@pytest.mark.slow
def test_an_address_without_a_ray_cluster_is_one_line_at_once(ray_executor, dataset_dir, tmp_path):
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.perf_counter()
    args = ("--no-progress", "--model", "hold", "--dataset", dataset_dir, "--output", tmp_path / "run")
    out = cli("infer", *args, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", code=1)
    assert f"--ray-address 127.0.0.1:{port}: no Ray cluster answers there" in out and time.perf_counter() - start < 30
    assert not (tmp_path / "run").exists()  # refused before anything is written


@pytest.mark.slow
def test_more_ray_workers_than_cpus_still_runs_every_case(ray_executor, sample_ds, tmp_path):
    """Issue 22, item 5: --workers beyond the cluster's CPUs used to leave a case waiting for ever."""
    ray_executor.workers = 10_000
    try:
        assert ray_executor.size() == 2
        opts = InferOptions(dataset=sample_ds, output=tmp_path / "run", model="hold")
        result = infer(opts, executor=ray_executor, progress=False)
    finally:
        ray_executor.workers = None
    assert result.ok and result.count("done") == 8


@pytest.mark.slow
def test_ray_address_check_speaks_to_the_real_gcs_and_refuses_an_http_server(ray_executor):
    import http.server
    import threading

    import ray

    from persistbench.executors.ray import check_reachable

    check_reachable(ray.get_runtime_context().gcs_address)  # the local cluster's GCS passes
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(PersistbenchError, match="not a Ray cluster"):
            check_reachable(f"127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()


@pytest.mark.slow
def test_a_local_ray_removes_its_session_folder():
    pytest.importorskip("ray")
    import shutil
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes

    code = (
        "import pathlib, sys; from persistbench.executors.ray import RayExecutor\n"
        "with RayExecutor(num_cpus=1) as ex:\n"
        "    print(len(list(pathlib.Path(sys.argv[1]).glob('pbray*'))), ex.size())\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "1"]  # its folder while it ran, one worker for one CPU
    assert list(tmp_path.glob("pbray*")) == []
    shutil.rmtree(tmp_path)


def test_more_processes_than_cores_are_not_started():
    from persistbench.executors.local import ProcessExecutor

    ex = ProcessExecutor(workers=10_000)
    assert (
        ex.size()
        == ex._pool_size()
        == (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    )


class _Counted:
    """A job's prepared state that counts how often it was made and closed, in a file (workers are processes)."""

    def __init__(self, log: Path, fail: str | None):
        if fail == "bad input":
            raise PersistbenchError("model.pt: not a checkpoint")
        if fail == "bug":
            raise RuntimeError("a bug in setup")
        self.log = log
        with open(log, "a") as f:
            f.write(f"made {os.getpid()}\n")

    def close(self) -> None:
        with open(self.log, "a") as f:
            f.write(f"closed {os.getpid()}\n")


def _work(state: _Counted, item: str) -> None:
    with open(state.log, "a") as f:
        f.write(f"case {item} {os.getpid()}\n")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_jobs_setup_runs_once_per_worker_and_is_closed(tmp_path, workers):
    from persistbench.executors import Job

    log = tmp_path / "log"
    job = Job("prep", _work, tmp_path / "state", setup=functools.partial(_Counted, log, None))
    with ExecutorOptions(workers=workers).build() as ex:
        assert ex.run(job, [f"c{i}" for i in range(6)], key_of=str, progress=False).ok
    lines = log.read_text().splitlines()
    made = [line.split()[1] for line in lines if line.startswith("made")]
    closed = [line.split()[1] for line in lines if line.startswith("closed")]
    assert len(made) == len(set(made)) <= workers and sorted(made) == sorted(closed)
    assert sum(line.startswith("case") for line in lines) == 6


@pytest.mark.parametrize(("fail", "reason"), [("bad input", "model.pt: not a checkpoint"), ("bug", "internal error")])
def test_a_setup_that_fails_fails_each_case_with_its_reason(tmp_path, fail, reason):
    from persistbench.executors import Job, SerialExecutor

    job = Job("prep", _work, tmp_path / "state", setup=functools.partial(_Counted, tmp_path / "log", fail))
    result = SerialExecutor().run(job, ["a", "b"], key_of=str, progress=False)
    assert [o.status for o in result.outcomes] == ["failed", "failed"]
    assert all(o.reason.startswith(reason) for o in result.outcomes), result.outcomes
