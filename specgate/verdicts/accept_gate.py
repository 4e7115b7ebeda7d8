"""The accept-length floor gate: the drafter's accept length on this workload, pooled over the
measured requests, against the deployment's floor."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specgate.deployment import (
    MAX_CONCURRENCY,
    MAX_TOKENS_PER_STEP,
    Deployment,
    ServerConfig,
    Workload,
    check_concurrency,
    check_config_named,
    flag_int,
)
from specgate.gate_kinds import GateKind, PlannedGate
from specgate.measure.answer_end import past_the_end
from specgate.measure.stats import Interval
from specgate.measure.summary import accept_interval
from specgate.prompts import set_of
from specgate.verdicts.gate_base import SIMULATED_TAU_ENV, GateBase, _level, simulated_tau
from specgate.verdicts.gates import (
    FAIL,
    PASS,
    VACUOUS,
    GateFigures,
    Verdict,
    at_least,
    decide_sequentially,
    planned_looks,
)
from specgate.verdicts.vacuity import TAU_FLOOR, Vacuity

if TYPE_CHECKING:
    from specgate.tomlcheck import Table


@dataclass(frozen=True)
class AcceptFloorGate:
    """A trained drafter's promise: this config's accept length (tokens per verify step, pooled over
    the measured requests) is at least `at_least` on this workload."""

    config: str
    at_least: float
    concurrency: int

    @property
    def name(self) -> str:
        at = f"-c{self.concurrency}" if self.concurrency != 1 else ""  # as a beats gate names it
        return f"{self.config}-accepts-{self.at_least:g}{at}"


class AcceptFloorGates(GateBase):
    def accept_floor(self, gate: AcceptFloorGate) -> Verdict:
        """The drafter's accept length on this workload, pooled over the measured requests, is at
        least `gate.at_least`: the whole interval above it passes, below it fails."""
        name = f"accept:{gate.name}"
        if (vacuous := self._vacuous(name, gate.config, accept_floor(self.deployment, gate))) is not None:
            return vacuous
        conf = self.confidence
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
            return accept_interval(record, level) or Interval(math.nan, math.nan, math.nan, level)

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
        figures: GateFigures = {"accept_length": tau.as_dict(), "required": gate.at_least, "n": len(spec)}
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


def accept_floor(deployment: Deployment, gate: AcceptFloorGate) -> Vacuity | None:
    if gate.at_least > TAU_FLOOR:
        return None
    index = deployment.gates.accept_length.index(gate)
    return Vacuity(
        f"gates.accept_length[{index}].at_least",
        gate.at_least,
        f"every verify step accepts at least the verified token, so {gate.config}'s accept length is at least "
        f"{TAU_FLOOR:g}: a floor of {gate.at_least:g} passes a drafter that accepts nothing",
    )


class AcceptFloor(GateKind):
    """A speculative config's accept length on this workload is at least a floor."""

    name = "accept"
    test = "test_accept_length_floor"
    table = "accept_length"
    example = {"config": "{speculative}", "at_least": 1.5, "concurrency": 1}

    def parse(self, g: Table, configs: dict[str, ServerConfig], workload: Workload) -> AcceptFloorGate:
        gate = AcceptFloorGate(
            config=g.text("config"),
            at_least=g.number("at_least", minimum=0.0, maximum=MAX_TOKENS_PER_STEP),
            concurrency=g.integer("concurrency", 1, minimum=1, maximum=MAX_CONCURRENCY),
        )
        check_config_named(g, "config", gate.config, configs)
        if not configs[gate.config].speculative:
            raise g.error("config", f"{gate.config!r} does not speculate: it has no accept length")
        # A floor at or below 1.0 cannot fail (every accept length is at least 1): VACUOUS, warned of
        # by `specgate check` and reported by the run (accept_floor), not refused.
        steps = flag_int(configs[gate.config].args, "--speculative-num-steps")
        if steps is not None and gate.at_least > steps + 1:
            raise g.error(
                "at_least",
                f"is {gate.at_least:g}, above {steps + 1} (--speculative-num-steps {steps} + the verified token), "
                "the most one verify step can accept: this gate cannot pass",
            )
        check_concurrency(g, gate.concurrency, workload)
        return gate

    def planned(self, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
        return [
            PlannedGate(
                self.name, f"accept:{floor.name}", floor.config, (floor.config,), floor.name, floor,
                concurrency=floor.concurrency,
            )
            for floor in dep.gates.accept_length
        ]

    def decide(self, judge: AcceptFloorGates, gate: PlannedGate) -> Verdict:
        return judge.accept_floor(gate.spec)

    def describe(self, dep: Deployment) -> list[str]:
        return [
            f"  gate: {floor.config} must accept >= {floor.at_least:g} tokens per verify step "
            f"(concurrency {floor.concurrency})"
            for floor in dep.gates.accept_length
        ]

    def vacuities(self, dep: Deployment) -> list[Vacuity]:
        return [v for floor in dep.gates.accept_length if (v := accept_floor(dep, floor)) is not None]


KIND = AcceptFloor()
