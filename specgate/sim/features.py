"""SIMULATOR request features: what SGLang's sampling params do to the toy model's logits.

Plain decoding applies them at every token, from the tokens generated before it:
- frequency_penalty / presence_penalty: minus penalty x count, minus penalty once, for each
  token already in the output (SGLang's penalizers; the output only, as SGLang's);
- repetition_penalty: a positive logit divided by it, a negative one multiplied (the output's
  tokens only: SGLang's counts the prompt too, which the toy's hashed prompt ids cannot show);
- logit_bias: added to the token's logit (a token outside the toy's candidates joins them);
- min_new_tokens: EOS and stop_token_ids masked before that many tokens (and the finish check,
  stop strings included, waits for them: engine.py);
- regex: the one grammar form the simulator honours, a repeated character class such as
  `[a-z ]*` or `[a-z ,.]+`: a token whose text leaves the class is masked (EOS is allowed once
  the class's repetition is satisfied). Other regexes and json_schema are refused (400).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from specgate.sim.model import Distribution
from specgate.sim.tokenizer import EOS_ID, PUNCT_IDS, VOCAB, VOCAB_SIZE

_CHAR_CLASS = re.compile(r"\[([^\]]+)\]([*+])")


@dataclass(frozen=True)
class Grammar:
    allowed: re.Pattern[str]  # one token's text, matched whole
    nonempty: bool  # `+`: EOS only after one token

    @classmethod
    def parse(cls, regex: str) -> Grammar:
        found = _CHAR_CLASS.fullmatch(regex)
        if found is None:
            raise ValueError(
                f"regex {regex!r}: the simulator honours one repeated character class only, e.g. '[a-z ]*' or '[a-z ,.]+'"
            )
        return cls(re.compile(f"[{found.group(1)}]*"), found.group(2) == "+")

    def allows(self, token: int, produced: int) -> bool:
        if token == EOS_ID:
            return produced > 0 or not self.nonempty
        # A word's text carries its leading space (except at the start or after a newline).
        text = VOCAB[token] if token in PUNCT_IDS else " " + VOCAB[token]
        return self.allowed.fullmatch(text) is not None


@dataclass(frozen=True)
class Features:
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()
    grammar: Grammar | None = None

    @property
    def any(self) -> bool:
        return self != Features()


def parse_features(sp: dict) -> Features:
    """SGLang's sampling params, checked as SGLang checks them (a 400 naming the param)."""
    if sp.get("json_schema") is not None or sp.get("ebnf") is not None:
        raise ValueError("json_schema / ebnf: the simulator honours a regex of one repeated character class only")
    bias = sp.get("logit_bias") or {}
    if not isinstance(bias, dict):
        raise ValueError("logit_bias: expected an object of token id -> bias")
    pairs = []
    for key, value in bias.items():
        if not str(key).isdigit() or not 0 <= int(key) < VOCAB_SIZE:
            raise ValueError(f"logit_bias: {key!r} is not a token id of this vocabulary (0..{VOCAB_SIZE - 1})")
        pairs.append((int(key), float(value)))
    repetition = float(sp.get("repetition_penalty", 1.0))
    if not 0 < repetition <= 2:
        raise ValueError("repetition_penalty must be in (0, 2]")
    for name in ("frequency_penalty", "presence_penalty"):
        if not -2 <= float(sp.get(name, 0.0)) <= 2:
            raise ValueError(f"{name} must be in [-2, 2]")
    regex = sp.get("regex")
    return Features(
        frequency_penalty=float(sp.get("frequency_penalty", 0.0)),
        presence_penalty=float(sp.get("presence_penalty", 0.0)),
        repetition_penalty=repetition,
        min_new_tokens=int(sp.get("min_new_tokens", 0)),
        logit_bias=tuple(sorted(pairs)),
        grammar=Grammar.parse(regex) if isinstance(regex, str) else None,
    )


def adjusted(
    dist: Distribution,
    features: Features,
    counted: list[int],
    produced: int,
    stop_ids: tuple[int, ...],
    bias: bool = True,
    grammar: bool = True,
) -> Distribution:
    """`dist` under the features: `counted` the output tokens the penalties see, `produced` the
    count min_new_tokens and the grammar's `+` see; `bias`/`grammar` False leave those off (the
    faults that leave them off drafted positions)."""
    if not features.any:
        return dist
    logits = dict(zip(dist.tokens, dist.logits, strict=True))
    counts = Counter(counted)
    for token in list(logits):
        n = counts.get(token, 0)
        if n:
            x = logits[token]
            x = x / features.repetition_penalty if x > 0 else x * features.repetition_penalty
            logits[token] = x - features.frequency_penalty * n - features.presence_penalty
    if bias:
        for token, b in features.logit_bias:
            logits[token] = logits.get(token, 0.0) + b
    masked = set(stop_ids) | {EOS_ID} if produced < features.min_new_tokens else set()
    if grammar and features.grammar is not None:
        masked |= {t for t in logits if not features.grammar.allows(t, produced)}
    kept = {t: x for t, x in logits.items() if t not in masked}
    if not kept or max(kept.values()) < 0:
        # Every candidate masked or pushed below the background: the first background token
        # the features allow stands at logit 0 (the others tie with it; ids break the tie).
        biased = dict(features.logit_bias) if bias else {}
        for token in range(len(PUNCT_IDS) + 1, VOCAB_SIZE):
            if token in logits or token in masked or biased.get(token, 0.0) < 0 or counts.get(token):
                continue
            if not grammar or features.grammar is None or features.grammar.allows(token, produced):
                kept[token] = 0.0
                break
    ranked = sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))
    return Distribution(tuple(t for t, _ in ranked), tuple(x for _, x in ranked))
