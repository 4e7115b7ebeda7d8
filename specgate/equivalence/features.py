"""Request features: the /generate sampling parameters a speculative path may treat differently.

A verify step commits several tokens at once, so every feature whose state advances per token
(penalties, min_new_tokens, a grammar) or that must hold at every position (a logit bias, stop
token ids) is a place where "per verify step" can stand in for "per token". Greedy equivalence
draws them beside its prompt mutations (cases.py), sends them as SGLang's /generate takes them
(`sampling_params`), and judges the answers by what plain decoding does under them (check.py).

Two features name token ids, which differ by model: a logit-bias ban and a stop token id are
drawn as an *anchor* ("@K": the plain answer's token at position K, without those two features)
and made concrete from the reference's own answer before the case is asked (`anchor`). A case
that failed keeps its concrete ids in the replay file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specgate.deployment import REQUEST_FEATURES

PENALTIES = "penalties"
MIN_NEW_TOKENS = "min_new_tokens"
LOGIT_BIAS = "logit_bias"
STOP_ORDER = "stop_order"
STOP_TOKEN_IDS = "stop_token_ids"
N_CHOICES = "n"
GRAMMAR = "grammar"
FEATURES = REQUEST_FEATURES  # the deployment's names for them: PENALTIES ... GRAMMAR, in that order
assert FEATURES == (PENALTIES, MIN_NEW_TOKENS, LOGIT_BIAS, STOP_ORDER, STOP_TOKEN_IDS, N_CHOICES, GRAMMAR)

# The sampling params each feature sets (stop_order sets the case's `stop` list instead).
PARAMS_OF = {
    PENALTIES: ("frequency_penalty", "presence_penalty", "repetition_penalty"),
    MIN_NEW_TOKENS: ("min_new_tokens",),
    LOGIT_BIAS: ("logit_bias",),
    STOP_ORDER: (),
    STOP_TOKEN_IDS: ("stop_token_ids",),
    N_CHOICES: ("n",),
    GRAMMAR: ("regex",),
}
# Regexes a grammar case draws: character classes repeated, which every backend (xgrammar,
# outlines, llguidance) compiles and whose every prefix is valid (an answer cut by max_new_tokens
# is checked like a whole one). The simulator honours exactly this form (sim/features.py).
REGEXES = ("[a-z ]*", "[a-z ,.]*")
BAN = -100.0  # SGLang adds the bias to the logits: -100 is a ban for every model in practice
ANCHOR = "@"


def canonical(params: dict[str, Any]) -> str:
    """The params as the case stores them: one JSON text per meaning (sorted keys)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":")) if params else ""


def params_of(text: str) -> dict[str, Any]:
    return json.loads(text) if text else {}


def is_anchor(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(ANCHOR)


def anchored(params: dict[str, Any]) -> bool:
    """Whether the params still name token ids by position in the plain answer."""
    return any(is_anchor(v) for v in params.get("stop_token_ids", ())) or any(
        is_anchor(k) for k in params.get("logit_bias", {})
    )


def without_anchors(params: dict[str, Any]) -> dict[str, Any]:
    """The params whose plain answer the anchors point into: those two features left out."""
    return {k: v for k, v in params.items() if k not in ("stop_token_ids", "logit_bias")}


def anchor(params: dict[str, Any], plain_ids: tuple[int, ...]) -> dict[str, Any]:
    """Anchors replaced by the token ids of the plain answer they point at (a position past its
    end points at its last token); an empty plain answer has no token to point at: those
    features are left out."""
    out = dict(params)

    def at(value: str) -> int:
        return plain_ids[min(int(value[len(ANCHOR) :]), len(plain_ids) - 1)]

    if "stop_token_ids" in out:
        ids = [at(v) if is_anchor(v) else v for v in out["stop_token_ids"]] if plain_ids else []
        out["stop_token_ids"] = sorted(set(ids))
    if "logit_bias" in out:
        bias = {str(at(k)) if is_anchor(k) else k: v for k, v in out["logit_bias"].items()} if plain_ids else {}
        out["logit_bias"] = bias
    return {k: v for k, v in out.items() if v not in ([], {})}


def features_in(params: dict[str, Any], stop_order: bool) -> tuple[str, ...]:
    """The features a case's params (and its stop list) exercise, in FEATURES order."""
    return tuple(f for f in FEATURES if (f == STOP_ORDER and stop_order) or any(p in params for p in PARAMS_OF[f]))


def banned_ids(params: dict[str, Any]) -> set[int]:
    """Token ids the logit bias bans (a bias at or below BAN): plain decoding never emits them."""
    return {int(k) for k, v in params.get("logit_bias", {}).items() if not is_anchor(k) and float(v) <= BAN}


def grammar_problem(regex: str, text: str) -> str | None:
    """Why `text` is not valid under `regex`, or None. Drawn regexes are repeated character
    classes (REGEXES), so a prefix is valid exactly where the whole is: fullmatch decides."""
    if re.fullmatch(regex, text) is not None:
        return None
    bad = next((i for i in range(len(text)) if re.fullmatch(regex, text[: i + 1]) is None), len(text))
    return f"text breaks the grammar (regex {regex!r}) at char {bad}: {text[max(0, bad - 20) : bad + 20]!r}"
