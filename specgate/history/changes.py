"""Steps and slow creeps in one series of a results history (one config's figure, run by run).

The detector is `ruptures` (PELT on the series' log levels, least-squares cost), chosen among
the field's change-point libraries by what installs beside specgate on a CPU CI machine:

- **ruptures** (BSD, maintained, PyPI wheels for CPython 3.9-3.13 on Linux/macOS/Windows; its
  costs are compiled Cython, its only dependencies numpy and scipy, which specgate already
  needs). PELT finds the optimal segmentation for a penalised cost exactly, in linear time.
- **Apache Otava** (formerly Hunter; E-divisive means with a Student-t significance test, the
  method MongoDB and DataStax use): `pip download apache-otava` works (0.8.0, pure Python), but it
  pins `numpy==2.2.*` and `scipy<1.17` and pulls google-cloud-bigquery, pg8000 and slack-sdk:
  it would downgrade the numpy specgate runs on and bring a database client into a merge gate.
  (The PyPI name `hunter` is another project: a tracing tool.)
- **signal-processing-algorithms** (MongoDB's E-divisive): sdist only (a C extension built at
  install), `Requires-Python <3.12` and `numpy<2`: it does not install beside numpy 2.

E-divisive's strength is distribution-free detection of changes in any moment; a gate's figure
is a level with near-normal run-to-run noise (the median of tens of requests), where the
least-squares cost is the likelihood and PELT's penalty can be set from the measured noise:
`PENALTY_SDS`² · σ² · log(n) (BIC's form), σ estimated from the series itself (the median
absolute difference of neighbours, which a step moves in one place only).

Each step is named by the first run after it: its size (the ratio of the mean levels after and
before, within the neighbouring segments) and a Welch t-interval of that ratio. A creep is a
significant least-squares slope over the window where no step was found, or where one line
explains the series at a lower penalised cost than the steps PELT cut a ramp into: a regression
no single merge failed on (each run a fraction of a percent below the last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# PELT's penalty per change point, in units of σ²·log(n): 2 is BIC's; larger keeps false alarms
# of a healthy history of 40 runs under 5% (benchmarks/history_change_points.py measures it).
PENALTY_SDS = 2.0
MIN_SEGMENT = 3  # runs on each side of a step: fewer cannot tell a step from one slow boot
CONFIDENCE = 0.95
CREEP_ALPHA = 0.01  # a slope is a creep where its p-value is below this (two-sided)
MIN_RUNS = 2 * MIN_SEGMENT


@dataclass(frozen=True)
class Step:
    """A change point: `index` is the first run after it."""

    index: int
    ratio: float  # mean level after / before (exp of the log difference)
    low: float
    high: float
    before: int  # runs in the segment before
    after: int

    def regression_past(self, threshold: float) -> bool:
        """A drop whose interval excludes no change and reaches `threshold` (a loss at least
        that large cannot be ruled out)."""
        return self.high < 1.0 and self.low <= 1.0 - threshold


@dataclass(frozen=True)
class Creep:
    """A slope over the window with no step: the level's change per run and over the window."""

    per_run: float  # ratio per run (exp of the slope)
    over_window: float  # ratio from the first run to the last
    low: float  # interval of over_window
    high: float
    p: float
    runs: int


@dataclass(frozen=True)
class Changes:
    steps: list[Step]
    creep: Creep | None
    noise: float  # σ of log level between runs, as estimated from the series


def noise_sd(logs: np.ndarray) -> float:
    """σ of the series between runs, robust to steps: MAD of first differences / (√2·0.6745)."""
    diffs = np.diff(logs)
    if diffs.size == 0:
        return 0.0
    return float(np.median(np.abs(diffs - np.median(diffs))) / (math.sqrt(2) * 0.6745))


def _interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    """exp of (mean after − mean before) and its Welch t-interval."""
    diff = float(after.mean() - before.mean())
    va, vb = after.var(ddof=1) / after.size, before.var(ddof=1) / before.size
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(diff), math.exp(diff), math.exp(diff)
    df = (va + vb) ** 2 / (va**2 / (after.size - 1) + vb**2 / (before.size - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def find_changes(levels: Sequence[float], penalty_sds: float = PENALTY_SDS) -> Changes:
    """Steps and creep in `levels` (positive figures, oldest first)."""
    import ruptures

    logs = np.log(np.asarray(levels, dtype=float))
    sigma = noise_sd(logs)
    if logs.size < MIN_RUNS or sigma == 0:
        return Changes([], None, sigma)
    penalty = penalty_sds**2 * sigma**2 * math.log(logs.size)
    ends = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(logs.reshape(-1, 1)).predict(pen=penalty)
    bounds = [0, *ends]  # ruptures ends each segment at its exclusive end; the last is len(logs)
    if len(bounds) > 2 and _line_fits_better(logs, bounds, penalty):
        # A ramp that PELT cut into small steps: one slope explains it at a lower penalised cost.
        return Changes([], _creep(logs), sigma)
    steps = []
    for k in range(1, len(bounds) - 1):
        before, after = logs[bounds[k - 1] : bounds[k]], logs[bounds[k] : bounds[k + 1]]
        ratio, low, high = _interval(before, after)
        steps.append(Step(bounds[k], ratio, low, high, before.size, after.size))
    return Changes(steps, None if steps else _creep(logs), sigma)


def _line_fits_better(logs: np.ndarray, bounds: list[int], penalty: float) -> bool:
    """The penalised cost of one straight line (a slope: one parameter more than a flat series)
    against that of the steps PELT found (one penalty each)."""
    steps = sum(float(((logs[a:b] - logs[a:b].mean()) ** 2).sum()) for a, b in zip(bounds, bounds[1:]))
    runs = np.arange(logs.size, dtype=float)
    slope, intercept = np.polyfit(runs, logs, 1)
    line = float(((logs - (slope * runs + intercept)) ** 2).sum())
    return line + penalty < steps + (len(bounds) - 2) * penalty


def _creep(logs: np.ndarray) -> Creep | None:
    """A significant slope over the whole window (where no step explains the change)."""
    runs = np.arange(logs.size, dtype=float)
    fit = stats.linregress(runs, logs)
    if not fit.pvalue < CREEP_ALPHA:
        return None
    span = logs.size - 1
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, logs.size - 2)) * fit.stderr
    return Creep(
        per_run=math.exp(fit.slope),
        over_window=math.exp(fit.slope * span),
        low=math.exp((fit.slope - half) * span),
        high=math.exp((fit.slope + half) * span),
        p=float(fit.pvalue),
        runs=int(logs.size),
    )
