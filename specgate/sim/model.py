"""SIMULATOR toy language model, its draft model, and bf16-like near-tie flips.

The target model's next-token distribution is a deterministic function of the prompt
and the last three tokens. Each context has a handful of candidate tokens with logit
gaps drawn so that about 2% of positions are near-ties (gap < 0.05 nats), as in real
models. The draft model agrees with the target's top-1 with a fixed probability per
context, so accept length emerges from a real draft-then-verify loop instead of being
dialled in.

`verify_kernel=True` models what bf16 does to SGLang's verify pass: where the target's
top-2 gap is below `FLIP_EPS`, the order of the two may swap (decided per context, so
it is reproducible). That is a legitimate divergence the equivalence check must excuse.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from functools import lru_cache

from specgate.sim.tokenizer import EOS_ID, PUNCT_IDS, VOCAB_SIZE

CANDIDATES = 6
TOP_LOGIT = 10.0
FLIP_EPS = 0.02
_BACKGROUND = VOCAB_SIZE - CANDIDATES  # tokens at logit 0 outside the candidate list


@dataclass(frozen=True)
class Distribution:
    """Candidates sorted by logit, highest first; everything else sits at logit 0."""

    tokens: tuple[int, ...]
    logits: tuple[float, ...]

    @property
    def log_normaliser(self) -> float:
        return math.log(sum(math.exp(x) for x in self.logits) + _BACKGROUND)

    def top_logprobs(self, k: int) -> list[tuple[float, int]]:
        z = self.log_normaliser
        return [(self.logits[i] - z, self.tokens[i]) for i in range(min(k, len(self.tokens)))]

    def logprob_of(self, token: int) -> float:
        z = self.log_normaliser
        for t, x in zip(self.tokens, self.logits):
            if t == token:
                return x - z
        return -z


def _rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


@lru_cache(maxsize=200_000)
def target_distribution(prompt_key: int, tail: tuple[int, ...]) -> Distribution:
    rng = _rng("target", prompt_key, tail)
    tokens: list[int] = []
    while len(tokens) < CANDIDATES:
        r = rng.random()
        if r < 0.004:
            tok = EOS_ID
        elif r < 0.12:
            tok = rng.choice(PUNCT_IDS)
        else:
            tok = rng.randrange(len(PUNCT_IDS) + 1, VOCAB_SIZE)
        if tok not in tokens:
            tokens.append(tok)
    logits = [TOP_LOGIT]
    for _ in range(CANDIDATES - 1):
        logits.append(logits[-1] - rng.expovariate(1 / 2.5))
    return Distribution(tuple(tokens), tuple(logits))


# Past the positions its (simulated) drafter was trained for, its guesses mostly miss,
# as a real EAGLE-3 head trained at a shorter max length does on longer prompts.
PAST_CONTEXT_AGREEMENT_FACTOR = 0.15


class ToyModel:
    def __init__(
        self, prompt_ids: list[int], draft_agreement: float, draft_context: int | None = None, weights: str = ""
    ) -> None:
        # `weights`: another --model-path is another model (other answers); "" is the default toy.
        key = repr(prompt_ids) if not weights else repr((weights, prompt_ids))
        digest = hashlib.blake2b(key.encode(), digest_size=4).digest()
        self.prompt_key = int.from_bytes(digest, "little")
        self.draft_agreement = draft_agreement
        self.draft_context = draft_context

    def distribution(self, context: list[int]) -> Distribution:
        return target_distribution(self.prompt_key, tuple(context[-3:]))

    def greedy(self, context: list[int], verify_kernel: bool = False) -> int:
        dist = self.verify_distribution(context) if verify_kernel else self.distribution(context)
        return dist.tokens[0]

    def verify_distribution(self, context: list[int]) -> Distribution:
        """The distribution as the verify pass computes it: where the target's top two are within
        FLIP_EPS, their order may swap (per context, reproducibly), and a speculative server's
        logprobs say so, as SGLang's, taken from the verify pass, would."""
        dist = self.distribution(context)
        if dist.logits[0] - dist.logits[1] < FLIP_EPS and _rng("flip", self.prompt_key, tuple(context[-3:])).random() < 0.5:
            return Distribution((dist.tokens[1], dist.tokens[0], *dist.tokens[2:]), dist.logits)
        return dist

    def draft(self, context: list[int], attempt: int = 0) -> int:
        """The draft model's guess: the target's top-1 with probability `draft_agreement`."""
        dist = self.distribution(context)
        agreement = self.draft_agreement
        if self.draft_context is not None and len(context) > self.draft_context:
            agreement *= PAST_CONTEXT_AGREEMENT_FACTOR
        if _rng("draft", self.prompt_key, tuple(context[-3:]), attempt).random() < agreement:
            return dist.tokens[0]
        return dist.tokens[1 + attempt % (CANDIDATES - 1)]
