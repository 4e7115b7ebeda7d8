"""SIMULATOR expected speed against context length: what a config of the toy engine decodes
at, one request at a time, from the cost model (sim/cost.py) and the accept model (the
draft's agreement per position, sim/model.py), with no server started.

A twin's targets (public figures of another engine) are checked against this curve; a served
request's measured speed is checked against it too (tests/self/test_sim_context_cost.py), so
the curve is the engine's own arithmetic, not a second model of it. Figures are the
simulator's.
"""

from __future__ import annotations

from specgate.sim.cost import CostModel
from specgate.sim.engine import SpecSettings
from specgate.sim.model import PAST_CONTEXT_AGREEMENT_FACTOR


def tokens_per_cycle(spec: SpecSettings, kv_tokens: int) -> float:
    """Expected tokens a verify cycle keeps: the bonus token and the run of accepted drafts. A
    draft position is accepted where one of the `topk` guesses is the target's top-1 (each guess
    is, with the draft's agreement); the run stops at the first miss, at most `depth` long.
    Near-tie flips in verify (about 1% of positions) are left out."""
    agreement = spec.draft_agreement
    if spec.draft_context is not None and kv_tokens > spec.draft_context:
        agreement *= PAST_CONTEXT_AGREEMENT_FACTOR
    hit = 1.0 - (1.0 - agreement) ** spec.topk
    return 1.0 + sum(hit**i for i in range(1, spec.depth + 1))


def decode_tps(cost: CostModel, spec: SpecSettings | None, kv_tokens: int) -> float:
    """Expected single-stream decode speed (tokens per second after the first) of a config whose
    requests attend over `kv_tokens` (prompt + answer): plain, one token per decode step;
    speculative, `tokens_per_cycle` per draft-then-verify cycle. Drift and per-request noise
    are left out (they move with the clock); every other factor of the cost model is in."""
    if spec is None:
        return 1000.0 / (cost.plain_step_ms(kv_tokens) * cost.static_factor)
    if spec.simulate_acc_len is not None:
        kept = min(max(1.0, spec.simulate_acc_len), spec.depth + 1.0)
    else:
        kept = tokens_per_cycle(spec, kv_tokens)
    cycle_ms = cost.cycle_ms(spec.steps, spec.draft_tokens, spec.attention_mode, kv_tokens) * cost.static_factor
    return 1000.0 * kept / cycle_ms
