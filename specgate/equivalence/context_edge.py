"""The edge "a prompt at the context length": a prompt long enough that its answer crosses the
drafter's context length, or, where the drafter's is not below the server's, ends at the
server's own.

A drafter trained at a shorter length than the target serves (SpecForge trains at 2,048 tokens;
targets serve 8k to 256k) runs past its position limit there; and at the server's context end a
speculative cycle drafts and verifies tokens past the last slot the request may use. Neither may
change a greedy answer, and both are where a server's bookkeeping is least exercised. Drawn cases
never get there: the workload's prompts are short.

The prompt's length is counted by the reference server itself (meta_info.prompt_tokens of a
one-token request), so that no tokenizer is needed here: the first prompt, with plain filler
prose before its question, is resized until it holds the tokens wanted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specgate.deployment import Deployment, flag_int, flag_value
from specgate.equivalence.cases import GenerationCase, edge_case, edge_name
from specgate.prompts import Message, render
from specgate.server_info import lookup

CONTEXT_EDGE = "prompt at the context length"
# Beyond this many prompt tokens the edge costs more than it shows (a 128k-token prefill per
# config); the report says it was left out, and why.
MAX_CONTEXT_EDGE_TOKENS = 32768
# The answer must end within this many tokens of the limit wanted: a verify step of up to 8
# draft tokens still reaches past it.
SIZE_TOLERANCE = 8
MAX_PROBES = 8
CALIBRATION_WORDS = 200
MIN_DRAFTER_CONTEXT = 256  # a draft config's max_position_embeddings below this is not taken as its length
_FILLER = (
    "The river runs past the old mill and the quiet fields. People walk along the water in the "
    "morning and talk about the weather, the harvest and the news from town. "
).split()


def is_context_edge(case: GenerationCase) -> bool:
    """The case is this edge (by its edge name: a workload label holding the words is not)."""
    return (edge_name(case) or "").startswith(CONTEXT_EDGE)


@dataclass(frozen=True)
class Capacity:
    """What one server lets a request hold, prompt and whole answer together, and the limit
    that sets it.

    SGLang (0.5.14's tokenizer manager and scheduler, read from its source) refuses a request
    whose prompt, plus the slots an EAGLE-family server reserves for draft tokens
    (max(topk x steps, draft tokens)), plus max_new_tokens passes the context length; and its
    scheduler refuses a prompt of `max_req_input_len` tokens or more."""

    tokens: int
    limit: str  # e.g. "context length 8192, less 12 slots reserved for draft tokens"
    longest_prompt: int | None = None  # the scheduler takes prompts shorter than max_req_input_len

    def describe(self) -> str:
        return f"{self.tokens} tokens, the most a request may hold ({self.limit})"


def served_context_length(models: object) -> int | None:
    """`max_model_len` of the first model in an OpenAI-style /v1/models list (SGLang's model
    config context length), where one is given."""
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        value = data[0].get("max_model_len")
        return value if _count(value) else None
    return None


# SGLang 0.5.14's SpeculativeAlgorithm.is_eagle(): the algorithms whose requests hold draft slots
# (NEXTN is SGLang's other name for EAGLE, rewritten before it reaches the server's own report).
_RESERVING = ("EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN")
# A config that declares an EAGLE-family algorithm but none of topk, steps or draft tokens lets
# SGLang choose them: before it has booted and said, this many slots are assumed (more than any
# chain or tree a server picks for itself; a few tokens of prompt are the whole cost).
ASSUMED_RESERVATION = 64
# tp_worker.get_worker_info: max_req_input_len = max_req_len - 5, max_req_len = context length - 1
# (where the KV pool is larger); the scheduler clips an answer to max_req_len - prompt - 1.
_INPUT_SHORTFALL = 6
_ANSWER_ROOM = 4  # prompt + whole answer <= max_req_input_len + 4


def _reserves(algorithm: object) -> bool:
    return isinstance(algorithm, str) and algorithm.upper() in _RESERVING


def draft_reservation(info: dict[str, Any]) -> int:
    """Slots an EAGLE-family server keeps per request for draft tokens (SGLang's tokenizer
    manager counts them with the prompt): max(topk x steps, draft tokens)."""
    if not _reserves(lookup(info, "speculative_algorithm")):
        return 0
    topk, steps, drafts = (lookup(info, name) for name in (
        "speculative_eagle_topk", "speculative_num_steps", "speculative_num_draft_tokens"))
    product = topk * steps if _count(topk) and _count(steps) else 0
    return max(product, drafts if _count(drafts) else 0)


def declared_speculation(args: tuple[str, ...]) -> dict[str, Any]:
    """A config's speculative launch arguments in /server_info's names: a server not booted yet
    (the golden mode boots the reference alone first) still reserves what it declares, or
    ASSUMED_RESERVATION where it leaves the choice to SGLang."""
    declared = {
        "speculative_algorithm": flag_value(args, "--speculative-algorithm"),
        "speculative_eagle_topk": flag_int(args, "--speculative-eagle-topk"),
        "speculative_num_steps": flag_int(args, "--speculative-num-steps"),
        "speculative_num_draft_tokens": flag_int(args, "--speculative-num-draft-tokens"),
    }
    if _reserves(declared["speculative_algorithm"]) and all(v is None for k, v in declared.items() if k != "speculative_algorithm"):
        declared["speculative_num_draft_tokens"] = ASSUMED_RESERVATION
        declared["reservation_assumed"] = True
    return declared


def server_capacity(info: dict[str, Any], models: object = None) -> Capacity | None:
    """The server's capacity, or None where it reports no length at all (or no room)."""
    longest_input = lookup(info, "max_req_input_len")
    longest_input = longest_input if _count(longest_input) else None
    context = served_context_length(models)
    if context is None:
        length = lookup(info, "context_length", "context_len")
        context = length if _count(length) else None
    if context is None and longest_input is None:
        return None
    if longest_input is None:
        longest_input = context - _INPUT_SHORTFALL  # type: ignore[operator]
    reserved = draft_reservation(info)
    if not reserved:
        spare = ""
    elif info.get("reservation_assumed"):
        spare = f", less {reserved} slots assumed for draft tokens (its launch arguments name none)"
    else:
        spare = f", less {reserved} slots reserved for draft tokens"
    found = [Capacity(longest_input + _ANSWER_ROOM, f"max_req_input_len {longest_input} + {_ANSWER_ROOM}")]
    if context is not None:
        found.append(Capacity(context - reserved, f"context length {context}{spare}"))
    elif reserved:
        # The context is at least max_req_input_len + 1; the reservation is counted against it.
        found.append(Capacity(longest_input + 1 - reserved, f"max_req_input_len {longest_input} + 1{spare}"))
    pool, page = lookup(info, "max_total_num_tokens"), lookup(info, "page_size")
    if _count(pool):
        # The scheduler also clips an answer to the KV pool: paged prompt + answer + page + 1 at
        # most; a page rounds the prompt up by less than a page.
        page = page if _count(page) else 1
        found.append(Capacity(pool - 2 * page, f"KV pool of {pool} tokens, pages of {page}"))
    return replace(min(found, key=lambda c: c.tokens), longest_prompt=longest_input - 1)


def _count(value: object) -> bool:
    """A positive whole number (JSON's `true` is not one, though Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def drafter_context_length(deployment: Deployment) -> int | None:
    """The shortest `max_position_embeddings` among the speculative configs' draft models whose
    config.json is on this machine (None where none is)."""
    from specgate.measure.drafters import drafters

    found = []
    for identity in drafters(deployment).values():
        try:
            value = json.loads((Path(identity["path"]) / "config.json").read_text()).get("max_position_embeddings")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if _count(value) and value >= MIN_DRAFTER_CONTEXT:
            found.append(value)  # anything else is no length a drafter serves at: the server's stands
    return min(found, default=None)


def target_prompt_tokens(capacity: Capacity, drafter: int | None, answer: int) -> tuple[int, str]:
    """(prompt tokens, what an answer of `answer` tokens then reaches): it crosses the drafter's
    length at its middle where that fits within the capacity; else it ends on the last slot a
    request may hold. An answer that ends early (EOS, a stop string) reaches less: the edge's
    name says what a whole one would."""
    if drafter is not None and answer // 2 < drafter and drafter + (answer - answer // 2) <= capacity.tokens:
        return drafter - answer // 2, f"a whole answer crosses the drafter's context length {drafter}"
    prompt = capacity.tokens - answer
    if capacity.longest_prompt is not None and prompt > capacity.longest_prompt:
        return capacity.longest_prompt, f"the prompt is the longest the server takes ({capacity.describe()})"
    return prompt, f"a whole answer reaches {capacity.describe()}"


def context_edge_case(
    deployment: Deployment, capacity: Capacity | None, count_tokens: Callable[[str], int]
) -> GenerationCase | str:
    """The edge case, or why it is left out. `capacity` is the least any running server allows
    (server_capacity); `count_tokens(text)` is the reference's prompt token count for `text`
    (one short request each; at most MAX_PROBES of them)."""
    if capacity is None:
        return "no server reports a context length (/v1/models max_model_len, max_req_input_len, context_length)"
    answer = deployment.equivalence.max_new_tokens
    wanted, reaches = target_prompt_tokens(capacity, drafter_context_length(deployment), answer)
    if capacity.tokens < 1 or wanted < 1:
        return f"an answer of {answer} tokens does not fit: {capacity.describe()}"
    if wanted > MAX_CONTEXT_EDGE_TOKENS:
        return f"a prompt of {wanted} tokens ({reaches}) is over {MAX_CONTEXT_EDGE_TOKENS}: it costs more than it shows"
    first = deployment.workload.prompts()[0]

    def text_with(words: int) -> str:
        filler = " ".join(_FILLER[i % len(_FILLER)] for i in range(words))
        last = first.messages[-1]
        messages = (*first.messages[:-1], Message(last.role, f"{filler}\n\n{last.content}" if words else last.content))
        return render(messages, deployment.workload.prompt_format)

    bare = count_tokens(text_with(0))
    if bare > wanted:
        return f"the first prompt alone holds {bare} tokens, more than the {wanted} wanted"
    # A short filler first, to learn its tokens per word: a first guess too long would be refused
    # (the probe's prompt past the context length) rather than measured.
    words = min(CALIBRATION_WORDS, wanted - bare)
    got, probes = count_tokens(text_with(words)), 2
    while not wanted - SIZE_TOLERANCE <= got <= wanted:
        if probes >= MAX_PROBES:
            return f"could not size the prompt to {wanted} tokens in {MAX_PROBES} requests (last: {got})"
        per_word = (got - bare) / words if words else 1.0
        # Aim at the middle of the tolerance; a step of at least one word either way.
        step = round((wanted - SIZE_TOLERANCE // 2 - got) / max(per_word, 0.1))
        words = max(0, words + (step or (1 if got < wanted else -1)))
        got, probes = count_tokens(text_with(words)), probes + 1
    return edge_case(deployment, f"{CONTEXT_EDGE}: {got} prompt tokens, {reaches}", text_with(words), answer, (), 1)
