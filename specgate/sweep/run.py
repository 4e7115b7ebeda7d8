"""Boot the sweep's points in waves beside a plain baseline, measure each, record as we go.

A wave is as many servers as `parallel` allows per GPU; every server of a wave boots at
once (staggered as the deployment says), then each is measured alone (single stream, the
gate's pinned requests) and stopped, so no two measurements share the GPU. The first wave
carries one plain baseline per GPU. Before each later wave the time budget is checked
against the longest wave so far: a sweep stopped for time ends cleanly, state saved, and
the next invocation resumes it.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specgate.deployment import Deployment, ServerConfig
from specgate.diagnosis.cycle import cycle_model
from specgate.errors import SpecgateError
from specgate.measure.speed import ConfigSpeed, SpeedMeter
from specgate.provenance import provenance
from specgate.server.launcher import BootProgress
from specgate.server.pool import ServerPool
from specgate.sweep.plan import SweepPlan, SweepPoint, plan_sweep
from specgate.sweep.state import PointResult, SessionRecord, SweepState


@dataclass(frozen=True)
class SweepOutcome:
    plan: SweepPlan
    state: SweepState
    session: str
    complete: bool  # every point was attempted (measured now or before, or failed now)


def _on_gpu(config: ServerConfig, gpu: str, name: str | None = None) -> ServerConfig:
    env = {**config.env, "CUDA_VISIBLE_DEVICES": gpu} if gpu else dict(config.env)
    return replace(config, name=name or config.name, env=env)


def _waves(queue: list[str], size: int) -> list[list[str]]:
    return [queue[i : i + size] for i in range(0, len(queue), size)]


def run_sweep(
    deployment: Deployment,
    state_path: Path,
    log_dir: Path,
    max_seconds: float | None = None,
    progress: BootProgress | None = None,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    plan = plan_sweep(deployment)
    spec = deployment.sweep
    assert spec is not None  # plan_sweep raised otherwise
    state = SweepState.open(state_path, deployment.name, plan.digest)
    session = SessionRecord(_dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ"), provenance())
    todo = [p for p in plan.points if not state.done(p.name)]
    if not todo:
        return SweepOutcome(plan, state, session.id, complete=True)
    state.sessions.append(session)

    gpus = spec.gpus or ("",)
    reference = deployment.configs[deployment.reference]
    baseline_of = {g: deployment.reference if len(gpus) == 1 else f"{deployment.reference}-gpu{g}" for g in gpus}
    configs = {name: _on_gpu(reference, g, name) for g, name in baseline_of.items()}
    gpu_of = {name: g for g, name in baseline_of.items()}
    points: dict[str, SweepPoint] = {}
    for i, point in enumerate(todo):
        gpu = gpus[i % len(gpus)]
        configs[point.name] = _on_gpu(point.config, gpu)
        gpu_of[point.name] = gpu
        points[point.name] = point
    workload = replace(deployment.workload, max_new_tokens=spec.max_new_tokens)
    synth = replace(deployment, configs=configs, workload=workload)
    pool = ServerPool(synth, log_dir, progress)
    meter = SpeedMeter(synth)
    base_records: dict[str, ConfigSpeed] = {}
    attempted: set[str] = set()
    started, longest = time.monotonic(), 0.0
    echo(f"sweep {deployment.name}: {len(todo)} of {len(plan.points)} points to measure in session {session.id}")
    try:
        for n, wave in enumerate(_waves(list(baseline_of.values()) + list(points), spec.parallel * len(gpus))):
            if n and max_seconds is not None and time.monotonic() - started + longest > max_seconds:
                echo(f"sweep: stopping before wave {n + 1}: the next wave (~{longest:.0f} s) would pass --max-seconds")
                break
            t0 = time.monotonic()
            pool.boot(wave)
            for name in wave:
                gpu = gpu_of[name]
                if name in points:
                    attempted.add(name)
                try:
                    if name in pool.failed:
                        raise SpecgateError(pool.failed[name])
                    record = meter.record(name, 1)
                    meter.measure(pool.live[name], 1, spec.repeats)
                except SpecgateError as exc:
                    _failed(state, session, points.get(name), name, gpu, str(exc), echo)
                    pool.release(name)
                    continue
                pool.release(name)
                boot_s = next((b.seconds for b in reversed(pool.boots) if b.config == name and b.ok), None)
                if name not in points:
                    base_records[gpu] = record
                    session.baselines[gpu] = [round(v, 3) for v in record.decode_tps]
                    echo(
                        f"  {name}: {_median(record.decode_tps):.1f} tok/s (plain baseline{' on GPU ' + gpu if gpu else ''})"
                    )
                    state.save()
                    continue
                result = _result(points[name], record, base_records.get(gpu), session.id, gpu, boot_s, deployment)
                state.points[name] = result
                state.save()
                echo("  " + _line(result))
            longest = max(longest, time.monotonic() - t0)
    finally:
        pool.close()
        session.complete = len(attempted) == len(points)
        state.save()
    return SweepOutcome(plan, state, session.id, complete=session.complete)


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2 if v else float("nan")


def _failed(
    state: SweepState, session: SessionRecord, point: SweepPoint | None, name: str, gpu: str, error: str, echo
) -> None:
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    if point is None:
        echo(f"  {name}: plain baseline FAILED: {first} (no ratios for points on this GPU in this session)")
        return
    state.points[name] = PointResult(name, point.axes(), "failed", session.id, gpu, error=error[-4000:])
    state.save()
    echo(f"  {name}: FAILED: {first}")


def _result(
    point: SweepPoint,
    record: ConfigSpeed,
    baseline: ConfigSpeed | None,
    session: str,
    gpu: str,
    boot_s: float | None,
    deployment: Deployment,
) -> PointResult:
    result = PointResult(
        point.name,
        point.axes(),
        "measured",
        session,
        gpu,
        decode_tps=[round(v, 3) for v in record.decode_tps],
        accept_lengths=[round(s.accept_length, 4) for s in record.samples if s.accept_length],
        boot_s=None if boot_s is None else round(boot_s, 1),
    )
    model = cycle_model(record, baseline, deployment.gates.confidence) if baseline else None
    if model is not None:
        result.ratio = model.measured.as_dict()
        result.tau = model.tau.as_dict()
        result.t_c_ms = round(model.t_c_ms.estimate, 4)
        result.cycle_cost = round(model.cycle_cost, 4)
    elif baseline is None:
        result.error = "no plain baseline measured on this GPU in this session: no ratio"
    return result


def _line(r: PointResult) -> str:
    ratio = f"{r.ratio['estimate']:.3f}x [{r.ratio['low']:.3f}, {r.ratio['high']:.3f}]" if r.ratio else "no ratio"
    tau = f"τ {r.tau['estimate']:.2f}" if r.tau else "τ ?"
    cost = f", cycle {r.t_c_ms:.2f} ms = {r.cycle_cost:.2f} plain steps" if r.cycle_cost else ""
    return f"{r.name}: {r.median_tps:.1f} tok/s, {ratio} baseline, {tau}{cost}"
