"""From A/A rounds to noise components, false-alarm rates, detectable regressions, tolerances.

Per config and figure (decode tok/s; for speculative configs also the speedup over the
reference, paired by request within each round):

- within-boot noise: the SD of log(figure) between requests of one boot, around each
  request's own mean over the rounds (the pinned requests differ from each other);
- between-boot noise: the SD of log(a boot's median) across rounds, less what the
  within-boot noise alone would give a median of that many requests (never below 0).

A no-regression gate compares one run (one boot) with one stored run (one boot): its
estimate varies with both boots and the requests of each. From that the model gives the
chance an unchanged build FAILS the gate at the deployment's tolerance (a false alarm) and the
chance it cannot tell (INCONCLUSIVE: no regression shown, no pass either), the regression it
FAILS with 80% power ("cannot tell" where an unchanged build mostly cannot pass, so no
detection figure means anything), and the smallest tolerance at which an unchanged build passes
95% of the time; the A/A pairs themselves (each round judged against each other round by the
real gate code) give the empirical FAIL / INCONCLUSIVE / PASS counts beside the model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import norm

from specgate.deployment import Deployment
from specgate.measure.pairing import Series, ratio_series
from specgate.measure.speed import ConfigSpeed
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, PASS, at_least, per_look_confidence, planned_looks, within
from specgate.verdicts.noise import (
    MEDIAN_EFFICIENCY,
    UPPER_BOUND,
    BootSpread,
    between_boot_spread,
    lag1_autocorrelation,
    ratio_interval,
)

FALSE_ALARM_TARGET = 0.05
POWER = 0.8


@dataclass(frozen=True)
class FigureNoise:
    boot_medians: list[float]
    within_log_sd: float
    between_boot_log_sd: float  # point estimate
    between_boot_log_sd_upper: float  # its one-sided UPPER_BOUND bound: what gates use
    requests_per_boot: int
    # Lag-1 autocorrelation of consecutive requests' residuals (each request about its own mean over
    # the rounds, less its round's level): what widens every requests' interval (noise.py).
    request_lag1: float | None = None
    # The part of the upper bound the servers of one run share, where the rounds booted replicas side
    # by side (launch.boots >= 2): replicas differ by their own part only. None: not measured.
    shared_log_sd: float | None = None
    own_log_sd: float | None = None


@dataclass(frozen=True)
class GateCalibration:
    tolerance: float
    two_sided: bool
    false_alarm: float  # model: an unchanged build FAILS the gate
    inconclusive: float  # model: an unchanged build is INCONCLUSIVE (cannot tell; no false alarm)
    detects_80pct: float | None  # model: the regression it FAILS with 80% probability; None: cannot tell
    cannot_tell: str  # why no detection figure is given ("" where one is)
    suggested_tolerance: float  # model: the least tolerance at which an unchanged build passes 95%
    aa_pairs: int  # empirical: ordered pairs of rounds judged by the gate code
    aa_failures: int  # of them FAIL (false alarms)
    aa_inconclusive: int  # INCONCLUSIVE: the gate could not tell
    aa_passes: int


def _noise(per_round: list[Series]) -> FigureNoise | None:
    """Noise of one figure whose rounds are given as boot-1 series (request index → value)."""
    rows = [r[1] for r in per_round if r.get(1)]
    if len(rows) < 2:
        return None
    n = min(len(r) for r in rows)
    logs = np.log(np.asarray([r[:n] for r in rows], dtype=float))  # rounds x requests
    residual = logs - logs.mean(axis=0, keepdims=True)  # each request against its own mean over the rounds
    boot_level = residual.mean(axis=1, keepdims=True)
    within = float(np.sqrt(((residual - boot_level) ** 2).sum() / max(1, (len(rows) - 1) * (n - 1))))
    medians = np.median(logs, axis=1)
    between, upper = between_boot_spread([float(m) for m in medians], within, n)
    lag1 = lag1_autocorrelation([list(np.exp(row - row.mean())) for row in residual])
    shared, own = _split(per_round, within, between, upper)
    return FigureNoise(
        [float(np.exp(m)) for m in medians], within, between, upper, n,
        None if lag1 is None else round(lag1, 4), shared, own,
    )  # fmt: skip


def _split(per_round: list[Series], within: float, between: float, upper: float) -> tuple[float | None, float | None]:
    """(shared, own) parts of the upper bound where every round booted replicas side by side: the
    replicas of a round differ by each server's own part; the rounds' means by the shared part
    and what is left of the own. The split of the point estimate is applied to the bound."""
    rounds = [[float(np.median(np.log(v))) for _, v in sorted(r.items()) if v] for r in per_round]
    rounds = [levels for levels in rounds if len(levels) >= 2]
    if len(rounds) < 2 or between <= 0:
        return None, None
    n = min(len(v) for r in per_round for v in r.values() if v)
    median_noise = (MEDIAN_EFFICIENCY * within) ** 2 / n
    inside = sum(float(np.sum((np.asarray(lv) - np.mean(lv)) ** 2)) for lv in rounds)
    own_sq = max(0.0, inside / sum(len(lv) - 1 for lv in rounds) - median_noise)
    share = min(1.0, max(0.0, 1 - own_sq / between**2))
    return round(upper * math.sqrt(share), 5), round(upper * math.sqrt(1 - share), 5)


@dataclass(frozen=True)
class GateModel:
    false_alarm: float  # P(FAIL) for an unchanged build
    inconclusive: float  # P(INCONCLUSIVE) for an unchanged build
    detects: float | None  # the regression FAILED with 80% power; None where the gate cannot tell
    cannot_tell: str
    suggested: float  # least tolerance at which an unchanged build passes with 95%


def _gate_model(noise: FigureNoise, tolerance: float, two_sided: bool, deployment: Deployment) -> GateModel:
    """For a gate comparing one boot now with one stored boot: how an unchanged build fares (FAIL,
    INCONCLUSIVE), the regression it FAILS with 80% power, and the least tolerance at which an
    unchanged build passes 95% of the time."""
    wl = deployment.workload
    looks = planned_looks(wl.repeats, wl.max_repeats, deployment.gates.sample_batch)
    z = float(norm.ppf(1 - (1 - per_look_confidence(deployment.gates.confidence, looks)) / 2))
    n = wl.max_repeats  # an undecided gate measures to its cap: its last look decides
    sd = math.sqrt(2 * (MEDIAN_EFFICIENCY * noise.within_log_sd) ** 2 / n + 2 * noise.between_boot_log_sd_upper**2)
    sd = max(sd, 1e-12)  # rounds alike to the last digit (a server replaying its answers): no noise, no division by it
    half = z * sd

    def not_passed(tol: float) -> float:
        # the estimate (log scale, centred on 0 for an unchanged build) passes where the whole
        # interval clears the bar: above log(1 - tol) + half, and for the two-sided reference
        # also below log(1 + tol) - half (not the mirror image: ratios are not symmetric)
        low = float(norm.cdf((math.log(1 - tol) + half) / sd))
        high = float(norm.sf((math.log(1 + tol) - half) / sd)) if two_sided else 0.0
        return min(1.0, low + high)

    def failed(tol: float) -> float:
        # FAIL: the whole interval misses the bar (below log(1 - tol) - half, or above log(1 + tol) + half)
        low = float(norm.cdf((math.log(1 - tol) - half) / sd))
        high = float(norm.sf((math.log(1 + tol) + half) / sd)) if two_sided else 0.0
        return min(1.0, low + high)

    lo, hi = 0.0, 0.999
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if not_passed(mid) <= FALSE_ALARM_TARGET else (mid, hi)
    false_alarm = failed(tolerance)
    inconclusive = max(0.0, not_passed(tolerance) - false_alarm)
    passes = 1 - false_alarm - inconclusive
    detects: float | None = 1 - math.exp(math.log(1 - tolerance) - half - float(norm.ppf(POWER)) * sd)
    why = ""
    if passes < 0.5:
        # An unchanged build mostly cannot pass: a regression then "detected" says nothing.
        detects, why = None, (
            f"an unchanged build passes only {passes:.0%} (INCONCLUSIVE {inconclusive:.0%}): the interval "
            f"(±{math.exp(half) - 1:.1%}) is wider than the tolerance {tolerance:.0%} allows"
        )
    elif detects is not None and detects >= 0.99:
        detects, why = None, "only a regression of 99% or more would fail it: the noise is too wide for this tolerance"
    return GateModel(false_alarm, inconclusive, detects, why, hi)


def _aa_pairs(
    per_round: list[Series], noise: FigureNoise, tolerance: float, two_sided: bool, deployment: Deployment
) -> dict[str, int]:
    """Every round judged against every other as stored, by the gate's own interval and rule:
    how many pairs FAIL, are INCONCLUSIVE and PASS (only FAIL is a false alarm)."""
    wl = deployment.workload
    looks = planned_looks(wl.repeats, wl.max_repeats, deployment.gates.sample_batch)
    level = per_look_confidence(deployment.gates.confidence, looks)
    spread = BootSpread(
        noise.between_boot_log_sd_upper, "this calibration", noise.shared_log_sd, noise.request_lag1
    )
    counts = {FAIL: 0, INCONCLUSIVE: 0, PASS: 0}
    for i, stored in enumerate(per_round):
        for j, now in enumerate(per_round):
            if i == j or not stored or not now:
                continue
            interval, _ = ratio_interval(ratio_series(now, stored), level, spread, boots_other=1)
            status = (
                within(interval, 1 - tolerance, 1 + tolerance) if two_sided else at_least(interval, 1 - tolerance)
            )
            counts[status] += 1
    return {"pairs": sum(counts.values()), "fail": counts[FAIL], "inconclusive": counts[INCONCLUSIVE], "pass": counts[PASS]}


SPREAD_DECIMALS = 5  # a spread as the record stores it

# Why a figure's between-boot spread is recorded as not estimated (its within-boot noise still is):
# no A/A rounds can show a spread of 0, and a record refused for it recorded nothing at all.
NO_SPREAD_SHOWN = (
    "not estimated: the rounds' medians differed no more than their requests' own noise explains, and A/A rounds "
    "cannot show a spread of 0; gates treat the between-boot noise as unknown (more --boots or --requests may show it)"
)
NO_DRIFT_SHOWN = (
    "not estimated: the running servers did not drift between the rounds beyond their requests' own noise, and "
    "specgate cannot restart servers attached by url, so their between-boot spread is not measured here; gates "
    "treat it as unknown (declare [gates.between_boot] from rounds where the servers were restarted)"
)


def not_estimated(noise: FigureNoise, deployment: Deployment) -> str | None:
    """Why this figure's between-boot spread cannot be recorded, or None where it can."""
    if round(noise.between_boot_log_sd_upper, SPREAD_DECIMALS) > 0:  # as stored: a spread rounded to 0 is 0
        return None
    return NO_DRIFT_SHOWN if deployment.launch.launcher == "url" else NO_SPREAD_SHOWN


def analyse(deployment: Deployment, rounds: list[dict[str, ConfigSpeed]]) -> dict[str, dict]:
    """config → {"decode_tps": {...}, "speedup": {...}} with noise and gate calibration."""
    out: dict[str, dict] = {}
    for config in deployment.configs:
        ref = deployment.reference_of(config)
        tol = deployment.gates.tolerance.decode_tps_for(config)
        series = [r[config].decode_tps_by_boot() for r in rounds if config in r and r[config].samples]
        entry: dict[str, dict] = {}
        tps = _noise(series)
        if tps is not None:
            entry["decode_tps"] = _figure_entry(tps, deployment)
        if config != ref:
            speedups = [
                ratio_series(r[config].decode_tps_by_boot(), r[ref].decode_tps_by_boot())
                for r in rounds
                if config in r and ref in r and r[config].samples and r[ref].samples
            ]
            sp = _noise(speedups)
            if sp is not None:
                entry["speedup"] = _figure_entry(sp, deployment)
                entry["gate"] = _gate_entry(sp, speedups, tol, False, deployment)
        elif tps is not None:
            entry["gate"] = _gate_entry(tps, series, tol, True, deployment)
        if entry:
            out[config] = entry
    return out


def _figure_entry(noise: FigureNoise, deployment: Deployment) -> dict:
    d = asdict(noise)
    d["boot_medians"] = [round(x, 4) for x in noise.boot_medians]
    why = not_estimated(noise, deployment)
    d["between_boot_log_sd"] = None if why else round(noise.between_boot_log_sd, SPREAD_DECIMALS)
    d["between_boot_log_sd_upper"] = None if why else round(noise.between_boot_log_sd_upper, SPREAD_DECIMALS)
    if why:
        d["not_estimated"] = why
    d["within_log_sd"] = round(noise.within_log_sd, 5)
    d["boot_median_spread"] = round(max(noise.boot_medians) / min(noise.boot_medians) - 1, 4)
    return d


def _gate_entry(noise: FigureNoise, per_round: list[Series], tol: float, two_sided: bool, deployment: Deployment) -> dict:
    model = _gate_model(noise, tol, two_sided, deployment)
    aa = _aa_pairs(per_round, noise, tol, two_sided, deployment)
    return asdict(
        GateCalibration(
            tol, two_sided, round(model.false_alarm, 4), round(model.inconclusive, 4),
            None if model.detects is None else round(model.detects, 4), model.cannot_tell,
            round(model.suggested, 4), aa["pairs"], aa["fail"], aa["inconclusive"], aa["pass"],
        )
    )  # fmt: skip


def runner_setup(deployment: Deployment) -> str:
    """The settings of this host's launch that move speculative speed between boots, in words:
    a spread measured under one setup says nothing of another."""
    from specgate.server import affinity, idle

    launch = deployment.launch
    parts = [f"servers {'side by side' if launch.coexist else 'one at a time'}"]
    if launch.launcher == "local":
        servers = affinity.side_by_side(deployment)
        by = "whole physical cores" if affinity.placement(servers, affinity.available_cpus()).whole_cores else "logical CPUs"
        parts.append(
            f"CPU affinity split (each server on its own fixed CPU slice, by {by})"
            if launch.cpu_affinity == "split"
            else "CPU affinity none (each server where the kernel puts it)"
        )
    if idle.share_a_host(deployment):
        spinning = [c for c, cfg in deployment.configs.items() if not idle.gives_sleep_on_idle([*launch.args, *cfg.args])]
        if not spinning:
            parts.append(f"idle neighbours asleep ({idle.SLEEP_ON_IDLE})")
        else:
            whose = "" if len(spinning) == len(deployment.configs) else f" of {', '.join(spinning)}"
            parts.append(f"idle neighbours{whose} spinning (no {idle.SLEEP_ON_IDLE})")
    return ", ".join(parts)


def render(deployment: Deployment, configs: dict[str, dict], boots: int, notes: list[str]) -> str:
    lines = [
        f"# specgate calibrate — {deployment.name}" + (" (SIMULATOR)" if deployment.simulator else ""),
        "",
        (
            f"{boots} A/A rounds against the same running servers (launcher url), minutes apart: what is called "
            "between-boot noise below is the drift of one running server between runs, which a gate against "
            "these servers meets. "
            if deployment.launch.launcher == "url"
            else f"{boots} A/A rounds: every config booted afresh each round and measured with the gate's own plan. "
        )
        + "Within-boot noise is the spread of one request around its own mean; between-boot noise is the spread of "
        "a boot's median beyond what its requests explain (SD of the log, ≈ relative).",
        "",
        f"Runner setup these figures hold for: {runner_setup(deployment)}.",
        "",
        f"| config | figure | boot medians | within-boot SD | between-boot SD | its {UPPER_BOUND:.0%} upper bound (used) |",
        "|---|---|---|---|---|---|",
    ]
    for config, entry in configs.items():
        for kind in ("decode_tps", "speedup"):
            if kind in entry:
                e = entry[kind]
                meds = ", ".join(f"{m:.3f}" if kind == "speedup" else f"{m:.1f}" for m in e["boot_medians"])
                spread, upper = (
                    ("not estimated (below)", "—")
                    if e.get("not_estimated")
                    else (f"{e['between_boot_log_sd']:.1%}", f"{e['between_boot_log_sd_upper']:.1%}")
                )
                lines.append(f"| {config} | {kind} | {meds} | {e['within_log_sd']:.1%} | {spread} | {upper} |")
    lines += [
        "",
        "No-regression gates, one boot now against one stored boot (the reference on decode tok/s, two-sided; "
        "speculative configs on their speedup):",
        "",
        "| config | tolerance now | unchanged build FAILS / cannot tell (model) | A/A pairs FAIL / INCONCLUSIVE / PASS (gate code) | FAILS with 80% power a regression of | suggested tolerance (unchanged build passes ≥95%) |",
        "|---|---|---|---|---|---|",
    ]
    for config, entry in configs.items():
        g = entry.get("gate")
        if g:
            detects = "cannot tell: " + g["cannot_tell"] if g["detects_80pct"] is None else f"{g['detects_80pct']:.1%}"
            lines.append(
                f"| {config} | {g['tolerance']:.0%}{' ±' if g['two_sided'] else ''} | {g['false_alarm']:.1%} / "
                f"{g['inconclusive']:.1%} | {g['aa_failures']} / {g['aa_inconclusive']} / {g['aa_passes']} of "
                f"{g['aa_pairs']} | {detects} | {g['suggested_tolerance']:.1%} |"
            )
    unestimated = {
        entry[kind]["not_estimated"]
        for entry in configs.values()
        for kind in ("decode_tps", "speedup")
        if entry.get(kind, {}).get("not_estimated")
    }
    notes = [*notes, *(f"between-boot spread {why}" for why in sorted(unestimated))]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def too_noisy(configs: dict[str, dict]) -> list[str]:
    """The gates this runner's noise leaves unable to tell (an unchanged build mostly cannot pass):
    recorded all the same, with its wide spread, and said as a warning."""
    return [
        f"{config}'s no-regression gate cannot tell at its tolerance on this runner ({entry['gate']['cannot_tell']}); "
        f"it passes an unchanged build 95% of the time only from {entry['gate']['suggested_tolerance']:.0%}"
        for config, entry in configs.items()
        if entry.get("gate") and entry["gate"]["detects_80pct"] is None
    ]


def summary_line(configs: dict[str, dict]) -> str:
    worst = max((e["gate"]["suggested_tolerance"] for e in configs.values() if e.get("gate")), default=None)
    return "" if worst is None else f"largest suggested tolerance: {worst:.1%}"

