"""Reaching verdicts: measure more while a gate is inconclusive, then decide.

The *beats* gate compares two configs measured in this run (a ratio of median decode
tok/s with a bootstrap interval). The *no-regression* gate compares one config with
its stored baseline for the same fingerprint; the reference (plain) config is checked
in both directions, so "the machine drifted" is told apart from "speculation
regressed".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specgate.deployment import BeatsGate, Deployment
from specgate.measure.speed import ConfigSpeed, SpeedMeter
from specgate.measure.stats import Interval, median_interval, pair_ratios, paired_pooled_ratio, paired_ratio
from specgate.measure.summary import accept_interval, summarise_speed
from specgate.server.pool import ServerPool
from specgate.verdicts.baselines import BaselineLookup, StoredBaseline, StoredFigures, find_baselines
from specgate.verdicts.fingerprint import Fingerprint, collect_fingerprint
from specgate.verdicts.gates import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SKIP,
    Verdict,
    at_least,
    decide_sequentially,
    pct,
    planned_looks,
    within,
)


def _level(interval: Interval, overall: float, looks: int) -> str:
    if looks <= 1:
        return f"{overall:.0%} interval"
    return f"{interval.confidence:.1%} interval per look, {overall:.0%} over up to {looks} looks"


@dataclass
class Judge:
    deployment: Deployment
    pool: ServerPool
    meter: SpeedMeter
    baselines_root: Path
    allow_fingerprint_mismatch: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    _fingerprint: Fingerprint | None = None
    _lookup: BaselineLookup | None = None

    # --- measurements -------------------------------------------------------------
    def ensure_measured(self, config: str, concurrency: int, at_least_n: int) -> ConfigSpeed:
        record = self.meter.record(config, concurrency)
        missing = at_least_n - len(record.samples)
        if missing > 0:
            self.meter.measure(self.pool.acquire(config), concurrency, missing)
        return record

    def _batch(self) -> int:
        """Where servers coexist, small interleaved batches; else all at once (a reboot each)."""
        wl = self.deployment.workload
        if self.deployment.launch.coexist:
            return self.deployment.gates.sample_batch
        return max(1, wl.max_repeats - wl.repeats)

    def _looks(self, have: int, cap: int) -> int:
        return planned_looks(have, cap, self._batch())

    # --- fingerprint and stored baselines -------------------------------------------
    def fingerprint(self, boot: bool = True) -> Fingerprint | None:
        """This run's fingerprint; None where no server has answered and `boot` is False."""
        if self._fingerprint is None:
            ref = self.deployment.reference
            if ref not in self.pool.server_infos:
                if not boot:
                    return None
                self.pool.acquire(ref)
            self._fingerprint = collect_fingerprint(
                self.deployment, self.pool.server_infos.get(ref, {}), self.pool.model_infos.get(ref, {})
            )
        return self._fingerprint

    def lookup(self) -> BaselineLookup:
        if self._lookup is None:
            self._lookup = find_baselines(self.deployment.name, self.fingerprint(), self.baselines_root)
        return self._lookup

    def stored_for_comparison(self) -> tuple[StoredBaseline | None, str]:
        """The baseline to compare with, or None and the reason it is not compared."""
        lookup = self.lookup()
        if lookup.exact is not None:
            return lookup.exact, ""
        if not lookup.others:
            return None, (
                f"no stored baseline for deployment {self.deployment.name!r} under {self.baselines_root}; "
                f"record one with: specgate baseline update {self.deployment.path}"
            )
        newest = lookup.others[0]
        diff = "; ".join(self.fingerprint().differences(newest.fingerprint))
        if self.allow_fingerprint_mismatch:
            return newest, f"compared against {newest.path.name} although the fingerprint differs ({diff})"
        return None, (
            f"stored baselines are for other hardware/software, not compared: {newest.path.name} differs in {diff}. "
            "Pass --specgate-allow-fingerprint-mismatch to compare anyway, or record a baseline for this machine."
        )

    # --- the beats gate ---------------------------------------------------------------
    def beats(self, gate: BeatsGate) -> Verdict:
        conf = self.deployment.gates.confidence
        wl = self.deployment.workload
        cfg = self.ensure_measured(gate.config, gate.concurrency, wl.repeats)
        ref = self.ensure_measured(gate.over, gate.concurrency, wl.repeats)

        def measure_more() -> bool:
            n = min(len(cfg.samples), len(ref.samples))
            more = min(self._batch(), wl.max_repeats - n)
            if more <= 0:
                return False
            # Alternate the two configs so slow drift of the machine hits both alike.
            self.meter.measure(self.pool.acquire(gate.over), gate.concurrency, more)
            self.meter.measure(self.pool.acquire(gate.config), gate.concurrency, more)
            return True

        looks = self._looks(min(len(cfg.samples), len(ref.samples)), wl.max_repeats)
        status, interval, taken = decide_sequentially(
            lambda level: paired_ratio(cfg.decode_tps, ref.decode_tps, level),
            lambda iv: at_least(iv, gate.ratio),
            measure_more,
            conf,
            looks,
        )
        tau = accept_interval(cfg, conf)
        figures = {
            "ratio": interval.as_dict(),
            "required": gate.ratio,
            "n": [len(cfg.samples), len(ref.samples)],
            "accept_length": tau.as_dict() if tau else None,
        }
        head = (
            f"{gate.config} decodes at {interval.estimate:.3f}x {gate.over} "
            f"[{interval.low:.3f}, {interval.high:.3f}] ({_level(interval, conf, looks)}, "
            f"{min(len(cfg.samples), len(ref.samples))} paired requests, look {taken} of {looks}); "
            f"required >= {gate.ratio:g}x"
        )
        if tau is not None:
            head += f"; accept length {tau.estimate:.2f}"
        notes = []
        if not self.deployment.launch.coexist:
            notes.append(
                "the two configs were measured in separate boots, not interleaved: the interval holds the noise "
                "within each boot but not the variation between boots (on the H200 smoke runs that variation "
                "was larger than the interval)"
            )
        if status == PASS:
            verdict = Verdict(f"beats:{gate.name}", gate.config, PASS, head, notes, figures)
        elif status == FAIL:
            verdict = Verdict(f"beats:{gate.name}", gate.config, FAIL, head + " — FAILS", notes, figures)
        else:
            verdict = Verdict(
                f"beats:{gate.name}",
                gate.config,
                FAIL,
                head + f" — still INCONCLUSIVE at the cap of {wl.max_repeats} samples: the interval straddles "
                f"{gate.ratio:g}, so no pass can be shown",
                notes,
                figures,
            )
        self.verdicts.append(verdict)
        return verdict

    # --- the no-regression gate -----------------------------------------------------------
    def regression(self, config: str, concurrency: int, metric: str) -> Verdict:
        name = f"regression:{config}:c{concurrency}:{metric}"
        stored, why_not = self.stored_for_comparison()
        if stored is None:
            return self._record(Verdict(name, config, SKIP, why_not))
        figs = stored.figures.get((config, concurrency))
        if figs is None:
            return self._record(
                Verdict(
                    name,
                    config,
                    SKIP,
                    f"{stored.path.name} has no figures for {config} at concurrency {concurrency}"
                    + (f" ({stored.excluded[config]})" if config in stored.excluded else ""),
                )
            )
        digest = self.deployment.configs[config].args_digest(self.deployment.launch)
        if figs.args_digest != digest:
            return self._record(
                Verdict(
                    name,
                    config,
                    SKIP,
                    f"{config}'s launch flags changed since {stored.path.name} was recorded "
                    f"(digest {figs.args_digest} then, {digest} now): not comparable; update the baseline",
                )
            )
        if stored.workload_digest != self.meter.workload_digest:
            return self._record(
                Verdict(
                    name,
                    config,
                    SKIP,
                    f"the pinned workload changed since {stored.path.name} was recorded (prompts, format or "
                    "max_new_tokens): its requests no longer pair with ours; update the baseline",
                )
            )
        notes = [why_not] if why_not else []
        if metric == "accept_length":
            return self._record(self._accept_regression(name, config, concurrency, figs, stored, notes))
        return self._record(self._speed_regression(name, config, concurrency, figs, stored, notes))

    def _record(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict

    def _speed_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """The reference: its decode tok/s now vs stored, both directions (did the machine or
        plain decoding drift?). Any other config: its speedup over the reference now vs
        stored, so that a machine a few percent slower than the one that recorded the
        baseline (same GPU model, another host) is judged once, on the reference, and not
        again on every speculative config."""
        ref = self.deployment.reference
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

    def _absolute_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """Now vs stored as the median of per-request ratios over the same pinned requests."""
        conf = self.deployment.gates.confidence
        tol = self.deployment.gates.tolerance
        wl = self.deployment.workload
        two_sided = config == self.deployment.reference
        stored_n = len(figs.decode_tps_samples)
        record = self.ensure_measured(config, concurrency, min(wl.repeats, stored_n))
        cap = min(wl.max_repeats, stored_n)  # beyond the stored requests there is nothing to pair with

        def measure_more() -> bool:
            more = min(self._batch(), cap - len(record.samples))
            if more <= 0:
                return False
            self.meter.measure(self.pool.acquire(config), concurrency, more)
            return True

        def decide(iv: Interval) -> str:
            return within(iv, 1 - tol.decode_tps, 1 + tol.decode_tps) if two_sided else at_least(iv, 1 - tol.decode_tps)

        looks = self._looks(len(record.samples), cap)
        status, ratio, taken = decide_sequentially(
            lambda level: paired_ratio(record.decode_tps, figs.decode_tps_samples, level),
            decide,
            measure_more,
            conf,
            looks,
        )
        pairs = min(len(record.samples), stored_n)
        now = median_interval(record.decode_tps, conf)
        head = (
            f"{config} decode {now.estimate:.1f} tok/s vs stored {figs.decode_tps:.1f}: per-request ratio "
            f"{ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({_level(ratio, conf, looks)}) over {pairs} paired requests "
            f"({pct(ratio.estimate - 1)}); allowed {'±' if two_sided else '-'}{tol.decode_tps:.0%}"
        )
        figures = {
            "ratio_to_stored": ratio.as_dict(),
            "now": now.as_dict(),
            "stored": figs.decode_tps,
            "baseline_file": stored.path.name,
        }
        if status == PASS:
            return Verdict(name, config, PASS, head, notes, figures)
        if status == INCONCLUSIVE:
            return Verdict(name, config, FAIL, head + " — " + _inconclusive_at(cap, stored_n), notes, figures)
        if two_sided:
            direction = "faster" if ratio.low > 1 + tol.decode_tps else "slower"
            notes.append(
                f"the plain baseline itself is {direction} than stored: the machine (or plain decoding) drifted; "
                "speculative configs are judged on their speedup over it, which such drift leaves alone"
            )
            return Verdict(name, config, FAIL, head + f" — plain decode drifted ({direction})", notes, figures)
        return Verdict(name, config, FAIL, head + " — REGRESSED", notes, figures)

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
        """(config/reference now) / (config/reference stored), request by request."""
        conf = self.deployment.gates.confidence
        tol = self.deployment.gates.tolerance
        wl = self.deployment.workload
        ref = self.deployment.reference
        stored_speedups = pair_ratios(figs.decode_tps_samples, ref_figs.decode_tps_samples)
        cap = min(wl.max_repeats, len(stored_speedups))  # beyond the stored pairs there is nothing to pair with
        record = self.ensure_measured(config, concurrency, min(wl.repeats, cap))
        ref_record = self.ensure_measured(ref, concurrency, min(wl.repeats, cap))

        def speedups_now() -> list[float]:
            return pair_ratios(record.decode_tps, ref_record.decode_tps)

        def measure_more() -> bool:
            have = len(speedups_now())
            more = min(self._batch(), cap - have)
            if more <= 0:
                return False
            # Both to the same count, alternated, so slow drift of the machine hits both alike.
            for which, rec in ((ref, ref_record), (config, record)):
                short = have + more - len(rec.samples)
                if short > 0:
                    self.meter.measure(self.pool.acquire(which), concurrency, short)
            return True

        looks = self._looks(len(speedups_now()), cap)
        status, ratio, taken = decide_sequentially(
            lambda level: paired_ratio(speedups_now(), stored_speedups, level),
            lambda iv: at_least(iv, 1 - tol.decode_tps),
            measure_more,
            conf,
            looks,
        )
        pairs = min(len(speedups_now()), len(stored_speedups))
        # Both medians over the same pinned requests, so the headline agrees with the paired ratio.
        speedup_now = median_interval(speedups_now()[:pairs], conf)
        speedup_then = median_interval(stored_speedups[:pairs], conf)
        absolute = paired_ratio(record.decode_tps, figs.decode_tps_samples, conf)
        ref_change = paired_ratio(ref_record.decode_tps, ref_figs.decode_tps_samples, conf)
        head = (
            f"{config} speedup over {ref} {speedup_now.estimate:.3f}x now vs {speedup_then.estimate:.3f}x stored: "
            f"per-request ratio {ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({_level(ratio, conf, looks)}) "
            f"over {pairs} paired requests ({pct(ratio.estimate - 1)}); allowed -{tol.decode_tps:.0%}"
        )
        context = (
            f"absolute: {config} {pct(absolute.estimate - 1)} and plain {ref} {pct(ref_change.estimate - 1)} "
            f"vs stored ({median_interval(record.decode_tps, conf).estimate:.1f} tok/s now, {figs.decode_tps:.1f} stored)"
        )
        figures = {
            "ratio_to_stored": ratio.as_dict(),
            "speedup_now": speedup_now.as_dict(),
            "speedup_stored": speedup_then.as_dict(),
            "absolute_ratio_to_stored": absolute.as_dict(),
            "reference_ratio_to_stored": ref_change.as_dict(),
            "baseline_file": stored.path.name,
        }
        if status == PASS:
            same_way = (absolute.estimate - 1) * (ref_change.estimate - 1) > 0
            if abs(absolute.estimate - 1) > tol.decode_tps and same_way:
                notes.append(context + ": the change follows plain decoding (machine or core); the speedup held")
            if ratio.low > 1 + tol.faster_note:
                notes.append(
                    f"{config}'s speedup is {pct(ratio.estimate - 1)} above stored: consider updating the baseline"
                )
            return Verdict(name, config, PASS, head, notes, figures)
        notes.append(context)
        if status == INCONCLUSIVE:
            return Verdict(
                name, config, FAIL, head + " — " + _inconclusive_at(cap, len(stored_speedups)), notes, figures
            )
        where = "measured side by side" if self.deployment.launch.coexist else "each measured in its own boot"
        notes.append(f"speculation itself lost ground: its speedup over plain decoding fell ({where})")
        return Verdict(name, config, FAIL, head + " — REGRESSED", notes, figures)

    def _accept_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """Accept length over the same pinned requests, now vs stored, pooled and paired."""
        conf = self.deployment.gates.confidence
        tol = self.deployment.gates.tolerance.accept_length
        record = self.ensure_measured(config, concurrency, min(self.deployment.workload.repeats, len(figs.verify_ct)))
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
        if figs.accept_length is None or any(v is None for v in figs.verify_ct):
            return Verdict(name, config, SKIP, f"{stored.path.name} holds no accept length for {config}", notes)
        ratio = paired_pooled_ratio(
            [s.completion_tokens for s in now],
            [s.verify_ct for s in now],
            list(figs.completion_tokens),
            list(figs.verify_ct),
            conf,
        )
        tau = accept_interval(record, conf)
        assert tau is not None
        status = at_least(ratio, 1 - tol)
        head = (
            f"{config} accept length {tau.estimate:.3f} vs stored {figs.accept_length:.3f}: paired ratio "
            f"{ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({pct(ratio.estimate - 1)}); allowed -{tol:.0%}"
        )
        figures = {"ratio_to_stored": ratio.as_dict(), "now": tau.as_dict(), "stored": figs.accept_length}
        if status == PASS:
            return Verdict(name, config, PASS, head, notes, figures)
        notes.append(
            "accept length does not depend on timing noise: a drop means the draft model, its inputs or the "
            "verify path changed (draft weights, hidden-state capture, tokenizer, sampling)"
        )
        suffix = " — REGRESSED" if status == FAIL else " — INCONCLUSIVE"
        return Verdict(name, config, FAIL, head + suffix, notes, figures)


def _inconclusive_at(cap: int, stored_n: int) -> str:
    if cap >= stored_n:
        return f"INCONCLUSIVE with every stored request paired ({stored_n}); a baseline update stores max_repeats"
    return f"INCONCLUSIVE at the cap of {cap} paired requests (workload.max_repeats)"


def baseline_document(judge: Judge, provenance: dict, excluded: dict[str, str] | None = None) -> dict:
    """The stored form of this run's measurements: estimates, intervals and raw samples."""
    dep = judge.deployment
    conf = dep.gates.confidence
    configs: dict[str, dict] = {}
    excluded = excluded or {}
    for (config, concurrency), record in sorted(judge.meter.results.items()):
        if not record.samples or config in excluded:
            continue
        summary = summarise_speed(record, judge.meter.results.get((dep.reference, concurrency)), conf)
        entry = configs.setdefault(
            config, {"args_digest": dep.configs[config].args_digest(dep.launch), "concurrency": {}}
        )
        entry["concurrency"][str(concurrency)] = {
            "n": len(record.samples),
            "decode_tps": summary.decode_tps.as_dict(),
            "ttft_s": summary.ttft_s.as_dict(),
            "accept_length": summary.accept_length.as_dict() if summary.accept_length else None,
            "ratio_to_reference": summary.ratio_to_reference.as_dict() if summary.ratio_to_reference else None,
            "samples": {
                "decode_tps": [round(s.decode_tps, 3) for s in record.samples],
                "ttft_s": [round(s.ttft_s, 6) for s in record.samples],
                "completion_tokens": [s.completion_tokens for s in record.samples],
                "verify_ct": [s.verify_ct for s in record.samples],
            },
        }
    return {
        "provenance": provenance,
        "workload_digest": judge.meter.workload_digest,
        "configs": configs,
        "excluded": excluded,
        "equivalence": "checked"
        if dep.equivalence.enabled
        else f"NOT CHECKED (the deployment says: {dep.equivalence.skip_reason})",
    }
