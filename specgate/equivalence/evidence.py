"""The answers behind a failed or excused equivalence judgment, kept so they can be judged again.

A report's failure lines and curl commands say what differed and how to ask again, but asking
again needs the servers. When the check learns a new shape (as it did after an H200 run found
SGLang taking stop strings in list order, a failure it could then only call "another defect"),
yesterday's red should be re-judged from what the servers said, not re-run. So report.json keeps,
per config, the first KEPT_FAILED failing, KEPT_TOLERATED excused and KEPT_FLIPS near-tie answers
with their baseline: the case, both texts, token ids, finish reasons, and the baseline's top
logprobs (a parting's margin is read from them). A batch of identical answers is one pair with
its `copies`, so the cap counts distinct answers and a re-judgment can say how many of the run's
failures it covers. `specgate rejudge` runs them through today's check.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from specgate.client import FinishReason, GenerateResult
from specgate.equivalence import features
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.check import EquivalenceStats, Outcome, compare

KEPT_FAILED = 5  # distinct failing answers kept per config
KEPT_TOLERATED = 5  # distinct answers excused by a declared tolerance, kept per config
KEPT_FLIPS = 5  # distinct near-tie flips kept per config (a smaller tie margin may call them decisive)
PROMPT_CHARS_KEPT = 8000  # of a case's prompt (context-length edges run to 100k+ characters)
_FAILING = ("divergence", "invariant")
# What makes two judged answers the same one (a batch answers alike): all but the count.
_IDENTITY = ("case", "kind", "shape", "baseline", "speculative")


# What is read back: report.model's KeptAnswer, KeptCase and KeptPair (a layer above this one),
# read-only.
class KeptAnswerView(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def output_ids(self) -> Sequence[int]: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def matched(self) -> int | str | None: ...
    @property
    def top_ids(self) -> Sequence[Sequence[int]] | None: ...
    @property
    def top_logprobs(self) -> Sequence[Sequence[float]] | None: ...


class KeptCaseView(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def max_new_tokens(self) -> int: ...
    @property
    def stop(self) -> Sequence[str]: ...
    @property
    def concurrency(self) -> int: ...


class KeptPairView(Protocol):
    @property
    def case(self) -> KeptCaseView: ...
    @property
    def kind(self) -> str: ...
    @property
    def shape(self) -> str | None: ...
    @property
    def copies(self) -> int: ...
    @property
    def baseline(self) -> KeptAnswerView: ...
    @property
    def speculative(self) -> KeptAnswerView: ...


def kept_answer(answer: GenerateResult, logprobs: bool) -> dict[str, Any]:
    """One server's answer as report.json keeps it (report.model.KeptAnswer)."""
    tops = answer.top_logprobs if logprobs and answer.top_logprobs else None
    matched = answer.finish_reason.matched
    return {
        "text": answer.text,
        "output_ids": list(answer.output_ids),
        "completion_tokens": answer.completion_tokens,
        "finish_reason": answer.finish_reason.kind,
        # A bool is no stop (JSON would write it as one); anything else unexpected is kept as text.
        "matched": matched if isinstance(matched, int | str) and not isinstance(matched, bool) else None,
        "top_ids": None if tops is None else [[int(t) for t, _ in position] for position in tops],
        "top_logprobs": None if tops is None else [[float(v) for _, v in position] for position in tops],
    }


def kept_pair(case: GenerationCase, outcome: Outcome, baseline: GenerateResult, spec: GenerateResult) -> dict[str, Any]:
    """A judged answer and its baseline (report.model.KeptPair). The baseline's top logprobs are
    kept (the margin where the answers part is read from them); the speculative server's are not
    needed to judge."""
    return {
        "case": {
            "label": case.label,
            # Judging reads the prompt only to name where a parting happened; the whole text of a
            # long case is in the replay file or the golden answers.
            "text": case.text[:PROMPT_CHARS_KEPT],
            "text_chars": len(case.text),
            "max_new_tokens": case.max_new_tokens,
            "stop": list(case.stop),
            "concurrency": case.concurrency,
            "features": list(case.features),
            "params": case.sampling_params,
        },
        "kind": outcome.kind,
        "shape": outcome.shape,
        "copies": 1,
        "baseline": kept_answer(baseline, logprobs=True),
        "speculative": kept_answer(spec, logprobs=False),
    }


def _category(kind: str) -> str:
    return "failing" if kind in _FAILING else kind


_CAPS = {"failing": KEPT_FAILED, "tolerated": KEPT_TOLERATED, "near-tie-flip": KEPT_FLIPS}


def keep(
    stats: EquivalenceStats, case: GenerationCase, outcome: Outcome, baseline: GenerateResult, spec: GenerateResult
) -> None:
    """Keep this judged answer in `stats` if it failed, was excused or flipped at a near tie: a
    copy of one already kept counts on it, a new one is kept up to its category's cap."""
    category = _category(outcome.kind)
    if category not in _CAPS:
        return
    pair = kept_pair(case, outcome, baseline, spec)
    for held in stats.kept:
        if all(held[k] == pair[k] for k in _IDENTITY):
            held["copies"] += 1
            return
    if sum(1 for held in stats.kept if _category(held["kind"]) == category) < _CAPS[category]:
        stats.kept.append(pair)


def covered(pairs: Iterable[KeptPairView], category: str) -> int:
    """How many of the run's answers of this category ("failing", "tolerated", "near-tie-flip")
    the kept pairs stand for."""
    return sum(p.copies for p in pairs if _category(p.kind) == category)


@dataclass(frozen=True)
class Rejudged:
    label: str
    then: str  # the kind and shape the run gave
    now: Outcome


def _answer(kept: KeptAnswerView, case: GenerationCase) -> GenerateResult:
    tops = None
    if kept.top_ids is not None and kept.top_logprobs is not None:
        # The model checked that the two lists align (report.model.KeptAnswer).
        tops = tuple(
            tuple(zip(ids, values, strict=True))
            for ids, values in zip(kept.top_ids, kept.top_logprobs, strict=True)
        )
    return GenerateResult(
        request=case.request(),
        text=kept.text,
        output_ids=tuple(kept.output_ids),
        prompt_tokens=0,
        completion_tokens=kept.completion_tokens,
        finish_reason=FinishReason(kept.finish_reason, kept.matched),
        e2e_s=0.0,
        server_e2e_s=None,
        top_logprobs=tops,
    )


def describe(kind: str, shape: str | None) -> str:
    return kind if shape is None else f"{kind} ({shape})"


def rejudge(
    pair: KeptPairView,
    tie_margin: float,
    tolerate: tuple[str, ...],
    max_tokens_per_step: int | None,
) -> Rejudged:
    """A kept pair (report.model.KeptPair) judged by today's check under the given settings."""
    c = pair.case
    # The kept speculative answer is one choice (the failing one, for n > 1): judged alone.
    params = {k: v for k, v in (getattr(c, "params", None) or {}).items() if k != "n"}
    named = tuple(f for f in getattr(c, "features", None) or () if f != features.N_CHOICES)
    case = GenerationCase(c.label, c.text, c.max_new_tokens, tuple(c.stop), c.concurrency, named, features.canonical(params))
    outcome = compare(
        case,
        _answer(pair.baseline, case),
        _answer(pair.speculative, case),
        tie_margin,
        "<baseline, from report.json>",
        "<speculative, from report.json>",
        tolerate,
        max_tokens_per_step=max_tokens_per_step,
    )
    return Rejudged(c.label, describe(pair.kind, pair.shape), outcome)
