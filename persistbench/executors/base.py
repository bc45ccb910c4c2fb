"""The executor interface: one job mapped over case keys, the same way for every stage.

``download``, ``infer``, ``score``, ``pack`` and ``fetch`` each describe their work
as a :class:`Job` (a picklable callable of one item) and hand it, with the
selected items, to :meth:`Executor.run`. The executor owns everything around
the work: which items are already done, ordering, dispatch to workers,
retries when a worker dies, the progress bar with its ETA, and the per-case
records under ``<state dir>/records/``. Subclasses only say how calls reach
workers (:mod:`.local`: serial and processes; :mod:`.ray`: Ray actors).

Completion never depends on a lock: each stage's outputs are written to a
temporary name and renamed, and ``is_done`` checks them on read (a per-case
lock only keeps two runs on one machine from doing a case twice). The records
written here add what the outputs do not say: attempts, seconds per phase and
the worker, for ``persistbench report``.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import time
import traceback
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from persistbench.core import timing
from persistbench.core.errors import ForeignError, Interrupted, PersistbenchError, UsageError, debugging, os_error_line
from persistbench.core.layout import stage_lock, stage_log, stage_record, stage_records_dir
from persistbench.core.registry import Registry
from persistbench.io.files import file_lock, read_json, write_json, write_text

T = TypeVar("T")
DEFAULT_MAX_RETRIES = 2  # a case whose worker dies is run at most 1 + this many times


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: items whose position in the selection is ``index`` mod ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            k, n = (int(v) for v in text.split("/"))
            if not 0 <= k < n:
                raise ValueError
        except ValueError:
            raise PersistbenchError(f"--shard {text!r}: expected K/N with 0 <= K < N, e.g. 0/4") from None
        return cls(k, n)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def check_sharding(shard: Shard | None, aggregate_only: bool) -> None:
    """The rule of every stage that runs in shards: ``--shard`` runs part of the items, ``--aggregate-only`` then
    combines what every shard made, and never both in one call."""
    if shard is not None and aggregate_only:
        raise UsageError(
            "--shard runs part of the items; --aggregate-only then combines what every shard made: "
            "use them in separate calls"
        )


@dataclass(frozen=True)
class Selection:
    """Which of a stage's items one invocation handles: the items in their deterministic order, then
    ``subset``, then the first ``limit``, then every ``shard.count``-th from ``shard.index``.

    The same selection gives the same items on every machine, so ``--shard K/N`` on N machines
    covers the selection exactly once. (WROP's ``--tasks``/``--per-task`` are not here: they say
    which cases a dataset has, are recorded in ``run.json`` and are options of the suite.)
    """

    limit: int | None = None
    subset: str | None = None
    shard: Shard | None = None

    def apply(self, items: Sequence[T], subset_of: Callable[[T], str] | None = None) -> list[T]:
        chosen = [it for it in items if self.subset is None or subset_of is None or subset_of(it) == self.subset]
        if self.limit is not None:
            chosen = chosen[: self.limit]
        if self.shard is not None:
            chosen = chosen[self.shard.index :: self.shard.count]
        return chosen


@dataclass
class Outcome:
    """What became of one item: ``status`` is ``done``, ``skipped`` (done before) or ``failed``."""

    key: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    attempts: int = 0  # how many times it ran (0: skipped)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase (decode, model, write, ...)
    worker: str = ""  # host:pid of the worker that ran it last

    @property
    def retries(self) -> int:
        return max(0, self.attempts - 1)


@dataclass
class RunResult:
    """Every stage's answer: one outcome per selected item, in selection order, and how it ran."""

    stage: str
    outcomes: list[Outcome]
    executor: str = "serial"
    value: Any = None  # what the stage returns besides outcomes (score: the summary, or None for a shard)

    def __iter__(self) -> Iterator[Outcome]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def __getitem__(self, index: int) -> Outcome:
        return self.outcomes[index]

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def retries(self) -> int:
        return sum(o.retries for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.failed

    def text(self) -> str:
        """``done N, skipped M, failed K[, retried R]`` and one ``  key: reason`` line per failure."""
        head = ", ".join(f"{s} {self.count(s)}" for s in ("done", "skipped", "failed"))
        if self.retries:
            head += f", retried {self.retries}"
        lines = [head]
        lines += [f"  {o.reason if o.reason.startswith(o.key + ':') else f'{o.key}: {o.reason}'}" for o in self.failed]
        return "\n".join(lines)


@dataclass(frozen=True)
class Job(Generic[T]):
    """One stage's work on one item, run in any worker.

    ``setup()``, when given, makes what every case of the stage needs (the suite opened on its dataset, the
    protocol, a loaded model): it runs once in each worker, before its first case, and the job keeps the
    result for the worker's later cases (as a datatrove step keeps its loaded state per rank); it is never
    pickled, and :meth:`release` closes it (``close()``) when the worker is done with the job. ``work`` then
    takes it first: ``work(prepared, item)``, else ``work(item)``; ``is_done`` likewise. ``work`` does the job
    and raises :class:`PersistbenchError` with a one-line reason on bad input; it marks its phases with
    :func:`persistbench.core.timing.phase`. ``is_done(item)``, when given, says whether the item's outputs are
    already complete (checked again in the worker just before the work, so an item another process finished
    meanwhile is not redone). ``state_dir`` holds the per-case records.
    """

    stage: str
    work: Callable[..., object]
    state_dir: Path
    is_done: Callable[..., bool] | None = None
    setup: Callable[[], object] | None = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_prepared"}  # each worker prepares its own

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def prepared(self) -> object:
        """What :attr:`setup` made in this process (made now, on first use)."""
        if "_prepared" not in self.__dict__:
            object.__setattr__(self, "_prepared", self.setup())  # frozen: the cache is not a field
            atexit.register(self.release)  # a worker process ends without telling its jobs
        return self.__dict__["_prepared"]

    def release(self) -> None:
        """Close what :attr:`setup` made in this process, if anything (a model's ``close()``)."""
        prepared = self.__dict__.pop("_prepared", None)
        close = getattr(prepared, "close", None)
        if callable(close):
            close()

    def _args(self, item: T) -> tuple:
        return (self.prepared(), item) if self.setup is not None else (item,)

    def __call__(self, key: str, item: T) -> Outcome:
        start = time.perf_counter()
        worker = f"{socket.gethostname()}:{os.getpid()}"
        # Two runs into one output on one machine do each case once: the second waits, then finds it done.
        # Only work is saved: outputs are renamed into place whole, so an unlocked duplicate writes the same bytes.
        with file_lock(stage_lock(self.state_dir, key), best_effort=True):
            try:
                done = self.is_done is not None and self.is_done(*self._args(item))
            except Exception:  # setup failed: the work fails the same way, and its handling says why
                done = False
            if done:
                return Outcome(key, "skipped", worker=worker)
            return self._run(key, item, start, worker)

    def _run(self, key: str, item: T, start: float, worker: str) -> Outcome:
        with timing.collect() as phases:
            try:
                self.work(*self._args(item))
                status, reason = "done", ""
            except ForeignError as e:  # the user's code: one line pointing to its log, the traceback in the record
                log = self._log(key, e.details)
                status, reason = "failed", f"{str(e).splitlines()[0]} (traceback: {log})\n{e.details}"
            except PersistbenchError as e:
                status, reason = "failed", str(e).splitlines()[0]
            except OSError as e:  # the environment (disk full, permissions), not a bug: one line naming the path
                status, reason = "failed", os_error_line(e)
            except Exception as e:  # a bug (ours, a backend's), not bad input: the traceback to the record and log
                details = traceback.format_exc()
                line = f"internal error: {type(e).__name__}: {e}".splitlines()[0]
                status, reason = "failed", f"{line} (traceback: {self._log(key, details)})\n{details}"
        return Outcome(key, status, reason, time.perf_counter() - start, 1, dict(phases), worker)

    def _log(self, key: str, details: str) -> Path:
        """Write a case's traceback to ``<state>/logs/<key>.log`` (shown on stderr too with ``--debug``)."""
        path = stage_log(self.state_dir, key)
        write_text(path, details)
        if debugging():
            print(f"{key}:\n{details}", file=sys.stderr, flush=True)
        return path


@dataclass(frozen=True)
class WorkerLost:
    """A call whose worker died before answering (killed, out of memory, crashed)."""

    reason: str


@dataclass
class _Call(Generic[T]):
    key: str
    item: T
    attempts: int = 0


class Executor(ABC):
    """Maps a :class:`Job` over items. Use as a context manager (workers start on entry, stop on exit),
    or let :meth:`run` start them for one call.

    ``max_retries``: a case whose worker dies is given to a new worker at most this many times, then
    reported as failed with the reason. A case that fails by raising is not retried: it fails the
    same way again.
    """

    name = "executor"
    one_at_a_time: ClassVar[bool] = False  # runs one case at a time, in this process (no --workers)
    cluster: ClassVar[bool] = False  # takes --ray-address, --cpus-per-task and --gpus-per-task

    @classmethod
    def from_options(cls, opts: ExecutorOptions) -> Executor:
        """A new executor of this kind from the command line's options."""
        return (
            cls(max_retries=opts.max_retries)
            if cls.one_at_a_time
            else cls(workers=opts.workers, max_retries=opts.max_retries)
        )

    def __init__(self, max_retries: int = DEFAULT_MAX_RETRIES, worker_setup: Callable[[], object] | None = None):
        self.max_retries = max_retries
        self.worker_setup = worker_setup  # run once in each worker before its first case (tests: chdir elsewhere)
        self._started = False

    # ---------------------------------------------------------------- what subclasses provide

    def _start(self) -> None:  # noqa: B027 - an optional hook
        """Start the workers' infrastructure (a cluster connection, ...)."""

    def _stop(self) -> None:  # noqa: B027 - an optional hook
        """Release what :meth:`_start` and the workers hold."""

    @abstractmethod
    def _results(self, job: Job, calls: deque[_Call]) -> Iterator[tuple[_Call, Outcome | WorkerLost]]:
        """Run each call of ``calls`` (taking them from the left, as workers free up) and yield it with its
        outcome, or with :class:`WorkerLost`. Calls may be appended while this runs (retries)."""

    # ---------------------------------------------------------------- the loop

    def __enter__(self) -> Executor:
        if not self._started:
            self._start()
            self._started = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._started = False
            self._stop()

    def run(
        self,
        job: Job[T],
        items: Sequence[T],
        key_of: Callable[[T], str],
        is_done: Callable[[T], bool] | None = None,
        desc: str | None = None,
        progress: bool = True,
    ) -> RunResult:
        """Run ``job`` over ``items`` (already selected); outcomes come back in item order.

        Items for which ``is_done`` holds are skipped without reaching a worker.
        """
        from tqdm import tqdm

        owned = not self._started
        outcomes: dict[str, Outcome] = {}
        calls: deque[_Call] = deque()
        for it in items:
            if is_done is not None and is_done(it):
                outcomes[key_of(it)] = Outcome(key_of(it), "skipped")
            else:
                calls.append(_Call(key_of(it), it))
        bar = tqdm(
            total=len(items),
            initial=len(items) - len(calls),
            desc=desc or job.stage,
            unit="case",
            disable=not progress,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]",
        )
        failed = retried = 0
        try:
            if owned and calls:
                self.__enter__()
            for call, result in self._results(job, calls) if calls else ():
                if isinstance(result, WorkerLost):
                    if call.attempts <= self.max_retries:
                        retried += 1
                        calls.append(call)
                        bar.set_postfix(failed=failed, retried=retried, refresh=False)
                        continue
                    result = Outcome(
                        call.key, "failed", f"{result.reason} (on each of {call.attempts} attempts)", 0.0, call.attempts
                    )
                result.attempts = call.attempts
                outcomes[call.key] = result
                if result.status != "skipped":
                    self._record(job, result)
                failed += result.status == "failed"
                bar.set_postfix(failed=failed, retried=retried, refresh=False)
                bar.update(1)
        except KeyboardInterrupt:
            finished = sum(o.status != "failed" for o in outcomes.values())
            raise Interrupted(job.stage, finished, len(items)) from None
        finally:
            bar.close()
            job.release()  # what a serial run prepared here
            if owned:
                self.__exit__()
        return RunResult(job.stage, [outcomes[key_of(it)] for it in items], self.name)

    def _record(self, job: Job, outcome: Outcome) -> None:
        """Write the case's record (temporary name, then rename); the traceback of a bug is kept there only."""
        record = {"stage": job.stage, **asdict(outcome)}
        write_json(stage_record(job.state_dir, outcome.key), record)
        outcome.reason = outcome.reason.split("\n", 1)[0]


def read_records(state_dir: Path) -> list[dict]:
    """The per-case records of one stage's state folder, checked on read: a record that does not parse,
    or that is not one, is left out (a record is written whole or not at all, so this is a foreign file)."""
    folder = stage_records_dir(state_dir)
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            rec = read_json(path)
        except PersistbenchError:
            continue
        if isinstance(rec, dict) and rec.get("key") == path.stem and _is_record(rec):
            out.append(rec)
    return out


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def _is_record(rec: dict) -> bool:
    """Whether ``rec`` has the documented record fields with their types (docs/data-format.md, "Executor records")."""
    phases = rec.get("phases")
    return (
        rec.get("status") in ("done", "failed")
        and _number(rec.get("seconds", 0.0))
        and isinstance(phases, dict)
        and all(isinstance(k, str) and _number(v) for k, v in phases.items())
        and isinstance(rec.get("attempts", 1), int)
        and not isinstance(rec.get("attempts", 1), bool)
        and isinstance(rec.get("worker", ""), (str, type(None)))
    )


class PoolExecutor(Executor):
    """An executor of long-lived workers, each running one call at a time. Workers start when a run first
    needs them and stay until the executor stops, across runs and jobs: a worker loads what a job needs once
    (a model) and keeps it for every case it runs. Subclasses say how a worker starts, takes a job and a
    call, and answers; this class keeps the workers busy and replaces one that dies."""

    def __init__(self, workers: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.workers = workers
        self._idle: list[Any] = []

    @abstractmethod
    def _pool_size(self) -> int:
        """How many workers run at once (when ``workers`` was not given)."""

    @abstractmethod
    def _spawn(self) -> Any:
        """Start a worker (an object with a ``job`` attribute, None until :meth:`_assign`)."""

    @abstractmethod
    def _assign(self, worker: Any, job: Job, cwd: str) -> None:
        """Give ``worker`` the job its next calls belong to, to run in the folder ``cwd`` (the driver's)."""

    @abstractmethod
    def _submit(self, worker: Any, call: _Call) -> None:
        """Give ``worker`` one call."""

    @abstractmethod
    def _wait(self, busy: list[Any]) -> list[tuple[Any, Outcome | WorkerLost]]:
        """Block until at least one busy worker answers (or dies); return those."""

    @abstractmethod
    def _discard(self, worker: Any) -> None:
        """Let go of a worker (dead, or no longer needed)."""

    def release_workers(self) -> None:
        """Stop the idle workers (they hold their resources until then); the next run starts new ones."""
        while self._idle:
            self._discard(self._idle.pop())

    def _stop(self) -> None:
        self.release_workers()

    def size(self) -> int:
        """Workers at once: ``workers``, at most :meth:`_pool_size` (more processes than cores only compete;
        a Ray actor beyond the cluster's resources waits for ever while idle actors hold theirs)."""
        pool = max(1, self._pool_size())
        return min(self.workers, pool) if self.workers else pool

    def _results(self, job: Job, calls: deque[_Call]) -> Iterator[tuple[_Call, Outcome | WorkerLost]]:
        size = self.size()
        cwd = os.getcwd()
        busy: dict[Any, _Call] = {}
        try:
            while calls or busy:
                while calls and (self._idle or len(busy) < size):
                    worker = self._idle.pop() if self._idle else self._spawn()
                    if worker.job is not job:
                        self._assign(worker, job, cwd)
                        worker.job = job
                    call = calls.popleft()
                    call.attempts += 1
                    self._submit(worker, call)
                    busy[worker] = call
                for worker, result in self._wait(list(busy)):
                    call = busy.pop(worker)
                    if isinstance(result, WorkerLost):
                        self._discard(worker)  # a new one starts when a call needs it
                    else:
                        self._idle.append(worker)
                    yield call, result
        finally:
            for worker in busy:  # interrupted while they work: they go
                self._discard(worker)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def limit_threads(n: int) -> None:
    """Let this worker process use ``n`` threads in numpy's BLAS, OpenCV and torch: workers running side by
    side would otherwise each start a thread per core and slow each other down. Called before the job's
    imports (the variables are read when those libraries load)."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(n)
    import cv2

    cv2.setNumThreads(n)


@dataclass(frozen=True)
class Refusal:
    """Stands in for a job a worker cannot run: each of its calls fails with ``reason``."""

    reason: str

    def __call__(self, key: str, item: object) -> Outcome:
        return Outcome(key, "failed", self.reason, attempts=1, worker=f"{socket.gethostname()}:{os.getpid()}")


def take_job(job: Job, cwd: str) -> Job | Refusal:
    """What a worker runs for ``job``: the job, in the driver's folder ``cwd`` so that relative paths mean there
    what they mean in the driver; a :class:`Refusal` on a node without that folder, saying what must be shared."""
    try:
        os.chdir(cwd)
    except OSError:
        return Refusal(
            f"{socket.gethostname()}: the driver's folder {cwd} does not exist on this worker; the dataset, the "
            "output and the caches must be on a file system mounted at the same path on every node "
            "(docs/distributed.md)"
        )
    return job


EXECUTORS: Registry[type[Executor]] = Registry(
    "executor",
    {
        "serial": "persistbench.executors.local:SerialExecutor",
        "processes": "persistbench.executors.local:ProcessExecutor",
        "ray": "persistbench.executors.ray:RayExecutor",
    },
    option="--executor",
)


@dataclass(frozen=True)
class ExecutorOptions:
    """The command line's executor options. ``kind`` None: serial for one worker, processes for more."""

    kind: str | None = None
    workers: int | None = None
    ray_address: str | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    max_retries: int = DEFAULT_MAX_RETRIES

    def __post_init__(self) -> None:
        cls = EXECUTORS[self.resolved]
        if not cls.cluster and (self.ray_address or self.gpus_per_task or self.cpus_per_task != 1.0):
            raise UsageError("--ray-address, --cpus-per-task and --gpus-per-task need --executor ray")
        if cls.one_at_a_time and (self.workers or 1) > 1:
            raise UsageError(
                f"--executor {self.resolved} runs one case at a time; --workers {self.workers} needs processes or ray"
            )

    @property
    def resolved(self) -> str:
        if self.kind is not None:
            return self.kind
        return "processes" if (self.workers or 1) > 1 else "serial"

    def build(self) -> Executor:
        """A new executor of this kind (not started: use it as a context manager, or let ``run`` start it)."""
        return EXECUTORS[self.resolved].from_options(self)
