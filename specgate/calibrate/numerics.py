"""What a tie margin must cover, measured: how far a speculative server moves the gaps between
its reference's top tokens at the same prefix.

A near tie flips when the speculative server's kernels (an EAGLE verify pass, another attention
path, another batch shape) shift the gap between the reference's top token a and another token b
by more than that gap. So the figure to calibrate on is the shift itself, at every position both
servers reached with the same tokens before it, not only where an answer happened to part:
|(s[a] - s[b]) - (r[a] - r[b])| for each b that both list, with r and s the reference's and the
speculative server's logprobs (SGLang returns an EAGLE server's from its verify pass). The
largest shift seen, rounded up to the logprobs' step (the smallest difference seen between two
listed logprobs: bf16 steps at the scale they sit) and one step more, is the suggested margin; like the suggested tolerances it is written down and reported, never applied: the
deployment declares its `tie_margin`, chosen before the runs it judges.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from specgate.client import GenerateRequest, GenerateResult
from specgate.deployment import Deployment
from specgate.errors import SpecgateError
from specgate.prompts import render
from specgate.server.pool import ServerPool


def gap_shifts(reference: GenerateResult, spec: GenerateResult) -> tuple[list[float], int]:
    """Every shift of a gap between the reference's top token and another both list, and how many
    positions were compared: each up to and including the first where the answers part (after it
    the prefixes differ)."""
    ref_tops, spec_tops = reference.top_logprobs or (), spec.top_logprobs or ()
    shifts: list[float] = []
    positions = 0
    for i in range(min(len(ref_tops), len(spec_tops), len(reference.output_ids), len(spec.output_ids))):
        positions += 1
        r, s = dict(ref_tops[i]), dict(spec_tops[i])
        if r and s:
            top = ref_tops[i][0][0]
            if top in s:
                shifts.extend(abs((s[top] - s[b]) - (r[top] - r[b])) for b in r if b != top and b in s)
        if reference.output_ids[i] != spec.output_ids[i]:
            break
    return [x for x in shifts if math.isfinite(x)], positions


@dataclass
class Collected:
    """One speculative config's shifts over every round, and the answers they came from."""

    shifts: list[float] = field(default_factory=list)
    positions: int = 0
    answers: list[GenerateResult] = field(default_factory=list)

    def summary(self, tie_margin: float) -> dict:
        return summarise(self.shifts, quantum(self.answers), tie_margin, self.positions)


def quantum(results: Sequence[GenerateResult]) -> float | None:
    """The logprobs' step: the smallest non-zero difference between listed logprobs at a position."""
    steps = [
        abs(a - b)
        for r in results
        for pos in r.top_logprobs or ()
        for k, (_, a) in enumerate(pos)
        for _, b in pos[k + 1 :]
        if abs(a - b) > 1e-9
    ]
    return min(steps) if steps else None


def summarise(shifts: Sequence[float], step: float | None, tie_margin: float, positions: int) -> dict:
    """The shifts seen, and the margin that covers them with one step to spare."""
    if not shifts:
        return {"positions": positions, "pairs": 0, "tie_margin": tie_margin}
    ordered = sorted(shifts)
    largest = ordered[-1]
    suggested = (math.ceil(largest / step - 1e-9) + 1) * step if step else largest * 1.5
    return {
        "positions": positions,
        "pairs": len(ordered),
        "median": round(ordered[len(ordered) // 2], 5),
        "p99": round(ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)], 5),
        "largest": round(largest, 5),
        "step": None if step is None else round(step, 6),
        "beyond_tie_margin": sum(x >= tie_margin for x in ordered),
        "tie_margin": tie_margin,
        "suggested_tie_margin": round(suggested, 5),
        # every shift, counted by value (logprobs come in steps, so few values): the figures above re-derive from it
        "histogram": {f"{v:g}": n for v, n in sorted(Counter(round(x, 5) for x in ordered).items())},
    }


def collect(deployment: Deployment, pool: ServerPool, prompts: int, into: dict[str, Collected]) -> list[str]:
    """Ask each speculative config and its reference the same greedy requests with top logprobs
    (the first `prompts` of the workload's pinned order, the equivalence answer length), adding
    the shifts to `into`; returns what could not be asked."""
    eq = deployment.equivalence
    problems: list[str] = []
    for config in deployment.speculative_configs:
        reference = deployment.reference_of(config)
        got = into.setdefault(config, Collected())
        for prompt in deployment.workload.speed_sequence()[:prompts]:
            request = GenerateRequest(
                max_new_tokens=eq.max_new_tokens,
                text=render(prompt.messages, deployment.workload.prompt_format),
                top_logprobs=eq.top_logprobs,
            )
            try:
                ref, spec = pool.acquire(reference).generate(request), pool.acquire(config).generate(request)
            except SpecgateError as exc:
                problems.append(f"{config}: {prompt.label}: {str(exc).splitlines()[0][:200]}")
                continue
            if not spec.top_logprobs:
                problems.append(f"{config}: gave no top logprobs (this SGLang release may not return them)")
                break
            shifts, positions = gap_shifts(ref, spec)
            got.shifts += shifts
            got.positions += positions
            got.answers += [ref, spec]
    return problems


def render_numerics(by_config: dict[str, dict]) -> list[str]:
    if not by_config:
        return []
    lines = [
        "",
        "Tie margin: how far each speculative server moved the gap between its reference's top token and another "
        "both listed, at the same prefix (nats; every round's requests pooled):",
        "",
        "| config | positions | gaps compared | median | 99th percentile | largest | at or past the tie margin | suggested tie margin |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for config, e in by_config.items():
        if not e.get("pairs"):
            lines.append(f"| {config} | {e.get('positions', 0)} | 0 | — | — | — | — | — |")
            continue
        lines.append(
            f"| {config} | {e['positions']} | {e['pairs']} | {e['median']:g} | {e['p99']:g} | {e['largest']:g} "
            f"| {e['beyond_tie_margin']} (margin {e['tie_margin']:g}) | {e['suggested_tie_margin']:g} |"
        )
    lines.append(
        "\nThe suggestion is the largest shift seen rounded up to the logprobs' step, plus one step; the "
        "deployment's `tie_margin` is what the gate applies."
    )
    return lines
