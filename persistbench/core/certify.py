"""``persistbench certify``: a certificate of a scored run that anyone can check, for every suite.

A certificate (``RUN/certificate.json``) states what the run's numbers stand on: the dataset's
fingerprint and availability, the cases scored, the protocol's sha256, the toolkit (version, and the git
commit when run from a checkout), the numerical stack, the backends' weights and the judges, the hardware,
the seed, every case's prediction sha256 and score-record sha256, and the summary's sha256.

``certify --check`` reads the certificate and the run as untrusted input and names every file that differs
from it, every case missing or added, every claim that does not follow: each prediction's identity is
recomputed from its files, the summary is summarised again from the records, the weights claimed are
compared with the records', and a stratified sample of cases is scored again from the predictions and
compared with their records (exactly, or within a tolerance for model-based metrics). What it cannot show:
that the predictions came from the model named (docs/metrics.md, "Certificates").
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np

from persistbench import __version__
from persistbench.core.case import CaseRef
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.core.stats import fingerprint, seed_of
from persistbench.io.files import read_json, sha256_file, write_json

FORMAT = "persistbench-certificate/1"
CERTIFICATE = "certificate.json"
STACK = ("numpy", "opencv-python-headless", "pillow", "scipy", "torch", "torchvision", "transformers", "lpips", "sam2")


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or None if out.returncode == 0 else None


def _stack() -> dict[str, str]:
    found = {}
    for name in STACK:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _hardware() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "system": platform.platform()}


def _weights(backends: object) -> dict[str, list[str]]:
    """Backend -> the sha256 of the weights its records name (judges by their identity, elsewhere)."""
    out: dict[str, list[str]] = {}
    for name, entries in (backends or {}).items() if isinstance(backends, dict) else ():
        for e in entries if isinstance(entries, list) else [entries]:
            if isinstance(e, dict) and e.get("sha256"):
                out.setdefault(name, []).append(str(e["sha256"]))
    return {k: sorted(set(v)) for k, v in sorted(out.items())}


class Scored:
    """A scored run, opened as ``score`` opens it: the suite on its dataset, the protocol, the records."""

    def __init__(self, path: Path, protocol: str | None, dataset: str | None = None):
        from persistbench.core.report import load_runs
        from persistbench.core.runs import read_run_info
        from persistbench.core.score import dataset_of, recorded_options
        from persistbench.core.suites import SUITES, open_suite

        (self.loaded,) = load_runs([path], protocol)
        self.run = RunLayout(path)
        self.summary = self.loaded["summary"]
        self.info = read_run_info(self.run)
        name = self.summary.get("suite")
        if name not in SUITES:
            raise PersistbenchError(f"{self.run.summary_json(self.dirname)}: names no suite this toolkit has")
        root = dataset if dataset is not None else dataset_of(path)
        self.suite = open_suite(root, name, recorded_options(self.info, self.run, name))
        self.protocol = self.suite.load_protocol(self.summary.get("protocol"))
        if self.protocol.sha256 != self.summary.get("protocol_sha256"):
            raise PersistbenchError(
                f"{self.run.summary_json(self.dirname)}: scored with another definition of {self.protocol.name}"
            )

    @property
    def dirname(self) -> str:
        return str(self.summary.get("scores_dir"))

    def cases(self) -> dict[str, CaseRef]:
        """Key -> case of every case of the dataset that has a per-case record in the scores folder."""
        return {
            self.suite.key(c): c
            for c in self.suite.cases()
            if self.run.case_scores(self.dirname, c.subset, c.case_id).is_file()
        }

    def record_path(self, case: CaseRef) -> Path:
        return self.run.case_scores(self.dirname, case.subset, case.case_id)


def certificate(path: Path, protocol: str | None = None, dataset: str | None = None) -> dict:
    """The certificate of the run at ``path`` (its scoring under ``protocol``, default its only one; its dataset
    ``dataset``, default the one its ``run.json`` names)."""
    s = Scored(path, protocol, dataset)
    cases = s.cases()
    entries = {}
    for key, case in cases.items():
        record = read_json(s.record_path(case))
        entries[key] = {
            "prediction_sha256": record.get("prediction_sha256"),
            "record_sha256": sha256_file(s.record_path(case)),
        }
    summary = s.summary
    return {
        "format": FORMAT,
        "suite": summary.get("suite"),
        "run": s.run.root.name,
        "model": summary.get("model"),
        "protocol": {"name": s.protocol.name, "sha256": s.protocol.sha256, "scores_dir": s.dirname},
        "dataset": {
            "fingerprint": summary.get("dataset_fingerprint"),
            "available": (summary.get("cases_behind") or {}).get("available"),
        },
        "cases": {"count": len(entries), "fingerprint": fingerprint(list(entries)), "each": entries},
        "toolkit": {"version": __version__, "git_commit": _git_commit()},
        "stack": _stack(),
        "hardware": _hardware(),
        "weights": _weights(summary.get("backends")),
        "judge": {
            "identities": summary.get("judge_identities") or [],
            "calibration": summary.get("judge_calibration"),
        },
        "seed": (s.info or {}).get("seed"),
        "summary_sha256": sha256_file(s.run.summary_json(s.dirname)),
    }


def write(path: Path, protocol: str | None = None, dataset: str | None = None) -> Path:
    out = Path(path) / CERTIFICATE
    write_json(out, certificate(path, protocol, dataset))
    return out


def _problem_tree(a: object, b: object, tolerance: float, where: str = "") -> str | None:
    """Where two JSON values differ (numbers within ``tolerance``, relative and absolute), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in ("backends",):  # provenance, compared on its own
                continue
            found = _problem_tree(a.get(k), b.get(k), tolerance, f"{where}/{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} values, not {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _problem_tree(x, y, tolerance, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance) or (math.isnan(a) and math.isnan(b)):
            return None
        return f"{where}: {b!r}, re-scored {a!r}"
    return None if a == b else f"{where}: {b!r}, re-scored {a!r}"


def check(
    cert_path: Path, path: Path, sample: int = 5, tolerance: float = 0.0, backends=None, dataset: str | None = None
) -> tuple[list[str], int]:
    """Every problem of the run at ``path`` against the certificate at ``cert_path`` (one line each), and how
    many cases were scored again (with ``backends``, a :class:`~persistbench.backends.BackendOptions`: the
    weights and judge model-based metrics need)."""
    cert = read_json(cert_path)
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise PersistbenchError(f"{cert_path}: not a persistbench certificate ({FORMAT})")
    try:
        claimed = cert["cases"]["each"]
        protocol = cert["protocol"]["scores_dir"]
        if not isinstance(claimed, dict) or not all(isinstance(v, dict) for v in claimed.values()):
            raise TypeError
    except (KeyError, TypeError):
        raise PersistbenchError(f"{cert_path}: its cases are not a table of case -> hashes") from None
    s = Scored(path, str(protocol), dataset)
    problems: list[str] = []
    if cert["protocol"].get("sha256") != s.protocol.sha256:
        problems.append(
            f"{cert_path}: claims protocol sha256 {str(cert['protocol'].get('sha256'))[:12]}, the run's is {s.protocol.sha256[:12]}"
        )
    cases = s.cases()
    for key in sorted(set(claimed) - set(cases)):
        problems.append(f"{key}: in the certificate, not in the run (a case removed)")
    for key in sorted(set(cases) - set(claimed)):
        problems.append(f"{key}: in the run, not in the certificate")
    records = {}
    for key in sorted(set(claimed) & set(cases)):
        rpath = s.record_path(cases[key])
        if sha256_file(rpath) != claimed[key].get("record_sha256"):
            problems.append(f"{rpath}: edited since the certificate (its sha256 differs)")
        record = read_json(rpath)
        records[key] = record
        pred = s.suite.read_prediction(s.run.root, s.info, cases[key])
        digest = None if pred is None else pred.digest
        if digest is None:
            problems.append(f"{key}: its prediction is gone")
        elif (
            digest != record.get("prediction_sha256")
            or digest != claimed[key].get("prediction_sha256")
            or not _files_as_listed(s.run, cases[key])
        ):
            problems.append(f"{key}: its prediction's files are not those scored (sha256 {digest[:12]})")
    summary_path = s.run.summary_json(s.dirname)
    if sha256_file(summary_path) != cert.get("summary_sha256"):
        problems.append(f"{summary_path}: edited since the certificate (its sha256 differs)")
    problems += _summary_follows(s, list(records.values()), summary_path)
    weights = _weights(s.summary.get("backends"))
    if cert.get("weights") != weights:
        problems.append(f"{cert_path}: claims weights {cert.get('weights')}, the run's records name {weights}")
    checked = _rescore(s, cases, records, sample, tolerance, problems, backends)
    return problems, checked


def _files_as_listed(run: RunLayout, case: CaseRef) -> bool:
    """Whether a prediction in our layout still has the files its ``case.json`` lists, byte for byte (its
    identity is that record's; another toolkit's layout is identified by its files' bytes already)."""
    from persistbench.core.runs import case_record, complete_record

    try:
        listed = case_record(run, case.subset, case.case_id)
    except PersistbenchError:
        return False
    return listed is None or complete_record(run, case.subset, case.case_id) is not None


def _summary_follows(s: Scored, records: list[dict], where: Path) -> list[str]:
    """Whether the summary's numbers follow from the records (the scorer's summary of them)."""
    from persistbench.core.case import ScoreContext

    ctx = ScoreContext(tuple(s.protocol.metrics), allow_partial=True)
    _, body = s.protocol.scorer.summarise(s.suite, records, s.protocol, ctx)
    found = _problem_tree(json.loads(json.dumps(body)), {k: s.summary.get(k) for k in body}, 1e-12)
    return [] if found is None else [f"{where}: does not follow from the records ({found.lstrip('/')})"]


def _rescore(
    s: Scored, cases: dict, records: dict, sample: int, tolerance: float, problems: list[str], backends
) -> int:
    """Score ``sample`` cases again (stratified by subset, drawn from the cases' fingerprint) and compare."""
    from persistbench.backends import BackendOptions
    from persistbench.core.case import ScoreContext
    from persistbench.core.score import unavailable_metrics

    backends = backends or BackendOptions()
    keys = sorted(records)
    if not keys or sample <= 0:
        return 0
    rng = np.random.default_rng(seed_of(fingerprint(keys)))
    by_stratum = {}
    for k in keys:
        by_stratum.setdefault(cases[k].subset, []).append(k)
    queues = [list(rng.permutation(v)) for _, v in sorted(by_stratum.items())]
    picked = []
    while len(picked) < min(sample, len(keys)):  # one from each subset in turn
        for q in queues:
            if q and len(picked) < sample:
                picked.append(str(q.pop()))
    for key in picked:
        record = records[key]
        wanted = tuple(m for m in record.get("requested") or s.protocol.metrics)
        ctx = ScoreContext(wanted, unavailable_metrics(wanted, backends), allow_partial=True, backends=backends)
        pred = s.suite.read_prediction(s.run.root, s.info, cases[key])
        if pred is None:
            continue
        new = s.protocol.scorer.score_case(s.suite, cases[key], pred, s.protocol, ctx)
        found = _problem_tree(json.loads(json.dumps(new)), record, tolerance)
        if found:
            problems.append(f"{s.record_path(cases[key])}: does not follow from its prediction ({found.lstrip('/')})")
    return len(picked)
