"""What a tie margin must cover, measured: how far a speculative server moves the gaps between
its reference's top tokens at the same prefix.

A near tie flips when the speculative server's kernels (an EAGLE verify pass, another attention
path, another batch shape) shift the gap between the reference's top token a and another token b
by more than that gap. So the figure to calibrate on is the shift itself, at every position both
servers reached with the same tokens before it, not only where an answer happened to part:
|(s[a] - s[b]) - (r[a] - r[b])| for each b that both list, with r and s the reference's and the
speculative server's logprobs (SGLang returns an EAGLE server's from its verify pass). The
largest shift seen, rounded up to the logprobs' step (`quantum`: bf16 logits step alike at the
scale top tokens sit) and one step more, is the suggested margin. Like the suggested tolerances it
is written down and reported, never applied: the deployment declares its `tie_margin`, chosen
before the runs it judges.
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


def gap_shifts(reference: GenerateResult, spec: GenerateResult) -> tuple[list[float], int, int]:
    """Every shift of a gap between the reference's top token and another both list, how many
    positions were compared (each up to and including the first where the answers part: after it
    the prefixes differ), and how many of the reference's pairs the speculative server did not
    list (their shift is unknown, and may be the largest: a token it moved far down drops out)."""
    ref_tops, spec_tops = reference.top_logprobs or (), spec.top_logprobs or ()
    shifts: list[float] = []
    positions = unlisted = 0
    for i in range(min(len(ref_tops), len(spec_tops), len(reference.output_ids), len(spec.output_ids))):
        positions += 1
        r, s = dict(ref_tops[i]), dict(spec_tops[i])
        if r and s:
            top = ref_tops[i][0][0]
            for b in r:
                if b == top:
                    continue
                if top in s and b in s:
                    shifts.append(abs((s[top] - s[b]) - (r[top] - r[b])))
                else:
                    unlisted += 1
        if reference.output_ids[i] != spec.output_ids[i]:
            break
    return [x for x in shifts if math.isfinite(x)], positions, unlisted


@dataclass
class Collected:
    """One speculative config's shifts over every round, and the answers they came from."""

    shifts: list[float] = field(default_factory=list)
    positions: int = 0
    unlisted: int = 0
    answers: list[GenerateResult] = field(default_factory=list)

    def summary(self, tie_margin: float) -> dict:
        out = summarise(self.shifts, quantum(self.answers), tie_margin, self.positions)
        out["unlisted_pairs"] = self.unlisted
        return out


def quantum(results: Sequence[GenerateResult]) -> float | None:
    """The logprobs' step: per position, the smallest non-zero difference between two listed
    logprobs (bf16 logits step alike at the scale top tokens sit, e.g. 0.0625 or 0.125 nats), and
    of those the 10th percentile: a few positions with logits near zero, finer-grained, do not set
    it, and positions whose listed tokens all sit several steps apart do not either. None where no
    position lists three tokens or more."""
    smallest = []
    for r in results:
        for pos in r.top_logprobs or ():
            if len(pos) < 3:  # two listed tokens give their margin, not the step (top_logprobs = 2)
                continue
            diffs = [abs(a - b) for k, (_, a) in enumerate(pos) for _, b in pos[k + 1 :] if abs(a - b) > 1e-9]
            if diffs:
                smallest.append(min(diffs))
    return sorted(smallest)[len(smallest) // 10] if smallest else None


def summarise(shifts: Sequence[float], step: float | None, tie_margin: float, positions: int) -> dict:
    """The shifts seen, and the margin that covers them with one step to spare."""
    if not shifts:
        return {"positions": positions, "pairs": 0, "tie_margin": tie_margin}
    ordered = sorted(shifts)
    largest = ordered[-1]
    # rounded up to a step (a shift a float's width over a whole step is that step), plus one step
    suggested = (math.ceil(largest / step - 1e-4) + 1) * step if step else largest * 1.5
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


def collect(
    deployment: Deployment, pool: ServerPool, prompts: int, into: dict[str, Collected], offset: int = 0
) -> list[str]:
    """Ask each speculative config and its reference the same greedy requests with top logprobs
    (`prompts` of the workload's pinned order from `offset` on, wrapping: each round asks others
    where there are enough; the equivalence answer length), adding the shifts to `into`; returns
    what could not be asked or read."""
    eq = deployment.equivalence
    sequence = deployment.workload.speed_sequence()
    chosen = [sequence[(offset + k) % len(sequence)] for k in range(min(prompts, len(sequence)))]
    problems: list[str] = []
    for config in deployment.speculative_configs:
        reference = deployment.reference_of(config)
        got = into.setdefault(config, Collected())
        for prompt in chosen:
            request = GenerateRequest(
                max_new_tokens=eq.max_new_tokens,
                text=render(prompt.messages, deployment.workload.prompt_format),
                top_logprobs=eq.top_logprobs,
            )
            try:
                ref, spec = pool.acquire(reference).generate(request), pool.acquire(config).generate(request)
            except SpecgateError as exc:
                problems.append(f"{config}: {prompt.label}: {(str(exc).splitlines() or [''])[0][:200]}")
                continue
            if not spec.top_logprobs:
                problems.append(f"{config}: gave no top logprobs (this SGLang release may not return them)")
                break
            if len(spec.top_logprobs) != len(spec.output_ids) or len(ref.top_logprobs or ()) != len(ref.output_ids):
                problems.append(
                    f"{config}: logprobs for {len(spec.top_logprobs)} positions of {len(spec.output_ids)} tokens "
                    f"(reference: {len(ref.top_logprobs or ())} of {len(ref.output_ids)}): not read"
                )
                break
            shifts, positions, unlisted = gap_shifts(ref, spec)
            got.shifts += shifts
            got.positions += positions
            got.unlisted += unlisted
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
    unlisted = {c: e.get("unlisted_pairs", 0) for c, e in by_config.items() if e.get("unlisted_pairs")}
    if unlisted:
        lines.append(
            "\nPairs the speculative server did not list (their shift unknown, and possibly the largest: a token "
            "moved far down drops out of its top): " + ", ".join(f"{c} {n}" for c, n in unlisted.items()) + "."
        )
    lines.append(
        "\nThe suggestion is the largest shift seen rounded up to the logprobs' step, plus one step; the "
        "deployment's `tie_margin` is what the gate applies."
    )
    return lines
