"""Whether a config's launch can hold each context bucket (`workload.context_buckets`), before
anything boots: a bucket's prompt plus its answer must fit the server's context length, its KV
pool and the model's positions. A bucket that cannot fit is bad input (flag_check refuses the
launch with it), naming the bucket, the config, the flag to raise and how far.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from specgate.deployment import Deployment, bucket_label, flag_int, flag_value

# A long prompt is built to a character budget at 4 characters per token (measure.context); the
# densest text of the shipped sets (code, numbers) runs near 3 through the tokenizers of today,
# so a bucket is held to its budget at 3: a fit here fits the real prompt.
CHARS_PER_TOKEN = 4.0
CHARS_PER_TOKEN_BOUND = 3.0
# The calibration prompt's characters (measure.density): ~2K tokens at 4 characters each, a sample of
# the corpus large enough that its ratio is the whole corpus's within ~2% (measure.context.
# calibration_text). The same whatever buckets a run lists: a prompt that followed the longest bucket
# moved the ratio, and with it every bucket's prompts, when a bucket was added. The reference's
# launch is held to it here as to a bucket (it sends it, one token asked).
CALIBRATION_CHARS = 8192


def bound_tokens(tokens: int) -> int:
    """The most prompt tokens a prompt built for `tokens` can count, at CHARS_PER_TOKEN_BOUND."""
    return math.ceil(tokens * CHARS_PER_TOKEN / CHARS_PER_TOKEN_BOUND)


@dataclass(frozen=True)
class Limit:
    what: str  # "--context-length 4096 (the simulator's default)"
    flag: str  # the flag that raises it ("" where no flag can: the model's positions)
    tokens: int


def _model_positions(path: str) -> int | None:
    """max_position_embeddings of a model folder's config.json, where it is readable here."""
    try:
        value = json.loads((Path(path) / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def limits(argv: list[str], simulated: bool, model: str | None) -> list[Limit]:
    """What bounds one request's prompt plus answer on a server launched with `argv`."""
    found: list[Limit] = []
    words = tuple(argv)
    context = flag_int(words, "--context-length")
    if context is None and simulated:
        from specgate.sim.__main__ import build_parser

        default = build_parser().parse_known_args([])[0].context_length
        found.append(Limit(f"--context-length {default} (the simulator's default)", "--context-length", default))
    elif context is not None:
        found.append(Limit(f"--context-length {context}", "--context-length", context))
    pool = flag_int(words, "--max-total-tokens")
    if pool is not None:
        found.append(Limit(f"--max-total-tokens {pool} (the KV pool)", "--max-total-tokens", pool))
    path = flag_value(words, "--model-path", "--model") or model
    positions = _model_positions(path) if path and not simulated else None
    if positions is not None:
        found.append(Limit(f"the model's max_position_embeddings {positions} ({path}/config.json)", "", positions))
    return found


def refusals(dep: Deployment, config: str, argv: list[str], simulated: bool, model: str | None) -> list[str]:
    """Why `config`'s launch cannot hold each bucket that does not fit (empty: all fit)."""
    out: list[str] = []
    found = limits(argv, simulated, model)
    # Each bucket with the answer length it is measured at: the sweep's own max_new_tokens where
    # it is the sweep's, the longer of the two where both measure it.
    answers: dict[int, tuple[str, int]] = {}
    if dep.sweep is not None:
        answers.update((t, ("sweep.max_new_tokens", dep.sweep.max_new_tokens)) for t in dep.sweep.context_buckets)
    for tokens in dep.workload.context_buckets:
        if tokens not in answers or answers[tokens][1] <= dep.workload.max_new_tokens:
            answers[tokens] = ("max_new_tokens", dep.workload.max_new_tokens)
    if answers and config == dep.reference:
        out += _calibration_refusals(found)
    for tokens, (said_new, new) in sorted(answers.items()):
        field = "workload.context_buckets" if tokens in dep.workload.context_buckets else "sweep.context_buckets"
        need = bound_tokens(tokens) + new
        for limit in found:
            if need <= limit.tokens:
                continue
            fix = (
                f"raise {limit.flag} to at least {need}"
                if limit.flag
                else f"the model cannot take it: drop the bucket from {field}"
            )
            out.append(
                f"{field} {bucket_label(tokens)} needs up to {need} tokens per request ({tokens} "
                f"prompt tokens at {CHARS_PER_TOKEN:g} characters each, up to {bound_tokens(tokens)} at "
                f"{CHARS_PER_TOKEN_BOUND:g}, + {said_new} {new}), over {limit.what}: {fix}"
            )
    return out


def _calibration_refusals(found: list[Limit]) -> list[str]:
    """Why the reference's launch cannot hold the calibration prompt (CALIBRATION_CHARS, at
    CHARS_PER_TOKEN_BOUND, + its one answer token), where it cannot."""
    need = math.ceil(CALIBRATION_CHARS / CHARS_PER_TOKEN_BOUND) + 1
    return [
        f"the context buckets' calibration prompt (measure.density: {CALIBRATION_CHARS:,} characters, whatever buckets "
        f"are listed, sent to the reference) needs up to {need} tokens (at {CHARS_PER_TOKEN_BOUND:g} characters each, "
        f"+ 1 answer token), over {limit.what}: "
        + (f"raise {limit.flag} to at least {need}" if limit.flag else "the model cannot take it: drop the context buckets")
        for limit in found
        if need > limit.tokens
    ]


def unchecked(dep: Deployment, argv: list[str], simulated: bool, model: str | None) -> str | None:
    """Why no bucket of `dep` can be held to a limit for a launch with `argv` (None: one can, or
    there are no buckets): no --context-length or --max-total-tokens, and no model config.json
    here to read the model's positions from. The server's own length then decides, request by
    request, once the bucket is sent."""
    longest = max((*dep.workload.context_buckets, *(dep.sweep.context_buckets if dep.sweep is not None else ())), default=0)
    if not longest or limits(argv, simulated, model):
        return None
    return (
        f"context bucket {bucket_label(longest)} NOT checked against a length limit: the launch names no "
        "--context-length or --max-total-tokens and no model config.json is readable here; a bucket the "
        "server cannot hold fails when it is sent (name --context-length to have check hold it)"
    )

