"""A/B in one run: the candidate speculative config against a base speculative config booted beside
it, interleaved request by request, judged on the paired per-request ratios. No stored side.

The base is what the change is measured against: the same speculative flags on the base build
(a config with its own `command`: another install, venv or container, or a `url`), or the same
build with the base flags or drafter. Both servers run in one run, side by side, so what the
servers of one run share (on the H200, most of a speculative server's between-boot spread: a
host-side state) cancels in their ratio where the calibration splits it; each server's own part
and the requests' autocorrelation remain (verdicts/noise.py). On the H200 data this sees a few
percent from one run where a stored baseline sees ~10-13% (docs/statistics.md).

Each `[[gates.ab]]` entry is two gates, each with half of the run's false-alarm budget for the
pair: the speed (decode tok/s, candidate over base) and the accept length (tokens per verify step,
pooled and paired per prompt), which has no between-boot part and so sees a drafter or verify
regression far smaller than speed can. Their split, speed = accept length / verify-cycle time, is
said beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from specgate.deployment import (
    MAX_CONCURRENCY,
    Deployment,
    ServerConfig,
    Workload,
    check_concurrency,
    check_config_named,
)
from specgate.gate_kinds import GateKind, PlannedGate
from specgate.measure.pairing import pooled, ratio_series
from specgate.measure.speed import ConfigSpeed
from specgate.measure.stats import Interval, paired_pooled_ratio
from specgate.verdicts.gate_base import GateBase, _level, simulated_tau
from specgate.verdicts.gates import FAIL, PASS, VACUOUS, GateFigures, Verdict, at_least, pct
from specgate.verdicts.noise import HeldNoise, pair_spread, ratio_interval_held
from specgate.verdicts.vacuity import Vacuity

if TYPE_CHECKING:
    from specgate.tomlcheck import Table

Figure = Literal["speed", "accept"]
FIGURES: tuple[Figure, ...] = ("speed", "accept")


@dataclass(frozen=True)
class AbGate:
    """`[[gates.ab]]`: `config` is no more than `tolerance` slower than `base`, and accepts no more
    than `accept_tolerance` fewer tokens per verify step, both measured side by side in this run."""

    config: str
    base: str
    tolerance: float | None  # None: [gates.tolerance] decode_tps for the config
    accept_tolerance: float | None  # None: [gates.tolerance] accept_length
    concurrency: int = 1

    @property
    def name(self) -> str:
        at = f"-c{self.concurrency}" if self.concurrency != 1 else ""
        return f"{self.config}-vs-{self.base}{at}"

    def speed_tolerance(self, dep: Deployment) -> float:
        return self.tolerance if self.tolerance is not None else dep.gates.tolerance.decode_tps_for(self.config)

    def tau_tolerance(self, dep: Deployment) -> float:
        return self.accept_tolerance if self.accept_tolerance is not None else dep.gates.tolerance.accept_length


@dataclass(frozen=True)
class AbPlanned:
    """What one planned A/B gate decides: its entry and which of its two figures."""

    gate: AbGate
    figure: Figure


def share_of_budget(confidence: float) -> float:
    """Each of an entry's two gates keeps half the false-alarm budget (Bonferroni over the pair)."""
    return 1 - (1 - confidence) / len(FIGURES)


def _paired_tau(candidate: ConfigSpeed, base: ConfigSpeed, confidence: float) -> Interval | None:
    """Candidate's pooled accept length over base's, over the requests both answered (same boot and
    pinned index): each prompt's answer is the same greedy text on both, so pairing removes the prompt."""
    theirs = {(s.boot, s.index): s for s in base.samples if s.verify_ct}
    pairs = [(s, theirs[(s.boot, s.index)]) for s in candidate.samples if s.verify_ct and (s.boot, s.index) in theirs]
    if len(pairs) < 2:
        return None
    return paired_pooled_ratio(
        [a.completion_tokens for a, _ in pairs],
        [a.verify_ct or 0 for a, _ in pairs],
        [b.completion_tokens for _, b in pairs],
        [b.verify_ct or 0 for _, b in pairs],
        confidence,
    )


def _split_sentence(speed: float, tau: float | None) -> str | None:
    """speed ratio = accept-length ratio / cycle-time ratio: where the change sits."""
    if tau is None or speed <= 0 or tau <= 0:
        return None
    cycle = tau / speed
    return (
        f"speed {pct(speed - 1)} = accept length {pct(tau - 1)} and verify-cycle time {pct(cycle - 1)} "
        f"(cycle time = accept length / decode speed, per request, from the servers' own counters): the change is "
        + ("mostly in the cycle (host or kernels), not the drafter" if abs(math.log(cycle)) > abs(math.log(tau))
           else "mostly in what the drafter gets accepted")
    )  # fmt: skip


class AbGates(GateBase):
    def ab(self, planned: AbPlanned, name: str) -> Verdict:
        gate, figure = planned.gate, planned.figure
        if (vacuous := self._vacuous(name, gate.config, ab_vacuity(self.deployment, gate, figure))) is not None:
            return vacuous
        c = gate.concurrency
        pair = [gate.config, gate.base]
        candidate, base = self.records(pair, c)
        confidence = share_of_budget(self.confidence)
        if figure == "accept":
            return self._record(self._ab_accept(name, gate, candidate, base, confidence))
        return self._record(self._held_to_fidelity(self._ab_speed(name, gate, candidate, base, confidence), pair, c))

    def _ab_speed(
        self, name: str, gate: AbGate, candidate: ConfigSpeed, base: ConfigSpeed, confidence: float
    ) -> Verdict:
        allowed = gate.speed_tolerance(self.deployment)
        spread = pair_spread(self.spread(gate.config, "decode_tps"), self.spread(gate.base, "decode_tps"), True)
        noise = [HeldNoise("", covers_between_boot=False)]

        def interval_at(level: float) -> Interval:
            iv, noise[0] = ratio_interval_held(
                ratio_series(candidate.decode_tps_by_boot(), base.decode_tps_by_boot()), level, spread
            )
            return iv

        status, ratio, taken, looks = self.sequential(
            [gate.config, gate.base], gate.concurrency, interval_at, lambda iv: at_least(iv, 1 - allowed), confidence
        )
        paired = len(pooled(ratio_series(candidate.decode_tps_by_boot(), base.decode_tps_by_boot())))
        tau = _paired_tau(candidate, base, confidence)
        head = (
            f"{gate.config} decodes at {ratio.estimate:.3f}x {gate.base} [{ratio.low:.3f}, {ratio.high:.3f}] "
            f"({_level(ratio, confidence, looks)}, {paired} paired requests side by side, look {taken} of {looks}); "
            f"required >= {1 - allowed:.3g}x (at most {allowed:.0%} slower)"
        )
        figures: GateFigures = {"ratio": ratio.as_dict(), "required": 1 - allowed, "n": [len(candidate.samples), len(base.samples)]}
        notes = [
            f"A/B in one run: {gate.base} booted beside {gate.config} and sent the same requests interleaved; half "
            f"of the pair's false-alarm budget ({1 - confidence:.1%})"
        ]
        if (split := _split_sentence(ratio.estimate, tau.estimate if tau else None)) is not None:
            notes.append(split)
        if not self.deployment.launch.coexist:
            notes.append("the servers took turns (launch.coexist = false): not side by side, so nothing shared cancels")
        return self._ab_verdict(name, gate.config, status, head, notes, figures, noise[0])

    def _ab_accept(
        self, name: str, gate: AbGate, candidate: ConfigSpeed, base: ConfigSpeed, confidence: float
    ) -> Verdict:
        allowed = gate.tau_tolerance(self.deployment)
        faked = simulated_tau(self.deployment, gate.config) or simulated_tau(self.deployment, gate.base)
        if faked is not None:
            return Verdict(
                name, gate.config, VACUOUS,
                f"an accept length is fixed by SGLANG_SIMULATE_ACC_LEN={faked}: an A/B of it says nothing of the drafter",
            )  # fmt: skip
        if not any(s.verify_ct for s in candidate.samples) or not any(s.verify_ct for s in base.samples):
            silent = gate.config if not any(s.verify_ct for s in candidate.samples) else gate.base
            return Verdict(
                name, gate.config, FAIL,
                f"{silent} carries no spec_verify_ct: it does not speculate, or this SGLang spells the counter "
                "differently; an A/B of accept length needs both sides' counters — FAILS",
            )  # fmt: skip
        for config in (gate.config, gate.base):
            if (contradicted := self._counters_contradicted(name, config, gate.concurrency)) is not None:
                contradicted.config = gate.config
                return contradicted

        def interval_at(level: float) -> Interval:
            found = _paired_tau(candidate, base, level)
            return found if found is not None else Interval(math.nan, math.nan, math.nan, level)

        status, tau, taken, looks = self.sequential(
            [gate.config, gate.base], gate.concurrency, interval_at, lambda iv: at_least(iv, 1 - allowed), confidence
        )
        head = (
            f"{gate.config}'s accept length is {tau.estimate:.3f}x {gate.base}'s [{tau.low:.3f}, {tau.high:.3f}] "
            f"({_level(tau, confidence, looks)}, pooled over the requests both answered, paired per prompt; look "
            f"{taken} of {looks}); required >= {1 - allowed:.3g}x (at most {allowed:.0%} fewer tokens per step)"
        )
        figures: GateFigures = {"accept_ratio": tau.as_dict(), "required": 1 - allowed}
        notes = [
            "accept length depends on the drafter, the target and the verify path, not on timing: no between-boot "
            f"part, so it sees a drafter or verify regression far smaller than speed can; half of the pair's "
            f"false-alarm budget ({1 - confidence:.1%})"
        ]
        held = HeldNoise("requests (which prompt, which answer), paired per prompt; accept length has no timing noise", True)
        verdict = self._ab_verdict(name, gate.config, status, head, notes, figures, held)
        verdict.covers_between_boot = None  # no timing across boots
        return verdict

    def _ab_verdict(
        self, name: str, config: str, status, head: str, notes: list[str], figures: GateFigures, noise: HeldNoise
    ) -> Verdict:
        if status == PASS:
            summary = head
        elif status == FAIL:
            summary = head + " — FAILS"
        else:
            summary = head + " — still INCONCLUSIVE at the cap of requests: the interval straddles the bar"
        return Verdict(name, config, status, summary, notes, figures, noise.words, noise.covers_between_boot)


def ab_vacuity(dep: Deployment, gate: AbGate, figure: Figure) -> Vacuity | None:
    allowed = gate.speed_tolerance(dep) if figure == "speed" else gate.tau_tolerance(dep)
    if allowed < 1:
        return None
    index = dep.gates.of("ab").index(gate)
    field = "tolerance" if figure == "speed" else "accept_tolerance"
    return Vacuity(
        f"gates.ab[{index}].{field}",
        allowed,
        f"a tolerance of {allowed:.0%} lets the candidate be {allowed:.0%} slower or worse: no ratio above 0 fails it",
    )


class Ab(GateKind):
    """A/B in one run: a candidate speculative config against a base one booted beside it, on speed
    and on accept length, with no stored side."""

    name = "ab"
    test = "test_ab_in_one_run"
    table = "ab"
    example = {
        "config": "{speculative}", "base": "{speculative}", "tolerance": 0.05, "accept_tolerance": 0.03,
        "concurrency": 1,
    }  # fmt: skip

    def parse(self, g: Table, configs: dict[str, ServerConfig], workload: Workload) -> AbGate:
        gate = AbGate(
            config=g.text("config"),
            base=g.text("base"),
            tolerance=g.number("tolerance", None, minimum=0.0, maximum=1.0),
            accept_tolerance=g.number("accept_tolerance", None, minimum=0.0, maximum=1.0),
            concurrency=g.integer("concurrency", 1, minimum=1, maximum=MAX_CONCURRENCY),
        )
        check_config_named(g, "config", gate.config, configs)
        check_config_named(g, "base", gate.base, configs)
        if gate.config == gate.base:
            raise g.error("base", f"is {gate.base!r}, the gate's own config: a config compared with itself cannot fail")
        for field, name in (("config", gate.config), ("base", gate.base)):
            if not configs[name].speculative:
                raise g.error(
                    field,
                    f"{name!r} declares no --speculative-algorithm: A/B in one run compares two speculative "
                    "configs (the candidate and the base build or flags); against the plain reference use "
                    "[[gates.beats]]",
                )
        check_concurrency(g, gate.concurrency, workload)
        return gate

    def planned(self, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
        out = []
        for gate in dep.gates.of("ab"):
            for figure in FIGURES:
                out.append(
                    PlannedGate(
                        self.name, f"ab:{gate.name}:{figure}", gate.config, (gate.config, gate.base),
                        f"{gate.name}-{figure}", AbPlanned(gate, figure), timing=figure == "speed",
                        concurrency=gate.concurrency,
                    )
                )  # fmt: skip
        return out

    def decide(self, judge: AbGates, gate: PlannedGate) -> Verdict:
        return judge.ab(gate.spec, gate.name)

    def describe(self, dep: Deployment) -> list[str]:
        lines = []
        for gate in dep.gates.of("ab"):
            side = "side by side, interleaved" if dep.launch.coexist else "taking turns (coexist = false: nothing cancels)"
            lines.append(
                f"  gate: A/B in one run, {gate.config} against {gate.base} ({side}, concurrency {gate.concurrency}): "
                f"at most {gate.speed_tolerance(dep):.0%} slower and {gate.tau_tolerance(dep):.0%} lower accept "
                "length, each at half the false-alarm budget; no stored baseline"
            )
        return lines

    def vacuities(self, dep: Deployment) -> list[Vacuity]:
        return [v for gate in dep.gates.of("ab") for f in FIGURES if (v := ab_vacuity(dep, gate, f)) is not None]


KIND = Ab()
