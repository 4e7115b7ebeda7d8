"""Where a speculative answer parted from the baseline's, told so that a reader can judge it.

A parting is judged by the tie rule (check.py); this module says what the rule saw: the
baseline's own ranking at that token (its top logprobs, with the tokens' text where the server
gave it), where the speculative token stood in it (its rank and how far below the token the
baseline emitted), and how every answer of the run that reached the same context chose there (the
same prompt and the same baseline tokens before the parting, met by another request or another
config, those that agreed included). A speculative token the baseline ranked 3rd, a step past the
tie margin, at a context where other answers took the 2nd, reads differently from one the
baseline did not list at all, at a context every other answer passed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from specgate.client import GenerateResult


@dataclass(frozen=True)
class Standing:
    """The speculative token among the baseline's top logprobs at a parting, measured from the
    token the baseline emitted there (its top, unless the reference is inconsistent)."""

    rank: int | None  # 1 is the baseline's top; None: not among the tokens it listed
    gap: float | None  # the emitted token's logprob minus the speculative token's; None: not listed
    listed: int  # how many tokens the baseline listed there
    last_gap: float | None  # the gap of the last listed token: an unlisted token is at least that far below
    emitted_rank: int | None = 1  # where the baseline's own token stood in its list (None: not listed)

    def words(self, token: int, text: str | None) -> str:
        label = name(token, text)
        if self.listed == 0:
            return f"the baseline listed no top logprobs there to place speculative token {label}"
        if self.emitted_rank != 1:
            where = "not listed" if self.emitted_rank is None else f"its choice {self.emitted_rank}"
            own = f"; the baseline itself emitted a token it did not rank first ({where}): an inconsistent reference"
        else:
            own = ""
        if self.rank is None:
            below = f" (at least {self.last_gap:.4g} below the baseline's token)" if self.last_gap else ""
            return f"speculative token {label} is not among the baseline's top {self.listed}{below}{own}"
        if self.rank == 1:
            return f"speculative token {label} is the baseline's top choice{own}"
        return f"speculative token {label} is the baseline's choice {self.rank}, {self.gap:.4g} below the baseline's token{own}"


def standing(baseline: GenerateResult, position: int, token: int, emitted: int) -> Standing:
    tops = tops_at(baseline, position)
    if not tops:
        return Standing(None, None, 0, None, None)
    logprob_of = dict(tops)
    emitted_rank = next((k for k, (tok, _) in enumerate(tops, start=1) if tok == emitted), None)
    reference = logprob_of.get(emitted, tops[0][1])
    last_gap = reference - tops[-1][1]
    rank = next((k for k, (tok, _) in enumerate(tops, start=1) if tok == token), None)
    gap = None if rank is None else reference - logprob_of[token]
    return Standing(rank, gap, len(tops), last_gap, emitted_rank)


CHOICES_SHOWN = 10  # tokens of the baseline's ranking a line shows


def choices(baseline: GenerateResult, position: int) -> str:
    """The baseline's ranking at a token, e.g. "767 'ff' top, 359 'ver' -0.25, 335 'n' -0.375"."""
    tops = tops_at(baseline, position)
    if not tops:
        return "none listed"
    best = tops[0][1]
    shown = ", ".join(
        f"{name(tok, baseline.token_text(tok))} " + ("top" if k == 0 else f"-{best - lp:.4g}")
        for k, (tok, lp) in enumerate(tops[:CHOICES_SHOWN])
    )
    return shown + (f", and {len(tops) - CHOICES_SHOWN} more" if len(tops) > CHOICES_SHOWN else "")


def context_key(prompt: str, baseline_ids: Iterable[int]) -> str:
    """The same prompt and the same baseline tokens before a parting: the same context, whichever
    case (stop strings, answer length, batch) met it."""
    return hashlib.sha256(json.dumps([prompt, list(baseline_ids)]).encode()).hexdigest()[:16]


TEXT_SHOWN = 40  # characters of a token's text a line shows (a token is rarely longer; a server may say anything)


def name(token: int, text: str | None) -> str:
    if text is None:
        return str(token)
    return f"{token} {text[:TEXT_SHOWN]!r}" + ("…" if len(text) > TEXT_SHOWN else "")


def tops_at(result: GenerateResult, position: int) -> tuple[tuple[int, float], ...]:
    """The (id, logprob) pairs an answer listed at `position`, best first; none where it listed none."""
    if result.top_logprobs is None or position >= len(result.top_logprobs):
        return ()
    return result.top_logprobs[position]


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Parting:
    """A token-level parting's context and the baseline's top-1/top-2 margin there, that request."""

    context: str  # context_key
    margin: float | None


def met_elsewhere(
    prompt_key: str,
    prefix: tuple[int, ...],
    baseline_token: int,
    answers: Iterable[tuple[str, str, tuple[int, ...]]],
    partings: Iterable[Parting],
    context: str,
) -> list[str]:
    """How every judged answer that reached a context chose there, per config: "eagle3-decode:
    767 (the baseline's) 12x, 359 2x, 335 1x" (`answers`: config, prompt_digest, output ids; an
    answer reached the context if its prompt_key matches and it holds the baseline's tokens before it),
    and the baseline's margins there where they differed between requests. Empty for a context
    one answer reached. Hypothesis's replays of a failing case are answers too, and counted."""
    i = len(prefix)
    chose: dict[str, Counter[int]] = {}
    for config, digest, ids in answers:
        if digest == prompt_key and len(ids) > i and tuple(ids[:i]) == prefix:
            chose.setdefault(config, Counter())[ids[i]] += 1
    if sum(c.total() for c in chose.values()) < 2:
        return []
    def said(token: int, n: int) -> str:
        return f"{token} (the baseline's) {n}x" if token == baseline_token else f"{token} {n}x"

    # the baseline's token first, then the most chosen
    lines = [
        f"{config}: "
        + ", ".join(said(t, n) for t, n in sorted(counts.items(), key=lambda kv: (kv[0] != baseline_token, -kv[1], kv[0])))
        for config, counts in sorted(chose.items())
    ]
    margins = sorted({p.margin for p in partings if p.context == context and p.margin is not None})
    if len(margins) > 1:
        lines.append(
            "the baseline's top-1/top-2 margin there differed between requests: " + ", ".join(f"{m:.4g}" for m in margins)
        )
    return lines
