"""The *no-regression* gate: one config against its stored baseline for the same fingerprint
(decode speed, speedup over the reference, accept length); the reference is checked in both
directions, so "the machine drifted" is told apart from "speculation regressed"."""

from __future__ import annotations

import math
from typing import Any

from specgate.deployment import MAX_BOOTS, Deployment, bucket_label
from specgate.gate_kinds import GateKind, PlannedGate
from specgate.measure.pairing import Series, across_boots, pooled, ratio_series, truncated
from specgate.measure.stats import Interval, median_interval, paired_pooled_ratio
from specgate.measure.summary import accept_interval, accept_length_of, pooled_accept_length
from specgate.verdicts import vacuity
from specgate.verdicts.baselines import StoredBaseline, StoredFigures, workload_changed
from specgate.verdicts.gate_base import SIMULATED_TAU_ENV, GateBase, _level, simulated_tau
from specgate.verdicts.gates import (
    FAIL,
    INCONCLUSIVE,
    NOT_COMPARED,
    PASS,
    VACUOUS,
    GateFigures,
    Status,
    Verdict,
    at_least,
    decide_sequentially,
    pct,
    planned_looks,
    within,
)
from specgate.verdicts.history import BootValue
from specgate.verdicts.noise import HeldNoise, detection, ratio_interval, ratio_interval_held
from specgate.verdicts.sensitivity import Design, minutes, plan_sentence, sentence
from specgate.verdicts.stored_reference import NOT_BOOTED
from specgate.verdicts.vacuity import TAU_FLOOR, Vacuity


def _plain_explains(absolute: float, reference: float, tolerance: float) -> str | None:
    """A note on a passing speedup whose absolute figure moved beyond the tolerance: did plain
    decoding move the same way and by a like amount (then the machine or the shared core
    moved), or did the config move on its own? None where nothing moved enough to say."""
    if abs(absolute - 1) <= tolerance:
        return None
    a, r = math.log(absolute), math.log(reference)
    if a * r > 0 and abs(r) >= 0.5 * abs(a):
        return "the change follows plain decoding (machine or core); the speedup held"
    return (
        f"the config moved {pct(absolute - 1)} while plain decoding moved {pct(reference - 1)}: the change is "
        "mostly the config's own, within the speedup tolerance"
    )


def _stored_over(paired: int, stored: int, whole: float) -> str:
    """What a quoted stored speedup is: the median over the stored requests this run paired with
    (as many as it measured, so it moves from run to run), and, where that is not all of them, the
    whole stored baseline's figure (the one `ratio_to_reference` in the file and README quote)."""
    if paired >= stored:
        return f" (all {stored} stored requests)"
    return f" over the first {paired} stored requests, paired with this run's ({whole:.3f}x over all {stored})"


def _inconclusive_at(cap: int, stored_n: int, max_repeats: int, more_boots: str) -> str:
    if cap >= stored_n and stored_n < max_repeats:
        return (
            f"INCONCLUSIVE with every stored request paired ({stored_n}); a baseline update stores "
            f"max_repeats ({max_repeats}) for later runs to pair with"
        )
    return (
        f"INCONCLUSIVE at {cap} paired requests per boot: more requests cannot narrow what varies between boots; "
        f"{more_boots} can, or the tolerance `specgate calibrate` suggests for this machine"
    )


def seen_at_width(mde: float, false_alarm: float) -> str:
    """What this run's interval sees at the gate's tolerance (noise.detection): the regression it
    keeps from PASS with 80% power, and how often an unchanged build misses PASS. Neither is a FAIL
    (an interval wholly under the bar): the sensitivity line says the regression the gate FAILs."""
    if false_alarm > 0.5:
        return (
            "at this interval's width the gate cannot tell a regression from noise: an unchanged build does not "
            f"PASS it with probability {false_alarm:.0%}"
        )
    return (
        f"this run keeps regressions of {mde:.1%} or more from PASS (80% power); an unchanged build does not PASS it "
        f"with probability {false_alarm:.0%}"
    )


class RegressionGates(GateBase):
    def _no_stored_figures(self, stored: StoredBaseline, config: str, concurrency: int) -> str:
        """Why `stored` holds no figures for `config` here: a context bucket the baseline was
        recorded without is said as that (its short workload's figures are there), with the update
        that records it; otherwise the config at that concurrency was not stored."""
        if self.context and self.context not in stored.contexts:
            kept = ", ".join(bucket_label(t) for t in sorted(stored.contexts)) or "none"
            return (
                f"{stored.path.name} was recorded without the {bucket_label(self.context)} context bucket "
                f"(buckets it stores: {kept}): record it with {self.update_command()}"
            )
        return f"{stored.path.name} has no figures for {config} at concurrency {concurrency}" + (
            f" ({stored.excluded[config]})" if config in stored.excluded else ""
        )

    def regression(self, config: str, concurrency: int, metric: str) -> Verdict:
        name = f"regression:{config}:c{concurrency}:{metric}"
        static = (
            vacuity.accept_tolerance(self.deployment, config)
            if metric == "accept_length"
            else vacuity.speed_tolerance(self.deployment, config)
        )
        if (vacuous := self._vacuous(name, config, static)) is not None:
            return vacuous
        stored, why_not = self.stored_for_comparison()
        if stored is None:
            return self._record(Verdict(name, config, NOT_COMPARED, why_not, figures=self._first_record_mark()))
        figs = stored.figures.get((config, concurrency))
        if figs is None:
            return self._record(Verdict(name, config, NOT_COMPARED, self._no_stored_figures(stored, config, concurrency)))
        digest = self.deployment.configs[config].args_digest(self.deployment.launch)
        if figs.args_digest != digest:
            return self._record(
                Verdict(
                    name,
                    config,
                    NOT_COMPARED,
                    f"{config}'s launch flags changed since {stored.path.name} was recorded "
                    f"(digest {figs.args_digest} then, {digest} now): not comparable; update the baseline",
                )
            )
        now_version = self.server_version(config)
        if figs.server_version and now_version and figs.server_version != now_version:
            return self._record(
                Verdict(
                    name,
                    config,
                    NOT_COMPARED,
                    f"{config}'s server is another release than when {stored.path.name} was recorded "
                    f"({figs.server_version} then, {now_version} now): not comparable; gate the change side "
                    "by side (configs with their own command) or update the baseline",
                )
            )
        if stored.workload_digest != self.meter.workload_digest:
            return self._record(
                Verdict(
                    name,
                    config,
                    NOT_COMPARED,
                    workload_changed(stored, self.meter.built_at, self.context),
                )
            )
        notes = [why_not] if why_not else []
        if metric == "accept_length":
            return self._record(self._accept_regression(name, config, concurrency, figs, stored, notes))
        if self.reference_stored:
            verdict = self._regression_without_reference(name, config, concurrency, figs, stored, notes)
        else:
            verdict = self._speed_regression(name, config, concurrency, figs, stored, notes)
        # A speedup rests on the reference's figures now too; an absolute figure on the config's alone.
        rests_on = [config, self.deployment.reference_of(config)] if "speedup_now" in verdict.figures else [config]
        return self._record(self._held_to_fidelity(verdict, rests_on, concurrency))

    def _regression_without_reference(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """With the reference not booted, its speedup now would be over the stored reference, and
        (config now / stored ref) / (config stored / stored ref) is config now / config stored: the
        gate is on the config's own decode tok/s, and says that a change of the machine shows in it."""
        if config == self.deployment.reference:
            return Verdict(name, config, NOT_COMPARED, f"{NOT_BOOTED}: there is nothing of it measured now", notes)
        if (blind := self._no_boot_spread(config)) is not None:
            return Verdict(name, config, NOT_COMPARED, blind, notes)
        notes.append(
            f"{NOT_BOOTED}: judged on {config}'s own decode tok/s now vs stored, which is what its speedup over the "
            "stored reference reduces to; a change of the machine since the baseline shows here too and cannot be "
            "told apart from a change of speculation"
        )
        return self._absolute_regression(name, config, concurrency, figs, stored, notes)

    def _speed_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """The reference: its decode tok/s now vs stored, both directions (did the machine or
        plain decoding drift?). Any other config: its speedup over the reference now vs
        stored, so that a machine a few percent slower than the one that recorded the
        baseline (same GPU model, another host) is judged once, on the reference, and not
        again on every speculative config."""
        ref = self.deployment.reference_of(config)
        ref_stored = stored.figures.get((ref, concurrency))
        if config == ref:
            return self._absolute_regression(name, config, concurrency, figs, stored, notes)
        ref_digest = self.deployment.configs[ref].args_digest(self.deployment.launch)
        if ref_stored is None or ref_stored.args_digest != ref_digest:
            # A speedup over a reference booted with other flags says nothing about this one's.
            notes.append(
                f"judged on absolute decode tok/s: the stored {ref} "
                + ("is missing" if ref_stored is None else "was booted with other flags")
                + ", so speedups do not compare"
            )
            return self._absolute_regression(name, config, concurrency, figs, stored, notes)
        return self._speedup_regression(name, config, concurrency, figs, ref_stored, stored, notes)

    def _regression_verdict(
        self,
        name: str,
        config: str,
        status: Status,
        head: str,
        ratio: Interval,
        cap: int,
        stored_n: int,
        notes: list[str],
        figures: GateFigures,
        noise: HeldNoise,
    ) -> Verdict:
        tol = self.deployment.gates.tolerance.decode_tps_for(config)
        mde, false_alarm = detection(ratio, tol)
        figures["detects"] = {"regression_80pct_power": mde, "unchanged_fails": false_alarm}
        notes.append(self._sensitivity(config, figures, cap))
        sees = seen_at_width(mde, false_alarm)
        if not noise.covers_between_boot:
            sees += " (from the noise this interval holds; between-boot noise would raise both)"
        said = (noise.words + "; " if noise.words else "") + sees
        covers = noise.covers_between_boot
        if status == PASS:
            return Verdict(name, config, PASS, head, notes, figures, said, covers)
        suffix = (
            _inconclusive_at(cap, stored_n, self.deployment.workload.max_repeats, self.deployment.launch.more_boots)
            if status == INCONCLUSIVE
            else "REGRESSED"
        )
        return Verdict(name, config, status, f"{head} — {suffix}", notes, figures, said, covers)

    def _sensitivity(self, config: str, figures: GateFigures, cap: int) -> str:
        """The regression this gate's design detects (verdicts.sensitivity), kept in figures and
        said; with `[gates] detect`, the boots and minutes that would reach it."""
        history = figures.get("history") or {}
        kind = history.get("kind", "decode_tps")
        spread = self._spread_used.get((config, kind))
        if spread is None:
            figures["sensitivity"] = None
            return (
                "sensitivity not stated: no between-boot spread is known for this runner (specgate calibrate "
                "measures one; unchanged runs then refine it)"
            )
        values = [BootValue.model_validate(v) for v in history.get("values", [])]
        within = math.sqrt(sum(v.within_log_sd**2 for v in values) / len(values)) if values else None
        design = Design(
            between_log_sd=spread.log_sd,
            within_log_sd=within,
            boots_now=len(values) or self.deployment.launch.boots,
            boots_stored=int(history.get("stored_boots", 1)),
            requests=cap,
            false_alarm=1 - self.confidence,
            two_sided=kind == "decode_tps" and config in self.deployment.references,
            shared_log_sd=spread.shared_log_sd,
            lag1=spread.request_lag1,
            tolerance=self.deployment.gates.tolerance.decode_tps_for(config),
        )
        sensitivity: dict[str, Any] = {
            "detects_80pct": design.detects(),
            "fails_80pct_at_tolerance": design.detects_at_tolerance(),
            "false_alarm": design.false_alarm,
            "boots_now": design.boots_now,
            "boots_stored": design.boots_stored,
            "requests": design.requests,
            "between_log_sd": design.between_log_sd,
            "shared_log_sd": design.shared_log_sd,
            "request_lag1": design.lag1,
            "within_log_sd": within,
            "spread_source": spread.source,
        }
        figures["sensitivity"] = sensitivity
        said = sentence(design, spread.source)
        target = self.deployment.gates.detect
        if target is not None:
            servers = [config, self.deployment.reference_of(config)] if kind == "speedup" else [config]
            boot_s, request_s = self._measured_seconds(servers)
            boots = design.boots_for(target, MAX_BOOTS)
            sensitivity["plan"] = {
                "detect": target,
                "boots_per_side": boots,
                "gpu_minutes_per_side": minutes(boots, boot_s, request_s, cap) if boots else None,
            }
            said += "; " + plan_sentence(
                design, target, MAX_BOOTS, boot_s, request_s, url=self.deployment.launch.launcher == "url"
            )
        return said

    def _absolute_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """Now vs stored as the median of per-request ratios over the same pinned requests."""
        conf = self.confidence
        allowed = self.deployment.gates.tolerance.decode_tps_for(config)
        two_sided = config in self.deployment.references

        def decide(iv: Interval) -> Status:
            return within(iv, 1 - allowed, 1 + allowed) if two_sided else at_least(iv, 1 - allowed)

        status, ratio, cap, stored_n, looks, noise, record = self._now_over_stored(config, concurrency, figs, decide)
        pairs = self._paired_with_stored(record, figs, cap)
        now = median_interval(record.decode_tps_per_request, conf)
        head = (
            f"{config} decode {now.estimate:.1f} tok/s vs stored {figs.decode_tps_median:.1f}: per-request ratio "
            f"{ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({_level(ratio, conf, looks)}) over {pairs} "
            f"paired requests ({pct(ratio.estimate - 1)}); allowed {'±' if two_sided else '-'}{allowed:.0%}"
        )
        figures: GateFigures = {
            "ratio_to_stored": ratio.as_dict(),
            "now": now.as_dict(),
            "stored": figs.decode_tps_median,
            "baseline_file": stored.path.name,
            "history": self._history_figure(
                "decode_tps", truncated(record.decode_tps_by_boot(), cap), across_boots(figs.series()), figs, stored
            ),
        }
        machine = self._machine_note(stored) if status != PASS else None
        if machine is not None:
            notes.append(machine)
        if status == FAIL and two_sided:
            direction = "faster" if ratio.low > 1 + allowed else "slower"
            notes.append(
                f"the plain reference itself is {direction} than stored: the machine (or plain decoding) moved since the "
                "stored run (not within this run: the report's drift line says that); "
                "speculative configs are judged on their speedup over it, which such a move leaves alone"
            )
            verdict = self._regression_verdict(
                name, config, status, head, ratio, cap, stored_n, notes, figures, noise
            )
            verdict.summary = f"{head} — plain decode {direction} than stored"
            return self._cannot_tell_uncalibrated(verdict, head)
        return self._cannot_tell_uncalibrated(
            self._regression_verdict(name, config, status, head, ratio, cap, stored_n, notes, figures, noise), head
        )

    def _speedup_regression(
        self,
        name: str,
        config: str,
        concurrency: int,
        figs: StoredFigures,
        ref_figs: StoredFigures,
        stored: StoredBaseline,
        notes: list[str],
    ) -> Verdict:
        """(config/reference now) / (config/reference stored), request by request and boot by boot."""
        conf = self.confidence
        tol = self.deployment.gates.tolerance
        allowed = tol.decode_tps_for(config)
        wl = self.deployment.workload
        ref = self.deployment.reference_of(config)
        stored_by_boot = ratio_series(figs.series(), ref_figs.series())
        stored_speedups = across_boots(stored_by_boot)  # every stored boot counts, whatever this run boots
        stored_n = min((len(v) for v in stored_speedups.values()), default=0)
        cap = min(wl.max_repeats, stored_n)  # beyond the stored pairs there is nothing to pair with
        pair = [config, ref]
        self._gather(pair, concurrency, min(wl.repeats, cap))
        record, ref_record = self._record_of(config, concurrency), self._record_of(ref, concurrency)
        spread = self._spread_or_own(
            config,
            "speedup",
            ratio_series(record.decode_tps_by_boot(), ref_record.decode_tps_by_boot()),
            stored_by_boot,
        )
        noise = [HeldNoise("", covers_between_boot=False)]  # each look says it anew

        def speedups_now() -> Series:
            return truncated(ratio_series(record.decode_tps_by_boot(), ref_record.decode_tps_by_boot()), cap)

        def interval_at(level: float) -> Interval:
            iv, noise[0] = ratio_interval_held(
                ratio_series(speedups_now(), stored_speedups), level, spread, boots_other=figs.boot_count
            )
            return iv

        looks = planned_looks(self.plan.per_boot(pair, concurrency), cap, self._batch())
        status, ratio, taken = decide_sequentially(
            interval_at,
            lambda iv: at_least(iv, 1 - allowed),
            lambda: self.plan.more(pair, concurrency, cap, self._batch()),
            conf,
            looks,
        )
        now_series = speedups_now()
        pairs = len(pooled(ratio_series(now_series, stored_speedups)))
        # Both medians over the same pinned requests, so the headline agrees with the paired ratio.
        per_boot = min((len(v) for v in now_series.values()), default=0)
        speedup_now = median_interval(pooled(now_series), conf)
        speedup_then = median_interval(pooled(truncated(stored_speedups, per_boot)), conf)
        absolute, _ = ratio_interval(
            ratio_series(truncated(record.decode_tps_by_boot(), cap), across_boots(figs.series())), conf, None
        )
        ref_change, _ = ratio_interval(
            ratio_series(truncated(ref_record.decode_tps_by_boot(), cap), across_boots(ref_figs.series())), conf, None
        )
        head = (
            f"{config} speedup over {ref} {speedup_now.estimate:.3f}x now vs {speedup_then.estimate:.3f}x stored"
            f"{_stored_over(per_boot, stored_n, median_interval(pooled(stored_speedups), conf).estimate)}: "
            f"per-request ratio {ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({_level(ratio, conf, looks)}) "
            f"over {pairs} paired requests ({pct(ratio.estimate - 1)}); allowed -{allowed:.0%}"
        )
        context = (
            f"absolute: {config} {pct(absolute.estimate - 1)} and plain {ref} {pct(ref_change.estimate - 1)} "
            f"vs stored ({median_interval(record.decode_tps_per_request, conf).estimate:.1f} tok/s now, {figs.decode_tps_median:.1f} stored)"
        )
        figures: GateFigures = {
            "ratio_to_stored": ratio.as_dict(),
            "speedup_now": speedup_now.as_dict(),
            "speedup_stored": speedup_then.as_dict(),
            "absolute_ratio_to_stored": absolute.as_dict(),
            "reference_ratio_to_stored": ref_change.as_dict(),
            "baseline_file": stored.path.name,
            "history": self._history_figure("speedup", now_series, stored_speedups, figs, stored),
        }
        if status == PASS:
            moved = _plain_explains(absolute.estimate, ref_change.estimate, allowed)
            if moved is not None:
                notes.append(f"{context}: {moved}")
            if ratio.low > 1 + tol.faster_note:
                notes.append(
                    f"{config}'s speedup is {pct(ratio.estimate - 1)} above stored: consider updating the baseline"
                )
        else:
            notes.append(context)
            if status == FAIL:
                where = "measured side by side" if self.deployment.launch.coexist else "each measured in its own boot"
                notes.append(f"speculation itself lost ground: its speedup over plain decoding fell ({where})")
        return self._regression_verdict(
            name, config, status, head, ratio, cap, stored_n, notes, figures, noise[0]
        )

    def _accept_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """Accept length over the same pinned requests, now vs stored, pooled and paired."""
        conf = self.confidence
        tol = self.deployment.gates.tolerance.accept_length
        faked = simulated_tau(self.deployment, config)
        if faked is not None:
            return Verdict(
                name,
                config,
                VACUOUS,
                f"{config}'s accept length is fixed by {SIMULATED_TAU_ENV}={faked} (SGLang's simulation): "
                "it cannot regress, so this gate cannot fail",
            )
        self._gather([config], concurrency, min(self.deployment.workload.repeats, len(figs.verify_ct)))
        record = self._record_of(config, concurrency)
        now = [s for s in record.samples if s.verify_ct]
        if not now:
            # Configured speculative, yet no verify counts: speculation is off, or SGLang renamed the field.
            return Verdict(
                name,
                config,
                FAIL,
                f"{config} is configured speculative but its responses carry no spec_verify_ct: "
                "speculation is silently off, or this SGLang spells the counter differently",
                notes,
            )
        if (contradicted := self._counters_contradicted(name, config, concurrency)) is not None:
            return contradicted
        if figs.accept_length is None or any(v is None for v in figs.verify_ct):
            return Verdict(name, config, NOT_COMPARED, f"{stored.path.name} holds no accept length for {config}", notes)
        bar = figs.accept_length * (1 - tol)
        if bar <= TAU_FLOOR:
            return Verdict(
                name,
                config,
                VACUOUS,
                f"{config}'s stored accept length {figs.accept_length:.3f} less {tol:.0%} is {bar:.3f}, at or below "
                f"{TAU_FLOOR:g}, the least an accept length can be: this gate cannot fail (a drafter that accepts "
                "nothing passes it)",
                notes,
            )
        # Request i now against stored request i (accept length is a property of the request).
        stored_tokens = list(figs.completion_tokens)
        stored_counts = [v or 0 for v in figs.verify_ct]  # none is None (checked above)
        pairs = [(s, s.index) for s in now if s.index < len(stored_tokens)]
        ratio = paired_pooled_ratio(
            [s.completion_tokens for s, _ in pairs],
            [s.verify_ct or 0 for s, _ in pairs],  # `now` holds requests with verify counts only
            [stored_tokens[i] for _, i in pairs],
            [stored_counts[i] for _, i in pairs],
            conf,
        )
        tau = accept_interval(record, conf)
        assert tau is not None
        status = at_least(ratio, 1 - tol)
        # Both pooled over the same pinned requests, so the headline agrees with the paired ratio
        # (the stored figure over all its requests and this run's over its own did not: +1.5% beside +0.0%).
        now_pooled = accept_length_of(s for s, _ in pairs) or 0.0
        stored_pooled = pooled_accept_length((stored_tokens[i] for _, i in pairs), (stored_counts[i] for _, i in pairs)) or 0.0
        head = (
            f"{config} accept length {now_pooled:.3f} vs stored {stored_pooled:.3f} over the same {len(pairs)} pinned "
            f"requests: paired ratio {ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({pct(ratio.estimate - 1)}); "
            f"allowed -{tol:.0%}"
        )
        figures: GateFigures = {"ratio_to_stored": ratio.as_dict(), "now": tau.as_dict(), "stored": figs.accept_length}
        # Boots of one build accept alike only nearly (near-tie flips part the answers; draft-side
        # numerics could too): that spread belongs inside the tolerance, not inside this interval.
        noise = "requests (accept length does not depend on timing; not covered: the spread between boots of one build)"
        if status == PASS:
            return Verdict(name, config, PASS, head, notes, figures, noise)
        notes.append(
            "accept length does not depend on timing noise: a drop means the draft model, its inputs or the "
            "verify path changed (draft weights, hidden-state capture, tokenizer, sampling)"
        )
        if (why := self._drafter_note(config, figs.drafter_sha256)) is not None:
            notes.append(why)
        suffix = " — REGRESSED" if status == FAIL else " — INCONCLUSIVE"
        return Verdict(name, config, status, head + suffix, notes, figures, noise)


class NoRegression(GateKind):
    """Each measured config against the stored baseline of this machine: the reference's decode speed
    both ways, a speculative config's speedup over its reference and its accept length."""

    name = "regression"
    test = "test_no_regression_against_stored_baseline"

    def planned(self, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
        if not dep.gates.against_stored:
            return []  # regressions judged by A/B in one run: nothing stored is asked for
        out = []
        for n in dep.workload.concurrency:
            for config, spec in dep.configs.items():
                if config in unbooted:
                    continue
                reference = dep.reference_of(config)
                for metric in ("decode_tps", "accept_length") if spec.speculative else ("decode_tps",):
                    # A speculative config's speed gate is its speedup over its reference: both must serve.
                    live_reference = reference != config and reference not in unbooted
                    needs = (config, reference) if metric == "decode_tps" and live_reference else (config,)
                    out.append(
                        PlannedGate(
                            self.name,
                            f"regression:{config}:c{n}:{metric}",
                            config,
                            needs,
                            f"{config}-c{n}-{metric}",
                            (config, n, metric),
                            timing=metric == "decode_tps",
                            concurrency=n,
                        )
                    )
        return out

    def decide(self, judge: RegressionGates, gate: PlannedGate) -> Verdict:
        return judge.regression(*gate.spec)

    def describe(self, dep: Deployment) -> list[str]:
        if not dep.gates.against_stored:
            return ["  no-regression: none, nothing is compared with a stored baseline ([gates] against_stored = false)"]
        tol = dep.gates.tolerance
        return [
            f"  no-regression tolerance: {tol.decode_tps_fraction:.0%}"
            + "".join(f", {c} {t:.0%}" for c, t in tol.decode_tps_by_config.items())
            + f"; accept length {tol.accept_length:.0%}"
        ]

    def vacuities(self, dep: Deployment) -> list[Vacuity]:
        found = []
        for config, spec in dep.configs.items():
            if (v := vacuity.speed_tolerance(dep, config)) is not None:
                found.append(v)
            if spec.speculative and (v := vacuity.accept_tolerance(dep, config)) is not None:
                found.append(v)
        return found


KIND = NoRegression()
