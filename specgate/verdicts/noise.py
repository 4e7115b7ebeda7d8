"""Which noise an interval holds, and the between-boot noise it would otherwise miss.

Within one boot, requests of a config agree to a few percent; between boots (and hosts
of one GPU model) the same config can sit 5–30% apart (H200: SmolLM2's plain decode
710–941 tok/s over five boots; eagle3-prefill on the dummy 8B 0.67–0.94x). An interval
built from the requests of one boot says nothing about that, so a verdict states what
its interval covers and, where the run has one boot per config, adds the between-boot
spread stored for this machine (`specgate calibrate`) or declared in the deployment
(`[gates.between_boot]`, e.g. from `specgate spread`), in quadrature on the log scale.
"""

from __future__ import annotations

import math
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
    """SD of log(figure) between boots of one server, and where the number comes from."""

    log_sd: float
    source: str


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
    data = two_level_median(parts, confidence) if boots >= 2 else requests
    covered = "requests within one boot" if boots <= 1 else f"requests and {boots} boots (two-level bootstrap"
    if boots >= 2 and spread is None:
        # Resampling 2 or 3 boots covers far less than its level (58% at 95% with 2 boots). With no
        # spread known from elsewhere, a t-interval on the boots' medians, with its B-1 degrees of
        # freedom, bounds it: wide with few boots, as the data then says little about boots.
        data = _union(data, _boot_t_interval(parts, confidence, data.estimate))
        covered += f", bounded by a t-interval on the {boots} boot medians)"
    elif boots >= 2:
        covered += ")"
    if spread is None:
        missing = "the between-boot noise of this run" if boots <= 1 else ""
        if boots_other is not None:
            missing = (missing + " and " if missing else "") + "the stored run's own boot"
        text = covered + (f"; NOT {missing} (no between-boot spread for this machine: run specgate calibrate)" if missing else "")
        return data, HeldNoise(text, covers_between_boot=boots >= 2)
    variance = 1 / max(1, boots) + (1 / boots_other if boots_other else 0.0)
    extra = spread.log_sd * math.sqrt(variance)
    model = widened(requests, extra)
    final = _union(data, model)
    who = f"{boots} boot{'s' if boots != 1 else ''} now" + (f", {boots_other} stored" if boots_other else "")
    return final, HeldNoise(
        f"{covered}; plus between-boot spread {spread.log_sd:.1%} per boot ({who}; {spread.source})", covers_between_boot=True
    )


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
