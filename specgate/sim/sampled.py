"""SIMULATOR generation at temperature > 0: plain sampling, or draft-then-verify by rejection
sampling (sampling.py holds the distributions). Served whole (not streamed): the gate's
sampling test sends batches and reads each answer at the end, as it does of SGLang.

The sampling faults act on the verify pass only; the first token comes from the prefill's
sampler, which no fault touches, as on the engines whose verify broke:
- greedy-accept: a draft is accepted only where it is the target's argmax, and a rejected one,
  like the bonus, is replaced by the argmax (SGLang's ROCm verify at temperature > 0);
- drafts-unfiltered=F: the acceptance test uses the distribution without the filters F (top_k,
  top_p, min_p; all three when none are named), so accepted drafts break them (vLLM's min_p);
- temperature-twice: verify divides the logits by the temperature twice;
- penalties-off-verify: verify tests and replaces drafts, and draws the bonus, without the
  penalties and the logit_bias (a verify path not wired to the penalizers); the prefill's token keeps them.
And one that is no fault: boundary-jitter=S, every sampler's logits off the scoring pass's by
N(0, S), keyed to the context alone so the plain and the speculative server sample the same
distribution, which the prompt-logprob pass (sampled_api) ranks without the jitter: healthy
tokens at a filter's edge then fall past it as scored, on both sides, as on bf16 hardware.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace

from specgate.sim.cost import CostModel
from specgate.sim.engine import SpecSettings
from specgate.sim.faults import Faults
from specgate.sim.model import Distribution, ToyModel
from specgate.sim.sampling import SamplingParams, Weights, draft_weights, penalised, processed, residual
from specgate.sim.tokenizer import EOS_ID


@dataclass
class SampledAnswer:
    output_ids: list[int] = field(default_factory=list)
    finish_reason: dict | None = None
    verify_ct: int = 0
    accepted_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: list[int] = field(default_factory=list)
    cost_s: float = 0.0


class SampledGeneration:
    def __init__(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        max_new_tokens: int,
        ignore_eos: bool,
        seed: int | None,
        spec: SpecSettings | None,
        faults: Faults,
        cost: CostModel,
        weights: str = "",
    ) -> None:
        agreement = 0.0 if faults.accept_collapse else (spec.draft_agreement if spec else 0.0)
        self.model = ToyModel(prompt_ids, agreement, spec.draft_context if spec else None, weights)
        self.prompt_ids = prompt_ids
        self.params = params
        self.max_new_tokens = max_new_tokens
        self.ignore_eos = ignore_eos
        # SGLang's sampling_seed: the same seed, the same answer; none, a fresh draw.
        self.rng = random.Random(seed if seed is not None else random.SystemRandom().getrandbits(64))
        self.spec = spec
        self.faults = faults
        self.cost = cost
        self.answer = SampledAnswer(accept_histogram=[0] * ((spec.depth + 1) if spec else 0))

    def run(self) -> SampledAnswer:
        a = self.answer
        a.cost_s = self.cost.prefill_s(len(self.prompt_ids))
        if self.max_new_tokens <= 0:
            a.finish_reason = {"type": "length", "length": 0}
            return a
        self._append([self._target(verify=False).sample(self.rng)])
        while a.finish_reason is None:
            if self.spec is None:
                kv = len(self.prompt_ids) + len(a.output_ids)  # the KV this step attends over
                self._append([self._target(verify=False).sample(self.rng)])
                a.cost_s += self.cost.decode_step_s(kv)
            else:
                kv = len(self.prompt_ids) + len(a.output_ids)
                self._append(self._cycle())
                a.cost_s += self.cost.spec_cycle_s(self.spec.steps, self.spec.draft_tokens, self.spec.attention_mode, kv)
        return a

    def _context(self, extra: list[int] | None = None) -> list[int]:
        return self.prompt_ids + self.answer.output_ids + (extra or [])

    def _target(self, verify: bool, extra: list[int] | None = None, skip: frozenset[str] = frozenset()) -> Weights:
        params = self.params
        if verify and self.faults.temperature_twice:
            params = replace(params, temperature=params.temperature**2)
        context = self._context(extra)
        dist = self.model.distribution(context)
        # The penalties' state is the answer so far, drafts this cycle accepted included.
        if not (verify and self.faults.penalties_off_verify):
            dist = penalised(dist, self.answer.output_ids + (extra or []), params)
        if self.faults.boundary_jitter:
            dist = jittered(dist, self.faults.boundary_jitter, context)
        return processed(dist, params, skip)

    def _cycle(self) -> list[int]:
        assert self.spec is not None
        accepted: list[int] = []
        tail: int | None = None
        for _ in range(self.spec.depth):
            p = self._target(verify=True, extra=accepted)
            q = draft_weights(self.model, self._context(accepted), self.params.temperature)
            draft = q.sample(self.rng)
            if self.faults.greedy_accept:
                if draft == p.argmax():
                    accepted.append(draft)
                    continue
                tail = p.argmax()
                break
            tested = self._target(verify=True, extra=accepted, skip=self.faults.drafts_unfiltered) if (
                self.faults.drafts_unfiltered
            ) else p
            if self.rng.random() * q.prob(draft) < tested.prob(draft):
                accepted.append(draft)
                continue
            r = residual(p, q)
            tail = (r if r.total > 0 else p).sample(self.rng)
            break
        if tail is None:  # every draft passed: the bonus token, from the target itself
            p = self._target(verify=True, extra=accepted)
            tail = p.argmax() if self.faults.greedy_accept else p.sample(self.rng)
        a = self.answer
        a.verify_ct += 1
        a.accepted_drafts += len(accepted)
        a.proposed_drafts += self.spec.depth
        a.accept_histogram[len(accepted)] += 1
        return [*accepted, tail]

    def _append(self, tokens: list[int]) -> None:
        a = self.answer
        for token in tokens:
            a.output_ids.append(token)
            if token == EOS_ID and not self.ignore_eos:
                a.finish_reason = {"type": "stop", "matched": EOS_ID}
                return
            if len(a.output_ids) >= self.max_new_tokens:
                a.finish_reason = {"type": "length", "length": len(a.output_ids)}
                return


def jittered(dist: Distribution, sd: float, context: list[int]) -> Distribution:
    """The candidates' logits moved by N(0, sd) each, drawn from the context (the same numbers for
    every server and every sample at that context), re-sorted highest first."""
    digest = hashlib.blake2b(repr(("jitter", tuple(context))).encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "little"))
    moved = sorted(((x + rng.gauss(0.0, sd), t) for t, x in zip(dist.tokens, dist.logits)), reverse=True)
    return Distribution(tuple(t for _, t in moved), tuple(x for x, _ in moved))
