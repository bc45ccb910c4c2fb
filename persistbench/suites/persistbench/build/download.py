"""``persistbench download``: recipes -> sources -> reconstructed dataset.

The Python API behind the command: :func:`resolve_recipes` finds the recipe
file (bundled sample, local path, ``http(s)://`` or ``hf://``), and
:func:`download` runs it on an executor (:mod:`persistbench.executors`),
one case = fetch the source clip, then reconstruct.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.layout import STATE_DIR
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, Outcome, RunResult, Selection, SerialExecutor
from persistbench.io import hub, web
from persistbench.io.files import atomic_path, check_writable, sha256_file, write_json
from persistbench.io.names import confined
from persistbench.suites.persistbench.build import availability
from persistbench.suites.persistbench.build.recipes import MAX_FILE_BYTES, Recipe, load_recipes
from persistbench.suites.persistbench.build.reconstruct import clip_frames, reconstruct_case
from persistbench.suites.persistbench.build.sources import (
    SourceOptions,
    cached_clip,
    fetch,
    is_youtube,
    require_js_runtime,
)
from persistbench.suites.persistbench.build.ytdl_job import js_runtime
from persistbench.suites.persistbench.index import (
    completion_records,
    files_present,
    read_case_records,
    read_index,
    rebuild_index,
    recorded_sha256,
)
from persistbench.suites.persistbench.layout import RECIPES_PROVENANCE, SUBSETS, CacheLayout


def bundled_recipes() -> Path:
    """The sample recipes shipped in the package (sources are ``file://`` clips beside them)."""
    return Path(str(resources.files("persistbench") / "data" / "sample" / "recipes.jsonl"))


@dataclass(frozen=True)
class RecipeSource:
    path: Path  # local file
    spec: str  # what the user gave (or "bundled")
    revision: str | None = None  # hf:// commit hash
    final_url: str | None = None  # http(s): where the file came from after redirects (within one server)

    @property
    def origin(self) -> str:
        """How errors name the file: the URL for a fetched file, else its path."""
        return self.spec if self.spec.startswith(("http://", "https://", "hf://")) else str(self.path)


def resolve_recipes(spec: str | None, cache: Path) -> RecipeSource:
    """Local path, ``http(s)://`` URL (fetched into the cache), ``hf://OWNER/REPO/PATH[@REV]``
    (a dataset repo, fetched with huggingface_hub, revision resolved to a commit), or
    None for the bundled sample."""
    if spec is None:
        return RecipeSource(bundled_recipes(), "bundled")
    if spec.startswith(("http://", "https://")):
        target = CacheLayout(cache).recipes_copy(spec)
        try:  # streamed to disk, refused past the limit, nothing left behind when it fails
            with atomic_path(target) as tmp, open(tmp, "wb") as sink:
                response = web.request(spec, MAX_FILE_BYTES, sink=sink)
        except PersistbenchError as e:
            raise PersistbenchError(f"cannot fetch recipes: {e}") from None
        return RecipeSource(target, spec, final_url=response.url)
    if spec.startswith("hf://"):
        return _hf_recipes(spec, cache)
    path = Path(spec)
    if not path.is_file():
        raise PersistbenchError(f"{spec}: no such recipes file")
    return RecipeSource(path, spec)


def _hf_recipes(spec: str, cache: Path) -> RecipeSource:
    body, _, revision = spec[len("hf://") :].partition("@")
    parts = body.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise PersistbenchError(f"{spec}: expected hf://OWNER/REPO/PATH[@REVISION]")
    repo = f"{parts[0]}/{parts[1]}"
    target = CacheLayout(cache).recipes_copy(spec)
    # the declared size checked first, the transfer stopped at it, nothing left behind when it fails
    where = f"{spec}: cannot fetch recipes from the Hugging Face Hub"
    meta = hub.download(repo, parts[2], revision or None, target, MAX_FILE_BYTES, where)
    return RecipeSource(target, spec, meta.commit)


@dataclass(frozen=True)
class DownloadOptions:
    """What :func:`download` does; ``sources`` says where clips come from (and the cache)."""

    output: Path
    sources: SourceOptions
    selection: Selection = Selection()
    frame_format: str = "png"
    download_only: bool = False
    accept_changed_sources: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        subset = self.selection.subset
        if subset is not None and subset not in SUBSETS:
            raise UsageError(f"--subset {subset}: PersistBench's subsets are {', '.join(SUBSETS)}")


def _download_case(recipe: Recipe, opts: DownloadOptions) -> None:
    with phase("download"):
        clip = fetch(recipe, opts.sources)
    if opts.download_only:
        return
    with phase("reproject"):  # decoding the clip, reprojecting and writing the views, as one stream
        reconstruct_case(recipe, clip_frames(recipe, clip), opts.output, opts.frame_format, opts.accept_changed_sources)


def _recorded(recipe: Recipe, root: Path) -> bool:
    """Whether the case is complete with this recipe (its completion record; asked again in the worker)."""
    return recorded_sha256(root, recipe.subset, recipe.case_id) == recipe.sha256


def plan(source: RecipeSource, opts: DownloadOptions) -> list[Recipe]:
    """The recipes this run handles, in the deterministic order."""
    recipes = load_recipes(source.path, source.origin)
    return opts.selection.apply(recipes, lambda r: r.subset)


def dry_run(source: RecipeSource, opts: DownloadOptions) -> list[str]:
    """What a run would do, one line per selected case (``<subset>/<case_id>: N frames from <url or cached>``)
    and a last line with the count; nothing is written."""
    selected = plan(source, opts)
    lines = [
        f"{r.subset}/{r.case_id}: {r.n_frames} frames from {'cached' if cached_clip(r, opts.sources) else r.source.url}"
        for r in selected
    ]
    return [*lines, f"dry run: {len(selected)} case(s), nothing written"]


def complete_cases(root: Path) -> dict[tuple[str, str], str]:
    """(subset, uid) -> recipe sha256 of the complete cases: their completion records, and the cases marked
    complete in both index files (datasets written before completion records)."""
    rows = {(r["subset"], r["uid"]) for r in read_index(root)}
    records = {(r["subset"], r["uid"]): r for r in read_case_records(root) if (r["subset"], r["uid"]) in rows}
    records.update({key: record for key, (_, record) in completion_records(root).items()})
    return {key: r.get("recipe_sha256", "") for key, r in records.items() if files_present(root, r)}


def to_download(recipes: list[Recipe], opts: SourceOptions) -> list[Recipe]:
    """The recipes whose clip is neither in the cache nor in ``--sources-dir``'s folder: what a run downloads."""
    return [] if opts.sources_dir is not None else [r for r in recipes if cached_clip(r, opts) is None]


def download(source: RecipeSource, opts: DownloadOptions, executor: Executor | None = None) -> RunResult:
    """Reconstruct (or with ``download_only`` just fetch) the selected cases on ``executor`` (default: serial).

    Complete cases whose recipe is unchanged are skipped; incomplete ones are redone. At the end the
    index files are brought in line with every case's completion record (:func:`aggregate` does only
    that, after the shards of a run). Returns one outcome per selected case, in order.
    """
    recipes = plan(source, opts)
    missing = to_download(recipes, opts.sources)
    youtube = any(is_youtube(r.source.url) for r in missing)
    if missing and opts.sources.remote is not None:
        from persistbench.suites.persistbench.build.remote import host

        remote = host(opts.sources.remote)
        remote.python()  # reachable, its host key known, its yt-dlp ready: before any case
        if youtube:
            require_js_runtime(remote.js_runtime(), opts.sources.remote.label)
    elif youtube:
        require_js_runtime(js_runtime())
    check_writable(
        *([] if opts.download_only else [opts.output]),
        *([] if opts.sources.sources_dir else [(opts.sources.cache, "cache")]),
    )
    if not opts.download_only:
        write_json(
            opts.output / RECIPES_PROVENANCE,
            {
                "recipes": source.spec,
                "revision": source.revision,
                "sha256": sha256_file(source.path),
                **({"url": source.final_url} if source.final_url and source.final_url != source.spec else {}),
            },
        )
    done = {} if opts.download_only else complete_cases(opts.output)
    state = confined(opts.output if not opts.download_only else opts.sources.cache, STATE_DIR)
    recheck = None if opts.download_only else functools.partial(_recorded, root=opts.output)
    job = Job(
        "download" if opts.download_only else "reconstruct",
        functools.partial(_download_case, opts=opts),
        state,
        recheck,
    )
    result = (executor or SerialExecutor()).run(
        job,
        recipes,
        key_of=lambda r: r.case_id,
        is_done=lambda r: done.get((r.subset, r.case_id)) == r.sha256,
        progress=opts.progress,
    )
    if not opts.download_only:
        rebuild_index(opts.output)
        _availability(source, opts, state)
    return result


def _availability(source: RecipeSource, opts: DownloadOptions, state: Path) -> None:
    """``availability.json``: every case of the recipes file, built or why not (:mod:`.availability`)."""
    everything = load_recipes(source.path, source.origin)
    availability.write(opts.output, everything, set(complete_cases(opts.output)), state, sha256_file(source.path))


def aggregate(source: RecipeSource, opts: DownloadOptions) -> RunResult:
    """``download --aggregate-only``: rebuild the index from the completion records once every shard is done;
    one outcome per selected case (``failed``: not complete with its recipe)."""
    if not opts.output.is_dir():
        raise PersistbenchError(f"{opts.output}: no dataset here; run download (its shards) first")
    rebuild_index(opts.output)
    _availability(source, opts, confined(opts.output, STATE_DIR))
    done = complete_cases(opts.output)
    return RunResult(
        "reconstruct",
        [
            Outcome(r.case_id, "done", attempts=1)
            if done.get((r.subset, r.case_id)) == r.sha256
            else Outcome(r.case_id, "failed", "not reconstructed (or with another recipe)")
            for r in plan(source, opts)
        ],
        "none",
    )
