"""Is a speculative output the greedy baseline's output? Strict where it can be.

The rule: token for token equal, except that at a position where the baseline's
top-1/top-2 logprob margin is below the deployment's tie margin, the speculative
server may pick the other near-tied token (bf16 verify and decode kernels can order a
near-tie differently); from there the continuations legitimately differ. Everything
else is a decisive divergence and fails, with the position, both tokens, the margin,
where the speculative token stood in the baseline's ranking there (partings.py) and curl
reproducers. Invariants that hold whatever the numerics (max_new_tokens, no
text past a stop string) are checked first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from specgate.client import GenerateResult, curl_command
from specgate.equivalence import features
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.known import (
    PAST_STOP,
    PAST_STOP_AT_LENGTH,
    STOP_LIST_ORDER,
    STOP_OVERSHOOT,
    UNCLASSIFIED,
)
from specgate.equivalence.partings import Parting, choices, context_key, prompt_digest, standing, tops_at


@dataclass(frozen=True)
class NearTieFlip:
    case_label: str
    position: int
    baseline_token: int
    spec_token: int
    margin: float
    spec_gap: float | None = None  # the logprob of the baseline's token minus the speculative token's
    context: str = ""  # partings.context_key: the prompt and the baseline's tokens before the flip


@dataclass(frozen=True)
class TokenDivergence:
    """A decisive parting at a token, with what the baseline's ranking said there."""

    case_label: str
    position: int
    baseline_token: int
    spec_token: int
    margin: float | None  # the baseline's top-1/top-2 margin there (None: no top logprobs)
    spec_rank: int | None  # the speculative token's rank among the baseline's top logprobs
    spec_gap: float | None  # the logprob of the baseline's token minus the speculative token's
    baseline_choices: str  # partings.choices
    context: str
    second_opinion: str = ""  # what the speculative server said asked again with logprobs (second_opinion.py)
    prompt_digest: str = ""  # partings.prompt_digest of the case's prompt
    prefix: tuple[int, ...] = ()  # the baseline's tokens before the parting


@dataclass(frozen=True)
class Outcome:
    """One speculative answer judged against the baseline."""

    kind: str  # "match", "near-tie-flip", "tolerated", "divergence", "invariant"
    message: str = ""
    flip: NearTieFlip | None = None
    tokens_compared: int = 0
    margin: float | None = None  # the baseline's top-1/top-2 margin where the outputs parted, if known
    shape: str | None = None  # a named failure shape (specgate.equivalence.known), for known defects
    divergence: TokenDivergence | None = None  # a decisive parting at a token, described
    # The request feature(s) a failure is put down to (features.FEATURES; "a+b" where the case drew
    # several and the evidence cannot tell which): None for a case without features.
    feature: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind in ("match", "near-tie-flip", "tolerated")


@dataclass
class EquivalenceStats:
    """Tallies for the report, per speculative config."""

    cases: int = 0
    requests: int = 0
    matches: int = 0
    tokens_compared: int = 0
    flips: list[NearTieFlip] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    divergence_margins: list[float] = field(default_factory=list)  # every token-level parting: calibrates tie_margin
    tolerated: list[str] = field(default_factory=list)  # declared known differences, first line each
    # The first failures in full (prompt, position, tokens, margin, curl per server) for the report.
    failure_details: list[str] = field(default_factory=list)
    shapes: dict[str, int] = field(default_factory=dict)  # named shapes of failures and tolerated answers
    # Cases with no known answer of the baseline (a stored reference without them): NOT CHECKED.
    not_checked: list[str] = field(default_factory=list)
    # The edge cases checked (cases.edge_name), so that a report says which ran, not only how many.
    edges: list[str] = field(default_factory=list)
    # Edge requests this config refused that the reference answered (oracle.check): NOT CHECKED.
    refused: list[str] = field(default_factory=list)
    divergences: list[TokenDivergence] = field(default_factory=list)  # decisive partings at a token
    # Every judged answer: (partings.prompt_digest of its prompt, its output ids), so that a parting
    # can say how every answer that reached its context chose there, the ones that agreed included.
    answers: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    # The first failing, excused and near-tie answers with their baseline
    # (specgate.equivalence.evidence), for report.json: judged again without the servers.
    kept: list[dict] = field(default_factory=list)
    # Seconds each request feature's cases took (the case's features, or "none"), asking both servers.
    seconds_by_feature: dict[str, float] = field(default_factory=dict)

    def answered(self, prompt: str, output_ids: tuple[int, ...]) -> None:
        self.answers.append((prompt_digest(prompt), tuple(output_ids)))

    def partings(self) -> list[Parting]:
        """Every token-level parting's context and margin, flips and decisive ones."""
        return [Parting(f.context, f.margin) for f in self.flips if f.context] + [
            Parting(d.context, d.margin) for d in self.divergences
        ]

    def add(self, outcome: Outcome, case_label: str | None = None) -> None:
        """Count one judged answer; the lines kept for the report name its case where given (a
        first line alone says what differed, not on which prompt)."""
        self.requests += 1
        if outcome.shape is not None and outcome.kind != "match":
            self.shapes[outcome.shape] = self.shapes.get(outcome.shape, 0) + 1
        self.tokens_compared += outcome.tokens_compared
        if outcome.margin is not None:
            self.divergence_margins.append(outcome.margin)
        if outcome.kind == "match":
            self.matches += 1
        elif outcome.flip is not None:
            self.flips.append(outcome.flip)
        elif outcome.kind == "tolerated":
            self.tolerated.append(_line(outcome.message.splitlines()[0], case_label))
        else:
            self.failures.append(_line(outcome.message.splitlines()[0] if outcome.message else outcome.kind, case_label))
            if outcome.divergence is not None:
                self.divergences.append(outcome.divergence)
            if len(self.failure_details) < 5:
                self.failure_details.append(outcome.message or outcome.kind)


def _line(first_line: str, case_label: str | None) -> str:
    return f"`{case_label}`: {first_line}" if case_label else first_line


def _margin_at(baseline: GenerateResult, i: int, tie_margin: float) -> tuple[float | None, set[int]]:
    """(top-1 minus top-2 logprob, the tokens tied with top-1 within the tie margin) at i.

    Only tokens that close to top-1 may be swapped for it: with top_logprobs > 2 the
    list also holds tokens far below, which no rounding can promote."""
    tops = tops_at(baseline, i)
    if len(tops) < 2:
        return None, set()
    best = tops[0][1]
    return best - tops[1][1], {tok for tok, lp in tops if best - lp < tie_margin}


def _context(text_a: str, text_b: str, width: int = 60) -> str:
    common = os.path.commonprefix([text_a, text_b])
    start = max(0, len(common) - width)
    return (
        f"  shared text ends: {common[start:]!r}\n"
        f"  baseline goes on: {text_a[len(common) : len(common) + width]!r}\n"
        f"  speculative goes: {text_b[len(common) : len(common) + width]!r}"
    )


def invariant_violations(case: GenerationCase, result: GenerateResult, who: str) -> list[str]:
    return [f"{who} {problem}" for _, problem in _violations(case, result)] + [
        f"{who} (request feature {feature}) {problem}" for feature, _, problem in feature_violations(case, result)
    ]


def feature_violations(case: GenerationCase, result: GenerateResult) -> list[tuple[str, str, str]]:
    """What plain decoding never does under the case's request features, found in one answer:
    (feature, what was broken and where, the words for it). The rest of each feature's oracle is
    the token comparison against the plain answer (same penalties, same bias, same end)."""
    params = case.sampling_params
    ids = tuple(result.output_ids)
    out: list[tuple[str, str, str]] = []
    least = int(params.get("min_new_tokens", 0))
    if least and result.finish_reason.kind == "stop" and result.completion_tokens < least:
        words = (
            f"ended on a stop ({result.finish_reason}) after {result.completion_tokens} tokens, "
            f"before min_new_tokens = {least}"
        )
        out.append((features.MIN_NEW_TOKENS, words, words))
    for token in sorted(features.banned_ids(params)):
        if token in ids:
            at = ids.index(token)
            words = f"holds token {token} at output position {at}, which logit_bias bans ({params['logit_bias'][str(token)]:g})"
            out.append((features.LOGIT_BIAS, f"banned {token} at {at}", words))
    # Only an answer that says it stopped on one of the request's stop ids: ids past a stop id with
    # a length finish are the past-stop-at-length shape, which the token comparison names.
    matched = result.finish_reason.matched
    stop_ids = {int(t) for t in params.get("stop_token_ids", ()) if not features.is_anchor(t)}
    if result.finish_reason.kind == "stop" and isinstance(matched, int) and matched in stop_ids and matched in ids:
        where = ids.index(matched)
        if where < len(ids) - 1:
            words = (
                f"keeps {len(ids) - where - 1} token id(s) past stop token id {matched} at output position {where} "
                f"(finish_reason {result.finish_reason}; text ends {result.text[-40:]!r})"
            )
            out.append((features.STOP_TOKEN_IDS, f"past stop id {matched} at {where}", words))
    regex = params.get("regex")
    if isinstance(regex, str):
        problem = features.grammar_problem(regex, result.text)
        if problem is not None:
            out.append((features.GRAMMAR, f"grammar {regex}", problem))
    return out


def _first_difference(baseline: GenerateResult, spec: GenerateResult) -> str:
    """The first token where two answers part, with both texts from there."""
    a, b = baseline.output_ids, spec.output_ids
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))

    def told(ids: tuple[int, ...]) -> str:
        if i >= len(ids):
            return "the end"
        text = baseline.token_text(ids[i])  # the baseline's logprobs name the tokens they listed
        return f"token {ids[i]}" + (f" {text!r}" if text is not None else "")

    return (
        f"  first differing token at output position {i}: baseline {told(a)}, speculative {told(b)}\n"
        f"{_context(baseline.text, spec.text)}"
    )


def _violations(case: GenerationCase, result: GenerateResult, strict: bool = False) -> list[tuple[str, str]]:
    """Each invariant the answer breaks: (what was broken and where, the words for it). Two
    servers that break the same invariant at the same place share the first part, whatever
    text followed (that text is the token comparison's business). A stop string completed by
    the last allowed token is SGLang's behaviour, not a break, unless `strict` (the baseline
    doing so still tells where the speculative answer may do the same)."""
    problems = []
    if result.completion_tokens > case.max_new_tokens:
        words = f"returned {result.completion_tokens} tokens with max_new_tokens = {case.max_new_tokens}"
        problems.append((words, words))
    if len(result.output_ids) and len(result.output_ids) != result.completion_tokens:
        words = f"returned {len(result.output_ids)} output_ids but meta_info.completion_tokens = {result.completion_tokens}"
        problems.append((words, words))
    # With min_new_tokens M a stop string completed before the M-th token is generated text (the
    # finish check waits): where it lies in tokens is unknown here, so the token comparison judges.
    held = int(case.sampling_params.get("min_new_tokens", 0)) > 1
    for stop in () if held else case.stop:
        if stop in result.text:
            at = result.text.find(stop)
            if not strict and _completed_by_the_last_allowed_token(case, result, stop, at):
                continue
            if _ended_by_a_stop_id_with_that_text(result, stop, at):
                continue
            problems.append(
                (
                    f"past stop {stop!r} at char {at}",
                    f"text runs past stop string {stop!r}: found at char {at}, "
                    f"followed by {result.text[at : at + 40]!r} (finish_reason {result.finish_reason})",
                )
            )
    return problems


def _ended_by_a_stop_id_with_that_text(result: GenerateResult, stop: str, at: int) -> bool:
    """A stop token id (features.STOP_TOKEN_IDS) whose text is also a stop string ended the
    answer: the server checks token ids first and keeps the token's text, plain decoding alike."""
    matched = result.finish_reason.matched
    return (
        result.finish_reason.kind == "stop"
        and isinstance(matched, int)
        and not isinstance(matched, bool)
        and at == len(result.text) - len(stop)
    )


def _completed_by_the_last_allowed_token(case: GenerationCase, result: GenerateResult, stop: str, at: int) -> bool:
    """SGLang checks max_new_tokens before stop strings for every request, plain or speculative:
    a stop string that the last allowed token completes stays in the text and the answer ends on
    length. Plain decoding does the same, so this is not speculation's doing; it matters where a
    near-tie flip sent the speculative answer down a path that ends so and the baseline's did not
    (seen on the H200, 0.5.14: `chat-05`, max_new_tokens 10, '.' as the 10th token)."""
    # The occurrence lies in the stop string that ends the text (so "\n" inside a final "\n\n" too).
    ends_on_a_stop = any(result.text.endswith(s) and at >= len(result.text) - len(s) for s in case.stop)
    return (
        ends_on_a_stop
        and result.finish_reason.kind == "length"
        and result.completion_tokens >= case.max_new_tokens
    )


def _is_stop_overshoot(case: GenerationCase, baseline: GenerateResult, spec: GenerateResult) -> bool:
    """Exactly the shape seen on SGLang 0.5.11: both answers stopped on one of the request's stop
    strings with the same text, and the speculative one carries extra token ids (within
    max_new_tokens) after the baseline's. Not at the first token: SGLang checks the prefill's
    token alone, so PR #23802's miss cannot happen there (a server that misses it and meets the
    same stop later is another defect)."""
    return (
        len(baseline.output_ids) >= 2
        and baseline.finish_reason.kind == "stop"
        and baseline.finish_reason.matched in case.stop
        and spec.finish_reason.kind == "stop"
        and spec.finish_reason.matched == baseline.finish_reason.matched
        and spec.text == baseline.text
        and len(baseline.output_ids) < len(spec.output_ids) <= case.max_new_tokens
    )


# The fewest tokens a verify step of any speculative config can accept (--speculative-num-steps
# >= 1, plus the verified token): where a config's args do not give its step size, only a run
# that fits a step this small is known to fit one of its steps.
MIN_TOKENS_PER_STEP = 2
# SGLang's finish check decodes the last stop_str_max_len + 1 tokens of a step (stop_str_max_len:
# the longest stop string's length in tokens, at least 1): a stop string ending at most one token
# before the end of the step's tokens is always in that tail, whatever the release.
TAIL_TOKENS = 2


def _one_step_holds(tokens: int, max_tokens_per_step: int | None) -> bool | None:
    """Whether one verify step can have accepted `tokens` tokens: True or False where the step
    size says, and where it is unknown True only for what any step holds, None otherwise."""
    if max_tokens_per_step is not None:
        return tokens <= max_tokens_per_step
    return True if tokens <= MIN_TOKENS_PER_STEP else None


def _stop_in_the_step_that_hit_the_limit(
    case: GenerationCase, baseline: GenerateResult, spec: GenerateResult, max_tokens_per_step: int | None
) -> bool | None:
    """The baseline stopped on a stop string at token k; the speculative answer has the same
    tokens up to k and ended on max_new_tokens within one verify step's worth of tokens from
    the stop's (the stop token and those after it): the stop token was accepted in the step that
    reached the limit. Not at the first token (SGLang checks the prefill's token alone, and ends
    there on the stop). None where only the step size, unknown, could tell. (A stop string missed
    earlier, as PR #23802's, lets the answer run on for many steps.)"""
    k = len(baseline.output_ids)
    if not (
        baseline.finish_reason.kind == "stop"
        and spec.finish_reason.kind == "length"
        and spec.completion_tokens >= case.max_new_tokens
        and k >= 2
        and tuple(spec.output_ids[:k]) == tuple(baseline.output_ids)
        and spec.completion_tokens >= k
    ):
        return False
    return _one_step_holds(spec.completion_tokens - k + 1, max_tokens_per_step)


def _ended_on_a_stop_listed_first(
    case: GenerationCase, baseline: GenerateResult, spec: GenerateResult, max_tokens_per_step: int | None
) -> bool | None:
    """The baseline stopped on stop string b at token k; the speculative answer has the same
    tokens up to k and b right after the baseline's text, then ended on stop string a, listed
    before b in the request, within one verify step's worth of tokens from b's (b's token and
    those after it): one step completed both, and the server took them in list order. Only what
    list order can produce: not at the first token (SGLang checks the prefill's token alone), not
    a stop listed after b, not a run of more than one step, not an a that the baseline's text
    would already have ended on or that the speculative text runs past, and no stop listed
    before a in what that step added (list order would have ended on it). None where only the
    step size, unknown, could tell. It cannot tell a different defect that misses b and ends on
    such an a within the same step (the report names list order)."""
    b, a = baseline.finish_reason.matched, spec.finish_reason.matched
    k = len(baseline.output_ids)
    if not (
        baseline.finish_reason.kind == "stop"
        and spec.finish_reason.kind == "stop"
        and isinstance(b, str)
        and isinstance(a, str)
        and a
        and b in case.stop
        and a in case.stop
        and case.stop.index(a) < case.stop.index(b)
        and k >= 2
        and tuple(spec.output_ids[:k]) == tuple(baseline.output_ids)
        and len(spec.output_ids) > k
        and spec.text.startswith(baseline.text + b)
        and a not in baseline.text + b
        and a not in spec.text
    ):
        return False
    step_text = spec.text[len(baseline.text) :] + a  # what the step added, up to and with a
    if not all(s and s not in step_text for s in case.stop[: case.stop.index(a)]):
        return False
    return _one_step_holds(len(spec.output_ids) - k + 1, max_tokens_per_step)


def _stop_shape(
    case: GenerationCase,
    baseline: GenerateResult,
    spec: GenerateResult,
    problems: list[str],
    max_tokens_per_step: int | None,
) -> tuple[str, str]:
    """(shape, why) of a speculative answer whose text runs past a stop string: the most specific
    known shape that what the answers show fits fully, tried in this order: past-stop-at-length
    (ended on max_new_tokens within the stop's verify step), stop-list-order (ended on a stop
    listed first within that step), past-stop (ran on at least two tokens past the baseline's
    stop, so the stop could leave the finish check's tail). UNCLASSIFIED where none fits, where
    a more specific one might and only the unknown step size could tell, or where the evidence
    cannot place the run-on (other tokens before the stop, a baseline that did not end on one):
    a named shape carries a known defect's PR, and a wrong one is worse than none."""
    b = baseline.finish_reason.matched
    k = len(baseline.output_ids)
    if not all("text runs past stop string" in p for p in problems):
        return UNCLASSIFIED, "the answer breaks more than a stop string; no known shape is only that"
    if baseline.finish_reason.kind != "stop" or not isinstance(b, str) or not b or b not in case.stop:
        return UNCLASSIFIED, (
            f"the baseline did not end on one of the request's stop strings ({baseline.finish_reason}): "
            "where the speculative answer ran past a stop cannot be placed against it"
        )
    if tuple(spec.output_ids[:k]) != tuple(baseline.output_ids) or not spec.text.startswith(baseline.text + b):
        return UNCLASSIFIED, (
            f"the speculative answer does not hold the baseline's {k} tokens and text up to its stop {b!r}: "
            "where it ran past the stop cannot be placed"
        )
    if k < 2:
        return UNCLASSIFIED, (
            f"the baseline's stop {b!r} is its first token, which SGLang checks alone (after the prefill): "
            "no known shape misses it"
        )
    at_length = _stop_in_the_step_that_hit_the_limit(case, baseline, spec, max_tokens_per_step)
    listed_first = _ended_on_a_stop_listed_first(case, baseline, spec, max_tokens_per_step)
    after = len(spec.output_ids) - k  # tokens after the one that completed the baseline's stop
    steps = "unknown (the config's args give no --speculative-num-steps)" if max_tokens_per_step is None else str(
        max_tokens_per_step
    )
    if at_length:
        return PAST_STOP_AT_LENGTH, (
            f"the baseline's tokens through its stop {b!r}, then {after} more to max_new_tokens: one verify step "
            f"(of at most {steps} tokens) accepted the stop and reached the limit"
        )
    if listed_first:
        return STOP_LIST_ORDER, (
            f"the baseline's tokens through its stop {b!r}, then {after} more to {spec.finish_reason.matched!r}, "
            f"listed before it: one verify step (of at most {steps} tokens) completed both"
        )
    if at_length is None or listed_first is None:
        other = PAST_STOP_AT_LENGTH if at_length is None else STOP_LIST_ORDER
        return UNCLASSIFIED, (
            f"{after} token(s) after the baseline's stop {b!r}: {other} if one verify step held them and the stop, "
            f"{PAST_STOP} if not; the verify step's size is {steps}"
        )
    missable = after >= TAIL_TOKENS and (max_tokens_per_step is None or max_tokens_per_step >= TAIL_TOKENS + 1)
    if missable:
        return PAST_STOP, (
            f"the baseline's tokens through its stop {b!r}, then {after} more: the stop left the tail of its "
            "verify step that the finish check decodes"
        )
    return UNCLASSIFIED, (
        f"{after} token(s) after the baseline's stop {b!r} in a verify step of at most {steps} tokens: the stop "
        "stayed in the tail every release's finish check decodes, so no known shape misses it"
    )


def _ends_on_its_stop(case: GenerationCase, baseline: GenerateResult, spec: GenerateResult) -> bool:
    """The baseline ended on a stop that is its own last token (a stop token id) or one of the
    request's stop strings, and the speculative text continues the baseline's: only then is the
    difference where the step ended, not what was generated."""
    matched = baseline.finish_reason.matched
    if isinstance(matched, bool) or matched is None:
        return False
    if isinstance(matched, int):
        own = bool(baseline.output_ids) and baseline.output_ids[-1] == matched
    else:
        own = matched in case.stop
    return own and spec.text.startswith(baseline.text)


def _declare_hint(shape: str) -> str:
    return f'\n(known SGLang behaviour? declare it for this config with tolerate = ["{shape}"] to count it without failing)'


def _known_shape(shape: str, message: str, tokens_compared: int, tolerate: tuple[str, ...]) -> Outcome:
    """A difference of a shape a config may declare known: counted where it is declared, a
    divergence (saying how to declare it) where it is not."""
    if shape in tolerate:
        return Outcome("tolerated", message, tokens_compared=tokens_compared, shape=shape)
    return Outcome("divergence", message + _declare_hint(shape), tokens_compared=tokens_compared, shape=shape)


def compare(
    case: GenerationCase,
    baseline: GenerateResult,
    spec: GenerateResult,
    tie_margin: float,
    baseline_url: str,
    spec_url: str,
    tolerate: tuple[str, ...] = (),
    api_key_env: str | None = None,
    max_tokens_per_step: int | None = None,
) -> Outcome:
    """One speculative answer (every choice of it, for sampling_params.n > 1) judged against the
    baseline's; a failure on a case with request features says which it is put down to."""
    args = (tie_margin, baseline_url, spec_url, tolerate, api_key_env, max_tokens_per_step)
    outcome = _compare_one(case, baseline, spec, *args)
    wanted = spec.request.choices
    if outcome.ok and wanted > 1:
        # n greedy choices are the plain answer each (and so each other's).
        got = 1 + len(spec.other_choices)
        if got != wanted:
            return _attributed(case, Outcome(
                "invariant",
                f"request feature n: the speculative server returned {got} choice(s) for n = {wanted}\n{_header(case)}",
                shape=UNCLASSIFIED,
            ), features.N_CHOICES)  # fmt: skip
        for j, other in enumerate(spec.other_choices, 1):
            judged = _compare_one(case, baseline, other, *args)
            if not judged.ok:
                first, _, rest = judged.message.partition("\n")
                words = (
                    f"choice {j} of n = {wanted} is not the plain answer (choice 0 is): {first}\n"
                    f"  choice 0 against choice {j}:\n{_first_difference(spec, other)}\n{rest}"
                )
                return _attributed(case, replace(judged, message=words), features.N_CHOICES)
    return _attributed(case, outcome)


def _header(case: GenerationCase) -> str:
    asked = ""
    if case.features:
        asked = f", request features {list(case.features)}, sampling params {case.sampling_params}"
    return (
        f"prompt {case.label!r}, max_new_tokens={case.max_new_tokens}, stop={list(case.stop)}, "
        f"concurrency={case.concurrency}{asked}"
    )


def _attributed(case: GenerationCase, outcome: Outcome, feature: str | None = None) -> Outcome:
    """A failure on a case with request features, put down to `feature` where the evidence names
    one, else to the features the case drew ("a+b"); a known shape is kept only where one fits
    (set by the checks above), otherwise it is "unclassified" (no known defect has this shape)."""
    if outcome.ok or not (case.features or feature):
        return outcome
    named = feature or outcome.feature or "+".join(case.features)
    message = outcome.message
    if not message.startswith("request feature"):
        message = f"request feature {named}: {message}"
    shape = outcome.shape
    if shape in (STOP_OVERSHOOT, PAST_STOP, PAST_STOP_AT_LENGTH) and features.MIN_NEW_TOKENS in case.features:
        # A stop held back by min_new_tokens fits these shapes as well as a missed stop does.
        first, _, rest = message.partition("\n")
        message = f"{first}\n{UNCLASSIFIED}: min_new_tokens held the stop back as well as a known defect would ({shape})\n{rest}"
        shape = UNCLASSIFIED
    if shape is None:
        first, _, rest = message.partition("\n")
        message = f"{first}\n{UNCLASSIFIED}: no known defect has this shape\n{rest}"
    return replace(outcome, message=message, feature=named, shape=shape or UNCLASSIFIED)


def _compare_one(
    case: GenerationCase,
    baseline: GenerateResult,
    spec: GenerateResult,
    tie_margin: float,
    baseline_url: str,
    spec_url: str,
    tolerate: tuple[str, ...],
    api_key_env: str | None,
    max_tokens_per_step: int | None,
) -> Outcome:
    header = _header(case)
    repro = (
        f"reproduce:\n  baseline:    {curl_command(baseline_url, baseline.request, api_key_env)}\n"
        f"  speculative: {curl_command(spec_url, spec.request, api_key_env)}"
    )
    # An invariant the baseline breaks in the same way on the same request is the server's
    # behaviour (e.g. a stop string inside the token that also hits max_new_tokens), not
    # speculation's: it is listed among the baseline's problems, and the tokens are compared
    # (so a different continuation after the shared break is judged as any divergence is).
    shared = {key for key, _ in _violations(case, baseline, strict=True)}
    problems = [f"speculative server {m}" for key, m in _violations(case, spec) if key not in shared]
    if problems:
        shape: str | None = None
        why = ""
        if any("text runs past stop string" in p for p in problems):
            shape, why = _stop_shape(case, baseline, spec, problems, max_tokens_per_step)
        named = f"\n{shape}: {why}" if shape is not None else ""
        message = f"{problems[0]}{named}\n{header}\n" + "\n".join(problems[1:]) + f"\n{repro}"
        if shape in (PAST_STOP_AT_LENGTH, STOP_LIST_ORDER):
            # The tokens up to the baseline's stop are the baseline's (checked above); only where
            # SGLang's finish check lets the verify step end is different.
            if shape in tolerate:
                return Outcome("tolerated", message, tokens_compared=len(baseline.output_ids), shape=shape)
            message += _declare_hint(shape)
        return Outcome("invariant", message, shape=shape)
    shared_features = {key for _, key, _ in feature_violations(case, baseline)}
    broken = [(f, words) for f, key, words in feature_violations(case, spec) if key not in shared_features]
    if broken:
        feature, words = broken[0]
        more = "".join(f"\n  also (request feature {f}): {w}" for f, w in broken[1:])
        return Outcome(
            "invariant",
            f"request feature {feature}: speculative server {words}\n{header}{more}\n"
            f"{_first_difference(baseline, spec)}\n{repro}",
            feature=feature,
        )
    # Nothing to compare is no evidence of equality: an answer without output_ids (a proxy, an
    # old release, a renamed field) or two empty answers must not pass on 0 tokens compared.
    for who, answer in (("baseline", baseline), ("speculative", spec)):
        if answer.completion_tokens > 0 and not answer.output_ids:
            return Outcome(
                "invariant",
                f"the {who} answer carries no output_ids (meta_info.completion_tokens = {answer.completion_tokens}): "
                f"nothing can be compared token by token\n{header}\n{repro}",
            )
    if not baseline.output_ids and not spec.output_ids:
        return Outcome(
            "invariant",
            f"both answers are empty (0 tokens; baseline {baseline.finish_reason}, speculative "
            f"{spec.finish_reason}): 0 tokens compared proves nothing\n{header}\n{repro}",
        )

    base_ids, spec_ids = baseline.output_ids, spec.output_ids
    n = min(len(base_ids), len(spec_ids))
    i = next((k for k in range(n) if base_ids[k] != spec_ids[k]), None)
    if i is None:
        if len(base_ids) == len(spec_ids):
            if (
                baseline.finish_reason.kind != spec.finish_reason.kind
                or baseline.completion_tokens != spec.completion_tokens
            ):
                return Outcome(
                    "divergence",
                    f"same tokens but the finish differs: baseline {baseline.finish_reason} with "
                    f"{baseline.completion_tokens} tokens, speculative {spec.finish_reason} with "
                    f"{spec.completion_tokens}\n{header}\n{repro}",
                    tokens_compared=n,
                )
            if baseline.text != spec.text:
                # Same ids, other text: detokenization (or a stop-string cut) differs between the servers.
                return Outcome(
                    "divergence",
                    f"same {n} token ids but the text differs (detokenization or stop-string handling)\n{header}\n"
                    f"{_context(baseline.text, spec.text)}\n{repro}",
                    tokens_compared=n,
                )
            return Outcome("match", tokens_compared=n)
        if _is_stop_overshoot(case, baseline, spec):
            extra = len(spec_ids) - len(base_ids)
            message = (
                f"stop overshoot: the speculative answer has the baseline's text and first {n} tokens, then {extra} "
                f"more token id(s) past the stop ({baseline.finish_reason}); completion_tokens {spec.completion_tokens} "
                f"vs {baseline.completion_tokens}\n{header}\n{repro}"
            )
            return _known_shape(STOP_OVERSHOOT, message, n, tolerate)
        if _stop_in_the_step_that_hit_the_limit(case, baseline, spec, max_tokens_per_step) and _ends_on_its_stop(
            case, baseline, spec
        ):
            # SGLang's finish-check order, for a stop token (EOS) or a stop string whose text the
            # invariants above did not catch: the verify step that accepted the stop also reached
            # max_new_tokens, so it ended on length with tokens past the stop.
            extra = len(spec_ids) - len(base_ids)
            message = (
                f"past the stop at the limit: the speculative answer has the baseline's {n} tokens and text, which "
                f"ended on its stop ({baseline.finish_reason}), then {extra} more token id(s) to max_new_tokens = "
                f"{case.max_new_tokens} within the same verify step, finish_reason {spec.finish_reason}\n{header}\n"
                f"{_context(baseline.text, spec.text)}\n{repro}"
            )
            return _known_shape(PAST_STOP_AT_LENGTH, message, n, tolerate)
        shorter = "speculative" if len(spec_ids) < len(base_ids) else "baseline"
        return Outcome(
            "divergence",
            f"the {shorter} output ended at token {n} while the other went on: baseline {len(base_ids)} tokens "
            f"({baseline.finish_reason}), speculative {len(spec_ids)} tokens ({spec.finish_reason})\n{header}\n"
            f"{_context(baseline.text, spec.text)}\n{repro}",
            tokens_compared=n,
        )

    margin, near = _margin_at(baseline, i, tie_margin)
    b_tok, s_tok = base_ids[i], spec_ids[i]
    where = standing(baseline, i, s_tok, b_tok)
    context = context_key(case.text, base_ids[:i])
    if margin is not None and margin < tie_margin and s_tok in near:
        return Outcome(
            "near-tie-flip",
            tokens_compared=i,
            flip=NearTieFlip(case.label, i, b_tok, s_tok, margin, where.gap, context),
            margin=margin,
        )
    if margin is None:
        why = "the baseline gave no top-2 logprobs there, so no near-tie can excuse it"
    elif margin >= tie_margin:
        why = f"baseline margin {margin:.4f} >= tie margin {tie_margin:g}: a decisive position"
    else:
        why = f"speculative token {s_tok} is not among the baseline's near-tied tokens {sorted(near)}"
    # The baseline's ranking there: a token it ranked 3rd, a step past the tie margin, reads
    # differently from one it did not list at all.
    ranking = choices(baseline, i)
    told = (
        f"  {where.words(s_tok, baseline.token_text(s_tok))}; tie margin {tie_margin:g}\n"
        f"  the baseline's top {where.listed} there: {ranking}\n"
        if where.listed
        else ""
    )
    return Outcome(
        "divergence",
        f"decisive divergence at output token {i}: baseline token {b_tok}, speculative token {s_tok}; {why}\n"
        f"{header}\n{told}{_context(baseline.text, spec.text)}\n{repro}",
        tokens_compared=i,
        margin=margin,
        divergence=TokenDivergence(
            case.label,
            i,
            b_tok,
            s_tok,
            margin,
            where.rank,
            where.gap,
            ranking,
            context,
            prompt_digest=prompt_digest(case.text),
            prefix=tuple(base_ids[:i]),
        ),
    )
