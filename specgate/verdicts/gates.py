"""Gate decisions, direction-aware and honest about noise.

Each decision looks at a confidence interval, not a point estimate: PASS when the
whole interval clears the bar, FAIL when the whole interval misses it, INCONCLUSIVE
when it straddles. The caller then measures more (up to a cap); a gate still
inconclusive at the cap FAILS with the interval shown, because a merge gate that
cannot show a pass must not give one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from specgate.measure.stats import Interval

PASS, FAIL, INCONCLUSIVE, SKIP = "pass", "fail", "inconclusive", "skip"


@dataclass
class Verdict:
    gate: str  # e.g. "beats:eagle3-decode>baseline", "regression:eagle3-decode:decode_tps"
    config: str
    status: str
    summary: str
    notes: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, INCONCLUSIVE)


def at_least(interval: Interval, bar: float) -> str:
    """Is the true value >= bar? Judged on the whole interval."""
    if interval.low >= bar:
        return PASS
    if interval.high < bar:
        return FAIL
    return INCONCLUSIVE


def within(interval: Interval, low_bar: float, high_bar: float) -> str:
    """Is the true value inside [low_bar, high_bar]?"""
    if interval.low >= low_bar and interval.high <= high_bar:
        return PASS
    if interval.high < low_bar or interval.low > high_bar:
        return FAIL
    return INCONCLUSIVE


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def planned_looks(have: int, cap: int, batch: int) -> int:
    """How many times a gate may look at its interval: once now, once per batch to the cap."""
    remaining = max(0, cap - have)
    return 1 + -(-remaining // batch) if remaining and batch > 0 else 1


def per_look_confidence(confidence: float, looks: int) -> float:
    """Split the error budget over the looks (Bonferroni): measuring more while
    undecided must not turn a 5% chance of a wrong verdict into 10%."""
    return 1 - (1 - confidence) / max(1, looks)


def decide_sequentially(
    interval_at: Callable[[float], Interval],
    decide: Callable[[Interval], str],
    measure_more: Callable[[], bool],
    confidence: float,
    looks: int,
) -> tuple[str, Interval, int]:
    """Look, and while undecided measure more and look again; returns (status,
    interval at the last look, looks taken). `measure_more` returns False at the cap."""
    level = per_look_confidence(confidence, looks)
    taken = 0
    while True:
        taken += 1
        interval = interval_at(level)
        status = decide(interval)
        if status != INCONCLUSIVE or taken >= looks or not measure_more():
            return status, interval, taken
