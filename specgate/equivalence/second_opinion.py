"""After a decisive parting at a token, the speculative server's own view of that token.

The baseline's top logprobs say how near its choice was; they cannot say what the speculative
server computed. SGLang returns logprobs from a speculative server too (for EAGLE, those of the
target's verify pass over the accepted tokens: the numbers that chose the token). So the request
that parted is sent once more, as it was (the same copies at once) but asking for top logprobs,
and the answer says three things: whether the parting came again, whether the server's own top
at that token is the token it emitted, and how far below its choice it put the baseline's token.
The shift it reports is how far the server's numbers moved the gap between the two tokens (the
baseline's gap plus its own, the other way): a few bf16 steps past the tie margin reads as a near
tie the margin did not cover (compare with the shifts `specgate calibrate` measures); many nats,
or its own logits putting another token first than the one it emitted, is no near tie.

Explanation only: the rule (check.py) judged the first answer and stands. The second request
runs with logprobs on, a path SGLang may compute differently, and greedy answers under
batching need not repeat: the words say what the second answer was, never more.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from specgate.client import GenerateRequest, GenerateResult
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.check import TokenDivergence
from specgate.equivalence.partings import choices, name, tops_at


def second_opinion(
    generate: Callable[[GenerateRequest], GenerateResult],
    case: GenerationCase,
    parting: TokenDivergence,
    baseline: GenerateResult,
    top_logprobs: int,
    tie_margin: float,
) -> str:
    """One line on what the speculative server said when asked again with logprobs. Whatever
    goes wrong is told in that line: an explanation must never turn into a failure of its own."""
    request = case.request(top_logprobs)
    try:
        if case.concurrency == 1:
            again = generate(request)
        else:
            with ThreadPoolExecutor(max_workers=case.concurrency) as ex:
                again = list(ex.map(generate, [request] * case.concurrency))[0]
        return read_again(again, parting, baseline, tie_margin)
    except Exception as exc:  # noqa: BLE001 - the first answer was judged; this only explains it
        first = (str(exc).splitlines() or [""])[0][:200]
        return f"asked again with logprobs, no reading ({type(exc).__name__}: {first})"


def _held(a: int, b: int, gap: float) -> str:
    """"a held 0.1 above b", or below where the gap is negative."""
    return f"{a} {gap:.4g} above {b}" if gap >= 0 else f"{a} {-gap:.4g} below {b}"


def read_again(again: GenerateResult, parting: TokenDivergence, baseline: GenerateResult, tie_margin: float) -> str:
    i = parting.position
    ids = again.output_ids
    if len(ids) <= i:
        return f"asked again with logprobs, its answer ended after {len(ids)} tokens, before that token"
    if tuple(ids[:i]) != tuple(baseline.output_ids[:i]):
        return "asked again with logprobs, its answer parted from the baseline's before that token: no view of it"
    token = ids[i]
    if token == parting.spec_token:
        came = f"it parted again with {parting.spec_token}"
    elif token == parting.baseline_token:
        came = "it answered the baseline's token this time"
    else:
        came = f"it answered {token} this time"
    listed = again.top_logprobs
    if not listed:
        return f"asked again with logprobs, {came}; the server gave no top logprobs (this release may not return them)"
    if len(listed) != len(ids):
        # e.g. a release that returned the prefill token's logprobs alone (SGLang PR #14046): which
        # token a list belongs to is unknown, so none is read
        return f"asked again with logprobs, {came}; its logprobs cover {len(listed)} positions for {len(ids)} tokens: not read"
    tops = listed[i]
    if not tops:
        return f"asked again with logprobs, {came}; it listed no logprobs at that token"
    own = dict(tops)
    words = [f"asked again with logprobs, {came}; its own top {len(tops)} there: {choices(again, i)}"]
    best = max(lp for _, lp in tops)
    if token not in own or own[token] < best - 1e-6:  # an exact tie listed in either order is no contradiction
        favoured = next(tok for tok, lp in tops if lp == best)
        words.append(
            f"its own logits rank {name(favoured, again.token_text(favoured))} first, yet it emitted {token}: "
            "not a near tie, the token chosen is not the one its logits favour"
        )
    words.append(_shift(parting, baseline, own, len(tops), tie_margin))
    return "; ".join(words)


def _shift(parting: TokenDivergence, baseline: GenerateResult, own: dict[int, float], own_listed: int, tie_margin: float) -> str:
    """How far this server's numbers moved the gap between the baseline's token b and its own s:
    the baseline held b above s by one gap, this server holds s above b by another; the flip needs
    their sum, which is what a tie margin has to cover. Read from both lists, never assumed."""
    b_tok, s_tok = parting.baseline_token, parting.spec_token
    base = dict(tops_at(baseline, parting.position))
    missing = [str(t) for t in (s_tok, b_tok) if t not in own]
    if missing:
        return f"{' and '.join(missing)} not among its own top {own_listed} at the same prefix"
    own_gap = own[s_tok] - own[b_tok]
    mine = f"its own logits hold {_held(s_tok, b_tok, own_gap)}"
    if b_tok not in base:
        return f"{mine}; the baseline did not list its own token there: the shift is unknown"
    if s_tok not in base:
        # s sat at or below the baseline's last listed token: the gap was at least that far
        floor = base[b_tok] - min(base.values()) + own_gap
        return f"{mine}; the baseline did not list {s_tok}: a shift of at least {floor:.4g} nats"
    base_gap = base[b_tok] - base[s_tok]
    shift = base_gap + own_gap
    scale = f", {shift / tie_margin:.3g}x the tie margin {tie_margin:g}" if tie_margin > 0 and shift > 0 else ""
    moved = f"a shift of {shift:.4g} nats{scale}" if shift > 0 else "no shift towards its token (its numbers agree or lean the baseline's way)"
    return f"the baseline held {_held(b_tok, s_tok, base_gap)}, {mine}: {moved}"
