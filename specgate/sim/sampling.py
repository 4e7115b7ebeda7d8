"""SIMULATOR sampling: the toy target's distribution after temperature, top_k, top_p and min_p,
sampled with a seeded RNG, and speculative configs verified by real rejection sampling.

A plain server samples every token from the processed target distribution p. A speculative
server samples its first token the same way (prefill), then runs cycles: the drafter proposes
up to `depth` tokens from its own distribution q, each accepted with probability
min(1, p(x)/q(x)); the first rejection is replaced by a token from the residual
max(0, p - q), and a cycle whose drafts all pass adds a bonus token from p. That is exact:
outputs follow p whatever q is, so a healthy simulator matches the plain one in distribution
and only its accept length depends on the drafter. The sampling faults break that exactness
in the ways real engines did (faults.py): greedy acceptance at temperature > 0, the filters
left off on the acceptance test, temperature applied twice in verify.

The toy's distributions have one shape: a few candidate tokens with their own logits and every
other token at logit 0 (the background). `Weights` keeps that shape through every operation, so
a token costs a handful of float operations, not a pass over the vocabulary. Ties among the
background are broken by token id (the lowest ids rank first), as any top-k breaks ties somehow.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from specgate.sim.model import Distribution, ToyModel
from specgate.sim.tokenizer import VOCAB_SIZE

# How much the toy drafter favours its own guess (nats over the target's logit): q differs from p,
# so rejection sampling has something to correct.
DRAFT_BONUS = 2.0


@dataclass(frozen=True)
class SamplingParams:
    """SGLang's sampling_params that shape the distribution; off values as SGLang's defaults."""

    temperature: float
    top_p: float = 1.0
    top_k: int = -1  # -1 (or 0): all tokens
    min_p: float = 0.0
    # Penalties on the answer's own tokens so far and a fixed bias, applied to the logits before
    # temperature, as SGLang's penalizers do: frequency (x count), presence (once a token is there),
    # repetition (positive logits divided, negative multiplied); logit_bias adds to a token's logit.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()

    @property
    def penalises(self) -> bool:
        return bool(
            self.frequency_penalty or self.presence_penalty or self.repetition_penalty != 1.0 or self.logit_bias
        )


def penalised(dist: Distribution, answer: list[int], params: SamplingParams) -> Distribution:
    """`dist` after the penalties on the tokens of `answer` (the output so far) and the bias: a
    background token they touch becomes a candidate of its own, re-sorted highest first."""
    if not params.penalises:
        return dist
    logits = dict(zip(dist.tokens, dist.logits))
    counts: dict[int, int] = {}
    for token in answer:
        counts[token] = counts.get(token, 0) + 1
    for token, n in counts.items():
        x = logits.get(token, 0.0)
        if params.repetition_penalty != 1.0:
            x = x / params.repetition_penalty if x > 0 else x * params.repetition_penalty
        logits[token] = x - params.frequency_penalty * n - params.presence_penalty
    for token, bias in params.logit_bias:
        logits[token] = logits.get(token, 0.0) + bias
    ranked = sorted(logits.items(), key=lambda kv: (-kv[1], kv[0]))
    return Distribution(tuple(t for t, _ in ranked), tuple(x for _, x in ranked))


@dataclass(frozen=True)
class Weights:
    """Unnormalised weights over the vocabulary: `explicit` (token, weight) pairs for the candidate
    tokens still in play, and the first `block_n` background tokens (ids outside `candidates`, in
    id order) with `block_w` each; every other token has weight 0."""

    explicit: tuple[tuple[int, float], ...]
    candidates: tuple[int, ...]  # sorted: the ids that are never background
    block_n: int
    block_w: float

    @property
    def total(self) -> float:
        return sum(w for _, w in self.explicit) + self.block_n * self.block_w

    def background_index(self, token: int) -> int | None:
        if token in self.candidates:
            return None
        return token - sum(1 for c in self.candidates if c < token)

    def background_id(self, index: int) -> int:
        token = index
        for c in self.candidates:
            if c <= token:
                token += 1
        return token

    def weight(self, token: int) -> float:
        for t, w in self.explicit:
            if t == token:
                return w
        index = self.background_index(token)
        return self.block_w if index is not None and index < self.block_n else 0.0

    def prob(self, token: int) -> float:
        total = self.total
        return self.weight(token) / total if total > 0 else 0.0

    def ranked(self) -> list[tuple[int | None, float]]:
        """(token, weight) best first; None stands for the background block (its tokens follow
        one another in id order, after the explicit tokens of equal weight)."""
        items: list[tuple[int | None, float]] = sorted(self.explicit, key=lambda e: (-e[1], e[0]))
        if self.block_n and self.block_w > 0:
            at = next((i for i, (_, w) in enumerate(items) if w < self.block_w), len(items))
            items.insert(at, (None, self.block_w))
        return items

    def argmax(self) -> int:
        token, _ = self.ranked()[0]
        return self.background_id(0) if token is None else token

    def sample(self, rng: random.Random) -> int:
        u = rng.random() * self.total
        for token, w in self.explicit:
            if u < w:
                return token
            u -= w
        if self.block_n and self.block_w > 0:
            return self.background_id(min(self.block_n - 1, int(u / self.block_w)))
        return self.argmax()  # rounding left u at the very end

    def keep(self, tokens: set[int], block_n: int) -> Weights:
        return Weights(tuple(e for e in self.explicit if e[0] in tokens), self.candidates, block_n, self.block_w)


def tempered(dist: Distribution, temperature: float) -> Weights:
    top = dist.logits[0]
    explicit = tuple((t, math.exp((x - top) / temperature)) for t, x in zip(dist.tokens, dist.logits))
    candidates = tuple(sorted(dist.tokens))
    return Weights(explicit, candidates, VOCAB_SIZE - len(candidates), math.exp(-top / temperature))


def _top_k(w: Weights, k: int) -> Weights:
    tokens: set[int] = set()
    block = 0
    left = k
    for token, _ in w.ranked():
        if left <= 0:
            break
        if token is None:
            block = min(w.block_n, left)
            left -= block
        else:
            tokens.add(token)
            left -= 1
    return w.keep(tokens, block)


def _top_p(w: Weights, top_p: float) -> Weights:
    """SGLang's rule: a token stays while the probability before it is at most top_p."""
    total = w.total
    tokens: set[int] = set()
    block = 0
    before = 0.0
    for token, weight in w.ranked():
        p = weight / total
        if before > top_p:
            break
        if token is None:
            block = min(w.block_n, int((top_p - before) / p) + 1) if p > 0 else 0
            before += block * p
        else:
            tokens.add(token)
            before += p
    return w.keep(tokens, block)


def _min_p(w: Weights, min_p: float) -> Weights:
    bar = min_p * max([x for _, x in w.explicit] + ([w.block_w] if w.block_n else []))
    tokens = {t for t, x in w.explicit if x >= bar}
    return w.keep(tokens, w.block_n if w.block_w >= bar else 0)


def processed(dist: Distribution, params: SamplingParams, skip: frozenset[str] = frozenset()) -> Weights:
    """SGLang's order: temperature, softmax, top_k, top_p (on the renormalised top_k), min_p.
    `skip` names filters left off (the drafts-unfiltered fault)."""
    w = tempered(dist, params.temperature)
    if params.top_k > 0 and "top_k" not in skip:
        w = _top_k(w, params.top_k)
    if params.top_p < 1.0 and "top_p" not in skip:
        w = _top_p(w, params.top_p)
    if params.min_p > 0.0 and "min_p" not in skip:
        w = _min_p(w, params.min_p)
    return w


def residual(p: Weights, q: Weights) -> Weights:
    """max(0, p - q), unnormalised: where rejection sampling draws a rejected draft's replacement.
    p's block is a prefix of q's (q is unfiltered), so the block stays one block."""
    zp, zq = p.total, q.total
    explicit = tuple((t, max(0.0, w / zp - q.prob(t))) for t, w in p.explicit)
    block_w = max(0.0, p.block_w / zp - q.block_w / zq) if p.block_n else 0.0
    return Weights(explicit, p.candidates, p.block_n if block_w > 0 else 0, block_w)


def draft_weights(model: ToyModel, context: list[int], temperature: float) -> Weights:
    """The drafter's q: the target's tempered distribution with the drafter's own guess favoured."""
    dist = model.distribution(context)
    guess = model.draft(context, 0)
    w = tempered(dist, temperature)
    bonus = math.exp(DRAFT_BONUS / temperature)
    return Weights(tuple((t, x * bonus if t == guess else x) for t, x in w.explicit), w.candidates, w.block_n, w.block_w)


def true_top_logprobs(dist: Distribution, k: int) -> list[tuple[float, int]]:
    """The k most likely tokens with their logprobs, background tokens included where they rank
    (SGLang's top logprobs are a torch.topk: every token counts). Raw logits, temperature 1."""
    z = dist.log_normaliser
    w = tempered(dist, 1.0)
    out: list[tuple[float, int]] = []
    logit = dict(zip(dist.tokens, dist.logits))
    for token, _ in w.ranked():
        if len(out) >= k:
            break
        if token is None:
            for i in range(min(w.block_n, k - len(out))):
                out.append((0.0 - z, w.background_id(i)))
        else:
            out.append((logit[token] - z, token))
    return out
