"""A/A rounds: the same build, booted afresh and measured, again and again.

Each round boots every config of the deployment (side by side where they coexist, as a
gate run does), measures the pinned workload with the gate's own sampling plan
(interleaved rounds), and stops every server. Nothing changes between rounds, so every
difference between them is noise: within a boot (requests) and between boots. The
analysis (specgate.calibrate.analyse) splits the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from specgate.calibrate.numerics import Collected, collect
from specgate.deployment import Deployment
from specgate.errors import SpecgateError
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed, SpeedMeter
from specgate.server.launcher import BootProgress
from specgate.server.pool import ServerPool
from specgate.verdicts.fingerprint import Fingerprint, collect_fingerprint


@dataclass
class CalibrationRounds:
    """What the A/A rounds measured: round → config → its figures at concurrency 1."""

    rounds: list[dict[str, ConfigSpeed]] = field(default_factory=list)
    boot_seconds: list[float] = field(default_factory=list)
    round_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    fingerprint: Fingerprint | None = None
    stopped_early: str = ""
    # How far each speculative config moved its reference's logprob gaps (numerics.py), every round pooled.
    numerics: dict[str, Collected] = field(default_factory=dict)
    numerics_problems: list[str] = field(default_factory=list)


def run_rounds(
    deployment: Deployment,
    boots: int,
    requests: int,
    log_dir: Path,
    max_seconds: float | None = None,
    progress: BootProgress | None = None,
    echo: Callable[[str], None] = print,
    seed: int | None = None,
    numerics_prompts: int = 0,
) -> CalibrationRounds:
    """`boots` rounds of `requests` pinned requests per config; stops between rounds when the next
    would pass `max_seconds` (the rounds so far are kept). With `numerics_prompts`, each round also
    asks every speculative config and its reference that many greedy requests with top logprobs
    (servers side by side only: both must answer at the same prefix)."""
    out = CalibrationRounds()
    dep = replace(deployment, launch=replace(deployment.launch, boots=1))
    configs = list(dep.configs)
    started = time.monotonic()
    for r in range(boots):
        longest = max(out.round_seconds, default=0.0)
        if r and max_seconds is not None and time.monotonic() - started + longest > max_seconds:
            out.stopped_early = f"stopped after {r} of {boots} rounds: the next would pass --max-seconds"
            echo(f"calibrate: {out.stopped_early}")
            break
        t0 = time.monotonic()
        pool = ServerPool(dep, log_dir / f"round{r + 1}", progress)
        meter = SpeedMeter(dep)
        plan = SamplingPlan(dep, pool, meter, configs, None if seed is None else seed + r)
        try:
            if dep.launch.coexist:
                pool.boot(configs)
            plan.ensure(configs, 1, requests)
            if numerics_prompts and dep.launch.coexist and dep.equivalence.enabled:
                asked = collect(dep, pool, numerics_prompts, out.numerics, offset=r * numerics_prompts)
                out.numerics_problems += [f"round {r + 1}: {p}" for p in asked]
            if out.fingerprint is None and dep.reference in pool.server_infos:
                out.fingerprint = collect_fingerprint(
                    dep, pool.server_infos[dep.reference], pool.model_infos.get(dep.reference, {})
                )
        except SpecgateError as exc:
            out.failures.append(f"round {r + 1}: {exc}")
        finally:
            pool.close()
        out.failures.extend(f"round {r + 1}: {name}: {why.splitlines()[0]}" for name, why in plan.errors.items())
        out.boot_seconds.extend(b.seconds for b in pool.boots if b.ok)
        out.rounds.append({c: meter.record(c, 1) for c in configs})
        out.round_seconds.append(time.monotonic() - t0)
        line = ", ".join(
            f"{c} {sorted(s.decode_tps for s in rec.samples)[len(rec.samples) // 2]:.1f}"
            for c, rec in out.rounds[-1].items()
            if rec.samples
        )
        echo(f"calibrate: round {r + 1}/{boots} in {out.round_seconds[-1]:.0f} s: median tok/s {line}")
    return out
