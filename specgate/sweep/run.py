"""Boot the sweep's points in waves beside a resident plain reference, measure, record as we go.

One plain reference per GPU boots first and stays up for the whole session, holding one of
the `parallel` slots of its GPU. A wave fills the other slots; its servers boot at once
(staggered per GPU as the deployment says), then each GPU's baseline is measured again on
the same pinned requests, and each point is measured alone and stopped, so no two
measurements share a GPU and every point's ratio pairs with a baseline measured in its own
wave, on its own GPU, among the same neighbours. The plan is interleaved across attention
modes and step counts so that no wave holds one kind alone. Before each later wave the time
budget is checked against the longest wave so far: a sweep stopped for time ends cleanly,
state saved, and the next invocation resumes it.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

from specgate import interrupts
from specgate.deployment import Deployment, ServerConfig, bucket_label, bucket_view
from specgate.diagnosis.cycle import cycle_model
from specgate.errors import SpecgateError
from specgate.measure.density import DensityProbe
from specgate.measure.speed import ConfigSpeed, SpeedMeter
from specgate.provenance import provenance
from specgate.server.launcher import BootProgress
from specgate.server.pool import LiveServer, ServerPool
from specgate.shared_files import locked
from specgate.sweep.plan import SweepPlan, SweepPoint, plan_sweep, result_name
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


# A second sweep into a folder in use is refused, not made to wait: a sweep runs for hours, so a
# wait would look like a hang, and the first may well measure every point the second would.
IN_USE = (
    "a sweep is measuring into it (two sweeps into one folder would each overwrite the other's state and "
    "logs). Wait for it to end, or give this sweep another --report-dir (and --state)"
)


def run_sweep(
    deployment: Deployment,
    state_path: Path,
    log_dir: Path,
    max_seconds: float | None = None,
    progress: BootProgress | None = None,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    """Measure the points the state at `state_path` lacks; the folders of the state and of the
    logs are held (shared_files.locked) for the whole sweep, a second sweep into either refused."""
    with ExitStack() as held:
        for inside in (state_path, log_dir):  # the lock of each one's folder: the state's, the report folder
            held.enter_context(locked(inside, wait=False, in_use=IN_USE))
        return _run_sweep(deployment, state_path, log_dir, max_seconds, progress, echo)


def _run_sweep(
    deployment: Deployment,
    state_path: Path,
    log_dir: Path,
    max_seconds: float | None,
    progress: BootProgress | None,
    echo: Callable[[str], None],
) -> SweepOutcome:
    plan = plan_sweep(deployment)
    spec = deployment.sweep
    assert spec is not None  # plan_sweep raised otherwise
    state = SweepState.open(state_path, deployment.name, plan.digest)
    session = SessionRecord(_dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ"), provenance())
    # A point is measured at every context on one server: it is to do while any of them is.
    todo = [p for p in plan.points if not all(state.done(n) for n in plan.results_of(p))]
    if not todo:
        return SweepOutcome(plan, state, session.id, complete=True)
    state.sessions.append(session)

    gpus = spec.gpus or ("",)
    reference = deployment.configs[deployment.reference]
    baseline_of = {g: deployment.reference if len(gpus) == 1 else f"{deployment.reference}-gpu{g}" for g in gpus}
    configs = {name: _on_gpu(reference, g, name) for g, name in baseline_of.items()}
    gpu_of = {name: g for g, name in baseline_of.items()}
    points: dict[str, SweepPoint] = {}
    for i, point in enumerate(_interleaved(todo)):
        gpu = gpus[i % len(gpus)]
        configs[point.name] = _on_gpu(point.config, gpu)
        gpu_of[point.name] = gpu
        points[point.name] = point
    # A bucket's meter builds as many long prompts as the sweep measures (plus its warmup's).
    workload = replace(deployment.workload, max_new_tokens=spec.max_new_tokens, context_repeats=spec.repeats)
    synth = replace(deployment, configs=configs, workload=workload)
    pool = ServerPool(synth, log_dir, progress)
    # One meter per context of the sweep's axis (0: the short workload), each its own pinned requests.
    # The buckets' prompts are sized on the first GPU's resident baseline (measure.density).
    density = (
        DensityProbe(synth.workload, baseline_of[gpus[0]], lambda name: _live(pool, name))
        if any(plan.contexts)
        else None
    )
    meters = {
        c: SpeedMeter(bucket_view(synth, c), context=c, density=density) if c else SpeedMeter(synth, density=density)
        for c in plan.contexts
    }
    attempted: set[str] = set()
    started, longest = time.monotonic(), 0.0
    slots = max(1, spec.parallel - 1) * len(gpus)  # one slot per GPU holds its baseline
    echo(f"sweep {deployment.name}: {len(todo)} of {len(plan.points)} points to measure in session {session.id}")
    try:
        for n, wave in enumerate(_waves(list(points), slots)):
            if n and max_seconds is not None and time.monotonic() - started + longest > max_seconds:
                echo(f"sweep: stopping before wave {n + 1}: the next wave (~{longest:.0f} s) would pass --max-seconds")
                break
            _stop_if_cancelled(pool)
            t0 = time.monotonic()
            pool.boot([*baseline_of.values(), *wave] if n == 0 else wave)  # baselines boot with wave 1
            base = {
                c: _measure_baselines(pool, m, baseline_of, spec.repeats, session, n, echo, c)
                for c, m in meters.items()
            }
            state.save()
            for name in wave:
                _stop_if_cancelled(pool)
                attempted.add(name)
                gpu = gpu_of[name]
                point = points[name]
                for context, meter in meters.items():
                    named = result_name(point, context)
                    try:
                        if name in pool.failed:
                            raise SpecgateError(pool.failed[name])
                        record = meter.record(name, 1)
                        meter.measure(pool.live[name], 1, spec.repeats)
                    except SpecgateError as exc:
                        _failed(state, session, point, named, gpu, str(exc), echo, context)
                        continue
                    boot_s = next((b.seconds for b in reversed(pool.boots) if b.config == name and b.ok), None)
                    result = _result(
                        point, record, base[context].get(gpu), session.id, gpu, n + 1, boot_s, deployment, named, context
                    )
                    result.chars_per_token = meter.built_at  # a resumed sweep's bucket keeps what each point was built at
                    state.points[named] = result
                    state.save()
                    echo("  " + _line(result))
                pool.release(name)
            longest = max(longest, time.monotonic() - t0)
    finally:
        # Stopped or done, the servers stop and the state is saved whole: a second Ctrl-C here
        # would cut that short, so from here on a signal is only recorded (the CLI says it).
        interrupts.seal()
        pool.close()
        session.complete = len(attempted) == len(points)
        state.save()
    return SweepOutcome(plan, state, session.id, complete=session.complete)


def _live(pool: ServerPool, name: str) -> LiveServer:
    """`name`'s server, booted with its wave; a sweep boots nothing on the side."""
    if name not in pool.live:
        raise SpecgateError(f"{name} is not running: {pool.failed.get(name, 'not booted')[:200]}")
    return pool.live[name]


def _stop_if_cancelled(pool: ServerPool) -> None:
    """The signal handler's KeyboardInterrupt can be lost (raised inside a gc or logging callback,
    Python prints and drops it): the sweep stops at its next point all the same."""
    if pool.cancelled:
        raise KeyboardInterrupt("specgate: a signal stopped the sweep")


def _interleaved(points: list[SweepPoint]) -> list[SweepPoint]:
    """Round-robin over (attention mode, steps) groups, so every wave mixes them."""
    groups: dict[tuple[str, int], list[SweepPoint]] = {}
    for p in points:
        groups.setdefault((p.attention_mode, p.num_steps), []).append(p)
    lists = list(groups.values())
    return [lst[i] for i in range(max((len(g) for g in lists), default=0)) for lst in lists if i < len(lst)]


def _measure_baselines(
    pool: ServerPool,
    meter: SpeedMeter,
    baseline_of: dict[str, str],
    repeats: int,
    session: SessionRecord,
    wave: int,
    echo: Callable[[str], None],
    context: int = 0,
) -> dict[str, ConfigSpeed]:
    """Each GPU's resident baseline, measured again on the first `repeats` pinned requests (of
    the context bucket `context`; 0: the short workload)."""
    out = {}
    for gpu, name in baseline_of.items():
        if name not in pool.live:
            echo(f"  {name}: plain reference NOT RUNNING ({pool.failed.get(name, 'not booted')[:200]}): no ratios")
            continue
        try:
            samples = meter.sample(pool.live[name], 1, repeats)
        except SpecgateError as exc:
            echo(f"  {name}: plain reference FAILED in wave {wave + 1}: {str(exc)[:200]}")
            pool.release(name)
            continue
        record = ConfigSpeed(name, 1, samples=samples, context=context)
        out[gpu] = record
        if not context:  # the session's record keeps the short workload's, as before the context axis
            session.baselines.setdefault(gpu, []).append([round(v, 3) for v in record.decode_tps_per_request])
        where = f" on GPU {gpu}" if gpu else ""
        at = f" at {bucket_label(context)}" if context else ""
        echo(f"  {name}: {median(record.decode_tps_per_request):.1f} tok/s (plain reference{where}{at}, wave {wave + 1})")
    return out


def _axes(point: SweepPoint, context: int) -> dict[str, object]:
    return {**point.axes(), "context": context} if context else point.axes()


def _failed(
    state: SweepState, session: SessionRecord, point: SweepPoint, name: str, gpu: str, error: str, echo, context: int = 0
) -> None:
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    state.points[name] = PointResult(name, _axes(point, context), "failed", session.id, gpu, error=error[-4000:])
    state.save()
    echo(f"  {name}: FAILED: {first}")


def _result(
    point: SweepPoint,
    record: ConfigSpeed,
    baseline: ConfigSpeed | None,
    session: str,
    gpu: str,
    wave: int,
    boot_s: float | None,
    deployment: Deployment,
    name: str | None = None,
    context: int = 0,
) -> PointResult:
    result = PointResult(
        name or point.name,
        _axes(point, context),
        "measured",
        session,
        gpu,
        decode_tps=[round(v, 3) for v in record.decode_tps_per_request],
        accept_lengths=[round(s.accept_length, 4) for s in record.samples if s.accept_length],
        boot_s=None if boot_s is None else round(boot_s, 1),
        wave=wave,
    )
    model = cycle_model(record, baseline, deployment.gates.confidence) if baseline else None
    if model is not None:
        result.ratio = {k: float(v) for k, v in model.measured.as_dict().items()}  # type: ignore[arg-type]
        result.tau = {k: float(v) for k, v in model.tau.as_dict().items()}  # type: ignore[arg-type]
        result.t_c_ms = round(model.t_c_ms.estimate, 4)
        result.cycle_cost = round(model.cycle_cost, 4)
    else:
        # Measured, but with nothing to pair it with: not done, so the next sweep measures it again.
        result.status = "unpaired"
        result.error = "no plain reference measured beside it (same wave, same GPU): no ratio"
    return result


def _line(r: PointResult) -> str:
    ratio = f"{r.ratio['estimate']:.3f}x [{r.ratio['low']:.3f}, {r.ratio['high']:.3f}]" if r.ratio else "no ratio"
    tau = f"τ {r.tau['estimate']:.2f}" if r.tau else "τ ?"
    cost = f", cycle {r.t_c_ms:.2f} ms = {r.cycle_cost:.2f} plain steps" if r.cycle_cost else ""
    built = f", prompts built at {r.chars_per_token:.2f} chars/token" if r.chars_per_token else ""
    return f"{r.name}: {r.median_tps:.1f} tok/s, {ratio} baseline, {tau}{cost}{built}"
