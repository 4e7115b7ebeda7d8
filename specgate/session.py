"""Everything one gate run holds: deployment, servers, measurements, verdicts.

Built lazily by the pytest plugin the first time a gate test asks for it, so that
collecting or running the self-tests never reads a deployment or boots anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specgate.deployment import Deployment
from specgate.equivalence.oracle import EquivalenceOracle
from specgate.measure.speed import SpeedMeter
from specgate.report.build import TestTally
from specgate.server.launcher import BootProgress
from specgate.server.pool import ServerPool
from specgate.verdicts.judge import Judge


@dataclass(frozen=True)
class RunOptions:
    report_dir: Path
    baselines_dir: Path
    update_baselines: bool
    allow_fingerprint_mismatch: bool
    examples: int


@dataclass
class GateSession:
    deployment: Deployment
    options: RunOptions
    pool: ServerPool
    meter: SpeedMeter
    oracle: EquivalenceOracle
    judge: Judge
    tally: TestTally = field(default_factory=TestTally)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    equivalence_failed: bool = False

    @classmethod
    def create(cls, deployment: Deployment, options: RunOptions, progress: BootProgress | None) -> GateSession:
        pool = ServerPool(deployment, options.report_dir / "logs", progress)
        meter = SpeedMeter(deployment)
        oracle = EquivalenceOracle(deployment, pool, options.report_dir, options.examples)
        judge = Judge(deployment, pool, meter, options.baselines_dir, options.allow_fingerprint_mismatch)
        return cls(deployment, options, pool, meter, oracle, judge)

    def close(self) -> None:
        self.pool.close()
