"""What a run's context buckets will cost, said by `specgate check` before anything boots: per
bucket its requests, tokens and GPU time, and where a bucket's request may outlast the client's
request timeout."""

from __future__ import annotations

import math

from specgate import project
from specgate.deployment import Deployment, bucket_label

# Prefill throughput assumed for the GPU time `check` states per context bucket: no record of this
# runner times prefill, and one 8B-class model on one H200 prefills some 10-20 thousand tokens a
# second; the lower end keeps the estimate from promising a short run.
ASSUMED_PREFILL_TPS = 10_000.0
# How far under workload.request_timeout_s a bucket's estimated request must stay. The estimate
# decodes at the runner's short-context speed, and decode slows with context: on the public
# Kimi-K2.5 record (fixtures/deployments/kimi-k2.5-rtxpro6000-tp8-sim.toml, docs/kimi.md) plain decoding falls from
# ~92 tok/s at short context to 73.4 at 32K (1.25x), and prefill may be slower than assumed; a
# request that outlasts the timeout is cut off and its config's gates are NOT RUN, not judged.
TIMEOUT_HEADROOM = 2.0


def _span(low: float, high: float, fmt: str = "{:,.0f}") -> str:
    """"9" where the bounds agree, else "9 to 90"."""
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)} to {fmt.format(high)}"


def _rounded_up(seconds: float) -> float:
    """`seconds` rounded up to a whole second, or to a tenth under ten seconds: a sub-second
    timeout is rounded to what it is, not to 1 (which is no longer "2x the estimate")."""
    return float(math.ceil(seconds)) if seconds >= 10 else math.ceil(seconds * 10) / 10


def request_seconds(tokens: int, max_new_tokens: int, decode_tps: float | None) -> float:
    """One bucket request's estimated time: its prompt prefilled at ASSUMED_PREFILL_TPS and its
    answer decoded at `decode_tps` (None: no decode speed known, the prefill alone)."""
    return tokens / ASSUMED_PREFILL_TPS + (max_new_tokens / decode_tps if decode_tps else 0.0)


def timeout_warnings(dep: Deployment, speeds: dict[str, float]) -> list[str]:
    """Per context bucket, where its slowest config's estimated request (`request_seconds`) times
    TIMEOUT_HEADROOM passes workload.request_timeout_s: the bucket, the config, the estimate and
    the field to raise. `speeds`: this runner's calibrated decode tok/s per config (may be empty)."""
    wl = dep.workload
    out = []
    for tokens in wl.context_buckets:
        config, estimate = max(
            ((c, request_seconds(tokens, wl.max_new_tokens, speeds.get(c))) for c in dep.configs), key=lambda ce: ce[1]
        )
        if estimate * TIMEOUT_HEADROOM <= wl.request_timeout_s:
            continue
        how = (
            f"its answer decoded at this runner's calibrated {speeds[config]:.1f} tok/s"
            if config in speeds
            else "its answer not counted: no calibration of this runner's decode speeds"
        )
        out.append(
            f"  WARNING: {dep.path}: context bucket {bucket_label(tokens)}: a request of config {config!r} is estimated "
            f"at {estimate:.1f} s ({tokens:,} prompt tokens prefilled at an assumed {ASSUMED_PREFILL_TPS:,.0f} tokens/s, "
            f"{how}), and decode slows with context: it can pass workload.request_timeout_s = {wl.request_timeout_s:g} s, "
            f"which cuts it off (its gates NOT RUN). Raise workload.request_timeout_s to at least "
            f"{_rounded_up(estimate * TIMEOUT_HEADROOM):g} ({TIMEOUT_HEADROOM:g}x the estimate, rounded up)"
        )
    return out


def context_cost(dep: Deployment) -> list[str]:
    """Per context bucket: the requests it sends, their prompt and answer tokens, how often the
    shipped text repeats in one prompt, and (where this runner's calibration records the configs'
    decode speeds) about how long they take on the GPU: long prompts dominate a run's time."""
    wl = dep.workload
    if not wl.context_buckets:
        return []
    from specgate.gate_kinds import UNBUCKETED_WHY, unbucketed_gates
    from specgate.measure.context import passes_needed
    from specgate.measure.speed import warmup_requests
    from specgate.verdicts.planned import decode_speeds

    speeds = decode_speeds(dep, project.current().baselines_dir)
    servers = len(dep.configs) * dep.launch.boots
    parts = dep.judged_contexts
    skipped = unbucketed_gates(dep)
    which = "every gate at concurrency 1" if skipped else "every gate"
    out = [
        f"  context buckets {', '.join(bucket_label(t) for t in wl.context_buckets)} beside the short workload: "
        f"{wl.context_repeats} request(s) per config and boot each, at concurrency 1 (single-stream decode "
        "speed), real text of the shipped prompt sets",
        f"    {which} judged per bucket too (\"…@{bucket_label(wl.context_buckets[-1])}\"), each at a false-alarm "
        f"share of {(1 - dep.gates.confidence) / parts:.2%}: the run's {1 - dep.gates.confidence:.1%} split over "
        f"{parts} buckets (the short one among them)",
    ]
    if skipped:
        out.append(
            f"    NOT judged in any bucket ({UNBUCKETED_WHY}): "
            f"{', '.join(skipped)}; a gate at concurrency 1 (with 1 in workload.concurrency) gates them"
        )
    # Each bucket warms every server up anew on its own prompts (its meter's), as the short workload does.
    fewest, most = warmup_requests(wl.warmup)
    warm = f"{fewest}" if fewest == most else f"{fewest} to {most}"
    for tokens in wl.context_buckets:
        measured = servers * wl.context_repeats
        low, high = measured + servers * fewest, measured + servers * most
        line = (
            f"    {bucket_label(tokens)}: {measured} measured request(s) ({wl.context_repeats} per server) and {warm} "
            "warmup request(s) per server "
            f"(workload.warmup), {_span(low, high)} request(s) in all: about {_span(low * tokens, high * tokens)} prompt "
            f"and {_span(low * wl.max_new_tokens, high * wl.max_new_tokens)} answer tokens; the shipped text runs "
            f"{passes_needed(wl, tokens)} time(s) through each prompt"
        )
        if speeds and len(speeds) == len(dep.configs):
            per_server = sum(request_seconds(tokens, wl.max_new_tokens, tps) for tps in speeds.values()) * dep.launch.boots
            minutes = [per_server * (wl.context_repeats + n) / 60 for n in (fewest, most)]
            line += (
                f"; about {_span(minutes[0], minutes[1], fmt='{:.1f}')} GPU-minute(s): decode at this runner's calibrated "
                f"short-context speeds (slower at length: a floor), prefill assumed at {ASSUMED_PREFILL_TPS:,.0f} tokens/s"
            )
        else:
            line += "; GPU time not stated (no calibration of this runner's decode speeds)"
        out.append(line)
    return out + timeout_warnings(dep, speeds)
