"""The *beats* gate: one config against another measured in this run (the median of per-request
ratios, paired by request and boot), or against the stored reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specgate.deployment import (
    MAX_CONCURRENCY,
    MAX_RATIO,
    Deployment,
    ServerConfig,
    Workload,
    check_concurrency,
    check_config_named,
)
from specgate.gate_kinds import GateKind, PlannedGate
from specgate.measure.pairing import pooled, ratio_series
from specgate.measure.stats import Interval, median_interval, widened
from specgate.measure.summary import accept_interval
from specgate.verdicts.baselines import StoredBaseline, workload_changed
from specgate.verdicts.gate_base import GateBase, _level
from specgate.verdicts.gates import (
    FAIL,
    INCONCLUSIVE,
    NOT_COMPARED,
    PASS,
    GateFigures,
    Verdict,
    at_least,
    decide_sequentially,
    pct,
    planned_looks,
)
from specgate.verdicts.noise import HeldNoise, ratio_interval_held
from specgate.verdicts.stored_reference import NOT_BOOTED, StoredReferenceError
from specgate.verdicts.vacuity import BEATS_RATIO_VACUOUS, Vacuity

if TYPE_CHECKING:
    from specgate.tomlcheck import Table


@dataclass(frozen=True)
class BeatsGate:
    """`[[gates.beats]]`: `config` decodes at least `ratio` times as fast as `over`."""

    config: str
    over: str
    ratio: float
    concurrency: int
    # "run": `over` measured in this run, side by side; "stored": `over`'s figures in the stored
    # baseline (same fingerprint), for a reference too slow to boot on every merge, or a promise
    # made against a number ("EAGLE-3 must beat the 82 tok/s plain decoding gave").
    against: str = "run"

    @property
    def name(self) -> str:
        # The concurrency is named where it is not 1: one promise per concurrency is two gates.
        at = f"-c{self.concurrency}" if self.concurrency != 1 else ""
        return f"{self.config}-beats-{'stored-' if self.against == 'stored' else ''}{self.over}{at}"


class BeatsGates(GateBase):
    def beats(self, gate: BeatsGate) -> Verdict:
        if (vacuous := self._vacuous(f"beats:{gate.name}", gate.config, beats_ratio(self.deployment, gate))) is not None:
            return vacuous
        if gate.against == "stored" or (self.reference_stored and gate.over == self.deployment.reference):
            # Over the unbooted reference a gate can only be "now vs stored", whatever it says.
            return self._record(self._held_to_fidelity(self._beats_stored(gate), [gate.config], gate.concurrency))
        conf = self.confidence
        wl = self.deployment.workload
        c = gate.concurrency
        pair = [gate.config, gate.over]
        self._gather(pair, c, wl.repeats)
        cfg, ref = self._record_of(gate.config, c), self._record_of(gate.over, c)
        spread = self.spread(gate.config, "speedup")
        blocks = not self.deployment.launch.coexist
        # Measured in blocks, the ratio holds whatever the host did between them: the reference's
        # own move from its first block to its last says how much, and is held as noise.
        drift = self.plan.drift(gate.over, c, conf) if gate.over in self.deployment.references else None
        between_blocks = drift if blocks and drift is not None and drift.moved else None
        noise = [HeldNoise("", covers_between_boot=False)]  # each look says it anew

        def interval_at(level: float) -> Interval:
            iv, noise[0] = ratio_interval_held(
                ratio_series(cfg.decode_tps_by_boot(), ref.decode_tps_by_boot()), level, spread
            )
            if between_blocks is not None:
                iv = widened(iv, between_blocks.log_size)
                noise[0] = noise[0].plus(f"; plus the reference's move between blocks ({pct(between_blocks.ratio.estimate - 1)}) as one SD")
            return iv

        looks = planned_looks(self.plan.per_boot(pair, c), wl.max_repeats, self._batch())
        status, interval, taken = decide_sequentially(
            interval_at,
            lambda iv: at_least(iv, gate.ratio),
            lambda: self.plan.more(pair, c, wl.max_repeats, self._batch()),
            conf,
            looks,
        )
        paired = len(pooled(ratio_series(cfg.decode_tps_by_boot(), ref.decode_tps_by_boot())))
        tau = accept_interval(cfg, conf)
        figures: GateFigures = {
            "ratio": interval.as_dict(),
            "required": gate.ratio,
            "n": [len(cfg.samples), len(ref.samples)],
            "accept_length": tau.as_dict() if tau else None,
        }
        head = (
            f"{gate.config} decodes at {interval.estimate:.3f}x {gate.over} "
            f"[{interval.low:.3f}, {interval.high:.3f}] ({_level(interval, conf, looks)}, "
            f"{paired} paired requests, look {taken} of {looks}); required >= {gate.ratio:g}x"
        )
        if tau is not None:
            head += f"; accept length {tau.estimate:.2f}"
        notes = []
        if blocks:
            notes.append(
                "the two configs were measured in separate boots, one block each, not interleaved: the ratio also "
                "holds whatever drifted between the blocks"
                + (f" ({drift.sentence()})" if drift is not None else " (how far was not measured)")
            )
        name = f"beats:{gate.name}"
        if status == PASS:
            verdict = Verdict(name, gate.config, PASS, head, notes, figures, noise[0].words)
        elif status == FAIL:
            verdict = Verdict(name, gate.config, FAIL, head + " — FAILS", notes, figures, noise[0].words)
        else:
            verdict = Verdict(
                name,
                gate.config,
                INCONCLUSIVE,
                head + f" — still INCONCLUSIVE at the cap of {wl.max_repeats} requests per boot: the interval "
                f"straddles {gate.ratio:g}, so no pass can be shown",
                notes,
                figures,
                noise[0].words,
            )
        verdict.covers_between_boot = noise[0].covers_between_boot
        return self._record(self._held_to_fidelity(verdict, pair, c))

    def _beats_stored(self, gate: BeatsGate) -> Verdict:
        """`gate.config` now against `gate.over` as stored, request by request over the same pinned
        requests: an absolute floor from a measured baseline, with its between-boot noise."""
        name = f"beats:{gate.name}"
        c = gate.concurrency
        unbooted = self.reference_stored and gate.over == self.deployment.reference
        stored: StoredBaseline | None
        if unbooted:
            try:
                stand_in = self.stored_reference()
            except StoredReferenceError as exc:
                return Verdict(name, gate.config, NOT_COMPARED, str(exc))
            stored, why_not = stand_in.baseline, stand_in.note
            if (blind := self._no_boot_spread(gate.config)) is not None:
                return Verdict(name, gate.config, NOT_COMPARED, blind)
        else:
            stored, why_not = self.stored_for_comparison()
        if stored is None:
            return Verdict(name, gate.config, NOT_COMPARED, why_not, figures=self._first_record_mark())
        figs = stored.figures.get((gate.over, c))
        over_digest = self.deployment.configs[gate.over].args_digest(self.deployment.launch)
        if figs is None or figs.args_digest != over_digest:
            why = "holds no figures for it" if figs is None else "was recorded with other launch flags"
            return Verdict(name, gate.config, NOT_COMPARED, f"{stored.path.name} {why} ({gate.over} at concurrency {c})")
        if stored.workload_digest != self.meter.workload_digest:
            return Verdict(name, gate.config, NOT_COMPARED, workload_changed(stored, self.meter.built_at, self.context))
        conf = self.confidence
        status, ratio, cap, _, looks, noise, record = self._now_over_stored(
            gate.config, c, figs, lambda iv: at_least(iv, gate.ratio)
        )
        now = median_interval(record.decode_tps_per_request, conf)
        head = (
            f"{gate.config} decodes at {now.estimate:.1f} tok/s, {ratio.estimate:.3f}x the stored {gate.over} "
            f"({figs.decode_tps_median:.1f} tok/s in {stored.path.name}) [{ratio.low:.3f}, {ratio.high:.3f}] "
            f"({_level(ratio, conf, looks)}, {self._paired_with_stored(record, figs, cap)} paired requests); "
            f"required >= {gate.ratio:g}x"
        )
        figures: GateFigures = {"ratio": ratio.as_dict(), "required": gate.ratio, "now": now.as_dict(), "stored": figs.decode_tps_median}
        notes = [f"{gate.over}'s figures are the stored baseline's ({stored.path.name}), not this run's"]
        if unbooted:
            notes.append(
                f"{NOT_BOOTED}: its figures are from {stored.path.name} (commit "
                f"{stored.provenance.get('commit', '?')}); how it drifted since is not seen"
            )
        if why_not:
            notes.append(why_not)
        covers = noise.covers_between_boot
        if status == PASS:
            return Verdict(name, gate.config, PASS, head, notes, figures, noise.words, covers)
        suffix = " — FAILS" if status == FAIL else f" — still INCONCLUSIVE at {cap} requests per boot: no pass can be shown"
        verdict = Verdict(name, gate.config, status, head + suffix, notes, figures, noise.words, covers)
        return self._cannot_tell_uncalibrated(verdict, head)


def beats_ratio(deployment: Deployment, gate: BeatsGate) -> Vacuity | None:
    if gate.ratio >= BEATS_RATIO_VACUOUS:
        return None
    index = deployment.gates.beats.index(gate)
    return Vacuity(
        f"gates.beats[{index}].ratio",
        gate.ratio,
        f"{gate.config} passes at {gate.ratio:g}x {gate.over}: a speculative cycle yields at least one token (the "
        "verified one) for its draft steps and one verify pass, so even with every draft rejected a config whose "
        "drafter is no dearer than its target decodes at 1/(steps + 1) of plain decoding or faster (0.125x at 7 "
        f"steps); a bar under {BEATS_RATIO_VACUOUS:g}x passes any speculative config "
        "that answers at all",
    )


class Beats(GateKind):
    """A config decodes at least `ratio` times as fast as another, both measured in this run (or the
    other as stored): the gate that says speculation pays."""

    name = "beats"
    test = "test_speculation_beats_reference"
    table = "beats"
    example = {"config": "{speculative}", "over": "{reference}", "ratio": 1.0, "concurrency": 1, "against": "run"}

    def parse(self, g: Table, configs: dict[str, ServerConfig], workload: Workload) -> BeatsGate:
        gate = BeatsGate(
            config=g.text("config"),
            over=g.text("over", "baseline"),
            ratio=g.number("ratio", 1.0, minimum=0.0, maximum=MAX_RATIO),
            concurrency=g.integer("concurrency", 1, minimum=1, maximum=MAX_CONCURRENCY),
            against=g.text("against", "run", choices=("run", "stored")),
        )
        check_config_named(g, "config", gate.config, configs)
        check_config_named(g, "over", gate.over, configs)
        # A config compared with itself is refused here, before anything boots. A ratio too low to
        # fail (0 included) is no error of the file: the gate is VACUOUS (beats_ratio), which
        # `specgate check` warns of and the run reports, never a pass.
        if gate.config == gate.over:
            raise g.error("over", f"is {gate.over!r}, the gate's own config: a config compared with itself cannot fail")
        check_concurrency(g, gate.concurrency, workload)
        return gate

    def planned(self, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
        out = []
        for gate in dep.gates.beats:
            needs = (gate.config, gate.over) if gate.against == "run" else (gate.config,)
            out.append(
                PlannedGate(
                    self.name, f"beats:{gate.name}", gate.config, needs, gate.name, gate, timing=True,
                    concurrency=gate.concurrency,
                )
            )
        return out

    def decide(self, judge: BeatsGates, gate: PlannedGate) -> Verdict:
        return judge.beats(gate.spec)

    def describe(self, dep: Deployment) -> list[str]:
        lines = []
        for gate in dep.gates.beats:
            as_stored = gate.against == "stored" or (dep.launch.reference_stored and gate.over == dep.reference)
            stored = " as stored in the baseline" if as_stored else ""
            lines.append(
                f"  gate: {gate.config} must reach {gate.ratio:g}x {gate.over}{stored} (concurrency {gate.concurrency})"
            )
        return lines

    def vacuities(self, dep: Deployment) -> list[Vacuity]:
        return [v for gate in dep.gates.beats if (v := beats_ratio(dep, gate)) is not None]


KIND = Beats()
