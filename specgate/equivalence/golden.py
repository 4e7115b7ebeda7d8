"""The reference's golden answers as stored data: written into a stored baseline, read back checked.

A deployment that takes its reference from the stored baseline (`launch.reference_from =
"stored"`) checks equivalence against answers the reference gave when the baseline was
recorded: a fixed list of cases, each with the reference's token ids, text, finish and top
logprobs (at least the top 2, which the near-tie rule needs). They decide a merge without the
reference running, so a broken or hand-edited entry is refused with its field named, never
read as an answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specgate.client import FinishReason, GenerateResult
from specgate.equivalence.cases import GenerationCase
from specgate.errors import GoldenFileError

MAX_TOKENS = 1 << 20
MAX_CONCURRENCY = 4096


@dataclass(frozen=True)
class GoldenAnswer:
    case: GenerationCase
    answer: GenerateResult


@dataclass(frozen=True)
class GoldenAnswers:
    """The reference's answers for a fixed case list, and what they are valid for."""

    reference: str  # the config that answered
    args_digest: str  # its launch digest then: answers of other flags are another server's
    top_logprobs: int
    entries: tuple[GoldenAnswer, ...]
    # What the cases were drawn from (specgate.equivalence.golden.case_settings_digest): answers
    # to other stop strings, lengths or prompts check nothing this deployment asks. None: unknown.
    case_settings: str | None = None

    def by_key(self) -> dict[str, GenerateResult]:
        return {e.case.key: e.answer for e in self.entries}

    def as_dict(self) -> dict:
        return {
            "reference": self.reference,
            "args_digest": self.args_digest,
            "top_logprobs": self.top_logprobs,
            "case_settings": self.case_settings,
            "cases": [{"case": e.case.as_dict(), "answer": result_to_dict(e.answer)} for e in self.entries],
        }


def result_to_dict(result: GenerateResult) -> dict:
    return {
        "request": result.request.payload(),
        "text": result.text,
        "output_ids": list(result.output_ids),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "finish_reason": {"type": result.finish_reason.kind, "matched": result.finish_reason.matched},
        "top_logprobs": [[list(p) for p in pos] for pos in result.top_logprobs or ()],
    }


def _whole(field: str, value: object, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise GoldenFileError(field, f"expected a whole number from {minimum} to {maximum}, got {value!r}")
    return value


def _case(field: str, raw: object) -> GenerationCase:
    if not isinstance(raw, dict):
        raise GoldenFileError(field, f"expected an object, got {raw!r}")
    label, text, stop = raw.get("label"), raw.get("text"), raw.get("stop")
    if not isinstance(label, str) or not isinstance(text, str):
        raise GoldenFileError(field, "expected 'label' and 'text' strings")
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise GoldenFileError(f"{field}.stop", f"expected a list of strings, got {stop!r}")
    return GenerationCase(
        label,
        text,
        _whole(f"{field}.max_new_tokens", raw.get("max_new_tokens"), 1, MAX_TOKENS),
        tuple(stop),
        _whole(f"{field}.concurrency", raw.get("concurrency"), 1, MAX_CONCURRENCY),
    )


def _top_logprobs(field: str, raw: object, wanted: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    if not isinstance(raw, list):
        raise GoldenFileError(field, f"expected a list per output position, got {str(raw)[:80]}")
    out = []
    for i, pos in enumerate(raw):
        # The near-tie rule reads top-1 minus top-2: a position with fewer would fail every flip there.
        if not isinstance(pos, list) or len(pos) < min(2, wanted):
            raise GoldenFileError(f"{field}[{i}]", f"expected at least 2 [token id, logprob] pairs, got {str(pos)[:80]}")
        pairs = []
        for j, pair in enumerate(pos):
            ok = isinstance(pair, list) and len(pair) == 2
            token, logprob = (pair[0], pair[1]) if ok else (None, None)
            if not ok or isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise GoldenFileError(f"{field}[{i}][{j}]", f"expected [token id, logprob], got {pair!r}")
            if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or not math.isfinite(logprob) or logprob > 0:
                raise GoldenFileError(f"{field}[{i}][{j}]", f"expected a finite logprob <= 0, got {logprob!r}")
            pairs.append((token, float(logprob)))
        out.append(tuple(pairs))
    return tuple(out)


def _answer(field: str, raw: object, case: GenerationCase, top_logprobs: int) -> GenerateResult:
    if not isinstance(raw, dict):
        raise GoldenFileError(field, f"expected an object, got {str(raw)[:80]}")
    ids = raw.get("output_ids")
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
        raise GoldenFileError(f"{field}.output_ids", f"expected a list of token ids, got {str(ids)[:80]}")
    text = raw.get("text")
    if not isinstance(text, str):
        raise GoldenFileError(f"{field}.text", f"expected a string, got {text!r}")
    # Not tied to len(output_ids): releases differ there, and the comparison itself reads both.
    completion = _whole(f"{field}.completion_tokens", raw.get("completion_tokens"), 0, MAX_TOKENS)
    finish = raw.get("finish_reason")
    if not isinstance(finish, dict) or not isinstance(finish.get("type"), str):
        raise GoldenFileError(f"{field}.finish_reason", f"expected {{'type': ..., 'matched': ...}}, got {finish!r}")
    return GenerateResult(
        # The request the case makes: reproducers and reports show what was asked, as when it ran.
        request=case.request(top_logprobs),
        text=text,
        output_ids=tuple(ids),
        prompt_tokens=_whole(f"{field}.prompt_tokens", raw.get("prompt_tokens", 0), 0, MAX_TOKENS),
        completion_tokens=completion,
        finish_reason=FinishReason.parse(finish),
        e2e_s=0.0,
        server_e2e_s=None,
        top_logprobs=_top_logprobs(f"{field}.top_logprobs", raw.get("top_logprobs"), top_logprobs),
    )


def case_settings_digest(deployment) -> str:  # noqa: ANN001 - a Deployment (deployment imports this package)
    """The settings equivalence cases are drawn from: their lengths, stop strings, batching,
    logprobs, the prompts and their chat format."""
    import hashlib
    import json

    eq, wl = deployment.equivalence, deployment.workload
    doc = {
        "max_new_tokens": eq.max_new_tokens,
        "stop_strings": list(eq.stop_strings),
        "concurrency": list(eq.concurrency),
        "top_logprobs": eq.top_logprobs,
        "prompt_format": wl.prompt_format,
        "prompts": [[p.label, [[m.role, m.content] for m in p.messages]] for p in wl.prompts()],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def parse_golden(raw: object, field: str = "golden") -> GoldenAnswers:
    """Checked for meaning, each problem naming its field (GoldenFileError)."""
    if not isinstance(raw, dict):
        raise GoldenFileError(field, f"expected an object, got {str(raw)[:80]}")
    reference, digest = raw.get("reference"), raw.get("args_digest")
    if not isinstance(reference, str) or not reference:
        raise GoldenFileError(f"{field}.reference", f"expected the reference config's name, got {reference!r}")
    if not isinstance(digest, str) or not digest:
        raise GoldenFileError(f"{field}.args_digest", f"expected the reference's launch digest, got {digest!r}")
    top = _whole(f"{field}.top_logprobs", raw.get("top_logprobs"), 2, 1000)
    cases = raw.get("cases")
    if not isinstance(cases, list) or not cases:
        raise GoldenFileError(f"{field}.cases", "expected a non-empty list of {case, answer}")
    settings = raw.get("case_settings")
    if settings is not None and (not isinstance(settings, str) or not settings):
        raise GoldenFileError(f"{field}.case_settings", f"expected the digest of the case settings, got {settings!r}")
    entries: list[GoldenAnswer] = []
    first_at: dict[str, int] = {}
    for i, entry in enumerate(cases):
        at = f"{field}.cases[{i}]"
        if not isinstance(entry, dict):
            raise GoldenFileError(at, f"expected an object, got {str(entry)[:80]}")
        case = _case(f"{at}.case", entry.get("case"))
        answer = _answer(f"{at}.answer", entry.get("answer"), case, top)
        # One request, one answer (a batched copy of a case asks the same): two that differ
        # cannot both be the reference's, and neither may be dropped in silence.
        if case.key in first_at:
            earlier = entries[first_at[case.key]].answer
            if (earlier.output_ids, earlier.text) != (answer.output_ids, answer.text):
                raise GoldenFileError(
                    f"{at}.answer", f"differs from {field}.cases[{first_at[case.key]}]'s answer to the same request"
                )
        else:
            first_at[case.key] = i
        entries.append(GoldenAnswer(case, answer))
    return GoldenAnswers(reference, digest, top, tuple(entries), settings)
