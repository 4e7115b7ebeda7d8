"""How often are the speed gates wrong, and what do they catch, at the H200's measured noise? (a benchmark, not a test)

    python3 benchmarks/gate_error_rates.py [--runs 200] [--seed 1] [--tolerance 0] [--quick]

Simulated figures, not booted servers: each simulated gate run draws per-request log figures
from the noise model the H200 data supports (specgate/sim/noise.py, the constants of the
simulator's `h200-noise` fault: SGLang 0.5.14, dummy 8B, `results/2026-12-03-h200-steady-*`):

- a run-shared offset on every speculative server of one run (RUN_SD), each speculative
  server's own offset (SERVER_SD), plain's own between-boot offset (PLAIN_BOOT_SD);
- AR(1) requests within a boot (REQUEST_LAG1), a speculative server's at SPEC_REQUEST_SD and
  plain's at PLAIN_REQUEST_SD; the speculative servers of one run share ROUND_SHARE of their
  request noise round by round (what makes E / D per request 4.57%, not 5.5%);
- accept length: per-request noise only (D's 3.45%), no between-boot part.

Prompt effects are left out: every design pairs request i with request i, where they cancel.

The designs of a no-regression gate on a speculative config (`--workload`: the H200 steady
deployment's 10 requests a boot, batches of 6, cap 20, 95%; the looks split the error budget,
specgate.verdicts.gates.decide_sequentially):
(a) stored baseline, one boot a side: the speedup (spec / plain, per request) now over stored;
(b) k sequential runs a side (each its own run offset), the stored side through across_boots;
(c) N side-by-side replicas in one run, a baseline recorded the same way;
(d) A/B in one run: a candidate and a reference speculative server booted side by side,
    interleaved, judged on the paired per-request ratio (no plain, no stored side); and the
    same in each of 3 sequential runs;
(e) the accept-length gate paired per prompt (specgate.measure.stats.paired_pooled_ratio).

Per design, two intervals: the suite's own (specgate.verdicts.noise.ratio_interval, given what a
calibration with replicas gives it: the speedup's between-boot SD, 2.72%, the part a run's
speculative servers share, 2.42%, and the requests' lag-1 0.32; for A/B in one run the pair's
spread, `pair_spread`, each server's own part), and an honest one (the helpers marked below: the
request bootstrap widened by the requests' exact design effect, AR(1) at n and what boots of one
run share, and by the small-sample expansion of a percentile bootstrap of few requests, then by
the between-boot part this design really holds). The gate FAILs when the whole
interval lies below 1 − tolerance. Printed: the A/A false-alarm rate (FAIL of an unchanged
build), the regression caught with 80% power (the smallest injected slowdown of the candidate,
on a 0.25% grid, that FAILs in 80% of runs; the intervals are scale-equivariant, so each run's
intervals are computed once and the slowdown applied to them, checked on the first run), and
GPU-minutes per verdict (this run's side; a stored side is recorded once and reused) at the
boot and request times the steady reports measured.

    python3 benchmarks/gate_error_rates.py --sim-calibrated [--runs 200] [--boot-sd 0.05]

is the earlier benchmark: the simulator's `boot-offset=S` fault (every boot independent), each
gate run calibrated first, at the sim deployment's workload.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specgate.calibrate.analyse import _gate_model, _noise  # noqa: E402
from specgate.deployment import load_deployment  # noqa: E402
from specgate.measure.pairing import Series, across_boots, pooled, ratio_series, truncated  # noqa: E402
from specgate.measure.stats import Interval, median_interval, paired_pooled_ratio, widened  # noqa: E402
from specgate.sim.noise import (  # noqa: E402
    PLAIN_BOOT_SD,
    PLAIN_REQUEST_SD,
    REQUEST_LAG1,
    ROUND_SHARE,
    RUN_SD,
    SERVER_SD,
    SPEC_REQUEST_SD,
    SPEEDUP_BOOT_SD,
)
from specgate.verdicts.gates import FAIL, PASS, Status, at_least, decide_sequentially, planned_looks, within  # noqa: E402
from specgate.verdicts.noise import BootSpread, pair_spread, ratio_interval  # noqa: E402

H200_DEPLOYMENT = ROOT / "fixtures" / "deployments" / "llama8b-dummy-h200-steady.toml"
STEADY_REPORTS = "results/2026-12-03-h200-steady-*/**/report.json"
TAU_REQUEST_SD = 0.0345  # D's accept length per request within a boot (issue 46's table); E's is forced
TAU = 2.0  # the accept length the candidate's requests centre on (cancels in the ratio)
TOKENS = 256  # completion tokens per request (the steady deployment's max_new_tokens)
GRID = np.arange(0.0, 0.4001, 0.0025)  # injected slowdowns searched for 80% power
# What a calibration with replicas gives the suite (verdicts/noise.py's model): the speedup's spread,
# the part a run's speculative servers share, and the requests' lag.
SUITE_SPREAD = BootSpread(
    SPEEDUP_BOOT_SD, "the measured speedup spread between boots (issue 46)", RUN_SD, REQUEST_LAG1
)
# A speculative server's decode tok/s: the shared part and its own (the A/B pair's sides).
SUITE_DECODE = BootSpread(math.hypot(RUN_SD, SERVER_SD), "a speculative server's decode spread", RUN_SD, REQUEST_LAG1)


# --- honest intervals: local to this benchmark, to be swapped for specgate.verdicts.noise's -----
# --- once the product's intervals hold these components (issue 46, item 1) ------------------------


def ar1_variance_factor(rho: float, n: int) -> float:
    """Var(mean of n AR(1) values) over Var(mean of n independent ones): 1 + 2·Σ(1 − h/n)·ρ^h,
    (1 + ρ)/(1 − ρ) as n grows."""
    return 1.0 + 2.0 * sum((1 - h / n) * rho**h for h in range(1, n))


def request_inflation(rho: float, n: int, boots: int, variance: float, shared: float) -> float:
    """How much wider than the suite's request bootstrap (all requests of all boots independent)
    an interval must be: AR(1) within a boot, and `shared` of `variance` (per request, log figure)
    common to the same request of every boot now (the run's round noise, a stored level used by
    every boot). Separable covariance, so the factors multiply."""
    return math.sqrt(ar1_variance_factor(rho, n) * (1 + (boots - 1) * shared / variance))


def small_sample_expansion(n: int, confidence: float) -> float:
    """How much a percentile bootstrap of n values under-covers at `confidence`: its tails are
    the sample's (SD with n, not n − 1) and normal, not t. Hesterberg's expanded percentile
    interval widens it by sqrt(n / (n − 1))·t_(n−1) / z ("What teachers should know about the
    bootstrap", The American Statistician 69, 2015)."""
    from scipy.stats import norm, t

    if n < 2:
        return 1.0
    q = 1 - (1 - confidence) / 2
    return math.sqrt(n / (n - 1)) * float(t.ppf(q, n - 1)) / float(norm.ppf(q))


def expanded(interval: Interval, factor: float) -> Interval:
    """`interval` with its half-widths scaled by `factor` on the log scale."""
    centre = math.log(interval.estimate)
    low = math.exp(centre - factor * (centre - math.log(interval.low)))
    high = math.exp(centre + factor * (math.log(interval.high) - centre))
    return Interval(interval.estimate, low, high, interval.confidence)


def honest_interval(series: Series, confidence: float, inflation: float, between_log_sd: float) -> Interval:
    """The suite's request bootstrap (median_interval) widened by `inflation` (what the requests
    share) and by the small-sample expansion, then the between-boot part this design holds added
    in quadrature."""
    values = pooled(series)
    requests = median_interval(values, confidence)
    factor = inflation * small_sample_expansion(len(values), confidence)
    return widened(expanded(requests, factor), between_log_sd)


# --- the noise model's draws -----------------------------------------------------------------------


def ar1(rng: np.random.Generator, rows: int, n: int, sd: float) -> np.ndarray:
    """`rows` AR(1) series of n requests each, marginal SD `sd`, lag-1 REQUEST_LAG1."""
    x = np.empty((rows, n))
    x[:, 0] = rng.normal(0.0, sd, rows)
    innovation = sd * math.sqrt(1 - REQUEST_LAG1**2)
    for i in range(1, n):
        x[:, i] = REQUEST_LAG1 * x[:, i - 1] + rng.normal(0.0, innovation, rows)
    return x


def one_run(rng: np.random.Generator, spec: int, plain: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Log decode speed of every request of `spec` speculative and `plain` plain servers booted
    side by side in one run: (spec rows, plain rows)."""
    shared_rounds = ar1(rng, 1, n, SPEC_REQUEST_SD)
    spec_logs = (
        rng.normal(0.0, RUN_SD)
        + rng.normal(0.0, SERVER_SD, (spec, 1))
        + math.sqrt(ROUND_SHARE) * shared_rounds
        + math.sqrt(1 - ROUND_SHARE) * ar1(rng, spec, n, SPEC_REQUEST_SD)
    )
    plain_logs = rng.normal(0.0, PLAIN_BOOT_SD, (plain, 1)) + ar1(rng, plain, n, PLAIN_REQUEST_SD)
    return spec_logs, plain_logs


def speedups(rng: np.random.Generator, runs: int, replicas: int, n: int) -> Series:
    """The speedup series of `runs` runs of `replicas` side-by-side replicas each (replica k of the
    speculative config pairs with replica k of plain, as CONFIG@k does)."""
    out: Series = {}
    for _ in range(runs):
        spec_logs, plain_logs = one_run(rng, replicas, replicas, n)
        for k in range(replicas):
            out[len(out) + 1] = list(np.exp(spec_logs[k] - plain_logs[k]))
    return out


# --- designs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Design:
    label: str
    draw: Callable[[np.random.Generator, int], Any]  # one gate run's A/A data (a design's own shape)
    current: Callable[[Any, int, float], Interval]  # the suite's interval at a look (requests a boot)
    honest: Callable[[Any, int, float], Interval]
    boots: int  # servers booted for this side's verdict
    requests_per_boot_share: int  # servers measured per request round (GPU time)
    note: str


def stored_design(label: str, runs: int, replicas: int) -> Design:
    """(a)-(c): the speedup now over a stored baseline recorded the same way."""
    boots = runs * replicas
    v = SPEC_REQUEST_SD**2 + PLAIN_REQUEST_SD**2  # per request, one boot's log speedup
    c_now = ROUND_SHARE * SPEC_REQUEST_SD**2 if replicas > 1 else 0.0  # replicas share the run's rounds
    stored_var = (v + (boots - 1) * c_now) / boots  # the stored side's level per request
    shared = c_now + stored_var  # what the same request of two boots now have in common
    between = math.sqrt(2 * (RUN_SD**2 / runs + (SERVER_SD**2 + PLAIN_BOOT_SD**2) / boots))

    def draw(rng: np.random.Generator, n: int) -> tuple[Series, Series]:
        return speedups(rng, runs, replicas, n), speedups(rng, runs, replicas, n)

    def series(data: tuple[Series, Series], per_boot: int) -> Series:
        now, stored = data
        return ratio_series(truncated(now, per_boot), across_boots(truncated(stored, per_boot)))

    return Design(
        label,
        draw,
        lambda d, m, level: ratio_interval(series(d, m), level, SUITE_SPREAD, boots_other=boots)[0],
        lambda d, m, level: honest_interval(
            series(d, m), level, request_inflation(REQUEST_LAG1, m, boots, v + stored_var, shared), between
        ),
        boots=2 * boots,
        requests_per_boot_share=2 * boots,
        note=(
            f"between-boot SD of the comparison: suite {math.sqrt(SUITE_SPREAD.between_variance(boots, boots)):.2%}, "
            f"honest {between:.2%}"
        ),
    )


_PAIR = pair_spread(SUITE_DECODE, SUITE_DECODE, same_run=True)
assert _PAIR is not None
PAIR_SPREAD: BootSpread = _PAIR


def ab_design(runs: int) -> Design:
    """(d): candidate and reference speculative servers side by side, paired per request, in each
    of `runs` runs (each its own run offset, which the pair cancels)."""
    between = math.sqrt(2 / runs) * SERVER_SD  # the run's shared offset cancels; the own offsets remain

    def draw(rng: np.random.Generator, n: int) -> Series:
        out: Series = {}
        for k in range(runs):
            spec_logs, _ = one_run(rng, 2, 0, n)
            out[k + 1] = list(np.exp(spec_logs[0] - spec_logs[1]))
        return out

    where = "one run" if runs == 1 else f"each of {runs} sequential runs"
    return Design(
        f"(d) A/B in {where}: candidate / reference speculative server, paired per request",
        draw,
        # The suite's A/B gate (verdicts/ab_gate.py): the pair's spread, where the shared part cancels.
        lambda d, m, level: ratio_interval(truncated(d, m), level, PAIR_SPREAD)[0],
        lambda d, m, level: honest_interval(
            truncated(d, m), level, request_inflation(REQUEST_LAG1, m, runs, 1.0, 0.0), between
        ),
        boots=2 * runs,
        requests_per_boot_share=2 * runs,
        note=f"between-boot SD: suite {math.sqrt(PAIR_SPREAD.between_variance(runs, None)):.2%}, honest {between:.2%}",
    )


def tau_design() -> Design:
    """(e): accept length, candidate over reference, paired per prompt (no between-boot part)."""

    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return tuple(TAU * np.exp(rng.normal(0.0, TAU_REQUEST_SD, n)) for _ in range(2))  # type: ignore[return-value]

    def interval(d: tuple[np.ndarray, np.ndarray], m: int, level: float) -> Interval:
        now, ref = d[0][:m], d[1][:m]
        tokens = [float(TOKENS)] * m
        return paired_pooled_ratio(tokens, list(TOKENS / now), tokens, list(TOKENS / ref), level)

    def honest(d: tuple[np.ndarray, np.ndarray], m: int, level: float) -> Interval:
        # No between-boot part and no measured autocorrelation: the small-sample expansion alone.
        return expanded(interval(d, m, level), small_sample_expansion(m, level))

    return Design(
        "(e) accept length (τ) paired per prompt, one run",
        draw,
        interval,
        honest,
        boots=2,
        requests_per_boot_share=2,
        note="the same requests as the speed gate's: no GPU time of its own beside (a) or (d)",
    )


def designs() -> list[Design]:
    return [
        stored_design("(a) stored baseline, one boot a side", 1, 1),
        *(stored_design(f"(b) {k} sequential runs a side, stored baseline of {k}", k, 1) for k in (2, 3, 5)),
        *(stored_design(f"(c) {n} side-by-side replicas in one run, baseline the same", 1, n) for n in (2, 4)),
        *(ab_design(k) for k in (1, 3)),
        tau_design(),
    ]


# --- running a design ------------------------------------------------------------------------------


def verdicts(intervals: list[Interval], slowdown: float, rule: Callable[[Interval], Status], confidence: float):
    """decide_sequentially over one run's looks, the candidate slowed by `slowdown`: (status, looks)."""
    factor = 1.0 - slowdown
    taken = [0]

    def more() -> bool:
        taken[0] += 1
        return taken[0] < len(intervals)

    status, _, looks = decide_sequentially(
        lambda level: intervals[taken[0]].scaled(factor), rule, more, confidence, len(intervals)
    )
    return status, looks


def _check_equivariant(design: Design, data: Any, per_boot: int, level: float) -> None:
    """The slowdown is applied to the intervals, not to the data: true where scaling every
    candidate figure scales the interval (the first run's, at one look, checked here)."""
    if isinstance(data, tuple) and isinstance(data[0], np.ndarray):
        slowed: Any = (data[0] * 0.9, data[1])
    elif isinstance(data, tuple):
        slowed = ({b: [x * 0.9 for x in v] for b, v in data[0].items()}, data[1])
    else:
        slowed = {b: [x * 0.9 for x in v] for b, v in data.items()}
    for make in (design.current, design.honest):
        a, b = make(data, per_boot, level).scaled(0.9), make(slowed, per_boot, level)
        if not np.allclose([a.low, a.high], [b.low, b.high], rtol=1e-6):
            raise AssertionError(f"{design.label}: interval not scale-equivariant ({a} vs {b})")


@dataclass
class Outcome:
    false_alarm: float
    caught: float | None  # the slowdown FAILed in 80% of runs (None: beyond the grid)
    requests_per_boot: float  # mean, at the looks the A/A runs took


def run_design(design: Design, args, rng: np.random.Generator, dep) -> tuple[Outcome, Outcome]:
    wl, batch, confidence = dep.workload, dep.gates.sample_batch, dep.gates.confidence
    looks = planned_looks(wl.repeats, wl.max_repeats, batch)
    per_look = [min(wl.repeats + k * batch, wl.max_repeats) for k in range(looks)]
    level = 1 - (1 - confidence) / looks
    bar = 1 - args.tolerance
    rule = lambda iv: at_least(iv, bar)  # noqa: E731
    current: list[list[Interval]] = []
    honest: list[list[Interval]] = []
    for r in range(args.runs):
        data = design.draw(rng, wl.max_repeats)
        if r == 0:
            _check_equivariant(design, data, per_look[0], level)
        current.append([design.current(data, m, level) for m in per_look])
        honest.append([design.honest(data, m, level) for m in per_look])
    out = []
    for intervals in (current, honest):
        fails = np.array([[verdicts(iv, d, rule, confidence)[0] == FAIL for d in GRID] for iv in intervals])
        power = fails.mean(axis=0)
        caught = next((float(d) for d, p in zip(GRID, power) if p >= 0.8), None)
        taken = [verdicts(iv, 0.0, rule, confidence)[1] for iv in intervals]
        out.append(Outcome(float(power[0]), caught, float(np.mean([per_look[t - 1] for t in taken]))))
    return out[0], out[1]


def measured_times() -> tuple[float, float, str]:
    """(boot seconds, seconds per request, where from): the median ok boot and the speed phase's
    seconds per request of the steady reports kept in results/."""
    boots, speed_s, requests = [], 0.0, 0
    found = sorted(ROOT.glob(STEADY_REPORTS))
    for path in found:
        doc = json.loads(path.read_text())
        boots += [b["seconds"] for b in doc.get("boots", []) if b.get("ok")]
        plan = doc.get("plan") or {}
        if doc.get("phase_seconds", {}).get("speed") and plan.get("orders"):
            speed_s += doc["phase_seconds"]["speed"]
            requests += plan["rounds"] * len(plan["orders"][0])
    if not boots or not requests:
        return 60.0, 1.0, "ASSUMED (no steady report found): boot 60 s, 1 s per request"
    where = ", ".join(str(p.parent.relative_to(ROOT)) for p in found)
    return (
        float(np.median(boots)),
        speed_s / requests,
        f"median of {len(boots)} boots and the speed phase's seconds per request (warm-up included) in {where}",
    )


def design_table(args) -> int:
    dep = load_deployment(str(H200_DEPLOYMENT))
    if args.cap is not None:
        dep = replace(dep, workload=replace(dep.workload, max_repeats=args.cap))
    boot_s, request_s, where = measured_times()
    started = time.monotonic()
    wl = dep.workload
    print(
        f"# speed-gate designs at the H200's measured noise: {args.runs} simulated runs a cell, seed {args.seed}\n"
        f"(simulated figures, specgate/sim/noise.py: run-shared {RUN_SD:.2%}, own {SERVER_SD:.2%}, plain {PLAIN_BOOT_SD:.2%} "
        f"between boots; requests AR(1) lag-1 {REQUEST_LAG1:g} at {SPEC_REQUEST_SD:.2%} (speculative) and "
        f"{PLAIN_REQUEST_SD:.2%} (plain), {ROUND_SHARE:.2f} of it shared round by round by the speculative servers of a run "
        f"(a median of {wl.max_repeats} such requests holds {ar1_variance_factor(REQUEST_LAG1, wl.max_repeats):.2f}x the "
        f"variance of {wl.max_repeats} independent ones); "
        f"accept length {TAU_REQUEST_SD:.2%} per request. {wl.repeats} requests a boot, batches of "
        f"{dep.gates.sample_batch}, cap {wl.max_repeats}, {dep.gates.confidence:.0%} overall; FAIL below "
        f"{1 - args.tolerance:g}x. GPU time: boot {boot_s:.0f} s, {request_s:.2f} s a request ({where}).)\n"
    )
    print(
        "| design | A/A FAIL, suite interval | A/A FAIL, honest | caught with 80% power, suite | caught, honest "
        "| GPU-min per verdict | note |"
    )
    print("|---|---|---|---|---|---|---|")
    for index, design in enumerate(designs()):
        if args.only and not any(design.label.startswith(f"({o})") for o in args.only):
            continue
        # Each design its own stream: a row of --only is the row of the whole table.
        now, fair = run_design(design, args, np.random.default_rng([args.seed, index]), dep)
        gpu_min = (design.boots * boot_s + design.requests_per_boot_share * fair.requests_per_boot * request_s) / 60
        caught = lambda o: f"{o.caught:.1%}" if o.caught is not None else f"> {GRID[-1]:.0%}"  # noqa: E731
        print(
            f"| {design.label} | {now.false_alarm:.1%} | {fair.false_alarm:.1%} | {caught(now)} | {caught(fair)} "
            f"| {gpu_min:.1f} | {design.note} |",
            flush=True,
        )
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


# --- the earlier benchmark: the simulator's boot-offset fault, each run calibrated first -----------

WITHIN_SD = 0.02  # per-request SD of log tok/s within a boot (the sim's healthy runs: 0.1–7%)
PROMPT_SD = 0.10  # how much the pinned prompts differ from each other (removed by pairing)


class Boot:
    """One booted server: its own offset, and requests around each prompt's level."""

    def __init__(self, rng: np.random.Generator, level: float, prompts: np.ndarray, boot_sd: float) -> None:
        self.rng = rng
        self.level = level + rng.normal(0.0, boot_sd)
        self.prompts = prompts
        self.values: list[float] = []

    def more(self, count: int) -> None:
        for _ in range(count):
            i = len(self.values)
            self.values.append(float(np.exp(self.level + self.prompts[i] + self.rng.normal(0.0, WITHIN_SD))))

    def series(self) -> dict[int, list[float]]:
        return {1: list(self.values)}


def gate_run(rng, prompts, boot_sd, true_log_ratio, spread, _tolerance, rule, dep) -> bool:
    """One gate, sequential as the judge runs it; True where it PASSES."""
    wl, batch = dep.workload, dep.gates.sample_batch
    a = Boot(rng, true_log_ratio, prompts, boot_sd)
    b = Boot(rng, 0.0, prompts, boot_sd)
    a.more(wl.repeats)
    b.more(wl.repeats)

    def more() -> bool:
        if len(a.values) >= wl.max_repeats:
            return False
        step = min(batch, wl.max_repeats - len(a.values))
        a.more(step)
        b.more(step)
        return True

    looks = planned_looks(wl.repeats, wl.max_repeats, batch)
    status, _, _ = decide_sequentially(
        lambda level: ratio_interval(ratio_series(a.series(), b.series()), level, spread, boots_other=rule[1])[0],
        rule[0],
        more,
        dep.gates.confidence,
        looks,
    )
    return status == PASS


def calibrate(rng, prompts, boot_sd, dep, rounds: int):
    """A/A rounds drawn apart from the checked runs: the spread the gate will be given."""
    tps, speedups_ = [], []
    for _ in range(rounds):
        ref = Boot(rng, 0.0, prompts, boot_sd)
        spec = Boot(rng, 0.4, prompts, boot_sd)
        ref.more(dep.workload.repeats)
        spec.more(dep.workload.repeats)
        tps.append(ref.series())
        speedups_.append(ratio_series(spec.series(), ref.series()))
    return _noise(tps), _noise(speedups_)


def sim_calibrated(args) -> int:
    dep = load_deployment("sim")
    bar = dep.gates.beats[0].ratio
    tol_now = dep.gates.tolerance.decode_tps_fraction
    rng = np.random.default_rng(args.seed)
    cal_rng = np.random.default_rng(args.seed + 1000)  # calibrations never share draws with the runs they serve
    prompts = rng.normal(0.0, PROMPT_SD, size=dep.workload.max_repeats)
    started = time.monotonic()
    one_sided = lambda tol: (lambda iv: at_least(iv, 1 - tol), 1)  # noqa: E731
    two_sided = lambda tol: (lambda iv: within(iv, 1 - tol, 1 + tol), 1)  # noqa: E731
    beats_rule = (lambda iv: at_least(iv, bar), None)
    counts = dict.fromkeys(
        ["beats_raw", "beats_cal", "ref_raw", "spec_raw", "ref_cal_now", "spec_cal_now", "ref_cal", "spec_cal"], 0
    )
    tolerances: list[tuple[float, float]] = []
    spreads: list[tuple[float, float]] = []
    for _ in range(args.runs):
        # Each gate run is preceded by its own calibration, as a user's would be: the rates below
        # hold the luck of the calibration too, not only of the run.
        tps_noise, sp_noise = calibrate(cal_rng, prompts, args.boot_sd, dep, args.calibration_rounds)
        sp = BootSpread(sp_noise.between_boot_log_sd_upper, "benchmark calibration")
        tp = BootSpread(tps_noise.between_boot_log_sd_upper, "benchmark calibration")
        t_ref = _gate_model(tps_noise, tol_now, True, dep).suggested
        t_spec = _gate_model(sp_noise, tol_now, False, dep).suggested
        tolerances.append((t_ref, t_spec))
        spreads.append((tp.log_sd, sp.log_sd))
        counts["beats_raw"] += gate_run(rng, prompts, args.boot_sd, np.log(bar), None, 0, beats_rule, dep)
        counts["beats_cal"] += gate_run(rng, prompts, args.boot_sd, np.log(bar), sp, 0, beats_rule, dep)
        counts["ref_raw"] += not gate_run(rng, prompts, args.boot_sd, 0.0, None, 0, two_sided(tol_now), dep)
        counts["spec_raw"] += not gate_run(rng, prompts, args.boot_sd, 0.0, None, 0, one_sided(tol_now), dep)
        counts["ref_cal_now"] += not gate_run(rng, prompts, args.boot_sd, 0.0, tp, 0, two_sided(tol_now), dep)
        counts["spec_cal_now"] += not gate_run(rng, prompts, args.boot_sd, 0.0, sp, 0, one_sided(tol_now), dep)
        counts["ref_cal"] += not gate_run(rng, prompts, args.boot_sd, 0.0, tp, 0, two_sided(t_ref), dep)
        counts["spec_cal"] += not gate_run(rng, prompts, args.boot_sd, 0.0, sp, 0, one_sided(t_spec), dep)
    r = {k: v / args.runs for k, v in counts.items()}
    med = lambda xs: float(np.median(xs))  # noqa: E731
    t_ref_med, t_spec_med = med([t[0] for t in tolerances]), med([t[1] for t in tolerances])
    print(f"# gate error rates: {args.runs} simulated gate runs per row, per-boot offset SD {args.boot_sd:.0%}")
    print(
        f"(sim workload: {dep.workload.repeats} requests, batches of {dep.gates.sample_batch}, cap "
        f"{dep.workload.max_repeats}; confidence {dep.gates.confidence:.0%}; within-boot SD {WITHIN_SD:.0%}; "
        f"each run calibrated first from {args.calibration_rounds} A/A rounds of its own)\n"
    )
    print("| scenario | wrong verdict | rate | bound |")
    print("|---|---|---|---|")
    rows = [
        (f"beats at a true speedup equal to its bar ({bar:g}x), interval of requests only", "PASS", r["beats_raw"]),
        ("the same, interval + calibrated between-boot spread", "PASS", r["beats_cal"]),
        (f"A/A reference (two-sided), tolerance {tol_now:.0%}, requests only", "FAIL", r["ref_raw"]),
        (f"A/A speculative speedup, tolerance {tol_now:.0%}, requests only", "FAIL", r["spec_raw"]),
        (f"A/A reference, tolerance {tol_now:.0%}, + calibrated spread", "FAIL", r["ref_cal_now"]),
        (f"A/A speculative speedup, tolerance {tol_now:.0%}, + calibrated spread", "FAIL", r["spec_cal_now"]),
        (f"A/A reference, calibrated tolerance (median {t_ref_med:.0%}), + calibrated spread", "FAIL", r["ref_cal"]),
        (
            f"A/A speculative speedup, calibrated tolerance (median {t_spec_med:.0%}), + calibrated spread",
            "FAIL",
            r["spec_cal"],
        ),
    ]
    for label, wrong, rate in rows:
        print(f"| {label} | {wrong} | {rate:.1%} | ≤ 5% |")
    print(
        f"\nbetween-boot spread the gates were given (median over calibrations, 80% upper bound): decode tok/s "
        f"{med([s[0] for s in spreads]):.1%}, speedup {med([s[1] for s in spreads]):.1%} "
        f"(true: {args.boot_sd:.1%} and {args.boot_sd * np.sqrt(2):.1%})"
    )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=None, help="simulated runs a cell (default 200; --quick: 40)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="40 runs a cell: a smoke run of the table, not its figures")
    p.add_argument("--tolerance", type=float, default=0.0, help="FAIL where the interval lies below 1 - this")
    p.add_argument("--cap", type=int, default=None, help="requests a boot at the last look (default: the deployment's max_repeats)")
    p.add_argument("--only", nargs="+", choices=list("abcde"), help="only these designs")
    p.add_argument("--sim-calibrated", action="store_true", help="the earlier benchmark (boot-offset fault)")
    p.add_argument("--boot-sd", type=float, default=0.05, help="--sim-calibrated: the boot-offset fault's S")
    p.add_argument("--calibration-rounds", type=int, default=5, help="--sim-calibrated: A/A rounds per calibration")
    args = p.parse_args()
    args.runs = args.runs if args.runs is not None else (40 if args.quick else 200)
    if args.sim_calibrated:
        if args.runs < 1 or args.calibration_rounds < 2 or not 0 <= args.boot_sd < 1:
            p.error("expected --runs >= 1, --calibration-rounds >= 2 and 0 <= --boot-sd < 1")
        return sim_calibrated(args)
    if args.runs < 1 or not 0 <= args.tolerance < 1 or (args.cap is not None and args.cap < 10):
        p.error("expected --runs >= 1, 0 <= --tolerance < 1 and --cap >= 10 (the first look's requests)")
    return design_table(args)


if __name__ == "__main__":
    sys.exit(main())
