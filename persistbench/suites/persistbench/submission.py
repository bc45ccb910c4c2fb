"""A leaderboard submission of a ``paper-v3`` run: the public toolkit's ZIP, and a manifest that makes it checkable.

The ZIP holds, at its root, the public toolkit's three reports as its ``aggregate`` and ``package`` commands
write them (0.1.7, ``default-three-paper-v3``; docs/data-format.md, "Submission"):

* ``run.json`` — the evaluation manifest (schema 3): name, ``case_ids``, ``prediction_cases`` (uid ->
  prediction sha256 and frame count), preprocessing, judge and backend settings; its canonical sha256
  (``json.dumps(sort_keys=True)``) is the *evaluation id* every result carries;
* ``results.json`` — the per-case ``result.json`` bodies, sorted by uid, each stamped with the evaluation id,
  the score protocol and its prediction's sha256;
* ``summary.json`` — equal-weight means over cases of the saved per-case means, overall and per group
  (static / dynamic / unknown), with ``per_case``;

and our ``manifest.json`` beside them: the sha256 of the three reports, of every per-case result and of
every prediction file it came from, and the toolkit, protocol, weights and judge that produced them.
``persistbench package --check`` re-scores sampled cases from the predictions against it.

:func:`validate` makes the public ``package``'s checks (coverage of the 2,000 published cases unless a subset
is allowed, evaluation identities, per-frame scores in range and nothing before the track start, each case
mean equal to its frame scores, the summary recomputed) with our own code.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from persistbench import __version__
from persistbench.core.errors import PersistbenchError
from persistbench.io.files import JsonBudget, atomic_path, parse_json
from persistbench.suites.persistbench.layout import SPLITS
from persistbench.suites.persistbench.paper import PAPER_METRICS, PROCEDURE, to_public

SCHEMA_VERSION = 3
PUBLISHED_CASES = 2000
REPORTS = ("run.json", "results.json", "summary.json")
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "persistbench-submission/1"
MAX_REPORT_BYTES = 256 << 20  # the three reports together, as the public package allows
MAX_ZIP_BYTES = 100 << 20
# What a member may cost to parse (io/files.JsonBudget). The largest legitimate submission is 2,000 cases:
# measured at eval_length 6, results.json is 4.3 MB with 42,001 lists and objects (21 a case, whatever the
# length) and 108,000 commas (about 9 a frame a case); at 200 frames a case that is 3.6 million commas.
# These budgets keep a parse under a few hundred MB whatever the file holds (tests/suites/persistbench/test_package.py measures).
MEMBER_BUDGET = {
    "results.json": JsonBudget(MAX_REPORT_BYTES, 1_000_000, 8_000_000),
    "run.json": JsonBudget(64 << 20, 200_000, 2_000_000),
    "summary.json": JsonBudget(64 << 20, 200_000, 2_000_000),
    MANIFEST: JsonBudget(64 << 20, 200_000, 2_000_000),
}
SCORE_KEYS = tuple(f"{m}_{s}" for m in PAPER_METRICS for s in SPLITS)
GROUPS = ("static", "dynamic", "unknown")
CASE_FIELDS = ("fov", "obj_id", "overlap_mode", "window_ratio", "window_move_ratio")  # from the dataset's data.db
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same run gives the same bytes


def canonical_sha256(obj: object) -> str:
    """The public toolkit's identity of a JSON value: sha256 of ``json.dumps(obj, sort_keys=True)`` (UTF-8)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def dump(obj: object) -> bytes:
    """A report's bytes as the public toolkit writes them: indent 2, keys in order, ASCII, one final newline."""
    return (json.dumps(obj, indent=2, allow_nan=False) + "\n").encode()


def group_of(use_stationary: object) -> str:
    """``static`` (1), ``dynamic`` (0) or ``unknown``, by the public rule on the dataset's ``use_stationary``."""
    if use_stationary in (True, 1, "1") and not isinstance(use_stationary, float):
        return "static"
    if use_stationary in (False, 0, "0") and not isinstance(use_stationary, float):
        return "dynamic"
    return "unknown"


@dataclass(frozen=True)
class Submission:
    """The four members of a submission ZIP, parsed."""

    run: dict
    results: list[dict]
    summary: dict
    manifest: dict

    def members(self) -> dict[str, bytes]:
        """Member name -> bytes, in the order they are written."""
        reports = dict(zip(REPORTS, (dump(self.run), dump(self.results), dump(self.summary))))
        return reports | {MANIFEST: dump(self.manifest)}


# ---------------------------------------------------------------- building


def result_entry(record: dict, case_fields: dict, evaluation_id: str, protocol_config: dict) -> dict:
    """One ``results.json`` entry (the public ``result.json`` body, keys in its order) of one of our records
    scored under ``protocol_config`` (the ``paper-v3`` protocol's fields)."""
    public = to_public(record, protocol_config["eval_size"], protocol_config["matching"]["bbox_margin"])
    return {
        "uid": public["uid"],
        **{k: case_fields.get(k) for k in ("fov",)},
        "use_stationary": public["use_stationary"],
        **{k: case_fields.get(k) for k in CASE_FIELDS[1:]},
        "results": public["results"],
        "evaluation_run_id": evaluation_id,
        "score_protocol": PROCEDURE,
        "prediction_sha256": record["prediction_sha256"],
    }


def summarise(run: dict, results: list[dict]) -> dict:
    """``summary.json`` of complete results, as the public ``aggregate`` computes it: each key's mean over the
    cases that have a value (null when none), overall and per group, and every case's saved means."""
    per_case = {}
    for entry in sorted(results, key=lambda e: e["uid"]):
        res = entry["results"]
        per_case[entry["uid"]] = {f"{m}_{s}": res[m]["scalars"][s] for m in PAPER_METRICS for s in SPLITS}

    def block(uids: list[str]) -> dict:
        averages, counts = {}, {}
        for key in SCORE_KEYS:
            values = [per_case[u][key] for u in uids if per_case[u][key] is not None]
            averages[key] = math.fsum(values) / len(values) if values else None
            counts[key] = len(values)
        return {"cases": len(uids), "averages": averages, "valid_counts": counts}

    groups = {g: [] for g in GROUPS}
    for entry in results:
        groups[group_of(entry.get("use_stationary"))].append(entry["uid"])
    overall = block(list(per_case))
    return {
        "name": run["name"],
        "score_protocol": PROCEDURE,
        "complete": True,
        "expected_cases": len(run["case_ids"]),
        "completed_cases": len(results),
        "missing_case_ids": [],
        "judge": run["judge"],
        **overall,
        "groups": {g: block(sorted(uids)) for g, uids in groups.items()},
        "per_case": per_case,
    }


def build(
    name: str,
    records: list[dict],
    prediction_files: dict[str, dict[str, str]],
    case_fields: dict[str, dict],
    header: dict,
    protocol_config: dict,
    preprocessing: dict,
    prediction_run_id: str,
    availability: dict | None = None,
) -> Submission:
    """The submission of scored ``records`` (our ``paper-v3`` per-case records, complete).

    ``prediction_files``: uid -> file name -> sha256 of the prediction each record scored; ``case_fields``:
    uid -> the dataset's ``fov``, ``obj_id``, ``overlap_mode``, ``window_ratio``, ``window_move_ratio``;
    ``header``: the run's ``paper-v3`` ``summary.json`` (dataset fingerprint, backends, protocol sha256);
    ``preprocessing``: ``{eval_length, eval_reso}`` of the run's inputs; ``prediction_run_id``: sha256 of the
    run's ``run.json``; ``availability``: the dataset's cases available of the recipes (its manifest's summary).
    """
    if not NAME.fullmatch(name):
        raise PersistbenchError(
            f"--name {name!r}: a name is letters, digits, '_', '.', '-', starting with one of the first two"
        )
    uid = {id(r): f"{r['subset']}__{r['uid']}" for r in records}
    judge = protocol_config["judge"]
    served = sorted({a.get("answered_by") or "" for r in records for a in r["judge"].get("answered_by", [])} - {""})
    backends = header.get("backends") or {}
    run = {
        "schema_version": SCHEMA_VERSION,
        "score_protocol": PROCEDURE,
        "package_version": f"persistbench-toolkit {__version__}",
        "stage": "evaluation",
        "name": name,
        "dataset_id": header["dataset_fingerprint"],
        "case_ids": sorted(uid.values()),
        "num_splits": 1,
        "preprocessing": preprocessing,
        "prediction_run_id": prediction_run_id,
        "prediction_cases": {
            uid[id(r)]: {"sha256": r["prediction_sha256"], "num_frames": len(r["visible"])}
            for r in sorted(records, key=lambda r: uid[id(r)])
        },
        "judge": {
            "profile": "persistbench-toolkit",
            "model": judge["model"],
            "revision": None,
            "temperature": judge["temperature"],
            "max_tokens": judge["max_tokens"],
            "enable_thinking": judge["enable_thinking"],
            "serving": {"served_models": served},
        },
        "backend_config": {
            "models": {
                name: [{"sha256": b["sha256"]} for b in infos]
                for name, infos in sorted(backends.items())
                if name != "judge"
            }
        },
    }
    evaluation_id = canonical_sha256(run)
    results = sorted(
        (result_entry(r, case_fields.get(uid[id(r)], {}), evaluation_id, protocol_config) for r in records),
        key=lambda e: e["uid"],
    )
    summary = summarise(run, results)
    reports = dict(zip(REPORTS, (dump(run), dump(results), dump(summary))))
    manifest = {
        "format": MANIFEST_FORMAT,
        "toolkit": {"name": "persistbench", "version": __version__},
        "protocol": {"name": header["protocol"], "sha256": header["protocol_sha256"], "score_protocol": PROCEDURE},
        "weights": {
            name: sorted({b["sha256"] for b in infos}) for name, infos in sorted(backends.items()) if name != "judge"
        },
        "judge": run["judge"],
        "dataset_fingerprint": header["dataset_fingerprint"],
        "availability": availability,  # how many cases of the recipes the dataset has (None: not recorded)
        "evaluation_run_id": evaluation_id,
        "reports": {name: hashlib.sha256(data).hexdigest() for name, data in reports.items()},
        "cases": {
            e["uid"]: {
                "result_sha256": canonical_sha256(e),
                "prediction_sha256": e["prediction_sha256"],
                "prediction_files": prediction_files[e["uid"]],
            }
            for e in results
        },
    }
    return Submission(run, results, summary, manifest)


# ---------------------------------------------------------------- the public checks


def _score_ok(value: object, metric: str) -> bool:
    if value is None:
        return True
    if type(value) not in (int, float) or not math.isfinite(value):
        return False
    slack = 1e-6 if metric == "appearance_preservation" else 0.0
    low = -1.0 if metric == "appearance_preservation" else 0.0
    return low - slack <= value <= 1.0 + slack


def _close(a: object, b: float) -> bool:
    return type(a) in (int, float) and math.isfinite(a) and math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-9)


def case_scalars(entry: dict, num_frames: int) -> dict[str, float | None]:
    """The six saved means of one results entry, after the public checks of its masks and frame scores (each
    mean equal to the mean of its split's frame scores from the track start, rel 1e-7, abs 1e-9)."""
    uid = entry["uid"]
    meta = entry["results"]["metadata"]
    vis, inv, start = meta["visible_mask"], meta["invisible_mask"], meta["track_start_frame_idx"]
    n = len(vis) if isinstance(vis, list) else 0
    if not (
        0 < n == num_frames
        and isinstance(inv, list)
        and len(inv) == n
        and all(type(v) is bool for v in vis + inv)
        and not any(a and b for a, b in zip(vis, inv))
        and type(start) is int
        and 0 <= start < n
    ):
        raise ValueError(f"{uid}: invalid visibility masks, frame count or track start")
    out = {}
    for m in PAPER_METRICS:
        res = entry["results"][m]
        frames = res["per_frame"]["score"]
        if not isinstance(frames, list) or len(frames) != n:
            raise ValueError(f"{uid}: {m}: {len(frames) if isinstance(frames, list) else 'no'} frame scores, not {n}")
        bad = next((v for v in frames if not _score_ok(v, m)), "ok")
        if bad != "ok":
            raise ValueError(f"{uid}: {m}: frame score {bad!r} out of range")
        if any(v is not None for v in frames[:start]):
            raise ValueError(f"{uid}: {m}: scores before the track start (frame {start})")
        for split, mask in (("visible", vis), ("invisible", inv)):
            picked = [v for i, v in enumerate(frames) if i >= start and mask[i] and v is not None]
            saved = res["scalars"][split]
            if not _score_ok(saved, m):
                raise ValueError(f"{uid}: {m}/{split}: mean {saved!r} out of range")
            if (saved is None) != (not picked) or (picked and not _close(saved, math.fsum(picked) / len(picked))):
                raise ValueError(f"{uid}: {m}/{split}: the saved mean differs from the frame scores")
            out[f"{m}_{split}"] = None if saved is None else float(saved)
    return out


def _matches(actual: object, expected: object) -> bool:
    """The public comparison of a summary with the recomputed one: every expected key present (extra keys
    allowed), floats within rel 1e-7 / abs 1e-9, everything else equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _matches(actual[k], v) for k, v in expected.items())
    if isinstance(expected, float):
        return _close(actual, expected)
    return actual == expected


def validate(run: object, results: object, summary: object, allow_subset: bool = False) -> None:
    """The public ``package``'s checks of the three reports; raises ``ValueError`` naming the first problem."""
    if not (
        isinstance(run, dict)
        and run.get("stage") == "evaluation"
        and run.get("schema_version") == SCHEMA_VERSION
        and run.get("score_protocol") == PROCEDURE
    ):
        raise ValueError(f"run.json: not a schema {SCHEMA_VERSION} {PROCEDURE} evaluation report")
    ids = run.get("case_ids")
    if not (isinstance(ids, list) and ids and all(isinstance(u, str) for u in ids) and len(set(ids)) == len(ids)):
        raise ValueError("run.json: case_ids must be distinct case ids")
    if not allow_subset and len(ids) != PUBLISHED_CASES:
        raise ValueError(
            f"run.json: {len(ids)} cases; the leaderboard requires all {PUBLISHED_CASES:,} published cases "
            "(--allow-subset packages a subset for diagnostics only)"
        )
    cases = run.get("prediction_cases")
    if not isinstance(cases, dict) or set(cases) != set(ids):
        raise ValueError("run.json: prediction_cases must cover exactly the case ids")
    if not isinstance(results, list) or len(results) != len(ids):
        raise ValueError(
            f"results.json: {len(results) if isinstance(results, list) else 'no'} results for {len(ids)} cases"
        )
    evaluation_id = canonical_sha256(run)
    seen, rows = set(), []
    try:
        for entry in results:
            uid = entry.get("uid") if isinstance(entry, dict) else None
            if not isinstance(uid, str) or uid not in cases or uid in seen:
                raise ValueError(f"results.json: unexpected or repeated case {uid!r}")
            seen.add(uid)
            if (
                entry.get("score_protocol") != PROCEDURE
                or entry.get("evaluation_run_id") != evaluation_id
                or entry.get("prediction_sha256") != cases[uid]["sha256"]
            ):
                raise ValueError(f"results.json: {uid}: belongs to another evaluation or prediction")
            rows.append((entry, case_scalars(entry, cases[uid]["num_frames"])))
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"results.json: malformed ({type(e).__name__}: {e})") from None
    if not (
        isinstance(summary, dict)
        and summary.get("complete") is True
        and isinstance(summary.get("per_case"), dict)
        and set(summary["per_case"]) == set(ids)
    ):
        raise ValueError("summary.json: must be complete and cover every case")
    expected = summarise(run, [entry for entry, _ in rows])
    if not _matches(summary, expected):
        raise ValueError("summary.json: differs from the means of results.json")


# ---------------------------------------------------------------- the ZIP


def write(submission: Submission, output: Path) -> Path:
    """Write the ZIP atomically (the same submission gives the same bytes); refuse one over the size limits."""
    members = submission.members()
    if sum(len(members[n]) for n in REPORTS) > MAX_REPORT_BYTES:
        raise PersistbenchError(f"{output}: the reports exceed {MAX_REPORT_BYTES >> 20} MiB")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            z.writestr(info, data)
    if buf.tell() > MAX_ZIP_BYTES:
        raise PersistbenchError(f"{output}: {buf.tell()} bytes, over the leaderboard's {MAX_ZIP_BYTES >> 20} MiB")
    with atomic_path(output) as tmp:
        tmp.write_bytes(buf.getvalue())
    return output


def read(path: Path) -> Submission:
    """A submission ZIP, checked before anything is parsed: exactly the four members at its root (no folders,
    nothing repeated), within the size limits; each member strict JSON."""
    if path.stat().st_size > MAX_ZIP_BYTES:
        raise PersistbenchError(f"{path}: over the leaderboard's {MAX_ZIP_BYTES >> 20} MiB")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            if sorted(names) != sorted((*REPORTS, MANIFEST)):
                raise PersistbenchError(f"{path}: members {names}, expected {[*REPORTS, MANIFEST]} at its root")
            if sum(i.file_size for i in infos) > MAX_REPORT_BYTES + MAX_ZIP_BYTES:
                raise PersistbenchError(f"{path}: members larger than the limits allow")
            data = {}
            for info in infos:  # each member checked before a byte of it is inflated, then read bounded
                where = f"{path}: {info.filename}"
                if info.flag_bits & 0x1:
                    raise PersistbenchError(f"{where}: an encrypted member")
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise PersistbenchError(f"{where}: compression method {info.compress_type} refused")
                if info.file_size > MEMBER_BUDGET[info.filename].bytes:
                    raise PersistbenchError(f"{where}: {info.file_size} bytes declared, over the budget")
                with z.open(info) as f:
                    raw = MEMBER_BUDGET[info.filename].read(f, f"{path}:{info.filename}")
                if len(raw) != info.file_size:
                    raise PersistbenchError(f"{where}: its size differs from the directory's")
                data[info.filename] = raw
    except zipfile.BadZipFile as e:
        raise PersistbenchError(f"{path}: not a ZIP file ({e})") from None
    except OSError as e:  # offsets of a damaged directory that point before the file's start
        raise PersistbenchError(f"{path}: a damaged ZIP file ({e.strerror or e})") from None
    except (zlib.error, EOFError, NotImplementedError, RuntimeError) as e:  # a corrupt stream, an unknown feature
        raise PersistbenchError(f"{path}: a damaged member ({str(e).splitlines()[0]})") from None
    parsed = {name: parse_json(raw, f"{path}:{name}") for name, raw in data.items()}
    sub = Submission(parsed["run.json"], parsed["results.json"], parsed["summary.json"], parsed[MANIFEST])
    _check_manifest(sub, data, path)
    return sub


def _check_manifest(sub: Submission, data: dict[str, bytes], path: Path) -> None:
    m = sub.manifest
    if not isinstance(m, dict) or m.get("format") != MANIFEST_FORMAT:
        raise PersistbenchError(f"{path}: {MANIFEST}: not a {MANIFEST_FORMAT} manifest")
    for name in REPORTS:
        if (m.get("reports") or {}).get(name) != hashlib.sha256(data[name]).hexdigest():
            raise PersistbenchError(f"{path}: {name} differs from the manifest's sha256")
    cases = m.get("cases")
    if not isinstance(sub.results, list) or not isinstance(cases, dict):
        raise PersistbenchError(f"{path}: results.json and the manifest's cases must be a list and an object")
    if not all(isinstance(e, dict) and isinstance(e.get("uid"), str) for e in sub.results):
        raise PersistbenchError(f"{path}: results.json: every entry must be an object with a text uid")
    if sorted(cases) != sorted(e["uid"] for e in sub.results):
        raise PersistbenchError(f"{path}: the manifest's cases differ from results.json's")
    for e in sub.results:
        c = cases[e["uid"]]
        if not isinstance(c, dict) or c.get("result_sha256") != canonical_sha256(e):
            raise PersistbenchError(f"{path}: results.json: {e['uid']}: differs from the manifest's sha256")
        if c.get("prediction_sha256") != e.get("prediction_sha256"):
            raise PersistbenchError(f"{path}: {e['uid']}: the prediction differs from the manifest's")


@dataclass(frozen=True)
class CaseCheck:
    """One re-scored case: the largest per-frame difference from the claimed scores, and what differs."""

    uid: str
    max_frame_diff: float
    problems: tuple[str, ...]


def recheck(entry: dict, rescored: dict, tolerance: float) -> CaseCheck:
    """Compare a claimed results entry with the public form of the same case scored again (both from
    :func:`result_entry`): masks, track start and every frame score (within ``tolerance``, nulls alike)."""
    problems, worst = [], 0.0
    a, b = entry["results"], rescored["results"]
    for key in ("visible_mask", "invisible_mask", "track_start_frame_idx"):
        if a["metadata"][key] != b["metadata"][key]:
            problems.append(f"{key} differs")
    for m in PAPER_METRICS:
        x, y = a[m]["per_frame"]["score"], b[m]["per_frame"]["score"]
        if len(x) != len(y) or any((u is None) != (v is None) for u, v in zip(x, y)):
            problems.append(f"{m}: the frames with a score differ")
            continue
        diffs = [abs(u - v) for u, v in zip(x, y) if u is not None]
        worst = max([worst, *diffs])
        if any(d > tolerance for d in diffs):
            problems.append(f"{m}: a frame score is {max(diffs):.3g} from the one re-scored")
    if entry["prediction_sha256"] != rescored["prediction_sha256"]:
        problems.append("the prediction's sha256 differs from the run's")
    return CaseCheck(entry["uid"], worst, tuple(problems))


def sample_uids(uids: list[str], n: int, seed: str) -> list[str]:
    """``n`` of ``uids`` drawn by ``seed`` (the ZIP's sha256 unless chosen): the same ZIP, the same cases."""
    import random

    return sorted(random.Random(seed).sample(sorted(uids), min(n, len(uids))))


def check(
    sub: Submission,
    prediction_files: Callable[[str], dict[str, str] | None],
    rescore: Callable[[str], dict],
    uids: list[str],
    tolerance: float,
) -> tuple[list[str], list[CaseCheck]]:
    """What does not follow in ``sub``: the public checks (subset allowed), every case's prediction files
    against the manifest (``prediction_files(uid)``: the run's files and sha256, None when missing), and the
    cases ``uids`` re-scored (``rescore(uid)``: the case's results entry scored again) against their claims."""
    problems = []
    try:
        validate(sub.run, sub.results, sub.summary, allow_subset=True)
    except ValueError as e:
        problems.append(str(e))
    for uid, claimed in sorted(sub.manifest["cases"].items()):
        files = prediction_files(uid)
        if files is None:
            problems.append(f"{uid}: no prediction in the run")
        elif files != claimed.get("prediction_files"):
            changed = sorted(set(files.items()) ^ set((claimed.get("prediction_files") or {}).items()))
            problems.append(f"{uid}: prediction files differ from the manifest ({changed[0][0]} first)")
    entries = {e["uid"]: e for e in sub.results}
    checks = [recheck(entries[u], rescore(u), tolerance) for u in uids]
    problems += [f"{c.uid}: {p}" for c in checks for p in c.problems]
    return problems, checks
