"""The diagnosis across context length (`workload.context_buckets`): how a speculative config's
verify cycle grows with the context, against the plain decode step at the same length.

Per bucket, the cycle's cost in plain steps is cycle_ms / (1000 / the reference's decode tok/s
there). A verify run on the prefill attention path pays attention over the whole context with
prefill kernels, so its cost grows with the context faster than a decode step's; in decode
mode (or with graphs on) it grows about as a decode step does. Where the ratio grows past
SLOPE_GROWTH from the shortest bucket to the longest and the config's settings explain it, the
lever is named at the first bucket where the config loses to its reference, with the measured
ratios as evidence; another config of the run measured in decode mode is quoted beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from specgate.deployment import Deployment, bucket_label
from specgate.diagnosis.levers import MEASURED, SETTING, Lever
from specgate.diagnosis.settings import EffectiveSettings, read_settings
from specgate.measure.speed import ConfigSpeed, Measurements
from specgate.measure.summary import paired_speed_ratio

# Growth of the cycle's cost in plain steps, shortest bucket to longest, past which the slope is
# named. The public PCIe figures issue 48 quotes (Kimi K2.5/K2.6, EAGLE-3; plain ~92 tok/s at 2K
# and 73.4 at 32K) put a cycle at (plain / speculative tok/s) x tokens per cycle: from 2K to 30K that
# grows about 2.4x in prefill mode (92/75 to 73.4/25.3) and shrinks to 0.9x in decode mode; the
# run-to-run noise of a median cycle over 9 requests is a few percent. 1.5x sits far from both:
# never noise, well short of the real slope.
SLOPE_GROWTH = 1.5


def context_name(tokens: int) -> str:
    return bucket_label(tokens) if tokens else "short"


@dataclass(frozen=True)
class BucketPoint:
    """One config's figures at one bucket (0: the short workload), from its speed rows."""

    context: int
    cycle_ms: float | None  # the config's median verify cycle (None: not speculative, or not told)
    reference_tps: float | None  # the reference's median decode tok/s at this bucket
    speedup: float | None  # the config's paired ratio to the reference (estimate)

    @property
    def steps(self) -> float | None:
        """The cycle's cost in plain decode steps at this length."""
        if self.cycle_ms is None or not self.reference_tps:
            return None
        return self.cycle_ms / (1000.0 / self.reference_tps)


@dataclass(frozen=True)
class SlopeFinding:
    config: str
    mode: str  # the verify path the config runs: "prefill mode", "decode mode", "graphs off"
    steps: tuple[tuple[int, float], ...]  # (bucket, cycle cost in plain steps), shortest first
    growth: float
    loses_at: int | None  # the first bucket where the config is slower than its reference
    lever: Lever | None  # None where the settings do not explain the slope, or it never loses
    evidence: str  # "verify costs 1.4x a decode step at 1K and 3.9x at 32K in prefill mode; ..."

    def as_dict(self) -> dict:
        return {
            "config": self.config,
            "mode": self.mode,
            "steps": [{"context": c, "plain_steps": round(s, 4)} for c, s in self.steps],
            "growth": round(self.growth, 4),
            "loses_at": self.loses_at,
            "lever": self.lever.as_dict() if self.lever else None,
            "evidence": self.evidence,
        }


def _mode(settings: EffectiveSettings) -> str:
    if settings.attention_mode in (None, "prefill") and settings.hybrid:
        return "prefill mode"
    if settings.cuda_graph_disabled:
        return "graphs off"
    return f"{settings.attention_mode or 'default'} mode"


def _ratios(points: list[BucketPoint]) -> list[tuple[int, float]]:
    return [(p.context, s) for p in sorted(points, key=lambda p: p.context) if (s := p.steps) is not None]


def _said(steps: list[tuple[int, float]]) -> str:
    first, last = steps[0], steps[-1]
    return f"{first[1]:.1f}x a decode step at {context_name(first[0])} and {last[1]:.1f}x at {context_name(last[0])}"


def context_slope(
    config: str,
    settings: EffectiveSettings,
    points: list[BucketPoint],
    others: dict[str, tuple[EffectiveSettings, list[BucketPoint]]] | None = None,
) -> SlopeFinding | None:
    """The slope of `config`'s verify cost across its buckets, or None where there is no slope
    to tell (fewer than two buckets with a cycle time, or growth under SLOPE_GROWTH). `others`:
    the run's other speculative configs, by name; one in decode mode is quoted beside."""
    steps = _ratios(points)
    if len(steps) < 2 or steps[0][1] <= 0:
        return None
    growth = steps[-1][1] / steps[0][1]
    if growth <= SLOPE_GROWTH:
        return None
    mode = _mode(settings)
    evidence = f"verify costs {_said(steps)} in {mode}"
    contrast = None
    for name, (their_settings, their_points) in (others or {}).items():
        theirs = _ratios(their_points)
        if name != config and len(theirs) >= 2 and their_settings.attention_mode == "decode":
            evidence += f"; decode mode ({name}): {theirs[0][1]:.1f}x and {theirs[-1][1]:.1f}x"
            contrast = name
            break
    losing = [p.context for p in sorted(points, key=lambda p: p.context) if p.speedup is not None and p.speedup < 1.0]
    loses_at = losing[0] if losing else None
    lever = None
    if loses_at is not None and mode in ("prefill mode", "graphs off"):
        at = context_name(loses_at)
        if mode == "prefill mode":
            action = "--speculative-attention-mode decode"
            why = (
                f"verify runs on the prefill attention backend ({settings.prefill_backend}), whose cost grows with "
                f"the context faster than a decode step's: {config} loses to its reference from {at} on"
            )
        else:
            action = "drop --disable-cuda-graph (CUDA graphs on)"
            why = f"verify runs without CUDA graphs, its launch cost grows with the context: {config} loses from {at} on"
        lever = Lever(
            f"context-slope-{mode.split()[0]}",
            action,
            why,
            (f"measured across context length: {evidence}",),
            MEASURED if contrast else SETTING,
            sibling=contrast,
        )
    return SlopeFinding(config, mode, tuple(steps), growth, loses_at, lever, evidence)


def bucket_points(record: ConfigSpeed | None, reference: ConfigSpeed | None, context: int, confidence: float) -> BucketPoint:
    """A config's BucketPoint from its record and its reference's at one bucket."""
    cycles = record.cycle_ms_per_request if record is not None else []
    ref_tps = [s.decode_tps for s in reference.samples] if reference is not None else []
    speedup = (
        paired_speed_ratio(record, reference, confidence).estimate
        if record is not None and reference is not None and record.samples and reference.samples
        else None
    )
    return BucketPoint(
        context,
        statistics.median(cycles) if cycles else None,
        statistics.median(ref_tps) if ref_tps else None,
        speedup,
    )


def slopes_of(
    deployment: Deployment, meters: Mapping[int, Measurements], server_infos: dict[str, dict]
) -> list[SlopeFinding]:
    """Every speculative config's slope across the run's buckets (`meters`: 0, the short
    workload's, then each bucket's), measured at concurrency 1."""
    conf = deployment.gates.confidence
    subjects: dict[str, tuple[EffectiveSettings, list[BucketPoint]]] = {}
    for config in deployment.speculative_configs:
        info = server_infos.get(config)
        if info is None:
            continue
        reference = deployment.reference_of(config)
        points = [
            bucket_points(m.results.get((config, 1)), m.results.get((reference, 1)), context, conf)
            for context, m in sorted(meters.items())
        ]
        subjects[config] = (read_settings(info), points)
    found = [context_slope(c, s, p, subjects) for c, (s, p) in subjects.items()]
    return [f for f in found if f is not None]


def with_slopes(diagnoses: list[dict], slopes: list[SlopeFinding]) -> None:
    """Each slope said in its config's diagnosis at concurrency 1 (report.json's `diagnosis`): a
    lever first, with why the config underperforms at that length; a slope no setting explains,
    or one where the config never loses, as a note."""
    for found in slopes:
        d = next((d for d in diagnoses if d["config"] == found.config and d["concurrency"] == 1), None)
        if d is None:
            continue
        if found.lever is not None and found.loses_at is not None:
            d["levers"].insert(0, found.lever.as_dict())
            d["underperforms"].append(f"slower than the reference at {context_name(found.loses_at)}: {found.evidence}")
        else:
            d["notes"].append(f"across context length: {found.evidence} (x{found.growth:.1f})")
