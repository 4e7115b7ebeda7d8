"""The cycle model of speculative decoding, from the suite's own per-request figures.

A plain server makes one token per decode step of t_d. A speculative server runs cycles
(draft `steps` tokens, verify them in one target pass) of t_c each, and each cycle yields
τ tokens on average (the accept length). So

    speedup = τ · t_d / t_c        and a cycle costs C = t_c / t_d plain steps.

Speculation wins exactly when C < τ; the share of its accept length that reaches the
user is 1 / C (efficiency = speedup / τ). This is a decomposition of the measured speedup,
not a second measurement of it: τ comes from meta_info (tokens over verify cycles), t_d is
the reference's median time per decoded token, and t_c the config's median time per cycle,
per request its τ over its own decode rate, so τ·t_d/t_c agrees with the paired speedup by
construction, up to τ and speed varying together across prompts. What it adds is *why*:
whether a config is slow because its drafts are rejected (τ) or because its cycle is dear
(C). The independent check of the timings themselves is the report's Fidelity section
(the server's own log and meta_info).
"""

from __future__ import annotations

from dataclasses import dataclass

from specgate.measure.speed import ConfigSpeed
from specgate.measure.stats import Interval, median_interval
from specgate.measure.summary import accept_interval, summarise_speed


@dataclass(frozen=True)
class CycleModel:
    config: str
    concurrency: int
    tau: Interval  # tokens per verify cycle
    t_d_ms: Interval  # reference: ms per decoded token
    t_c_ms: Interval  # this config: ms per cycle
    measured: Interval  # paired speedup over the reference (decode tok/s)

    @property
    def cycle_cost(self) -> float:
        """C: what one cycle costs, in plain decode steps."""
        return self.t_c_ms.estimate / self.t_d_ms.estimate

    @property
    def predicted(self) -> float:
        return self.tau.estimate / self.cycle_cost

    @property
    def efficiency(self) -> float:
        """Measured speedup over τ: the share of accepted tokens that became speed (1.0 if a
        cycle cost one plain step)."""
        return self.measured.estimate / self.tau.estimate

    @property
    def model_gap(self) -> float:
        """measured / predicted - 1."""
        return self.measured.estimate / self.predicted - 1.0

    def as_dict(self) -> dict:
        return {
            "config": self.config,
            "concurrency": self.concurrency,
            "tau": self.tau.as_dict(),
            "t_d_ms": self.t_d_ms.as_dict(),
            "t_c_ms": self.t_c_ms.as_dict(),
            "cycle_cost": round(self.cycle_cost, 4),
            "break_even_tau": round(self.cycle_cost, 4),
            "predicted_speedup": round(self.predicted, 4),
            "measured_speedup": self.measured.as_dict(),
            "efficiency": round(self.efficiency, 4),
            "model_gap": round(self.model_gap, 4),
        }


def cycle_model(record: ConfigSpeed, reference: ConfigSpeed, confidence: float) -> CycleModel | None:
    """None unless both were measured and this config reported verify cycles."""
    spec = [s for s in record.samples if s.verify_ct and s.decode_tps > 0]
    if not spec or not reference.samples:
        return None
    tau = accept_interval(record, confidence)
    measured = summarise_speed(record, reference, confidence).ratio_to_reference
    if tau is None or measured is None:
        return None
    t_c = [1000.0 * s.accept_length / s.decode_tps for s in spec if s.accept_length]
    t_d = [1000.0 / v for v in reference.decode_tps_per_request if v > 0]
    if not t_c or not t_d:
        return None
    return CycleModel(
        config=record.config,
        concurrency=record.concurrency,
        tau=tau,
        t_d_ms=median_interval(t_d, confidence),
        t_c_ms=median_interval(t_c, confidence),
        measured=measured,
    )
