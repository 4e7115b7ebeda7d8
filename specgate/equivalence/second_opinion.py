"""After a decisive parting at a token, the speculative server's own view of that token.

The baseline's top logprobs say how near its choice was; they cannot say what the speculative
server computed. SGLang returns logprobs from a speculative server too (for EAGLE, those of the
target's verify pass over the accepted tokens: the numbers that chose the token). So the request
that parted is sent once more, as it was (the same copies at once) but asking for top logprobs,
and the answer says three things: whether the parting came again, whether the server's own top
at that token is the token it emitted, and how far below its choice it put the baseline's token.
A speculative token its own logits rank first, with the baseline's a bf16 step or two below,
is two kernels ordering a near tie differently; its own logits putting another token first, or
the baseline's far below at the same prefix, is not.

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

MAX_PER_CONFIG = 5  # second requests per config per run: Hypothesis replays a failing case while shrinking


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
        return f"asked again with logprobs, the server did not answer ({type(exc).__name__}: {str(exc)[:200]})"
    return read_again(again, parting, baseline, tie_margin)


def read_again(again: GenerateResult, parting: TokenDivergence, baseline: GenerateResult, tie_margin: float) -> str:
    i = parting.position
    ids = again.output_ids
    if tuple(ids[:i]) != tuple(baseline.output_ids[:i]):
        return "asked again with logprobs, its answer parted from the baseline's before that token: no view of it"
    if len(ids) <= i:
        return "asked again with logprobs, its answer ended before that token"
    token = ids[i]
    if token == parting.spec_token:
        came = f"it parted again with {parting.spec_token}"
    elif token == parting.baseline_token:
        came = "it answered the baseline's token this time"
    else:
        came = f"it answered {token} this time"
    tops = again.top_logprobs[i] if again.top_logprobs is not None and i < len(again.top_logprobs) else ()
    if not tops:
        return f"asked again with logprobs, {came}; the server gave no top logprobs there (this release may not return them)"
    own = dict(tops)
    best_token = tops[0][0]
    words = [f"asked again with logprobs, {came}; its own top {len(tops)} there: {choices(again, i)}"]
    if best_token != token:
        words.append(
            f"its own logits rank {name(best_token, again.token_text(best_token))} first, yet it emitted {token}: "
            "not a near tie, the token chosen is not the one its logits favour"
        )
    pair = (parting.spec_token, parting.baseline_token)
    if all(t in own for t in pair):
        gap = abs(own[pair[0]] - own[pair[1]])
        within = gap < tie_margin
        words.append(
            f"its own logprobs for {pair[0]} and the baseline's {pair[1]} are {gap:.4g} apart, "
            + ("within" if within else "beyond")
            + f" the tie margin {tie_margin:g}"
            + (": the two servers' numerics order a near tie differently" if within and best_token == token else "")
        )
    else:
        missing = [t for t in pair if t not in own]
        words.append(f"{' and '.join(map(str, missing))} not among its own top {len(tops)} at the same prefix")
    return "; ".join(words)
