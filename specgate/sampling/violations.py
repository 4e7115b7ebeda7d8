"""Whether a sampled token breaks its setting outright, as the reference's own logprobs rank it:
outside top_k, below min_p, outside the top_p nucleus. A healthy sampler never emits one.

Judged on the reference's scoring pass (a prefill), whose numbers differ from the decode pass
that sampled by bf16 noise: a token counts only where it is `margin` nats past the boundary,
and the nucleus only where its bound is certain from the listed top logprobs (the tail's share
bounded from above; at temperature > 1 without top_k the tail cannot be bounded: not judged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specgate.sampling_spec import SamplingSetting

Tops = Sequence[tuple[int, float]]  # (token, logprob), best first


def violation(setting: SamplingSetting, margin: float, token_lp: float, tops: Tops) -> str | None:
    """The filter `token_lp` certainly breaks ("top_k", "min_p", "top_p"), or None."""
    if not tops:
        return None
    above = [lp for _, lp in tops if lp > token_lp + margin]
    if setting.top_k > 0 and len(above) >= setting.top_k:
        return "top_k"
    best = tops[0][1]
    t = setting.temperature
    if setting.min_p > 0.0 and token_lp + margin < best + t * math.log(setting.min_p):
        return "min_p"
    if setting.top_p < 1.0:
        total = _nucleus_normaliser(setting, tops)
        if total is not None:
            before = sum(math.exp((lp - best) / t) for lp in above[: setting.top_k if setting.top_k > 0 else None])
            if before / total > setting.top_p:
                return "top_p"
    return None


def _nucleus_normaliser(setting: SamplingSetting, tops: Tops) -> float | None:
    """An upper bound on the tempered weights' sum (relative to the top token's), over the
    tokens top_p is applied to: the top_k where it is on and listed, else every token."""
    best = tops[0][1]
    t = setting.temperature
    if setting.top_k > 0 and len(tops) >= setting.top_k:
        return sum(math.exp((lp - best) / t) for _, lp in tops[: setting.top_k])
    if t > 1.0:
        return None
    listed = sum(math.exp((lp - best) / t) for _, lp in tops)
    tail = max(0.0, 1.0 - sum(math.exp(lp) for _, lp in tops))
    last = math.exp(tops[-1][1])
    # Each unlisted token is at most as likely as the last listed: its tempered weight
    # (p/p_top)^(1/T) is at most p * last^(1/T - 1) / p_top^(1/T).
    return listed + tail * last ** (1 / t - 1) / math.exp(best) ** (1 / t)
