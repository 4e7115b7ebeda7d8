"""The runner's history: every boot it has measured of an unchanged build, pooled into one
between-boot spread per config and figure (a control chart of the runner).

A calibration of 3 boots pins a spread badly (its 80% upper bound is 2.2x the estimate). But
every unchanged run judged against the stored figures is another boot of the same build on
the same machine. So the runner keeps, beside its calibration record,
`baselines/<deployment>/history/<fingerprint slug>.json`: per config and figure, the level of
each boot (the median over its requests of log(figure), in a *frame*: the calibration's own
rounds, or the stored baseline it was paired with) and its provenance (date, host id,
commit, SGLang release, fingerprint). Values of one frame share their zero; their variance
about the frame's own mean, pooled over frames with its degrees of freedom adding up
(boots − 1 per frame), is the spread, and its chi-square upper bound shrinks with use.

Only boots of an unchanged build are added: the A/A rounds of `specgate calibrate`, and runs
whose every gate passed. A passing run may still hold a small real change; it then counts as
noise and widens the spread (fewer false alarms, a little less power), never the other way.
A run whose boot lies outside the control limits (CONTROL_SDS predicted SDs from its frame's
centre) is recorded as out of control, not pooled, and the run's verdict says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specgate.atomic import write_json_atomic
from specgate.documents import parse_json, problem
from specgate.errors import BaselineError
from specgate.measure.pairing import Series, across_boots, groups
from specgate.shared_files import locked
from specgate.verdicts.fingerprint import Fingerprint

SCHEMA_VERSION: Literal[1] = 1
# SD of a sample median ≈ 1.2533·σ/√n for normal data (as calibrate.analyse models it).
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
# The gates use the spread's one-sided 80% upper bound (as calibrate.analyse does).
UPPER_BOUND = 0.8
# A boot further than this many predicted SDs from its frame's centre is out of control.
CONTROL_SDS = 3.0
# Below this many degrees of freedom the pooled spread is too loose to set control limits.
CONTROL_MIN_DF = 2

Kind = Literal["decode_tps", "speedup"]
ANY_FLAGS = "*"  # the args digest of calibration rounds recorded before records named one
_Finite = Annotated[float, Field(allow_inf_nan=False)]


class BootValue(BaseModel):
    """One boot's level in its frame (median over requests of log figure), and what its median holds."""

    model_config = ConfigDict(extra="forbid", strict=True)
    boot: int = Field(ge=1, le=1000)
    level: _Finite
    within_log_sd: float = Field(ge=0, le=5, allow_inf_nan=False)  # SD of log figure between its requests
    requests: int = Field(ge=1)

    @property
    def median_variance(self) -> float:
        """What the requests alone give the variance of this boot's median."""
        return (MEDIAN_EFFICIENCY * self.within_log_sd) ** 2 / self.requests


class Entry(BaseModel):
    """The boots of one calibration or one run, for one config and figure."""

    model_config = ConfigDict(extra="forbid", strict=True)
    source: Literal["calibration", "run"]
    config: str = Field(min_length=1)
    kind: Kind
    args_digest: str = Field(min_length=1)  # the flags it was measured with: other flags never pool
    # Entries of one frame share their zero: a calibration's rounds, or runs paired with one stored baseline.
    frame: str = Field(min_length=1)
    date: str
    host_id: str
    commit: str
    sglang: str
    fingerprint: str  # the fingerprint slug
    values: list[BootValue] = Field(min_length=1)
    pooled: bool = True
    why_not_pooled: str = ""


class RunnerHistory(BaseModel):
    """`baselines/<deployment>/history/<fingerprint slug>.json`."""

    model_config = ConfigDict(extra="forbid", strict=True)
    schema_version: Literal[1]
    deployment: str
    fingerprint: dict[str, Any]
    entries: list[Entry] = []


@dataclass(frozen=True)
class PooledSpread:
    """A between-boot spread (SD of log figure) pooled over frames."""

    log_sd: float  # point estimate
    log_sd_upper: float  # its UPPER_BOUND bound: what the gates use
    df: int
    within_log_sd: float  # pooled within-boot SD (of the values' requests)
    requests: int  # the typical requests per boot behind it
    calibrations: int
    runs: int

    def describe(self, where: str) -> str:
        return (
            f"{UPPER_BOUND:.0%} upper bound pooled over {self.df} degrees of freedom ({self.calibrations} "
            f"calibration(s), {self.runs} unchanged run(s)) in {where}"
        )


def history_path(root: Path, deployment: str, fingerprint: Fingerprint) -> Path:
    return root / deployment / "history" / f"{fingerprint.slug}.json"


def load_history(path: Path) -> RunnerHistory | None:
    """None where there is no file; a file that cannot be read is an error naming it and the field."""
    if not path.is_file():
        return None
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"runner history cannot be read: {exc}; fix it or move it aside") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        got = data.get("schema_version") if isinstance(data, dict) else data
        raise BaselineError(path, f"field 'schema_version': expected {SCHEMA_VERSION}, got {got!r}")
    try:
        return RunnerHistory.model_validate(data)
    except ValidationError as exc:
        raise BaselineError(path, f"runner history malformed: {problem(exc)}") from None


def boot_values(now: Series, level: Series) -> list[BootValue]:
    """Each boot of `now` in the frame of `level` (one series: per request, the frame's zero)."""
    zero = next(iter(level.values()), [])
    out = []
    for boot, values in sorted(now.items()):
        logs = [math.log(v / z) for v, z in zip(values, zero) if v > 0 and z > 0]
        if logs:
            sd = float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0
            out.append(
                BootValue(boot=boot, level=float(np.median(logs)), within_log_sd=min(sd, 5.0), requests=len(logs))
            )
    return out


def own_boots(series: Series) -> list[BootValue]:
    """A side of several boots in its own frame (each boot against the side's level per request)."""
    return boot_values(series, across_boots(series)) if len(groups(series)) >= 2 else []


def pool(frames: Iterable[Sequence[BootValue]], calibrations: int = 0, runs: int = 0) -> PooledSpread | None:
    """The between-boot spread of boots grouped by frame: the variance of their levels about their
    frame's mean (degrees of freedom: boots − 1 per frame), less what their requests give a
    median, and its chi-square upper bound. None with no degree of freedom."""
    ss, df, noise, within, requests = 0.0, 0, [], [], []
    for values in frames:
        levels = [v.level for v in values]
        if len(levels) < 2:
            continue
        ss += float(np.sum((np.asarray(levels) - np.mean(levels)) ** 2))
        df += len(levels) - 1
        noise += [v.median_variance for v in values]
        within += [v.within_log_sd**2 for v in values]
        requests += [v.requests for v in values]
    if df < 1:
        return None
    from scipy.stats import chi2

    variance, median_noise = ss / df, float(np.mean(noise))
    upper = df * variance / float(chi2.ppf(1 - UPPER_BOUND, df))
    return PooledSpread(
        log_sd=math.sqrt(max(0.0, variance - median_noise)),
        log_sd_upper=math.sqrt(max(0.0, upper - median_noise)),
        df=df,
        within_log_sd=math.sqrt(float(np.mean(within))),
        requests=int(np.median(requests)),
        calibrations=calibrations,
        runs=runs,
    )


def pooled_spread(
    history: RunnerHistory | None, config: str, kind: str, args_digest: str, extra: Sequence[Entry] = ()
) -> PooledSpread | None:
    """The pooled spread of `config`'s `kind` over the history's pooled entries and `extra` (a
    calibration record's rounds the history does not hold yet), booted with `args_digest`."""
    entries = [*(history.entries if history else ()), *extra]
    chosen = [
        e
        for e in entries
        if e.pooled and e.config == config and e.kind == kind and e.args_digest in (args_digest, ANY_FLAGS)
    ]
    frames: dict[str, list[BootValue]] = {}
    for e in chosen:
        # A run's replicas were booted side by side and share that run's state: one level a run,
        # one degree of freedom, not one per replica (a calibration's values are its rounds).
        values = [run_level(e.values)] if e.source == "run" and len(e.values) > 1 else e.values
        frames.setdefault(e.frame, []).extend(values)
    sources = [e.source for e in chosen]
    return pool(frames.values(), sources.count("calibration"), sources.count("run"))


def run_level(values: Sequence[BootValue]) -> BootValue:
    """The replicas of one run as one level: their mean, with the median noise of all their requests."""
    within = math.sqrt(sum(v.within_log_sd**2 for v in values) / len(values))
    return BootValue(
        boot=values[0].boot,
        level=float(np.mean([v.level for v in values])),
        within_log_sd=within,
        requests=sum(v.requests for v in values),
    )


def out_of_control(history: RunnerHistory | None, entry: Entry, stored_boots: int = 1) -> str | None:
    """Why `entry`'s boots lie outside the control limits of what the history pooled so far, or
    None (also where the history is too short to set limits). The centre is the mean of the
    frame's earlier boots, or for the first run paired with a stored baseline, that baseline's
    own level (zero in its frame), which holds its `stored_boots` boots' noise."""
    spread = pooled_spread(history, entry.config, entry.kind, entry.args_digest)
    if spread is None or spread.df < CONTROL_MIN_DF:
        return None
    earlier = [
        v.level
        for e in (history.entries if history else ())
        if e.pooled and e.frame == entry.frame and e.config == entry.config and e.kind == entry.kind
        for v in e.values
    ]
    centre = float(np.mean(earlier)) if earlier else 0.0
    beside = 1 / len(earlier) if earlier else 1 / max(1, stored_boots)
    for v in entry.values:
        sd = math.sqrt((spread.log_sd_upper**2 + v.median_variance) * (1 + beside))
        if abs(v.level - centre) > CONTROL_SDS * sd:
            return (
                f"boot {v.boot} of {entry.config}'s {entry.kind} sits {math.exp(v.level - centre) - 1:+.1%} from its "
                f"frame's centre ({entry.frame}), beyond {CONTROL_SDS:g} predicted SDs ({CONTROL_SDS * sd:.1%}; "
                f"pooled spread {spread.log_sd_upper:.1%} over {spread.df} degrees of freedom)"
            )
    return None


def append(
    path: Path, deployment: str, fingerprint: Fingerprint, entries: Sequence[Entry], stored_boots: int = 1
) -> list[Entry]:
    """Append `entries` (each checked against the control limits first: one out of control is
    kept, marked not pooled, with why) atomically; returns them as written."""
    with locked(path):  # two runs of one runner finishing together each keep their entries
        history = load_history(path) or RunnerHistory(
            schema_version=SCHEMA_VERSION, deployment=deployment, fingerprint=fingerprint.as_dict()
        )
        written = []
        for entry in entries:
            if entry.source == "run" and (why := out_of_control(history, entry, stored_boots)) is not None:
                entry = entry.model_copy(update={"pooled": False, "why_not_pooled": why})
            history.entries.append(entry)
            written.append(entry)
        write_json_atomic(path, history.model_dump(mode="json"))
    return written


def calibration_entries(document: dict, fingerprint: str) -> list[Entry]:
    """A calibration record's rounds as history entries (one frame: the record's own rounds)."""
    prov = document.get("provenance") or {}
    date = str(prov.get("date", ""))
    requests = int(document.get("requests_per_boot") or 1)
    out = []
    for config, entry in (document.get("configs") or {}).items():
        # A record written before configs carried their digest applies to any flags, as it does in the judge.
        digest = (entry or {}).get("args_digest") or ANY_FLAGS
        for kind in ("decode_tps", "speedup"):
            figure = (entry or {}).get(kind)
            if not isinstance(figure, dict) or not figure.get("boot_medians"):
                continue
            within = float(figure.get("within_log_sd") or 0.0)
            n = int(figure.get("requests_per_boot") or requests)
            values = [
                BootValue(boot=k + 1, level=math.log(m), within_log_sd=within, requests=max(1, n))
                for k, m in enumerate(figure["boot_medians"])
                if isinstance(m, (int, float)) and m > 0
            ]
            if values:
                out.append(
                    Entry(
                        source="calibration",
                        config=config,
                        kind=kind,
                        args_digest=digest,
                        frame=f"calibration {date}",
                        date=date,
                        host_id=str(prov.get("host_id", "unknown")),
                        commit=str(prov.get("commit", "unknown")),
                        sglang=str(document.get("fingerprint", {}).get("sglang", "unknown")),
                        fingerprint=fingerprint,
                        values=values,
                    )
                )
    return out


def record_calibration(root: Path, deployment: str, fingerprint: Fingerprint, document: dict) -> Path:
    """Add a calibration's A/A rounds to the runner's history (calibrations are never out of
    control: they are what sets the limits); returns the history's path."""
    path = history_path(root, deployment, fingerprint)
    entries = calibration_entries({**document, "fingerprint": fingerprint.as_dict()}, fingerprint.slug)
    if entries:
        append(path, deployment, fingerprint, entries)
    return path
