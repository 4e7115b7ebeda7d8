"""Which noise an interval holds, and the noise between boots and runs it would otherwise miss.

Within one boot, requests of a config agree to a few percent; between boots (and hosts
of one GPU model) the same config can sit 5–30% apart (H200: SmolLM2's plain decode
710–941 tok/s over five boots; eagle3-prefill on the dummy 8B 0.67–0.94x). An interval
built from the requests of one boot says nothing about that, so a verdict states what
its interval covers and adds the between-boot spread stored for this machine (`specgate
calibrate`) or declared in the deployment (`[gates.between_boot]`), in quadrature on the log scale.

The model has three parts, as the H200 data shows them (docs/statistics.md):
- a part of the between-boot spread is **shared by the servers of one run** (the speculative
  servers of one run slowed together, r = 0.81, a host-side state): replicas booted side by side
  in one run do not average it away, and a comparison of two speculative servers of one run
  (A/B in one run) cancels it. Where the split is not known, all of it is taken as shared when
  replicas would narrow it (no √N credit), and none of it when a pair would cancel it: the
  wider answer each time;
- the rest is each **server's own**, which replicas do average;
- **requests within a boot are autocorrelated** (lag-1 0.32 there): an interval that resamples
  them as independent is too narrow by sqrt((1 + ρ) / (1 − ρ)) for AR(1) requests. Where the
  runner's calibration (or the deployment) states ρ, the requests' interval is widened by it;
  never by a ρ fitted to the run it judges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specgate.measure.pairing import Series, groups, pooled
from specgate.measure.stats import Interval, median_interval, two_level_median, widened

MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # SD of a sample median ≈ 1.2533·σ/√n for normal data
# A spread estimated from a handful of boots is itself uncertain (from 3 boots its SD can be
# a third of the truth): gates use its one-sided 80% upper bound, so that an unlucky
# calibration errs towards wider intervals, never towards false alarms.
UPPER_BOUND = 0.8


def between_boot_spread(log_medians: list[float], within_log_sd: float, requests: int) -> tuple[float, float]:
    """The between-boot SD of log(figure) from A/A rounds (calibrate.analyse), and its one-sided
    UPPER_BOUND upper bound: the variance of the boots' log medians less what the within-boot noise
    alone gives a median of `requests` requests (never below 0). One definition for the record's
    writer and for its reader, which recomputes what a record states."""
    from scipy.stats import chi2

    spread = float(np.var(log_medians, ddof=1))
    median_noise = (MEDIAN_EFFICIENCY * within_log_sd) ** 2 / requests
    df = len(log_medians) - 1
    upper_spread = df * spread / float(chi2.ppf(1 - UPPER_BOUND, df))
    return math.sqrt(max(0.0, spread - median_noise)), math.sqrt(max(0.0, upper_spread - median_noise))


@dataclass(frozen=True)
class BootSpread:
    """SD of log(figure) between boots of one server, and where the number comes from.

    `shared_log_sd`: the part of it the servers of one run share (None: not known), so that
    `log_sd² = shared² + own²`. `request_lag1`: the lag-1 autocorrelation of the figure between
    consecutive requests of one boot (None: not known)."""

    log_sd: float
    source: str
    shared_log_sd: float | None = None
    request_lag1: float | None = None
    # False for a spread seen among replicas of one run alone: it holds each server's own part,
    # not what a run's servers share, so an interval widened by it still misses that.
    covers_runs: bool = True

    def split_at(self, log_sd: float) -> float | None:
        """The shared part of another estimate `log_sd` of the same spread (a pooled history's), at
        this one's split; None where this one's split is not known."""
        if self.shared_log_sd is None or self.log_sd <= 0:
            return None
        return log_sd * self.shared_log_sd / self.log_sd

    @property
    def own_log_sd(self) -> float | None:
        if self.shared_log_sd is None:
            return None
        return math.sqrt(max(0.0, self.log_sd**2 - self.shared_log_sd**2))

    def between_variance(self, boots_now: int, boots_other: int | None) -> float:
        """The variance of log(figure now / figure stored) that boots and runs give a comparison
        of `boots_now` replicas of this run with `boots_other` replicas of one stored run (None:
        a figure within this run alone, e.g. a speedup over the reference booted beside it). The
        shared part is one draw per run, whatever the replicas; the own part averages over them."""
        runs = 1 + (1 if boots_other else 0)
        shared = self.log_sd if self.shared_log_sd is None else self.shared_log_sd
        own = 0.0 if self.shared_log_sd is None else (self.own_log_sd or 0.0)
        return shared**2 * runs + own**2 * (1 / max(1, boots_now) + (1 / boots_other if boots_other else 0.0))

    def words(self) -> str:
        """The components, as the noise text says them."""
        if self.shared_log_sd is None:
            return f"{self.log_sd:.1%} per boot, taken as shared by every server of a run (its split is not known)"
        if self.shared_log_sd == 0:
            return f"{self.log_sd:.1%} per boot"
        return (
            f"{self.log_sd:.1%} per boot, {self.shared_log_sd:.1%} of it shared by the servers of one run, "
            f"{self.own_log_sd or 0.0:.1%} each server's own"
        )


MAX_LAG1 = 0.9  # past this an AR(1) inflation is no longer a correction but a guess


def autocorrelation_inflation(lag1: float | None) -> float:
    """How much wider an interval of AR(1) requests with lag-1 autocorrelation `lag1` is than one
    that takes them as independent: sqrt((1 + ρ) / (1 − ρ)); 1 where ρ is unknown or not positive."""
    if lag1 is None or lag1 <= 0:
        return 1.0
    rho = min(lag1, MAX_LAG1)
    return math.sqrt((1 + rho) / (1 - rho))


def inflated(interval: Interval, factor: float) -> Interval:
    """`interval` with each half-width multiplied by `factor` on the log scale."""
    if factor == 1.0 or interval.low <= 0 or interval.estimate <= 0:
        return interval
    centre = math.log(interval.estimate)
    low = centre - (centre - math.log(interval.low)) * factor
    high = centre + (math.log(interval.high) - centre) * factor
    return Interval(interval.estimate, math.exp(low), math.exp(high), interval.confidence)


def lag1_autocorrelation(series: Sequence[Sequence[float]]) -> float | None:
    """The lag-1 autocorrelation of log(figure) between consecutive requests, pooled over runs of
    requests (each about its own mean); None with too few pairs to say."""
    num, den, pairs = 0.0, 0.0, 0
    for values in series:
        logs = np.log(np.asarray([v for v in values if v > 0], dtype=float))
        if len(logs) < 3:
            continue
        centred = logs - logs.mean()
        num += float(np.sum(centred[1:] * centred[:-1]))
        den += float(np.sum(centred**2))
        pairs += len(logs) - 1
    if pairs < 4 or den <= 0:
        return None
    return num / den


@dataclass(frozen=True)
class HeldNoise:
    """Which noise an interval holds, in words, and whether that holds the noise between boots of
    one build: an interval of one boot's requests with no between-boot spread known does not (a
    PASS there can be a difference of boots; its verdict and the report say so from this flag)."""

    words: str
    covers_between_boot: bool

    def plus(self, more: str) -> HeldNoise:
        """The same noise with one more part said (a drift widened into it)."""
        return HeldNoise(self.words + more, self.covers_between_boot)


def ratio_interval(
    series: Series,
    confidence: float,
    spread: BootSpread | None,
    boots_other: int | None = None,
) -> tuple[Interval, str]:
    """The interval of the median per-request ratio in `series` (boot → ratios), and the
    noise it covers, in words (ratio_interval_held, for a reader of the words alone)."""
    interval, held = ratio_interval_held(series, confidence, spread, boots_other)
    return interval, held.words


def ratio_interval_held(
    series: Series,
    confidence: float,
    spread: BootSpread | None,
    boots_other: int | None = None,
) -> tuple[Interval, HeldNoise]:
    """The interval of the median per-request ratio in `series` (boot → ratios), and the
    noise it covers.

    `spread` is the between-boot SD of one boot's figure (of the ratio's log). The ratio's
    boots are this run's; `boots_other` is the boot count of a stored side (None when both
    sides were measured in this run, boot by boot)."""
    parts = [g for g in groups(series)]
    boots = len(parts)
    requests = median_interval(pooled(series), confidence)
    factor = autocorrelation_inflation(spread.request_lag1 if spread is not None else None)
    requests = inflated(requests, factor)
    lag = (
        f" (widened x{factor:.2f} for their lag-1 autocorrelation {spread.request_lag1:.2f}, {spread.source})"
        if spread is not None and factor > 1.0 and spread.request_lag1 is not None
        else ""
    )
    data = two_level_median(parts, confidence) if boots >= 2 else requests
    covered = f"requests within one boot{lag}" if boots <= 1 else f"requests{lag} and {boots} boots (two-level bootstrap"
    if boots >= 2 and spread is None:
        # Resampling 2 or 3 boots covers far less than its level (58% at 95% with 2 boots). With no
        # spread known from elsewhere, a t-interval on the boots' medians, with its B-1 degrees of
        # freedom, bounds it: wide with few boots, as the data then says little about boots.
        data = _union(data, _boot_t_interval(parts, confidence, data.estimate))
        covered += f", bounded by a t-interval on the {boots} boot medians)"
    elif boots >= 2:
        covered += ")"
    if spread is None:
        # Replicas booted side by side in one run hold each server's own noise, not what the
        # servers of a run share: without a spread known across runs, that part is missing.
        missing = "the between-boot noise of this run" if boots <= 1 else "what the servers of one run share"
        if boots_other is not None:
            missing += " and the stored run's own"
        text = covered + f"; NOT {missing} (no between-boot spread for this machine: run specgate calibrate)"
        return data, HeldNoise(text, covers_between_boot=False)
    extra = math.sqrt(spread.between_variance(boots, boots_other))
    model = widened(requests, extra)
    final = _union(data, model)
    who = f"{boots} boot{'s' if boots != 1 else ''} now" + (f", {boots_other} stored" if boots_other else "")
    not_shared = "" if spread.covers_runs else "; NOT what the servers of one run share (no spread known across runs)"
    return final, HeldNoise(
        f"{covered}; plus between-boot spread {spread.words()} ({who}; {spread.source}){not_shared}",
        covers_between_boot=spread.covers_runs,
    )


def pair_spread(a: BootSpread | None, b: BootSpread | None, same_run: bool) -> BootSpread | None:
    """The between-boot spread of log(a / b) for two servers booted side by side in one run (A/B in
    one run): where both splits are known, the shared part cancels and each server's own remains;
    where either is not, nothing is taken to cancel (the wider answer). None where either is unknown."""
    if a is None or b is None:
        return None
    if same_run and a.own_log_sd is not None and b.own_log_sd is not None:
        sd = math.hypot(a.own_log_sd, b.own_log_sd)
        how = "each server's own part; the part the servers of one run share cancels in a pair booted side by side"
    else:
        sd = math.hypot(a.log_sd, b.log_sd)
        how = "both servers' whole spreads (the part a run's servers share is not known, so none is taken to cancel)"
    lag = max((x for x in (a.request_lag1, b.request_lag1) if x is not None), default=None)
    # One draw per pair, not a per-run draw shared with anything else: shared 0 for its reader.
    return BootSpread(sd, f"{how}; {a.source}", shared_log_sd=0.0, request_lag1=lag)


def _boot_t_interval(parts: list[list[float]], confidence: float, estimate: float) -> Interval:
    from scipy.stats import t

    logs = [math.log(float(np.median(p))) for p in parts if p and float(np.median(p)) > 0]
    if len(logs) < 2:
        return Interval(estimate, estimate, estimate, confidence)
    centre = float(np.mean(logs))
    half = float(t.ppf(1 - (1 - confidence) / 2, len(logs) - 1)) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
    return Interval(estimate, math.exp(centre - half), math.exp(centre + half), confidence)


def _union(a: Interval, b: Interval) -> Interval:
    return Interval(a.estimate, min(a.low, b.low), max(a.high, b.high), a.confidence)


def detection(interval: Interval, tolerance: float) -> tuple[float, float]:
    """For a no-regression gate that passes when the interval's low clears 1 − tolerance:
    (the regression it fails with 80% probability, the chance it fails an unchanged build),
    from this interval's width taken as the noise of its estimate (normal on the log scale).

    A wide interval sees only large regressions, and may fail even with nothing changed."""
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - interval.confidence) / 2))
    if interval.low <= 0 or interval.estimate <= 0 or z <= 0:
        return 1.0, 1.0
    half = math.log(interval.estimate) - math.log(interval.low)
    sd = half / z if half > 0 else 1e-9
    bar = math.log(1 - tolerance) + half  # the estimate must land above this to pass
    mde = 1 - math.exp(bar - float(norm.ppf(0.8)) * sd)
    false_alarm = float(norm.cdf(bar / sd))
    return max(0.0, mde), false_alarm
