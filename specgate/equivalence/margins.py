"""What the baseline's top-1/top-2 margins look like, to judge the tie margin by.

Logprobs come back in the model's precision: in bf16, logits of magnitude 16–32 step
by 0.125, so margins arrive in multiples of such a step (seen on SmolLM2 on an H200:
0, 0.125, 0.25). A tie margin smaller than two steps calls positions "decisive" that
bf16 rounding alone can flip, so the report shows the step and warns.
"""

from __future__ import annotations

from dataclasses import dataclass

from specgate.client import GenerateResult


def margins_of(result: GenerateResult) -> list[float]:
    return [pos[0][1] - pos[1][1] for pos in result.top_logprobs or () if len(pos) >= 2]


@dataclass(frozen=True)
class MarginSummary:
    positions: int
    below_tie: int
    quantum: float | None  # smallest non-zero margin seen: the precision's step at this scale
    tie_margin: float

    @property
    def warning(self) -> str | None:
        if self.quantum is not None and self.tie_margin < 2 * self.quantum:
            return (
                f"tie margin {self.tie_margin:g} is below two steps of the baseline's margin quantum "
                f"({self.quantum:.4g} nats): bf16 rounding alone can flip positions this gate calls decisive"
            )
        return None

    def as_dict(self) -> dict:
        return {
            "positions": self.positions,
            "below_tie": self.below_tie,
            "quantum": self.quantum,
            "tie_margin": self.tie_margin,
            "warning": self.warning,
        }


def summarise(margins: list[float], tie_margin: float) -> MarginSummary:
    positive = [m for m in margins if m > 1e-9]
    return MarginSummary(
        positions=len(margins),
        below_tie=sum(m < tie_margin for m in margins),
        quantum=min(positive) if positive else None,
        tie_margin=tie_margin,
    )
