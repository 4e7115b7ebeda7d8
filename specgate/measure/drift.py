"""How far a reference server's speed moved during one run.

The reference's first pinned requests are sent again once the speed phase is over (to the same
server where servers coexist, to a second boot of it where they take turns) and paired with
the first time: request i against request i, so the prompt cancels and what is left is the
host. A stored figure judged against this run is then judged with that drift as noise, and
a comparison between configs measured in blocks can say what moved between its blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specgate.measure.stats import Interval, median_interval, pair_ratios


@dataclass(frozen=True)
class ReferenceDrift:
    config: str
    concurrency: int
    ratio: Interval  # the reference's decode tok/s at the end over the start, median of paired requests
    requests: int
    # "the same server" (interleaved or url servers) or "a second boot" (servers that take turns)
    where: str
    # Rounds measured when the re-send went out: a later gate's looks may add rounds after it,
    # which this figure does not cover (0: not known).
    after_round: int = 0

    @property
    def log_size(self) -> float:
        """|log(end / start)|: the size of the move, used as one SD of this run's host noise."""
        return abs(math.log(self.ratio.estimate)) if self.ratio.estimate > 0 else 0.0

    @property
    def moved(self) -> bool:
        """The interval excludes no change: the host did move during the run."""
        return self.ratio.low > 1 or self.ratio.high < 1

    def sentence(self) -> str:
        change = (self.ratio.estimate - 1) * 100
        return (
            f"the reference drifted by {change:+.1f}% during the run: {self.config}'s first {self.requests} requests "
            f"sent again after the speed tests ({self.where}) decoded at {self.ratio} of the first time"
        )

    def as_dict(self) -> dict:
        return {
            "config": self.config,
            "concurrency": self.concurrency,
            "ratio": self.ratio.as_dict(),
            "requests": self.requests,
            "where": self.where,
            "moved": self.moved,
            "after_round": self.after_round,
        }


def measure_drift(
    config: str, concurrency: int, start: list[float], end: list[float], confidence: float, where: str
) -> ReferenceDrift | None:
    """The drift from the same pinned requests' decode tok/s at the start and at the end."""
    ratios = pair_ratios(end, start)
    if len(ratios) < 2:
        return None
    return ReferenceDrift(config, concurrency, median_interval(ratios, confidence), len(ratios), where)
