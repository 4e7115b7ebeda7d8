"""Hypothesis strategies for generation cases: realistic prompts and mutations of them.

A case is what the equivalence property is checked on: a chat-templated prompt from
fixtures/prompts (or a mutation: truncated, extended, multi-turn, with noise words or
a system message), a max_new_tokens from 1 up, optional stop strings, and how many
copies go to the speculative server at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from specgate.client import GenerateRequest
from specgate.deployment import Deployment
from specgate.equivalence import features
from specgate.prompts import Message, Prompt, render
from specgate.server_flags import graph_bound_from_args

FOLLOW_UPS = (
    "Answer in one sentence.",
    "Use bullet points.",
    "Explain your reasoning step by step.",
    "Keep it under fifty words.",
    "Give an example.",
)
NOISE_WORDS = ("please", "quickly", "however", "data", "report", "model", "again", "today", "the", "and", "42", "ok")
SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a terse expert. Answer precisely.")


@dataclass(frozen=True)
class GenerationCase:
    label: str  # prompt set/id and the mutations applied, for humans
    text: str
    max_new_tokens: int
    stop: tuple[str, ...]
    concurrency: int
    # The request features drawn (features.FEATURES) and the sampling params they set, as
    # features.canonical JSON (a dict is not hashable); both empty for a case without any.
    features: tuple[str, ...] = ()
    params: str = ""

    def request(self, top_logprobs: int = 0) -> GenerateRequest:
        if features.anchored(self.sampling_params):
            raise ValueError(f"case {self.label!r}: its token ids are still anchors; oracle.anchored_case makes them ids")
        return GenerateRequest(
            max_new_tokens=self.max_new_tokens,
            text=self.text,
            stop=self.stop,
            top_logprobs=top_logprobs,
            extra=self.params,
        )

    @property
    def sampling_params(self) -> dict:
        """The features' sampling params (SGLang's names), beside max_new_tokens and stop."""
        return features.params_of(self.params)

    @property
    def key(self) -> str:
        """Identity of the baseline answer: concurrency does not change what is asked."""
        asked = [self.text, self.max_new_tokens, list(self.stop)]
        return json.dumps([*asked, self.params] if self.params else asked)

    def as_dict(self) -> dict:
        out = {
            "label": self.label,
            "text": self.text,
            "max_new_tokens": self.max_new_tokens,
            "stop": list(self.stop),
            "concurrency": self.concurrency,
        }
        if self.features or self.params:  # a case without features reads as it did before them
            out.update(features=list(self.features), params=self.sampling_params)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> GenerationCase:
        return cls(
            d["label"],
            d["text"],
            int(d["max_new_tokens"]),
            tuple(d["stop"]),
            int(d["concurrency"]),
            tuple(d.get("features") or ()),
            features.canonical(d.get("params") or {}),
        )


@st.composite
def mutated_messages(draw: st.DrawFn, prompts: tuple[Prompt, ...]) -> tuple[str, tuple[Message, ...]]:
    prompt = draw(st.sampled_from(prompts))
    messages = list(prompt.messages)
    label = prompt.label
    mutation = draw(st.sampled_from(("none", "truncate", "follow-up", "noise", "multi-turn", "system")))
    last = messages[-1]
    if mutation == "truncate":
        words = last.content.split()
        keep = draw(st.integers(min_value=1, max_value=max(1, len(words))))
        messages[-1] = Message(last.role, " ".join(words[:keep]))
    elif mutation == "follow-up":
        messages[-1] = Message(last.role, last.content + " " + draw(st.sampled_from(FOLLOW_UPS)))
    elif mutation == "noise":
        noise = draw(st.lists(st.sampled_from(NOISE_WORDS), min_size=1, max_size=6))
        messages[-1] = Message(last.role, " ".join(noise) + " " + last.content)
    elif mutation == "multi-turn":
        other = draw(st.sampled_from(prompts))
        messages = [*messages, Message("assistant", "Sure, here it is."), *other.messages[-1:]]
        label += f"+{other.label}"
    elif mutation == "system" and messages[0].role != "system":
        messages = [Message("system", draw(st.sampled_from(SYSTEM_PROMPTS))), *messages]
    if mutation != "none":
        label += f" [{mutation}]"
    return label, tuple(messages)


@st.composite
def _cases(draw: st.DrawFn, deployment: Deployment, prompts: tuple[Prompt, ...]) -> GenerationCase:
    eq = deployment.equivalence
    label, messages = draw(mutated_messages(prompts))
    stop: tuple[str, ...] = ()
    if eq.stop_strings and bool(draw(st.booleans())):
        stop = tuple(draw(st.lists(st.sampled_from(eq.stop_strings), min_size=1, max_size=2, unique=True)))
    max_new_tokens = draw(st.integers(min_value=1, max_value=eq.max_new_tokens))
    # Features are drawn into the same cases (the case budget stays), up to two at once; an
    # empty set shrinks first, so a failure shrinks to the features it needs.
    chosen = draw(st.sets(st.sampled_from(eq.features), max_size=2)) if eq.features else set()
    params: dict = {}
    if features.PENALTIES in chosen:
        params.update(draw(_penalties()))
    if features.MIN_NEW_TOKENS in chosen:
        params["min_new_tokens"] = draw(st.integers(min_value=1, max_value=max_new_tokens))
        if not stop and eq.stop_strings:
            stop = eq.stop_strings[:1]  # something that could end the answer early, for the mask to hold back
    if features.LOGIT_BIAS in chosen:
        params["logit_bias"] = {_anchor(draw, max_new_tokens): features.BAN}
    if features.STOP_TOKEN_IDS in chosen:
        params["stop_token_ids"] = [_anchor(draw, max_new_tokens)]
    if features.N_CHOICES in chosen:
        params["n"] = draw(st.integers(min_value=2, max_value=3))
    if features.GRAMMAR in chosen:
        params["regex"] = draw(st.sampled_from(features.REGEXES))
    stop_order = features.STOP_ORDER in chosen and len(_stop_pool(eq.stop_strings)) >= 2
    if stop_order:
        pool = _stop_pool(eq.stop_strings)
        stop = tuple(draw(st.permutations(pool))[: draw(st.integers(min_value=2, max_value=len(pool)))])
    named = features.features_in(params, stop_order)
    return GenerationCase(
        label=label + (f" {{{', '.join(named)}}}" if named else ""),
        text=render(messages, deployment.workload.prompt_format),
        max_new_tokens=max_new_tokens,
        stop=stop,
        concurrency=draw(st.sampled_from(eq.concurrency)),
        features=named,
        params=features.canonical(params),
    )


# Stop strings common in any text, beside the deployment's own, for stop_order: two of them
# completed in one verify step is what list order gets wrong.
COMMON_STOPS = (".", ",", "\n")


def _stop_pool(declared: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*declared, *COMMON_STOPS)))


def _anchor(draw: st.DrawFn, max_new_tokens: int) -> str:
    return f"{features.ANCHOR}{draw(st.integers(min_value=0, max_value=max_new_tokens - 1))}"


@st.composite
def _penalties(draw: st.DrawFn) -> dict:
    """One to three of SGLang's penalties, at strengths that change greedy choices."""
    chosen = draw(st.sets(st.sampled_from(features.PARAMS_OF[features.PENALTIES]), min_size=1))
    values = {
        "frequency_penalty": st.sampled_from((0.5, 1.0, 2.0)),
        "presence_penalty": st.sampled_from((0.5, 1.0, 2.0)),
        "repetition_penalty": st.sampled_from((1.1, 1.3, 1.5)),
    }
    return {name: draw(values[name]) for name in sorted(chosen)}


def edge_cases(deployment: Deployment) -> list[GenerationCase]:
    """Cases every run checks, whatever the seed draws (the live property test adds them as
    Hypothesis @examples): one token only (the first token comes from prefill, not from a verify
    step); every stop string at the longest answer, alone and at the highest concurrency (a
    verify step that accepts several tokens may carry a stop string inside it, and batched
    verify differs from a lone one); and the same request at one more concurrent request than a
    speculative config's `--cuda-graph-max-bs`, where its decode leaves the captured graphs for
    eager kernels. (That one reuses the stop-string request, whose answer a stored reference
    already holds: concurrency does not change what is asked.) One more edge, a stop string that
    is the first answer token, depends on what the reference answers and is not in this list:
    first_token_stop_case builds it from the reference's answer to the one-token case here."""
    eq = deployment.equivalence
    out = [one_token_case(deployment)]
    if eq.stop_strings:
        stops = tuple(eq.stop_strings)
        out.append(_edge(deployment, "every stop string", eq.max_new_tokens, stops, 1))
        past = [b for b in graph_bounds(deployment) if b + 1 <= MAX_GRAPH_EDGE]
        # The batched case goes past the highest graph bound where that is more than the highest
        # concurrency anyway (one case, not two); a lower bound gets a case of its own.
        top = max([max(eq.concurrency), *(b + 1 for b in past)])
        if top > 1:
            beyond = f", past the decode graph bound {top - 1}" if top - 1 in past else ""
            out.append(_edge(deployment, f"every stop string, batched{beyond}", eq.max_new_tokens, stops, top))
        for bound in past:
            if bound + 1 < top:
                name = f"concurrency {bound + 1}, past the decode graph bound {bound}"
                out.append(_edge(deployment, name, eq.max_new_tokens, stops, bound + 1))
    return out


EDGE_MARK = " (edge: "  # in an edge case's label, before its name: edge_name reads it back


def edge_case(
    deployment: Deployment, name: str, text: str | None, max_new_tokens: int, stop: tuple[str, ...], concurrency: int
) -> GenerationCase:
    """An edge case: the deployment's first prompt (or `text`, made from it), labelled with the
    edge's name."""
    first = deployment.workload.prompts()[0]
    text = render(first.messages, deployment.workload.prompt_format) if text is None else text
    return GenerationCase(f"{first.label}{EDGE_MARK}{name})", text, max_new_tokens, stop, concurrency)


def _edge(deployment: Deployment, name: str, max_new_tokens: int, stop: tuple[str, ...], concurrency: int) -> GenerationCase:
    return edge_case(deployment, name, None, max_new_tokens, stop, concurrency)


def one_token_case(deployment: Deployment) -> GenerationCase:
    """The first prompt with max_new_tokens 1: the answer is the prefill's token alone."""
    return _edge(deployment, "max_new_tokens 1", 1, (), 1)


FIRST_TOKEN_STOP_EDGE = "stop string is the reference's first token"


def first_token_stop_left_out(first_token_text: str) -> str | None:
    """Why the reference's first answer token cannot stand as a stop string (the report says it),
    or None where it can."""
    if not first_token_text.strip():
        # Empty (an EOS, or a special token the detokenizer drops) or whitespace only. An empty
        # stop string is in every text, so the invariant check (`stop in text`) would call every
        # answer a run-on; and SGLang releases ignore or mishandle empty and whitespace-only
        # stop strings each in their own way, so the edge would test the release, not
        # speculation. A deployment that means "\n" lists it in [equivalence] stop_strings.
        return f"its text {first_token_text!r} is empty or whitespace"
    if "\ufffd" in first_token_text:
        # A token that is part of a multi-byte character decodes alone to U+FFFD: the same
        # token within a longer text does not, so a server may never see that stop string.
        return f"its text {first_token_text!r} is part of a multi-byte character (U+FFFD)"
    return None


def first_token_stop_case(deployment: Deployment, first_token_text: str) -> GenerationCase | None:
    """The first prompt at the longest answer, its only stop string the text of the reference's
    own first answer token (`first_token_text`: its answer to one_token_case). A correct server
    finds the stop in the prefill's token and ends there; one that looks for stop strings only in
    what verify steps add, or only in text after the first token, runs on. Where nothing may
    stand as that stop string, None: the edge is left out and the run goes on without it.

    The stop string cannot be known from the deployment: it is what the reference answers."""
    if first_token_stop_left_out(first_token_text) is not None:
        return None
    return _edge(deployment, FIRST_TOKEN_STOP_EDGE, deployment.equivalence.max_new_tokens, (first_token_text,), 1)


def edge_name(case: GenerationCase) -> str | None:
    """Which edge a case is, for the report (None for a drawn case): the name in its label, and
    for the derived first-token stop edge the stop string too (it differs by model and release)."""
    if EDGE_MARK not in case.label:
        return None
    name = case.label.split(EDGE_MARK, 1)[1].removesuffix(")")
    return f"{name} {case.stop[0]!r}" if name == FIRST_TOKEN_STOP_EDGE and case.stop else name


MAX_GRAPH_EDGE = 65  # concurrent copies of one request: beyond this the edge costs more than it shows


def graph_bounds(deployment: Deployment) -> list[int]:
    """The distinct decode graph bounds the speculative configs run with (the last one given wins,
    as in SGLang's argument parser: a config's own args come after launch.args), in any release's
    spelling: `--cuda-graph-max-bs`, `--cuda-graph-max-bs-decode`, `--cuda-graph-config` (server_flags.py)."""
    found = set()
    for name in deployment.speculative_configs:
        # Not a number: SGLang refuses such a flag at boot, and says so.
        bound = graph_bound_from_args((*deployment.launch.args, *deployment.configs[name].args))
        if bound is not None and bound > 0:
            found.add(bound)
    return sorted(found)


def generation_cases(deployment: Deployment) -> st.SearchStrategy[GenerationCase]:
    return _cases(deployment, deployment.workload.prompts())


def draw_cases(deployment: Deployment, count: int, seed_value: int = 0) -> list[GenerationCase]:
    """A fixed, reproducible list of cases drawn by Hypothesis, for when the baseline
    must be recorded before the speculative server can boot (no live shrinking then)."""
    cases: dict[str, GenerationCase] = {}

    @seed(seed_value)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(generation_cases(deployment))
    def collect(case: GenerationCase) -> None:
        cases.setdefault(case.key + str(case.concurrency), case)

    collect()
    return list(cases.values())
