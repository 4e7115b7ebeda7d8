"""SIMULATOR generation loop: plain greedy decoding, or draft-then-verify speculation.

Speculative steps follow EAGLE's shape: the draft proposes `steps` tokens (with `topk`
guesses per depth), the target verifies them in one pass, the longest agreeing prefix
is accepted and the target's own next token is added. Output is therefore always the
target's greedy chain under the verify kernel, whatever the draft guesses; only time
and accept length depend on the draft. Stop conditions are checked token by token, as
SGLang does, unless a fault says otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from specgate.sim.cost import CostModel
from specgate.sim.faults import Faults
from specgate.sim.features import Features, adjusted
from specgate.sim.model import Distribution, ToyModel
from specgate.sim.tokenizer import EOS_ID, decode


@dataclass(frozen=True)
class SpecSettings:
    algorithm: str
    steps: int
    topk: int
    draft_tokens: int
    attention_mode: str
    draft_agreement: float
    draft_context: int | None = None  # the draft config's max_position_embeddings, where it has one
    # SGLANG_SIMULATE_ACC_LEN, as SGLang's "match-expected" method: each cycle accepts the floor or
    # the ceiling of it (at most steps + 1), in proportions that average to it. Unlike SGLang, which
    # then writes a fixed token, the simulator keeps the target's greedy tokens.
    simulate_acc_len: float | None = None

    @property
    def depth(self) -> int:
        return max(1, min(self.steps, self.draft_tokens - 1))


@dataclass(frozen=True)
class GenParams:
    max_new_tokens: int
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    no_stop_trim: bool = False
    features: Features = Features()  # penalties, logit_bias, min_new_tokens, regex (sim/features.py)


@dataclass
class GenState:
    """What the server reports back: grows as steps complete."""

    output_ids: list[int] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)
    finish_reason: dict | None = None
    text: str = ""
    verify_ct: int = 0
    accepted_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: list[int] = field(default_factory=list)


class Generation:
    def __init__(
        self,
        prompt_ids: list[int],
        params: GenParams,
        spec: SpecSettings | None,
        faults: Faults,
        cost: CostModel,
        weights: str = "",
        choice: int = 0,
    ) -> None:
        # n-choices-differ: a speculative server's later choices (of sampling_params.n) part from
        # the first at their own index, as if each verified against another choice's drafts.
        if choice and spec is not None and faults.n_choices_differ:
            faults = replace(faults, diverge_at=choice)
        agreement = 0.0 if faults.accept_collapse else (spec.draft_agreement if spec else 0.0)
        self.model = ToyModel(prompt_ids, agreement, spec.draft_context if spec else None, weights)
        self.prompt_ids = prompt_ids
        self.params = params
        self.spec = spec
        self.faults = faults
        self.cost = cost
        self.state = GenState(accept_histogram=[0] * ((spec.depth + 1) if spec else 0))
        self._acc_rng = random.Random(len(prompt_ids))  # reproducible simulated accept lengths
        # penalty-per-step: the tokens the penalizer has counted, the last of each step only.
        self._penalized: list[int] = []

    def steps(self) -> Iterator[tuple[list[int], float]]:
        """Yields (new token ids, seconds the step costs); `state` is final when it stops."""
        first = self._token_at(self.prompt_ids, position=0, verify=False)
        self._penalized.append(first)
        yield self._append([first]), self.cost.prefill_s(len(self.prompt_ids))
        while self.state.finish_reason is None:
            if self.spec is None:
                kv = self.kv_tokens
                token = self._token_at(self.prompt_ids + self.state.output_ids, len(self.state.output_ids), False)
                yield self._append([token]), self.cost.decode_step_s(kv)
            else:
                kv = self.kv_tokens
                tokens = self._speculate()
                self._penalized.append(tokens[-1])
                yield (
                    self._append(tokens),
                    self.cost.spec_cycle_s(self.spec.steps, self.spec.draft_tokens, self.spec.attention_mode, kv),
                )

    @property
    def kv_tokens(self) -> int:
        """The KV length the next step attends over: the prompt and the answer so far."""
        return len(self.prompt_ids) + len(self.state.output_ids)

    def _token_at(self, context: list[int], position: int, verify: bool, drafted: bool = False) -> int:
        past = self.faults.diverge_past is not None and len(self.prompt_ids) + position >= self.faults.diverge_past
        if self.spec is not None and (self.faults.diverge_at == position or past):
            return self.model.distribution(context).tokens[2]  # never top-1 or top-2: decisive
        return self._distribution(context, verify, drafted).tokens[0]

    def _distribution(self, context: list[int], verify: bool, drafted: bool = False) -> Distribution:
        """The next token's distribution at the end of `context` under the request's features
        (sim/features.py); `drafted`: a position a verify step accepted from the draft."""
        base = self.model.verify_distribution(context) if verify else self.model.distribution(context)
        output = context[len(self.prompt_ids) :]
        f, spec = self.faults, self.spec is not None
        # penalty-per-step: the penalties' counts advance once per verify step, by its last token.
        counted = self._penalized if spec and f.penalty_per_step else output
        return adjusted(
            base,
            self.params.features,
            counted,
            self._produced(len(output)),
            self.params.stop_token_ids,
            bias=not (spec and drafted and f.bias_off_drafts),
            grammar=not (spec and drafted and f.grammar_off_drafts),
        )

    def _produced(self, tokens: int) -> int:
        """The output length min_new_tokens is held against: the tokens, or under the
        min-new-per-step fault a speculative server's verify steps (plus the prefill's token)."""
        if self.spec is not None and self.faults.min_new_per_step and tokens:
            return 1 + self.state.verify_ct
        return tokens

    def _speculate(self) -> list[int]:
        assert self.spec is not None
        context = self.prompt_ids + self.state.output_ids
        accepted: list[int] = []
        forced = self._simulated_accepts()
        for _ in range(self.spec.depth if forced is None else forced):
            here = context + accepted
            target = self._token_at(here, len(self.state.output_ids) + len(accepted), verify=True, drafted=True)
            guesses = {self.model.draft(here, attempt) for attempt in range(self.spec.topk)}
            if forced is None and target not in guesses:
                break
            accepted.append(target)
        bonus_context = context + accepted
        bonus = self._token_at(bonus_context, len(self.state.output_ids) + len(accepted), verify=True)
        self.state.verify_ct += 1
        self.state.accepted_drafts += len(accepted)
        self.state.proposed_drafts += self.spec.depth
        self.state.accept_histogram[len(accepted)] += 1
        return accepted + [bonus]

    def _simulated_accepts(self) -> int | None:
        """Drafts accepted this cycle under SGLANG_SIMULATE_ACC_LEN, or None (the draft decides)."""
        assert self.spec is not None
        if self.spec.simulate_acc_len is None:
            return None
        length = min(max(1.0, self.spec.simulate_acc_len), self.spec.depth + 1.0)
        lower = int(length)
        upper = lower + 1 if lower < self.spec.depth + 1 else lower
        chosen = upper if upper != lower and self._acc_rng.random() < length - lower else lower
        return chosen - 1

    def _append(self, tokens: list[int]) -> list[int]:
        """Append one step's tokens, stopping where SGLang would; returns those kept."""
        kept = []
        per_step = self.faults.stop_list_order and self.spec is not None
        for token in tokens:
            self.state.output_ids.append(token)
            context = self.prompt_ids + self.state.output_ids[:-1]
            # A speculative server's tokens after the first come from verify passes: its logprobs too.
            verified = self.spec is not None and len(self.state.output_ids) > 1
            self.state.distributions.append(self._distribution(context, verified))
            kept.append(token)
            reason = self._finish_reason(token, stop_strings=not per_step)
            if reason is not None:
                if self.state.finish_reason is None:
                    self.state.finish_reason = reason
                # The overshoot faults keep the rest of the accepted run: past max_new_tokens
                # (overshoot), or past a stop string with the text still cut there (stop-overshoot,
                # as SGLang 0.5.11's STANDALONE did on the H200).
                speculative = self.spec is not None
                matched = self.state.finish_reason.get("matched")
                past_stop = self.faults.stop_overshoot and isinstance(matched, str)
                # stop-id-overshoot: the same past one of the request's stop_token_ids
                past_id = self.faults.stop_id_overshoot and matched in self.params.stop_token_ids
                if not (speculative and (self.faults.overshoot or past_stop or past_id)):
                    break
        held = self._produced(len(self.state.output_ids)) < self.params.features.min_new_tokens
        # SGLang checks max_new_tokens first, then stop strings, then EOS. A request's stop token id
        # is checked before stop strings here, as on the plain path: only list order differs.
        finish = self.state.finish_reason or {}
        by_stop_id = finish.get("matched") in self.params.stop_token_ids
        if per_step and not held and finish.get("type") != "length" and not by_stop_id:
            self._stop_in_list_order(kept)
        self.state.text = self._text()
        return kept

    def _stop_in_list_order(self, kept: list[int]) -> None:
        """The stop-list-order fault: the step's stop strings, tried in the request's order; the
        first found ends the answer where it completes (earlier steps found none, so it lies in
        this step's tokens), even when another completes earlier in the same step."""
        start = self._stop_search_start()
        text = decode(self.state.output_ids)[start:]
        for s in self.params.stop:
            if s in text:
                ids = self.state.output_ids
                n = next(n for n in range(1, len(ids) + 1) if s in decode(ids[:n])[start:])
                drop = len(self.state.output_ids) - n
                if drop:
                    del self.state.output_ids[n:], self.state.distributions[n:], kept[max(0, len(kept) - drop) :]
                self.state.finish_reason = {"type": "stop", "matched": s}
                return

    def _finish_reason(self, token: int, stop_strings: bool = True) -> dict | None:
        p = self.params
        if self._produced(len(self.state.output_ids)) < p.features.min_new_tokens:
            # SGLang's finish check waits for min_new_tokens (stop strings too); only the limit ends it.
            if len(self.state.output_ids) >= p.max_new_tokens:
                return {"type": "length", "length": len(self.state.output_ids)}
            return None
        if token == EOS_ID and not p.ignore_eos:
            return {"type": "stop", "matched": EOS_ID}
        if token in p.stop_token_ids:
            return {"type": "stop", "matched": token}
        if stop_strings and p.stop and not (self.faults.stop_leak and self.spec is not None):
            text = decode(self.state.output_ids)
            start = self._stop_search_start()
            for s in p.stop:
                if s in text[start:]:
                    return {"type": "stop", "matched": s}
        if len(self.state.output_ids) >= p.max_new_tokens:
            return {"type": "length", "length": len(self.state.output_ids)}
        return None

    def _text(self) -> str:
        text = decode(self.state.output_ids)
        reason = self.state.finish_reason
        if reason and isinstance(reason.get("matched"), int) and reason["matched"] in self.state.output_ids:
            # A stop token id ends the text (stop-id-overshoot keeps ids past it, not text).
            text = decode(self.state.output_ids[: self.state.output_ids.index(reason["matched"]) + 1])
        if reason and isinstance(reason.get("matched"), str) and not self.params.no_stop_trim:
            text = text[: text.find(reason["matched"], self._stop_search_start())]
        return text

    def _stop_search_start(self) -> int:
        """Where in the output text stop strings are looked for (and cut): from its start, as SGLang
        does; under the prefill-stop-miss fault a speculative server starts after the first token's
        text, so a stop string that token holds is never seen (its text stays in the answer). With
        min_new_tokens M, from the M-th token's text: a stop string completed before it is
        generated text, as in SGLang, whose finish check waits for M tokens and then decodes only
        the tail."""
        start = 0
        if self.params.features.min_new_tokens > 1:
            start = len(decode(self.state.output_ids[: self.params.features.min_new_tokens - 1]))
        if self.faults.prefill_stop_miss and self.spec is not None and self.state.output_ids:
            return max(start, len(decode(self.state.output_ids[:1])))
        return start
