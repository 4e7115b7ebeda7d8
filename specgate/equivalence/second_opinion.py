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
from specgate.equivalence.partings import choices, name
from specgate.errors import SpecgateError


def second_opinion(
    generate: Callable[[GenerateRequest], GenerateResult],
    case: GenerationCase,
    parting: TokenDivergence,
    baseline: GenerateResult,
    top_logprobs: int,
    tie_margin: float,
) -> str:
    """One line on what the speculative server said when asked again with logprobs."""
    request = case.request(top_logprobs)
    try:
        if case.concurrency == 1:
            again = generate(request)
        else:
            with ThreadPoolExecutor(max_workers=case.concurrency) as ex:
                again = list(ex.map(generate, [request] * case.concurrency))[0]
    except (SpecgateError, OSError) as exc:  # an explanation must never turn into a failure of its own
        first = (str(exc).splitlines() or [""])[0][:200]
        return f"asked again with logprobs, the server did not answer ({type(exc).__name__}: {first})"
    return read_again(again, parting, baseline, tie_margin)


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
    own = dict(tops)
    words = [f"asked again with logprobs, {came}; its own top {len(tops)} there: {choices(again, i)}"]
    best = max(lp for _, lp in tops)
    if token not in own or own[token] < best - 1e-6:  # an exact tie listed in either order is no contradiction
        favoured = next(tok for tok, lp in tops if lp == best)
        words.append(
            f"its own logits rank {name(favoured, again.token_text(favoured))} first, yet it emitted {token}: "
            "not a near tie, the token chosen is not the one its logits favour"
        )
    b_tok, s_tok = parting.baseline_token, parting.spec_token
    if b_tok in own and s_tok in own and parting.spec_gap is not None:
        # The baseline put b above s by spec_gap; this server puts s above b by own_gap: its numbers
        # moved that gap by their sum, which is what a tie margin has to cover for the flip.
        own_gap = own[s_tok] - own[b_tok]
        shift = parting.spec_gap + own_gap
        scale = f", {shift / tie_margin:.2g}x the tie margin {tie_margin:g}" if tie_margin > 0 else ""
        words.append(
            f"the baseline held {b_tok} {parting.spec_gap:.4g} above {s_tok}, its own logits hold {s_tok} "
            f"{own_gap:.4g} above {b_tok}: a shift of {shift:.4g} nats{scale}"
        )
    else:
        missing = [str(t) for t in (s_tok, b_tok) if t not in own]
        if missing:
            words.append(f"{' and '.join(missing)} not among its own top {len(tops)} at the same prefix")
        else:
            words.append(f"the baseline did not list {s_tok}: the shift is at least its last listed gap")
    return "; ".join(words)
