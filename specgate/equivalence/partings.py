"""Where a speculative answer parted from the baseline's, told so that a reader can judge it.

A parting is judged by the tie rule (check.py); this module says what the rule saw: the
baseline's own ranking at that token (its top logprobs, with the tokens' text where the server
gave it), where the speculative token stood in it (its rank and how far below the baseline's top),
and whether the same context parted elsewhere in the run, and how (the same prompt and the same
baseline tokens before the parting, met by another request or another config). A speculative
token the baseline ranked 3rd, a step past the tie margin, at a context where other requests
flipped to the 2nd, reads differently from one the baseline did not list at all.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from specgate.client import GenerateResult


@dataclass(frozen=True)
class Standing:
    """The speculative token among the baseline's top logprobs at a parting."""

    rank: int | None  # 1 is the baseline's top; None: not among the tokens it listed
    gap: float | None  # the baseline's top logprob minus the speculative token's; None: not listed
    listed: int  # how many tokens the baseline listed there
    last_gap: float | None  # the gap of the last listed token: an unlisted token is further below

    def words(self, token: int, text: str | None) -> str:
        label = name(token, text)
        if self.listed == 0:
            return f"the baseline listed no top logprobs there to place speculative token {label}"
        if self.rank is None:
            below = f" (at least {self.last_gap:.4g} below its top)" if self.last_gap is not None else ""
            return f"speculative token {label} is not among the baseline's top {self.listed}{below}"
        if self.rank == 1:
            return f"speculative token {label} is the baseline's top choice"
        return f"speculative token {label} is the baseline's choice {self.rank}, {self.gap:.4g} below its top"


def standing(baseline: GenerateResult, position: int, token: int) -> Standing:
    tops = _tops(baseline, position)
    if not tops:
        return Standing(None, None, 0, None)
    best = tops[0][1]
    for rank, (tok, logprob) in enumerate(tops, start=1):
        if tok == token:
            return Standing(rank, best - logprob, len(tops), best - tops[-1][1])
    return Standing(None, None, len(tops), best - tops[-1][1])


def choices(baseline: GenerateResult, position: int) -> str:
    """The baseline's ranking at a token, e.g. "767 'ff' top, 359 'ver' -0.25, 335 'n' -0.375"."""
    tops = _tops(baseline, position)
    if not tops:
        return "none listed"
    best = tops[0][1]
    return ", ".join(
        f"{name(tok, baseline.token_text(tok))} " + ("top" if k == 0 else f"-{best - lp:.4g}")
        for k, (tok, lp) in enumerate(tops)
    )


def context_key(prompt: str, baseline_ids: Iterable[int]) -> str:
    """The same prompt and the same baseline tokens before a parting: the same context, whichever
    case (stop strings, answer length, batch) met it."""
    digest = hashlib.sha256(prompt.encode())
    digest.update(",".join(map(str, baseline_ids)).encode())
    return digest.hexdigest()[:16]


def name(token: int, text: str | None) -> str:
    return f"{token} {text!r}" if text is not None else str(token)


def _tops(baseline: GenerateResult, position: int) -> tuple[tuple[int, float], ...]:
    if baseline.top_logprobs is None or position >= len(baseline.top_logprobs):
        return ()
    return baseline.top_logprobs[position]


@dataclass(frozen=True)
class Parting:
    """One token-level parting as the run met it: a near-tie flip or a decisive divergence."""

    config: str
    context: str  # context_key
    spec_token: int
    margin: float | None  # the baseline's top-1/top-2 margin there, this request
    flip: bool


def met_elsewhere(context: str, partings: Iterable[Parting]) -> list[str]:
    """How the run's requests parted at one context, per config and token ("eagle3-decode chose
    359 2x (near-tie flips)") and the baseline's margins there, when the context was met more than
    once: empty for a parting met once."""
    here = [p for p in partings if p.context == context]
    if len(here) < 2:
        return []
    met = Counter((p.config, p.spec_token, p.flip) for p in here)
    lines = [
        f"{config} chose {token} {count}x ("
        + ("near-tie flip" if flip else "decisive divergence")
        + ("s)" if count > 1 else ")")
        for (config, token, flip), count in sorted(met.items())
    ]
    margins = sorted({p.margin for p in here if p.margin is not None})
    if len(margins) > 1:
        lines.append(
            "the baseline's top-1/top-2 margin there differed between requests: "
            + ", ".join(f"{m:.4g}" for m in margins)
        )
    return lines
