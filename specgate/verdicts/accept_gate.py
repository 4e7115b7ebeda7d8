"""The accept-length floor gate: the drafter's accept length on this workload, pooled over the
measured requests, against the deployment's floor."""

from __future__ import annotations

import math

from specgate.deployment import AcceptFloorGate
from specgate.measure.answer_end import past_the_end
from specgate.measure.stats import Interval, pooled_ratio
from specgate.prompts import set_of
from specgate.verdicts import vacuity
from specgate.verdicts.gate_base import SIMULATED_TAU_ENV, GateBase, _level, simulated_tau
from specgate.verdicts.gates import FAIL, PASS, VACUOUS, Verdict, at_least, decide_sequentially, planned_looks


class AcceptFloorGates(GateBase):
    def accept_floor(self, gate: AcceptFloorGate) -> Verdict:
        """The drafter's accept length on this workload, pooled over the measured requests, is at
        least `gate.at_least`: the whole interval above it passes, below it fails."""
        name = f"accept:{gate.name}"
        if (vacuous := self._vacuous(name, gate.config, vacuity.accept_floor(self.deployment, gate))) is not None:
            return vacuous
        conf = self.deployment.gates.confidence
        wl = self.deployment.workload
        faked = simulated_tau(self.deployment, gate.config)
        if faked is not None:
            return self._record(
                Verdict(
                    name,
                    gate.config,
                    VACUOUS,
                    f"{gate.config}'s accept length is fixed by {SIMULATED_TAU_ENV}={faked} (SGLang's simulation): "
                    "a floor on it says nothing about the drafter",
                )
            )
        self._gather([gate.config], gate.concurrency, wl.repeats)
        record = self._record_of(gate.config, gate.concurrency)

        def interval_at(level: float) -> Interval:
            spec = [s for s in record.samples if s.verify_ct]
            if not spec:
                return Interval(math.nan, math.nan, math.nan, level)
            return pooled_ratio([s.completion_tokens for s in spec], [s.verify_ct or 0 for s in spec], level)

        if not any(s.verify_ct for s in record.samples):
            return self._record(
                Verdict(
                    name,
                    gate.config,
                    FAIL,
                    f"{gate.config} is configured speculative but its responses carry no spec_verify_ct: "
                    "speculation is silently off, or this SGLang spells the counter differently",
                )
            )
        if (contradicted := self._counters_contradicted(name, gate.config, gate.concurrency)) is not None:
            return self._record(contradicted)  # measuring more of a miscounting server decides nothing
        looks = planned_looks(self.plan.per_boot([gate.config], gate.concurrency), wl.max_repeats, self._batch())
        status, tau, taken = decide_sequentially(
            interval_at,
            lambda iv: at_least(iv, gate.at_least),
            lambda: self.plan.more([gate.config], gate.concurrency, wl.max_repeats, self._batch()),
            conf,
            looks,
        )
        spec = [s for s in record.samples if s.verify_ct]
        head = (
            f"{gate.config} accepts {tau.estimate:.3f} tokens per verify step [{tau.low:.3f}, {tau.high:.3f}] "
            f"({_level(tau, conf, looks)}, {len(spec)} requests, {sum(s.verify_ct or 0 for s in spec)} verify steps); "
            f"required >= {gate.at_least:g}"
        )
        figures: dict = {"accept_length": tau.as_dict(), "required": gate.at_least, "n": len(spec)}
        noise = "requests (which prompt, which answer); accept length does not depend on timing"
        notes = []
        if not wl.ignore_eos:
            figures["answers_only"] = True
            notes.append(
                "requests end where the model's answer ends (workload.ignore_eos = false): τ over the answers alone"
            )
        past = past_the_end([(s.completion_tokens, s.answer_tokens) for s in spec])
        if past is not None:
            figures["past_answer_end"] = past
            if past["requests"] and not wl.ignore_eos:
                notes.append(
                    f"{past['requests']} of {past['of']} requests ended on max_new_tokens with tokens past the "
                    "model's end of sequence, accepted in the verify step that reached the limit (SGLang checks "
                    "the limit before the stops)"
                )
            elif past["requests"]:
                whose = "" if past["of"] == len(spec) else f" whose token ids came back (of {len(spec)})"
                notes.append(
                    f"{past['requests']} of the {past['of']} requests{whose} ran past the model's end-of-sequence "
                    f"token (speed requests ignore EOS to run to max_new_tokens = {wl.max_new_tokens}): "
                    f"{past['token_share']:.0%} of their tokens come after the answer, text past the end of turn "
                    "that a drafter trained on answers alone has not learned (SGLang counts accepts per request, "
                    "so τ over the answers alone cannot be separated)"
                )
        if status != PASS:
            notes.append(
                "accept length is the drafter's agreement with the target on these prompts: a shortfall means a "
                "weaker or mismatched draft checkpoint, prompts unlike its training data, or a broken hidden-state "
                "capture, never timing noise"
            )
            identity = self.drafters().get(gate.config)
            if identity is not None:
                from specgate.measure.drafters import describe, walk_comparison, walk_note

                notes.append(f"drafter: {describe(identity)}")
                # Only where the walk models these requests (measure.drafters.expected_by_set decided)
                # and walked these very weights (the checksum now is the one training recorded).
                walked = identity.get("walked_tau_by_set") if identity.get("matches_record") is True else None
                if walked:
                    answers = [(self.meter.label(s), s.completion_tokens, s.verify_ct or 0) for s in spec]
                    unwalked = sorted({set_of(a[0]) for a in answers} - set(walked))
                    compared = walk_comparison(
                        answers, walked, conf, identity.get("walked_by_prompt"),
                        [(s.answer_tokens, s.answer_digest) for s in spec], identity.get("walked_digest_by_prompt"),
                        wl.max_new_tokens,
                    )  # fmt: skip
                    if compared is not None:
                        figures["walked_tau"] = round(compared.predicted, 3)
                        figures["served_over_walked"] = compared.ratio.as_dict()
                        if compared.parted:
                            figures["answers_parted_from_walk"] = compared.parted
                        if compared.compared_by_ids:  # of those compared by ids, how many parted and how many were the walked ones
                            figures["answers_compared_by_token_ids"] = compared.compared_by_ids
                            figures["answers_parted_by_token_ids"] = compared.by_ids
                            figures["answers_walked_by_token_ids"] = compared.proven
                        if compared.kept_ratio is not None:
                            figures["served_over_walked_unparted"] = compared.kept_ratio.as_dict()
                        notes.append(walk_note(compared, gate.at_least))
                    elif unwalked:
                        notes.append(f"training's walk has no figure for {', '.join(unwalked)}: not compared with it")
        if (contradicted := self._counters_contradicted(name, gate.config, gate.concurrency)) is not None:
            return self._record(contradicted)  # a request measured since the first look miscounted
        if status == PASS:
            return self._record(Verdict(name, gate.config, PASS, head, notes, figures, noise))
        suffix = (
            " — FAILS"
            if status == FAIL
            else f" — still INCONCLUSIVE at the cap of {wl.max_repeats} requests per boot: no pass can be shown"
        )
        return self._record(Verdict(name, gate.config, status, head + suffix, notes, figures, noise))
