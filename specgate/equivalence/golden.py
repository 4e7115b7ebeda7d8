"""The reference's golden answers as stored data: written into a stored baseline, read back checked.

A deployment that takes its reference from the stored baseline (`launch.reference_from =
"stored"`) checks equivalence against answers the reference gave when the baseline was
recorded: a fixed list of cases, each with the reference's token ids, text, finish and top
logprobs (at least the top 2, which the near-tie rule needs). They decide a merge without the
reference running, so a broken or hand-edited entry is refused with its field named, never
read as an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, field_validator

from specgate.client import FinishReason, GenerateResult
from specgate.documents import meaning, problem
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
        "token_texts": [list(p) for p in result.token_texts],
    }


_Count = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
_TokenId = Annotated[int, Strict(), Field(ge=0)]
_Logprob = Annotated[float, Strict(), Field(le=0, allow_inf_nan=False)]
# JSON has no tuples: a [token id, logprob] list is read as the pair (its parts stay strict).
_Pair = Annotated[
    tuple[_TokenId, _Logprob],
    Strict(False),
    meaning("[token id, logprob]", lambda v: isinstance(v, list) and len(v) == 2, before=True),
]


_Text = Annotated[
    tuple[_TokenId, str],
    Strict(False),
    meaning("[token id, text]", lambda v: isinstance(v, list) and len(v) == 2, before=True),
]


class GoldenCase(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    label: str
    text: str
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    stop: list[str]
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
    # The request features and their sampling params (GenerationCase.as_dict), where it drew any.
    features: list[str] = []
    params: dict[str, Any] = {}

    def case(self) -> GenerationCase:
        return GenerationCase.from_dict(self.model_dump())


class StoredAnswer(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    output_ids: list[_TokenId]
    text: str
    # Not tied to len(output_ids): releases differ there, and the comparison itself reads both.
    completion_tokens: _Count
    prompt_tokens: _Count = 0
    finish_reason: dict[str, Any]
    # Per output position, [token id, logprob] pairs, best first.
    top_logprobs: list[list[_Pair]]
    # [token id, text] of the tokens listed there, where the server gave their text (absent from
    # files written before it was asked for): a failure names the words, not only the ids.
    token_texts: list[_Text] = []

    @field_validator("finish_reason")
    @classmethod
    def _a_finish(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("type"), str):
            raise ValueError(f"expected {{'type': ..., 'matched': ...}}, got {value!r}")
        return value


class GoldenEntry(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    case: GoldenCase
    answer: StoredAnswer


class GoldenDocument(BaseModel):
    """The `golden` table of a stored baseline (format /2): what `GoldenAnswers.as_dict` writes."""

    model_config = ConfigDict(extra="allow", strict=True)
    reference: Annotated[str, meaning("the reference config's name", bool)]  # the config that answered
    args_digest: Annotated[str, meaning("the reference's launch digest", bool)]  # its launch digest then
    top_logprobs: Annotated[int, Field(ge=2, le=1000)]  # the near-tie rule reads top-1 minus top-2
    case_settings: Annotated[str, meaning("the digest of the case settings", bool)] | None = None
    cases: Annotated[list[GoldenEntry], Field(min_length=1)]


def _result(answer: StoredAnswer, case: GenerationCase, top_logprobs: int) -> GenerateResult:
    return GenerateResult(
        # The request the case makes: reproducers and reports show what was asked, as when it ran.
        request=case.request(top_logprobs),
        text=answer.text,
        output_ids=tuple(answer.output_ids),
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        finish_reason=FinishReason.parse(answer.finish_reason),
        e2e_s=0.0,
        server_e2e_s=None,
        top_logprobs=tuple(tuple(pos) for pos in answer.top_logprobs),
        token_texts=tuple(answer.token_texts),
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
    try:
        doc = GoldenDocument.model_validate(raw)
    except ValidationError as exc:
        located = problem(exc, at=field)  # "field 'golden.cases[0]...': expected ..."
        where, _, what = located.partition("': ")
        raise GoldenFileError(where.removeprefix("field '"), what) from None
    entries: list[GoldenAnswer] = []
    first_at: dict[str, int] = {}
    for i, entry in enumerate(doc.cases):
        at = f"{field}.cases[{i}]"
        # The near-tie rule reads top-1 minus top-2: a position with fewer would fail every flip there.
        for j, pos in enumerate(entry.answer.top_logprobs):
            if len(pos) < 2:
                raise GoldenFileError(
                    f"{at}.answer.top_logprobs[{j}]", f"expected at least 2 [token id, logprob] pairs, got {len(pos)}"
                )
        case = entry.case.case()
        answer = _result(entry.answer, case, doc.top_logprobs)
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
    return GoldenAnswers(doc.reference, doc.args_digest, doc.top_logprobs, tuple(entries), doc.case_settings)
