"""The results history: every completed gate run's figures, one compact record per config,
concurrency, figure and bucket, appended to
`<baselines root>/<deployment>/results/<fingerprint slug>.jsonl` (beside the runner's history of
unchanged boots, `verdicts/history.py`, which holds only what the noise model pools).

One JSON object a line, so a CI job's diff shows one line per figure per run. The file is
rewritten whole (atomic.write_bytes_atomic) under the lock every shared file takes
(shared_files.locked): two runs of one runner finishing together each keep their records. Every
record names its deployment and fingerprint, and a file holds one of each: a record of another is
refused, named, on writing and on reading. The file keeps the last `[history] keep` records of
each series (default KEEP) and says how many older ones it dropped.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specgate.atomic import write_bytes_atomic
from specgate.deployment import Deployment
from specgate.documents import NestedTooDeeply, content_digest, parse_json, problem, read_document
from specgate.errors import BaselineError
from specgate.report.model import LEFT_OUT, Report
from specgate.shared_files import locked
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.not_run import cut_short

SCHEMA_VERSION: Literal[1] = 1
KEEP = 500  # records per series a file keeps by default ([history] keep)
FIGURES = ("decode_tps", "speedup")
Figure = Literal["decode_tps", "speedup"]
_Finite = Annotated[float, Field(allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ResultRecord(BaseModel):
    """One figure of one config in one run."""

    model_config = ConfigDict(extra="forbid", strict=True)
    schema_version: Literal[1]
    deployment: str = Field(min_length=1)
    fingerprint: str = Field(min_length=1)  # the fingerprint slug (verdicts.fingerprint)
    config: str = Field(min_length=1)
    concurrency: int = Field(ge=1)
    figure: Figure
    bucket: str = ""  # a deployment's bucket (none has any yet): its own series
    commit: str
    date: str  # ISO 8601, UTC
    host_id: str
    sglang: str
    deployment_digest: str  # the configs' launch digests and the reference, in one
    args_digest: str  # this config's launch digest
    verdict: str  # the config's verdict in the run (PASS, FAIL, ..., "—": no gate judged it)
    run_verdict: str
    level: _Positive
    low: _Positive
    high: _Positive
    confidence: _Finite
    accept_length: _Finite | None = None
    cycle_ms: _Finite | None = None
    simulator: bool = False

    @property
    def series(self) -> tuple[str, int, str, str]:
        return (self.config, self.concurrency, self.figure, self.bucket)


def series_name(series: tuple[str, int, str, str]) -> str:
    config, concurrency, figure, bucket = series
    return f"{config} c{concurrency} {figure}" + (f" [{bucket}]" if bucket else "")


def results_folder(root: Path, deployment: str) -> Path:
    return root / deployment / "results"


def results_path(root: Path, deployment: str, fingerprint: Fingerprint) -> Path:
    return results_folder(root, deployment) / f"{fingerprint.slug}.jsonl"


def deployment_digest(deployment: Deployment) -> str:
    """What was booted and compared, in one digest: a change of any config's flags changes it."""
    digests = {name: config.args_digest(deployment.launch) for name, config in deployment.configs.items()}
    return content_digest({"reference": deployment.reference, "configs": digests})[:12]


def records_of(
    report: Report,
    deployment: Deployment,
    failed_servers: dict[str, str] | None = None,
    measured: Collection[tuple[str, int]] = (),
) -> tuple[list[ResultRecord], list[str]]:
    """The records of a completed run's report: per speed row its decode tok/s, and for a
    speculative config its speedup over its reference; and a line per config whose figures were
    left out: a server lost before its short workload was measured whole (not_run.cut_short;
    `failed_servers` and `measured` as there) served only some of its requests, and a record of
    them would read as a whole run's figure in the trend ("the highest of N runs")."""
    if report.fingerprint is None:
        return [], []
    fingerprint = Fingerprint.from_dict(report.fingerprint.model_dump())
    prov = report.provenance
    common = {
        "schema_version": SCHEMA_VERSION,
        "deployment": report.deployment,
        "fingerprint": fingerprint.slug,
        "commit": str(prov.get("commit", "unknown")),
        "date": str(prov.get("date", "")),
        "host_id": str(prov.get("host_id", "unknown")),
        "sglang": fingerprint.sglang,
        "deployment_digest": deployment_digest(deployment),
        "run_verdict": str(report.overall),
        "simulator": report.simulator,
    }
    out: list[ResultRecord] = []
    left_out: dict[str, dict[str, list[str]]] = {}
    failed_servers = failed_servers or {}
    for row in report.speed:
        if row.context:
            # A context bucket's figures are of other traffic (long prompts): the history keys its
            # series by config, concurrency and figure, and would mix them with the short workload's.
            continue
        config = deployment.configs.get(row.config)
        figures = {"decode_tps": row.decode_tps, "speedup": row.ratio_to_reference}
        for figure, interval in figures.items():
            if interval is None or not interval.estimate > 0 or not interval.low > 0:
                continue
            needs = [row.config, *([deployment.reference_of(row.config)] if figure == "speedup" and config else [])]
            if lost := [c for c in needs if cut_short([c], 0, failed_servers, measured)]:
                left_out.setdefault(row.config, {})[figure] = lost
                continue
            out.append(
                ResultRecord.model_validate(
                    {
                        **common,
                        "config": row.config,
                        "concurrency": row.concurrency,
                        "figure": figure,
                        "args_digest": config.args_digest(deployment.launch) if config else "unknown",
                        "verdict": str(row.verdict),
                        "level": interval.estimate,
                        "low": interval.low,
                        "high": max(interval.high, interval.estimate),
                        "confidence": interval.confidence,
                        "accept_length": row.accept_length.estimate if row.accept_length else None,
                        "cycle_ms": row.cycle_ms.estimate if row.cycle_ms else None,
                    }
                )
            )
    return out, [_left_out_line(config, figures) for config, figures in left_out.items()]


def _left_out_line(config: str, figures: dict[str, list[str]]) -> str:
    lost = sorted({c for servers in figures.values() for c in servers})
    whose = " and ".join(repr(c) for c in lost)
    return (
        f"{config}'s {' and '.join(figures)} {LEFT_OUT}: the server of {whose} was lost before its "
        f"short workload was measured whole, and a record of the requests it answered would read as a whole run's figure"
    )


def load_results(path: Path, deployment: str | None = None, fingerprint: str | None = None) -> list[ResultRecord]:
    """The records of one file, oldest first ([] where there is none). A line that cannot be
    read, or a record of another deployment or fingerprint than the file's, is an error naming
    the file, the line and the field."""
    if not path.exists():
        return []
    try:
        text = read_document(path, "a specgate results history (JSON lines)")
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"results history cannot be read: {exc}") from None
    fingerprint = fingerprint or path.name.removesuffix(".jsonl")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = parse_json(line)
        except (json.JSONDecodeError, NestedTooDeeply) as exc:
            raise BaselineError(path, f"line {number}: not JSON ({exc.msg}); fix it or move the file aside") from None
        if isinstance(data, dict) and data.get("schema_version") != SCHEMA_VERSION:
            raise BaselineError(
                path,
                f"line {number}: field 'schema_version': expected {SCHEMA_VERSION}, got {data.get('schema_version')!r}",
            )
        try:
            record = ResultRecord.model_validate(data)
        except ValidationError as exc:
            raise BaselineError(path, f"line {number}: results record malformed: {problem(exc)}") from None
        _check_belongs(path, f"line {number}", record, deployment, fingerprint)
        out.append(record)
    return out


def _check_belongs(path: Path, where: str, record: ResultRecord, deployment: str | None, fingerprint: str) -> None:
    if deployment is not None and record.deployment != deployment:
        raise BaselineError(
            path,
            f"{where}: field 'deployment': a record of deployment {record.deployment!r}, in the results of {deployment!r}",
        )
    if record.fingerprint != fingerprint:
        raise BaselineError(
            path,
            f"{where}: field 'fingerprint': a record of fingerprint {record.fingerprint!r}, in the results of "
            f"{fingerprint!r}: figures of other hardware or software never share a series",
        )


def bounded(records: Sequence[ResultRecord], keep: int) -> tuple[list[ResultRecord], dict[str, int]]:
    """The last `keep` records of each series, in their order, and how many each series dropped."""
    seen: dict[tuple, int] = {}
    for r in records:
        seen[r.series] = seen.get(r.series, 0) + 1
    drop = {s: n - keep for s, n in seen.items() if n > keep}
    kept, dropped = [], dict.fromkeys(drop, 0)
    for r in records:
        if dropped.get(r.series, 0) < drop.get(r.series, 0):
            dropped[r.series] += 1
            continue
        kept.append(r)
    return kept, {series_name(s): n for s, n in dropped.items()}


def append_results(path: Path, records: Iterable[ResultRecord], keep: int = KEEP) -> list[str]:
    """Append `records` (each of the file's deployment and fingerprint, else refused, named),
    keeping `keep` per series; returns what it says of the write (what it dropped)."""
    new = list(records)
    if not new:
        return []
    fingerprint = path.name.removesuffix(".jsonl")
    deployment = new[0].deployment
    for k, record in enumerate(new):
        _check_belongs(path, f"record {k + 1} to append", record, deployment, fingerprint)
    with locked(path):  # two runs finishing together each keep their records
        kept, dropped = bounded([*load_results(path, deployment, fingerprint), *new], keep)
        text = "".join(json.dumps(r.model_dump(mode="json"), sort_keys=True) + "\n" for r in kept)
        write_bytes_atomic(path, text.encode("utf-8"))
    said = [f"results history: {len(new)} record(s) of this run appended to {path}"]
    if dropped:
        named = ", ".join(f"{n} of {s}" for s, n in dropped.items())
        said.append(
            f"results history keeps the last {keep} records per series ([history] keep): dropped the oldest {named}"
        )
    return said


def load_all(root: Path, deployment: str) -> dict[str, list[ResultRecord]]:
    """Every results file of `deployment`, by fingerprint slug."""
    folder = results_folder(root, deployment)
    if not folder.is_dir():
        return {}
    return {p.name.removesuffix(".jsonl"): load_results(p, deployment) for p in sorted(folder.glob("*.jsonl"))}


def by_series(records: Iterable[ResultRecord]) -> dict[tuple[str, int, str, str], list[ResultRecord]]:
    out: dict[tuple[str, int, str, str], list[ResultRecord]] = {}
    for r in records:
        out.setdefault(r.series, []).append(r)
    return out
