"""Confidence intervals by bootstrap (scipy.stats.bootstrap), and the settle test.

Percentile intervals rather than BCa: BCa breaks down on the near-constant samples a
quiet machine produces. The resampling is seeded so a verdict can be re-derived
from the stored samples.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import TypedDict

import numpy as np

N_RESAMPLES = 4000
SEED = 20261129


class IntervalFigure(TypedDict):
    """An interval as documents store it (report.json, baselines)."""

    estimate: float
    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    confidence: float

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (seconds to milliseconds, say)."""
        return Interval(self.estimate * factor, self.low * factor, self.high * factor, self.confidence)

    def as_dict(self) -> IntervalFigure:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "confidence": self.confidence}


def _bootstrap(data: tuple, statistic, confidence: float, paired: bool = False) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate (constant) samples warn; the interval is still right
        from scipy import stats  # here, not at import: the plugin loads in every pytest run of a user's repo

        res = stats.bootstrap(
            data,
            statistic,
            n_resamples=N_RESAMPLES,
            confidence_level=confidence,
            method="percentile",
            vectorized=True,
            paired=paired,
            rng=np.random.default_rng(SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):
        est = float(statistic(*[np.asarray(d) for d in data], axis=-1))
        return est, est
    return low, high


def median_interval(values: Sequence[float] | np.ndarray, confidence: float) -> Interval:
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        v = float(x[0]) if len(x) else float("nan")
        return Interval(v, v, v, confidence)
    low, high = _bootstrap((x,), lambda a, axis=-1: np.median(a, axis=axis), confidence)
    return Interval(float(np.median(x)), low, high, confidence)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], confidence: float) -> Interval:
    """Median of per-pair ratios numerator[i] / denominator[i], pairs resampled together.

    Both configs get the same pinned request at the same index, so pairing removes
    what the prompt contributes (accept length varies by prompt far more than timing
    noise does) and leaves only what the server changed.
    """
    return median_interval(pair_ratios(numerator, denominator), confidence)


def pair_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """numerator[i] / denominator[i] for every index both have (the pinned requests both measured)."""
    n = min(len(numerator), len(denominator))
    return list(np.asarray(numerator[:n], dtype=float) / np.asarray(denominator[:n], dtype=float))


def paired_pooled_ratio(
    tokens_a: Sequence[float],
    counts_a: Sequence[float],
    tokens_b: Sequence[float],
    counts_b: Sequence[float],
    confidence: float,
) -> Interval:
    """(Σ tokens_a / Σ counts_a) / (Σ tokens_b / Σ counts_b) over paired requests:
    the relative change of accept length between two runs of the same requests."""
    n = min(len(tokens_a), len(tokens_b))
    arrays = tuple(np.asarray(x[:n], dtype=float) for x in (tokens_a, counts_a, tokens_b, counts_b))

    def statistic(ta, ca, tb, cb, axis=-1):
        return (ta.sum(axis=axis) / ca.sum(axis=axis)) / (tb.sum(axis=axis) / cb.sum(axis=axis))

    estimate = float(statistic(*arrays))
    if n < 2:
        return Interval(estimate, estimate, estimate, confidence)
    low, high = _bootstrap(arrays, statistic, confidence, paired=True)
    return Interval(estimate, low, high, confidence)


def pooled_ratio(tokens: Sequence[float], counts: Sequence[float], confidence: float) -> Interval:
    """Σ tokens / Σ counts with requests resampled as pairs: accept length over a run."""
    t, c = np.asarray(tokens, dtype=float), np.asarray(counts, dtype=float)
    estimate = float(t.sum() / c.sum())
    if len(t) < 2:
        return Interval(estimate, estimate, estimate, confidence)

    def statistic(x, y, axis=-1):
        return x.sum(axis=axis) / y.sum(axis=axis)

    low, high = _bootstrap((t, c), statistic, confidence, paired=True)
    return Interval(estimate, low, high, confidence)


def two_level_median(groups: Sequence[Sequence[float]], confidence: float) -> Interval:
    """Median of the pooled values, with a two-level bootstrap: resample the groups (boots)
    with replacement, then the values (requests) within each chosen group.

    Performance differs between server processes more than between requests of one
    (pyperf spawns many workers for this reason): an interval that resamples only
    requests holds none of that. With one group this is the ordinary bootstrap."""
    kept = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if len(kept) <= 1:
        return median_interval(kept[0] if kept else [], confidence)
    pooled = np.concatenate(kept)
    rng = np.random.default_rng(SEED)
    width = max(len(g) for g in kept)
    draws = np.full((N_RESAMPLES, len(kept) * width), np.nan)
    chosen = rng.integers(0, len(kept), size=(N_RESAMPLES, len(kept)))
    for slot in range(len(kept)):
        for g, values in enumerate(kept):
            rows = np.nonzero(chosen[:, slot] == g)[0]
            if len(rows):
                picks = rng.integers(0, len(values), size=(len(rows), len(values)))
                draws[rows, slot * width : slot * width + len(values)] = values[picks]
    medians = np.nanmedian(draws, axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(medians, [alpha, 1 - alpha])
    return Interval(float(np.median(pooled)), float(low), float(high), confidence)


def widened(interval: Interval, extra_log_sd: float) -> Interval:
    """The interval with a noise it does not hold added in quadrature, on the log scale.

    `extra_log_sd` is the standard deviation of log(figure) that the interval's data cannot
    show, e.g. between boots when every config ran one boot (stored from A/A runs)."""
    if extra_log_sd <= 0 or interval.low <= 0 or interval.estimate <= 0:
        return interval
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - interval.confidence) / 2))
    centre = np.log(interval.estimate)
    below = np.hypot(centre - np.log(interval.low), z * extra_log_sd)
    above = np.hypot(np.log(interval.high) - centre, z * extra_log_sd)
    return Interval(interval.estimate, float(np.exp(centre - below)), float(np.exp(centre + above)), interval.confidence)


def relative_spread(values: Sequence[float]) -> float:
    """(max − min) / median: how far apart a window of figures lies."""
    m = median(values)
    return (max(values) - min(values)) / m if m else float("inf")


def settled(values: Sequence[float], window: int, tolerance: float) -> bool:
    """True when the last `window` figures lie within `tolerance` of each other."""
    return len(values) >= window and relative_spread(values[-window:]) <= tolerance
