"""What every gate kind shares: recording a verdict, holding it to the server's counters, the
gates that cannot fail, and comparing this run's figures with stored ones."""

from __future__ import annotations

import math
from collections.abc import Callable

from specgate.deployment import Deployment
from specgate.measure import accept_counts
from specgate.measure.fidelity import CONTRADICTED, UNCHECKED
from specgate.measure.pairing import Series, across_boots, pooled, ratio_series, truncated
from specgate.measure.speed import ConfigSpeed
from specgate.measure.stats import Interval, widened
from specgate.resources import builtin_baselines_dir
from specgate.verdicts import vacuity
from specgate.verdicts.baselines import StoredBaseline, StoredFigures
from specgate.verdicts.evidence import Evidence
from specgate.verdicts.fingerprint import unread_fields
from specgate.verdicts.gates import (
    FAIL,
    INCONCLUSIVE,
    NEXT_STEP,
    PASS,
    VACUOUS,
    Status,
    Verdict,
    decide_sequentially,
    pct,
    planned_looks,
)
from specgate.verdicts.history import boot_values
from specgate.verdicts.noise import HeldNoise, ratio_interval_held
from specgate.verdicts.own_time import measuring

SIMULATED_TAU_ENV = "SGLANG_SIMULATE_ACC_LEN"


def _level(interval: Interval, overall: float, looks: int) -> str:
    if looks <= 1:
        return f"{overall:.0%} interval"
    return f"{interval.confidence:.1%} interval per look, {overall:.0%} over up to {looks} looks"


def simulated_tau(deployment: Deployment, config: str) -> str | None:
    """The accept length SGLang is told to fake for this config, if any."""
    env = {**deployment.launch.env, **deployment.configs[config].env}
    return env.get(SIMULATED_TAU_ENV)


class GateBase(Evidence):
    # --- what a gate kind's `decide` calls (specgate.gate_kinds; docs/gate-kinds.md) ---
    def records(self, configs: list[str], concurrency: int) -> list[ConfigSpeed]:
        """This run's records of `configs`, measured to the workload's `repeats` per boot first
        (raises where a server it needs never served: the gate's NOT RUN row says why)."""
        self._gather(configs, concurrency, self.deployment.workload.repeats)
        return [self._record_of(c, concurrency) for c in configs]

    def sequential(
        self,
        configs: list[str],
        concurrency: int,
        interval_at: Callable[[float], Interval],
        decide: Callable[[Interval], Status],
        confidence: float | None = None,
    ) -> tuple[Status, Interval, int, int]:
        """Decide on `interval_at(level)`, measuring `configs` more while undecided, up to the
        workload's `max_repeats`, with the error budget (the deployment's, or this gate's share of
        it: `confidence`) split over the looks: (status, the last interval, looks taken, looks
        planned). `records` must have been called first."""
        wl = self.deployment.workload
        looks = planned_looks(self.plan.per_boot(configs, concurrency), wl.max_repeats, self._batch())
        status, interval, taken = decide_sequentially(
            interval_at,
            decide,
            lambda: self._measure_more(configs, concurrency),
            self.confidence if confidence is None else confidence,
            looks,
        )
        return status, interval, taken, looks

    def _measure_more(self, configs: list[str], concurrency: int) -> bool:
        with measuring():  # not the gate kind's own time (own_time.py)
            return self.plan.more(configs, concurrency, self.deployment.workload.max_repeats, self._batch())

    def record(self, verdict: Verdict) -> Verdict:
        """Keep `verdict` among the run's verdicts (the report reads them) and return it."""
        return self._record(verdict)

    def _cannot_tell_uncalibrated(self, verdict: Verdict, head: str) -> Verdict:
        """An absolute gate that did not pass on an uncalibrated runner is INCONCLUSIVE, never a regression."""
        why = self.uncalibrated(verdict.config)
        if verdict.status == PASS or why is None:
            return verdict
        tail = verdict.summary[len(head) :].removeprefix(" — ") if verdict.summary.startswith(head) else ""
        verdict.status = INCONCLUSIVE
        verdict.summary = f"{head} — INCONCLUSIVE, not a regression: {why}" + (
            f" (on this run's noise alone: {tail})" if tail else ""
        )
        verdict.figures["uncalibrated"] = True
        return verdict

    def next_step(self) -> str | None:
        """The report's first line where this run looked for a stored baseline of this machine and
        found none (never boots: None where no gate looked); None in a baseline update."""
        lookup = self._lookup
        if self.recording or lookup is None or lookup.exact is not None:
            return None
        if lookup.others and self.allow_fingerprint_mismatch:
            return None  # compared with another machine's, as asked; each gate says so
        name = self.deployment.name
        if lookup.others and (unread := unread_fields(self.fingerprint(), lookup.others[0].fingerprint)):
            return (
                f"{NEXT_STEP}this run could not read the {', '.join(unread)} of its servers that "
                f"{lookup.others[0].path.name} records, so nothing here is compared with it; find why the reference "
                "server's /get_server_info (or the GPUs) did not tell it. Recording a baseline now would file it "
                "under 'unknown'"
            )
        found = (
            f"the stored baselines of {name!r} are for other hardware/software ({lookup.others[0].path.name})"
            if lookup.others
            else f"no stored baseline for deployment {name!r}"
        )
        shipped = builtin_baselines_dir() / name
        if self.deployment.simulator and not lookup.others and shipped.is_dir() and shipped != self.baselines_root / name:
            # A built-in SIMULATOR deployment run from a user's project: no GPU runner is involved.
            return (
                f"{NEXT_STEP}{found} under {self.baselines_root}; this SIMULATOR deployment ships one: add "
                f"`--baselines-dir {shipped.parent}` to compare with it, or record your own with `{self.update_command()}`"
            )
        return (
            f"{NEXT_STEP}{found} on this machine, so nothing here is compared with it. Record one on this machine "
            f"(the GPU runner), at a committed tree, with `{self.update_command()}`, and commit "
            f"{self.baselines_root / name}; later runs compare against it"
        )

    def _record(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict

    def _held_to_fidelity(self, verdict: Verdict, configs: list[str], concurrency: int) -> Verdict:
        """A speed verdict rests on the suite's figures of `configs` now: where the server's own
        contradicts one, the verdict is no verdict and FAILS with that reason (a pass most of all:
        a stream delivered in bursts times as fast as the proxy flushes, not as the server decodes).
        Where no figure of the server's checks it, that is said beside the verdict."""
        if verdict.unjudged:
            return verdict
        checks = [self.fidelity(c, concurrency) for c in configs]
        verdict.figures["fidelity"] = {c.config: c.as_dict() for c in checks}
        contradicted = [c for c in checks if c.state == CONTRADICTED]
        if contradicted:
            verdict.status = FAIL
            verdict.summary = f"{verdict.summary} — FAILS on fidelity: {contradicted[0].contradiction()}"
            verdict.notes.extend(c.contradiction() for c in contradicted[1:])
        for c in checks:
            if c.state == UNCHECKED:
                verdict.notes.append(f"fidelity of {c.config}'s decode tok/s UNCHECKED ({c.why})")
        return verdict

    def _counters_contradicted(self, name: str, config: str, concurrency: int) -> Verdict | None:
        """A FAIL where the server's spec counters contradict each other (measure.accept_counts): an
        accept length from a miscounted spec_verify_ct is no figure, and must never pass a gate."""
        found = accept_counts.contradiction(
            self._record_of(config, concurrency), self.deployment.configs[config].max_tokens_per_step
        )
        if found is None:
            return None
        return Verdict(name, config, FAIL, f"{found} — FAILS: the accept length cannot be told", [], {"counters": found})

    def _vacuous(self, name: str, config: str, found: vacuity.Vacuity | None) -> Verdict | None:
        """A threshold under which this gate cannot fail: VACUOUS, before any figure is looked at."""
        if found is None:
            return None
        return self._record(Verdict(name, config, VACUOUS, found.summary(self.deployment)))

    def _now_over_stored(
        self, config: str, concurrency: int, figs: StoredFigures, decide: Callable[[Interval], Status]
    ) -> tuple[Status, Interval, int, int, int, HeldNoise, ConfigSpeed]:
        """`config` now over the stored figures `figs`, request by request over the same pinned
        requests, measured until `decide` settles: (status, ratio, cap, stored requests per boot,
        looks, which noise the interval holds, the record)."""
        conf = self.confidence
        wl = self.deployment.workload
        stored_series = across_boots(figs.series())  # every stored boot counts, whatever this run boots
        stored_n = min(len(v) for v in stored_series.values())
        cap = min(wl.max_repeats, stored_n)  # beyond the stored requests there is nothing to pair with
        self._gather([config], concurrency, min(wl.repeats, cap))
        record = self._record_of(config, concurrency)
        spread = self._spread_or_own(config, "decode_tps", record.decode_tps_by_boot(), figs.series())
        drift = self.host_drift(config, concurrency)
        # A host that moved during this run by more than the spread a calibration holds moves
        # between runs as much: a stored figure is judged with that move as noise, never against it.
        drifted = drift if drift is not None and drift.moved and drift.log_size > (spread.log_sd if spread else 0) else None
        noise = [HeldNoise("", covers_between_boot=False)]  # each look says it anew

        def interval_at(level: float) -> Interval:
            series = ratio_series(truncated(record.decode_tps_by_boot(), cap), stored_series)
            iv, noise[0] = ratio_interval_held(series, level, spread, boots_other=figs.boot_count)
            if drifted is not None:
                iv = widened(iv, drifted.log_size)
                noise[0] = noise[0].plus(f"; plus this run's host drift ({pct(drifted.ratio.estimate - 1)}) as one SD")
            return iv

        looks = planned_looks(self.plan.per_boot([config], concurrency), cap, self._batch())
        status, ratio, _ = decide_sequentially(
            interval_at, decide, lambda: self.plan.more([config], concurrency, cap, self._batch()), conf, looks
        )
        return status, ratio, cap, stored_n, looks, noise[0], record

    @staticmethod
    def _history_figure(kind: str, now: Series, level: Series, figs: StoredFigures, stored: StoredBaseline) -> dict:
        """What the runner's history would pool of this comparison (verdicts.history), kept on the
        interval's verdict: each boot now in the frame of the stored level. Its requests' spread is
        of a difference of two sides; the stored side's part (one level shared by every run of the
        frame) is taken out, both sides assumed alike within a boot."""
        values = boot_values(now, level)
        share = math.sqrt(1 + 1 / max(1, figs.boot_count))
        values = [v.model_copy(update={"within_log_sd": v.within_log_sd / share}) for v in values]
        recorded = f"{stored.provenance.get('date', '?')}, commit {stored.provenance.get('commit', '?')}"
        return {
            "kind": kind,
            # A baseline recorded anew is another zero: its frame names the recording, not only the file.
            "frame": f"baseline {stored.path.name} recorded {recorded}",
            "stored_boots": figs.boot_count,
            "values": [v.model_dump() for v in values],
        }

    def _paired_with_stored(self, record: ConfigSpeed, figs: StoredFigures, cap: int) -> int:
        return len(pooled(ratio_series(truncated(record.decode_tps_by_boot(), cap), across_boots(figs.series()))))
