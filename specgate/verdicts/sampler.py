"""The judge's sampler: the run's measurements as the gates ask for them (the sampling plan gathers
them; the judge never talks to a server) and what the server's own counters say of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specgate.deployment import Deployment
from specgate.measure.fidelity import FidelityCheck, check_fidelity, fidelity_of
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed
from specgate.verdicts.gates import Verdict
from specgate.verdicts.own_time import measuring


@dataclass
class Sampler:
    deployment: Deployment
    plan: SamplingPlan
    baselines_root: Path
    allow_fingerprint_mismatch: bool = False
    # The reference is not booted in this run: its figures come from the stored baseline.
    reference_stored: bool = False
    # A baseline update: this run's figures become the stored baseline (nothing stored is no gap).
    recording: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    # The context bucket this judge judges (measure.context; 0: the short workload), and how many
    # buckets the run judges in all (the short one among them).
    context: int = 0
    buckets: int = 1

    @property
    def confidence(self) -> float:
        """The confidence each gate of this judge decides at: the deployment's false-alarm budget
        split evenly over the run's context buckets (Bonferroni: a gate judged at every length
        must not fail a good build more often than one judged once; the looks of one gate split
        its share again, gates.per_look_confidence)."""
        return 1 - (1 - self.deployment.gates.confidence) / self.buckets

    @property
    def meter(self):  # noqa: ANN201 - the plan's meter, read-only here
        return self.plan.meter

    def _record_of(self, config: str, concurrency: int) -> ConfigSpeed:
        return self.meter.record(config, concurrency)

    def _batch(self) -> int:
        """Where servers coexist, small interleaved batches; else all at once (a reboot each)."""
        wl = self.deployment.workload
        if self.deployment.launch.coexist:
            return self.deployment.gates.sample_batch
        return max(1, wl.max_repeats - wl.repeats)

    def _gather(self, configs: list[str], concurrency: int, per_boot: int) -> None:
        with measuring():  # not the gate kind's own time (own_time.py)
            self.plan.ensure(configs, concurrency, per_boot)
        for config in configs:
            self.plan.raise_for(config)

    def fidelity(self, config: str, concurrency: int) -> FidelityCheck:
        """Whether the server's own figure bears out the suite's decode tok/s of `config` (measure.fidelity)."""
        record = self._record_of(config, concurrency)
        return check_fidelity(config, concurrency, fidelity_of(record, self.plan.pool.log_dir / f"{config}.log"))

    def _measured_seconds(self, configs: list[str]) -> tuple[float | None, float | None]:
        """Seconds one boot of each of `configs` took in this run, and one request of each (medians, summed)."""
        import statistics

        boots, requests = [], []
        for config in configs:
            took = [b.seconds for b in self.plan.pool.boots if b.config == config and b.ok]
            spent = [s.e2e_s for r in self.meter.results.values() if r.config == config for s in r.samples]
            if not took or not spent:
                return None, None
            boots.append(statistics.median(took))
            requests.append(statistics.median(spent))
        return sum(boots), sum(requests)
