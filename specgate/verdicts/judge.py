"""Reaching verdicts from the data the sampling plan gathers.

The *beats* gate compares two configs measured in this run (the median of per-request
ratios, paired by request and boot). The *no-regression* gate compares one config with
its stored baseline for the same fingerprint; the reference (plain) config is checked
in both directions, so "the machine drifted" is told apart from "speculation
regressed". The judge never talks to a server: while a gate is undecided it asks the
plan (specgate.measure.plan) for more, and the plan decides which servers and in what
order. A gate that cannot compare is NOT COMPARED, one that cannot fail VACUOUS: both
are said, never passed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specgate import provenance as run_provenance
from specgate.deployment import MAX_BOOTS, AcceptFloorGate, BeatsGate, Deployment
from specgate.equivalence.golden import GoldenAnswers
from specgate.measure import accept_counts
from specgate.measure.answer_end import past_the_end
from specgate.measure.drafters import drafters
from specgate.measure.drift import ReferenceDrift
from specgate.measure.fidelity import CONTRADICTED, UNCHECKED, FidelityCheck, check_fidelity, fidelity_of
from specgate.measure.pairing import Series, across_boots, pooled, ratio_series, truncated
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed
from specgate.measure.stats import Interval, median_interval, paired_pooled_ratio, pooled_ratio, widened
from specgate.measure.summary import accept_interval, summarise_speed
from specgate.prompts import set_of
from specgate.verdicts import vacuity
from specgate.verdicts.baselines import BaselineLookup, StoredBaseline, StoredFigures, find_baselines
from specgate.verdicts.calibration import Calibration, find_calibration
from specgate.verdicts.fingerprint import Fingerprint, collect_fingerprint
from specgate.verdicts.gates import (
    FAIL,
    INCONCLUSIVE,
    NEXT_STEP,
    NOT_COMPARED,
    PASS,
    VACUOUS,
    Status,
    Verdict,
    at_least,
    decide_sequentially,
    pct,
    planned_looks,
    within,
)
from specgate.verdicts.history import (
    BootValue,
    Entry,
    RunnerHistory,
    append,
    boot_values,
    calibration_entries,
    history_path,
    load_history,
    own_boots,
    pool,
    pooled_spread,
)
from specgate.verdicts.noise import BootSpread, detection, ratio_interval
from specgate.verdicts.sensitivity import Design, minutes, plan_sentence, sentence
from specgate.verdicts.stored_reference import (
    NOT_BOOTED,
    StoredReference,
    StoredReferenceError,
    resolve_stored_reference,
)
from specgate.verdicts.vacuity import TAU_FLOOR

SIMULATED_TAU_ENV = "SGLANG_SIMULATE_ACC_LEN"


def _level(interval: Interval, overall: float, looks: int) -> str:
    if looks <= 1:
        return f"{overall:.0%} interval"
    return f"{interval.confidence:.1%} interval per look, {overall:.0%} over up to {looks} looks"


def simulated_tau(deployment: Deployment, config: str) -> str | None:
    """The accept length SGLang is told to fake for this config, if any."""
    env = {**deployment.launch.env, **deployment.configs[config].env}
    return env.get(SIMULATED_TAU_ENV)


@dataclass
class Judge:
    deployment: Deployment
    plan: SamplingPlan
    baselines_root: Path
    allow_fingerprint_mismatch: bool = False
    # The reference is not booted in this run: its figures come from the stored baseline.
    reference_stored: bool = False
    # A baseline update: this run's figures become the stored baseline (nothing stored is no gap).
    recording: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    _fingerprint: Fingerprint | None = None
    _lookup: BaselineLookup | None = None
    _calibration: Calibration | None = None
    _calibration_read: bool = False
    _history: RunnerHistory | None = None
    _history_read: bool = False
    # The between-boot spread each gate's interval was widened by, for its sensitivity (config, kind).
    _spread_used: dict[tuple[str, str], BootSpread | None] = field(default_factory=dict)
    _drafters: dict[str, dict] | None = None
    _stand_in: StoredReference | StoredReferenceError | None = None
    _host_now: str | None = None

    @property
    def meter(self):  # noqa: ANN201 - the plan's meter, read-only here
        return self.plan.meter

    def _record_of(self, config: str, concurrency: int) -> ConfigSpeed:
        return self.meter.record(config, concurrency)

    def _batch(self) -> int:
        """Where servers coexist, small interleaved batches; else all at once (a reboot each)."""
        wl = self.deployment.workload
        if self.deployment.launch.coexist:
            return self.deployment.gates.sample_batch
        return max(1, wl.max_repeats - wl.repeats)

    def _gather(self, configs: list[str], concurrency: int, per_boot: int) -> None:
        self.plan.ensure(configs, concurrency, per_boot)
        for config in configs:
            self.plan.raise_for(config)

    def drafters(self) -> dict[str, dict]:
        """Per speculative config, the draft weights it ran (path, checksum, how made); read once."""
        if self._drafters is None:
            self._drafters = drafters(self.deployment)
        return self._drafters

    def server_version(self, config: str) -> str | None:
        """The release `config`'s own server reports: with per-config commands (an upgrade gated
        side by side) configs of one run differ, and the fingerprint holds the reference's only."""
        version = (self.plan.pool.server_infos.get(config) or {}).get("version")
        return str(version) if version else None

    def _drafter_note(self, config: str, stored_sha: str | None) -> str | None:
        """Why an accept length moved, where the weights say it: same checksum or another one."""
        now = (self.drafters().get(config) or {}).get("sha256")
        if now is None or stored_sha is None:
            return None
        if now != stored_sha:
            return (
                f"{config}'s draft weights changed since the baseline was stored (sha256 {stored_sha[:16]} then, "
                f"{now[:16]} now): the drafter itself is the first suspect"
            )
        return f"{config}'s draft weights are the ones the baseline was stored with (sha256 {now[:16]}): look at the verify path, tokenizer or inputs"

    def _machine_note(self, stored: StoredBaseline) -> str | None:
        """Where the stored speeds came from another machine of the same fingerprint: named, since
        the declared between-boot spread covers boots of one machine (seen: one H200's plain
        SmolLM2 decoded at 561 tok/s where another's stored 914). Only where the servers run on
        this host (the local launcher): elsewhere this host's id says nothing of theirs."""
        if self.deployment.simulator or self.deployment.launch.launcher != "local":
            return None
        if self._host_now is None:
            self._host_now = run_provenance.host_id()
        return other_machine(str(stored.provenance.get("host_id") or ""), self._host_now)

    # --- fingerprint, stored baselines, calibration ------------------------------------
    def fingerprint_source(self) -> str:
        """The config whose server says what this machine and install are: the reference, or where
        it is not booted, a speculative config of the run (the same install: the deployment
        refuses per-config commands there)."""
        dep = self.deployment
        if not self.reference_stored:
            return dep.reference
        booted = [c for c in self.plan.configs if c in dep.speculative_configs]
        return (booted or dep.speculative_configs)[0]

    def fingerprint(self) -> Fingerprint:
        """This run's fingerprint, booting the server that tells it where none has answered yet."""
        if self._fingerprint is None:
            pool = self.plan.pool
            ref = self.fingerprint_source()
            if ref not in pool.server_infos:
                pool.acquire(ref)
            self._fingerprint = collect_fingerprint(
                self.deployment, pool.server_infos.get(ref, {}), pool.model_infos.get(ref, {})
            )
        return self._fingerprint

    def fingerprint_if_known(self) -> Fingerprint | None:
        """This run's fingerprint where a server has answered; None otherwise (never boots)."""
        if self._fingerprint is None and self.fingerprint_source() in self.plan.pool.server_infos:
            return self.fingerprint()
        return self._fingerprint

    def lookup(self) -> BaselineLookup:
        if self._lookup is None:
            self._lookup = find_baselines(self.deployment.name, self.fingerprint(), self.baselines_root)
        return self._lookup

    def calibration(self) -> Calibration | None:
        if not self._calibration_read:
            self._calibration = find_calibration(self.baselines_root, self.deployment.name, self.fingerprint())
            self._calibration_read = True
        return self._calibration

    def spread(self, config: str, kind: str) -> BootSpread | None:
        """Between-boot spread of `config`'s decode tok/s or speedup on this machine, if known."""
        found = self.calibration()
        digest = self.deployment.configs[config].args_digest(self.deployment.launch)
        pooled_now = self.pooled_spread(config, kind)
        if pooled_now is not None and (pooled_now.runs or pooled_now.calibrations > 1):
            where = history_path(self.baselines_root, self.deployment.name, self.fingerprint()).name
            return BootSpread(pooled_now.log_sd_upper, pooled_now.describe(f"runner history {where}"))
        if found is not None and (s := found.spread_of(config, kind, digest)) is not None:
            return s
        declared = self.deployment.gates.between_boot
        if declared is not None:
            sd = declared.decode_tps_log_sd if kind == "decode_tps" else declared.speedup_log_sd
            return BootSpread(sd, f"declared in the deployment ([gates.between_boot]: {declared.source})")
        return None

    def history(self) -> RunnerHistory | None:
        """This runner's history of unchanged boots (verdicts.history), read once."""
        if not self._history_read:
            self._history = load_history(history_path(self.baselines_root, self.deployment.name, self.fingerprint()))
            self._history_read = True
        return self._history

    def pooled_spread(self, config: str, kind: str):  # noqa: ANN201 - a history.PooledSpread or None
        """`config`'s `kind` pooled over the history and this machine's calibration record (its
        rounds count once: where the history already holds them, from there)."""
        digest = self.deployment.configs[config].args_digest(self.deployment.launch)
        history, found = self.history(), self.calibration()
        extra: list[Entry] = []
        if found is not None:
            frames = {e.frame for e in history.entries} if history else set()
            extra = [e for e in calibration_entries(found.document, found.path.stem) if e.frame not in frames]
        return pooled_spread(history, config, kind, digest, extra)

    def _spread_or_own(self, config: str, kind: str, now: Series, stored: Series) -> BootSpread | None:
        """The runner's spread, or where it has none, the one this comparison's own boots show:
        this run's boots and the stored run's, each about its own level (boots − 1 degrees of
        freedom a side), at its 80% upper bound; None where both sides have one boot."""
        known = self.spread(config, kind)
        found = pool([own_boots(now), own_boots(stored)]) if known is None else None
        if found is not None:
            known = BootSpread(
                found.log_sd_upper,
                f"80% upper bound from this comparison's own boots ({len(now)} now, {len(stored)} stored; "
                f"{found.df} degrees of freedom)",
            )
        self._spread_used[(config, kind)] = known
        return known

    def pool_into_history(self) -> list[str]:
        """Add this run's boots to the runner's history (verdicts.history), where every gate of the
        run passed: each no-regression gate on a speed figure gives its boots in the frame of the
        stored baseline it was paired with. A boot out of control is kept, not pooled, and its
        gate's notes say so. Returns what was done, one line each (nothing where nothing may be).
        Never for the SIMULATOR: its boots are no runner's, and every local `specgate run` would
        rewrite a committed file."""
        if self.deployment.simulator or self.recording or not self.verdicts:
            return []
        if any(v.status != PASS for v in self.verdicts):
            return []
        found = [v for v in self.verdicts if isinstance(v.figures.get("history"), dict) and v.figures["history"]["values"]]
        fingerprint = self.fingerprint_if_known()
        if not found or fingerprint is None:
            return []
        path = history_path(self.baselines_root, self.deployment.name, fingerprint)
        said = run_provenance.provenance()
        lines = []
        for verdict in found:
            figure = verdict.figures["history"]
            entry = Entry(
                source="run", config=verdict.config, kind=figure["kind"],
                args_digest=self.deployment.configs[verdict.config].args_digest(self.deployment.launch),
                frame=figure["frame"], date=said["date"], host_id=said["host_id"], commit=said["commit"],
                sglang=self.server_version(verdict.config) or fingerprint.sglang, fingerprint=fingerprint.slug,
                values=[BootValue.model_validate(v) for v in figure["values"]],
            )  # fmt: skip
            (written,) = append(path, self.deployment.name, fingerprint, [entry], figure["stored_boots"])
            if written.pooled:
                line = f"{verdict.config}'s {entry.kind}: {len(entry.values)} boot(s) pooled into the runner history {path}"
            else:
                line = f"{verdict.config}'s {entry.kind} NOT pooled into the runner history {path}: out of control: {written.why_not_pooled}"
            verdict.notes.append(line)
            lines.append(line)
        self._history_read = False  # read again where asked: it holds this run now
        return lines

    def stored_reference(self) -> StoredReference:
        """The stored baseline standing in for the unbooted reference, checked once; raises
        StoredReferenceError (the same one every time) where it cannot stand in."""
        if self._stand_in is None:
            try:
                self._stand_in = resolve_stored_reference(
                    self.deployment,
                    self.fingerprint(),
                    self.fingerprint_source(),
                    self.lookup(),
                    self.baselines_root,
                    self.allow_fingerprint_mismatch,
                )
            except StoredReferenceError as exc:
                self._stand_in = exc
        if isinstance(self._stand_in, StoredReferenceError):
            raise self._stand_in
        return self._stand_in

    def stand_in_problem(self) -> str | None:
        """Why the stored reference cannot be used, where that is already known (never boots)."""
        return str(self._stand_in) if isinstance(self._stand_in, StoredReferenceError) else None

    def _no_boot_spread(self, config: str) -> str | None:
        """With the reference not booted every timing comparison crosses boots: an interval
        without the between-boot spread would call a difference of boots a change. Where none is
        known for this machine, the gate cannot compare (fails closed)."""
        if not self.reference_stored or self.spread(config, "decode_tps") is not None:
            return None
        return (
            f"{NOT_BOOTED}: {config} now is compared with stored figures of another boot, and no between-boot "
            f"spread is known for this machine (no calibration record under {self.baselines_root / self.deployment.name}"
            " / calibration, no [gates.between_boot]), so no interval can hold that noise. Run `specgate calibrate` "
            "on this machine or declare [gates.between_boot] with its source"
        )

    def _first_record(self) -> bool:
        """This baseline update is the deployment's first record on the machine: nothing before it."""
        lookup = self.lookup()
        return self.recording and lookup.exact is None and not lookup.others

    def _first_record_mark(self) -> dict:
        """figures of a gate left uncompared because this is the first record: expected there, so
        the run's verdict does not count it as missing."""
        return {"first_record": True} if self._first_record() else {}

    def stored_for_comparison(self) -> tuple[StoredBaseline | None, str]:
        """The baseline to compare with, or None and the reason it is not compared."""
        lookup = self.lookup()
        if lookup.exact is not None:
            return lookup.exact, ""
        if self._first_record():
            return None, (
                f"nothing stored for deployment {self.deployment.name!r} on this machine before this run to compare "
                "with: this baseline update stores its figures as the baseline (the report's first line says where)"
            )
        if not lookup.others:
            return None, (
                f"no stored baseline for deployment {self.deployment.name!r} under {self.baselines_root}; "
                f"record one with: {self.update_command()}"
            )
        newest = lookup.others[0]
        diff = "; ".join(self.fingerprint().differences(newest.fingerprint))
        if self.allow_fingerprint_mismatch:
            return newest, f"compared against {newest.path.name} although the fingerprint differs ({diff})"
        return None, (
            f"stored baselines are for other hardware/software, not compared: {newest.path.name} differs in {diff}. "
            "Pass --specgate-allow-fingerprint-mismatch to compare anyway, or record a baseline for this machine."
        )

    def host_drift(self, config: str, concurrency: int) -> ReferenceDrift | None:
        """How far `config`'s reference moved during this run (measured once, at the first gate
        that asks); None where the reference is not booted in this run."""
        if self.reference_stored:
            return None
        return self.plan.drift(self.deployment.reference_of(config), concurrency, self.deployment.gates.confidence)

    def uncalibrated(self, config: str) -> str | None:
        """Why an absolute comparison of `config` with stored figures cannot tell a regression
        from this runner's own drift between runs, or None where a spread is known for it."""
        if self.spread(config, "decode_tps") is not None:
            return None
        return (
            f"this runner has no calibration, so a change of {config}'s absolute speed since the stored run cannot be "
            "told from the runner's own drift between runs (an untouched server can move by 15% or more minutes "
            f"apart); measure it once with: specgate calibrate {self.deployment.path}"
        )

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

    def update_command(self) -> str:
        """The command that records this deployment's baseline for this machine."""
        return f"specgate baseline update {self.deployment.path} --baselines-dir {self.baselines_root}"

    def next_step(self) -> str | None:
        """The report's first line where this run looked for a stored baseline of this machine and
        found none (never boots: None where no gate looked); None in a baseline update."""
        lookup = self._lookup
        if self.recording or lookup is None or lookup.exact is not None:
            return None
        if lookup.others and self.allow_fingerprint_mismatch:
            return None  # compared with another machine's, as asked; each gate says so
        name = self.deployment.name
        found = (
            f"the stored baselines of {name!r} are for other hardware/software ({lookup.others[0].path.name})"
            if lookup.others
            else f"no stored baseline for deployment {name!r}"
        )
        return (
            f"{NEXT_STEP}{found} on this machine, so nothing here is compared with it. Record one on this machine "
            f"(the GPU runner), at a committed tree, with `{self.update_command()}`, and commit "
            f"{self.baselines_root / name}; later runs compare against it"
        )

    def _record(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict

    # --- fidelity: the suite's timing against the server's own ---------------------------
    def fidelity(self, config: str, concurrency: int) -> FidelityCheck:
        """Whether the server's own figure bears out the suite's decode tok/s of `config` (measure.fidelity)."""
        record = self._record_of(config, concurrency)
        return check_fidelity(config, concurrency, fidelity_of(record, self.plan.pool.log_dir / f"{config}.log"))

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

    # --- the beats gate ---------------------------------------------------------------
    def _vacuous(self, name: str, config: str, found: vacuity.Vacuity | None) -> Verdict | None:
        """A threshold under which this gate cannot fail: VACUOUS, before any figure is looked at."""
        if found is None:
            return None
        return self._record(Verdict(name, config, VACUOUS, found.summary(self.deployment)))

    def beats(self, gate: BeatsGate) -> Verdict:
        if (vacuous := self._vacuous(f"beats:{gate.name}", gate.config, vacuity.beats_ratio(self.deployment, gate))) is not None:
            return vacuous
        if gate.against == "stored" or (self.reference_stored and gate.over == self.deployment.reference):
            # Over the unbooted reference a gate can only be "now vs stored", whatever it says.
            return self._record(self._held_to_fidelity(self._beats_stored(gate), [gate.config], gate.concurrency))
        conf = self.deployment.gates.confidence
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
        noise = [""]

        def interval_at(level: float) -> Interval:
            iv, noise[0] = ratio_interval(
                ratio_series(cfg.decode_tps_by_boot(), ref.decode_tps_by_boot()), level, spread
            )
            if between_blocks is not None:
                iv = widened(iv, between_blocks.log_size)
                noise[0] += f"; plus the reference's move between blocks ({pct(between_blocks.ratio.estimate - 1)}) as one SD"
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
        figures = {
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
            verdict = Verdict(name, gate.config, PASS, head, notes, figures, noise[0])
        elif status == FAIL:
            verdict = Verdict(name, gate.config, FAIL, head + " — FAILS", notes, figures, noise[0])
        else:
            verdict = Verdict(
                name,
                gate.config,
                INCONCLUSIVE,
                head + f" — still INCONCLUSIVE at the cap of {wl.max_repeats} requests per boot: the interval "
                f"straddles {gate.ratio:g}, so no pass can be shown",
                notes,
                figures,
                noise[0],
            )
        return self._record(self._held_to_fidelity(verdict, pair, c))

    def _now_over_stored(
        self, config: str, concurrency: int, figs: StoredFigures, decide: Callable[[Interval], Status]
    ) -> tuple[Status, Interval, int, int, int, str, ConfigSpeed]:
        """`config` now over the stored figures `figs`, request by request over the same pinned
        requests, measured until `decide` settles: (status, ratio, cap, stored requests per boot,
        looks, which noise the interval holds, the record)."""
        conf = self.deployment.gates.confidence
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
        noise = [""]

        def interval_at(level: float) -> Interval:
            series = ratio_series(truncated(record.decode_tps_by_boot(), cap), stored_series)
            iv, noise[0] = ratio_interval(series, level, spread, boots_other=figs.boot_count)
            if drifted is not None:
                iv = widened(iv, drifted.log_size)
                noise[0] += f"; plus this run's host drift ({pct(drifted.ratio.estimate - 1)}) as one SD"
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
            return Verdict(name, gate.config, NOT_COMPARED, f"{stored.path.name} was measured on another workload")
        conf = self.deployment.gates.confidence
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
        figures = {"ratio": ratio.as_dict(), "required": gate.ratio, "now": now.as_dict(), "stored": figs.decode_tps_median}
        notes = [f"{gate.over}'s figures are the stored baseline's ({stored.path.name}), not this run's"]
        if unbooted:
            notes.append(
                f"{NOT_BOOTED}: its figures are from {stored.path.name} (commit "
                f"{stored.provenance.get('commit', '?')}); how it drifted since is not seen"
            )
        if why_not:
            notes.append(why_not)
        if status == PASS:
            return Verdict(name, gate.config, PASS, head, notes, figures, noise)
        suffix = " — FAILS" if status == FAIL else f" — still INCONCLUSIVE at {cap} requests per boot: no pass can be shown"
        return self._cannot_tell_uncalibrated(Verdict(name, gate.config, status, head + suffix, notes, figures, noise), head)

    # --- the accept-length floor ----------------------------------------------------------
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

    # --- the no-regression gate -----------------------------------------------------------
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
            return self._record(
                Verdict(
                    name,
                    config,
                    NOT_COMPARED,
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
                    f"the pinned workload changed since {stored.path.name} was recorded (prompts, format, "
                    "max_new_tokens or ignore_eos): its requests no longer pair with ours; update the baseline",
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
        figures: dict,
        noise: str,
    ) -> Verdict:
        tol = self.deployment.gates.tolerance.decode_tps_for(config)
        mde, false_alarm = detection(ratio, tol)
        figures["detects"] = {"regression_80pct_power": mde, "unchanged_fails": false_alarm}
        notes.append(self._sensitivity(config, figures, cap))
        if false_alarm > 0.5:
            sees = (
                f"at this interval's width the gate cannot tell a regression from noise: an unchanged build fails "
                f"it with probability {false_alarm:.0%}"
            )
        else:
            sees = (
                f"this run sees regressions of {mde:.1%} or more (80% power); an unchanged build fails it with "
                f"probability {false_alarm:.0%}"
            )
        if "NOT the between-boot" in noise:
            sees += " (from the noise this interval holds; between-boot noise would raise both)"
        noise = (noise + "; " if noise else "") + sees
        if status == PASS:
            return Verdict(name, config, PASS, head, notes, figures, noise)
        suffix = (
            _inconclusive_at(cap, stored_n, self.deployment.workload.max_repeats, self.deployment.launch.more_boots)
            if status == INCONCLUSIVE
            else "REGRESSED"
        )
        return Verdict(name, config, status, f"{head} — {suffix}", notes, figures, noise)

    def _sensitivity(self, config: str, figures: dict, cap: int) -> str:
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
            false_alarm=1 - self.deployment.gates.confidence,
            two_sided=kind == "decode_tps" and config in self.deployment.references,
        )
        figures["sensitivity"] = {
            "detects_80pct": design.detects(),
            "false_alarm": design.false_alarm,
            "boots_now": design.boots_now,
            "boots_stored": design.boots_stored,
            "requests": design.requests,
            "between_log_sd": design.between_log_sd,
            "within_log_sd": within,
            "spread_source": spread.source,
        }
        said = sentence(design, spread.source)
        target = self.deployment.gates.detect
        if target is not None:
            servers = [config, self.deployment.reference_of(config)] if kind == "speedup" else [config]
            boot_s, request_s = self._measured_seconds(servers)
            boots = design.boots_for(target, MAX_BOOTS)
            figures["sensitivity"]["plan"] = {
                "detect": target,
                "boots_per_side": boots,
                "gpu_minutes_per_side": minutes(boots, boot_s, request_s, cap) if boots else None,
            }
            said += "; " + plan_sentence(
                design, target, MAX_BOOTS, boot_s, request_s, url=self.deployment.launch.launcher == "url"
            )
        return said

    def _measured_seconds(self, configs: list[str]) -> tuple[float | None, float | None]:
        """Seconds one boot of each of `configs` took in this run, and one request of each (medians, summed)."""
        import statistics

        boots, requests = [], []
        for config in configs:
            took = [b.seconds for b in self.plan.pool.boots if b.config == config and b.ok]
            spent = [s.e2e_s for r in self.meter.results.values() if r.config == config for s in r.samples]
            if not took or not spent:
                return None, None
            boots.append(statistics.median(took))
            requests.append(statistics.median(spent))
        return sum(boots), sum(requests)

    def _absolute_regression(
        self, name: str, config: str, concurrency: int, figs: StoredFigures, stored: StoredBaseline, notes: list[str]
    ) -> Verdict:
        """Now vs stored as the median of per-request ratios over the same pinned requests."""
        conf = self.deployment.gates.confidence
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
        figures = {
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
                f"the plain baseline itself is {direction} than stored: the machine (or plain decoding) moved since the "
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
        conf = self.deployment.gates.confidence
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
        noise = [""]

        def speedups_now() -> Series:
            return truncated(ratio_series(record.decode_tps_by_boot(), ref_record.decode_tps_by_boot()), cap)

        def interval_at(level: float) -> Interval:
            iv, noise[0] = ratio_interval(
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
            f"{config} speedup over {ref} {speedup_now.estimate:.3f}x now vs {speedup_then.estimate:.3f}x stored: "
            f"per-request ratio {ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({_level(ratio, conf, looks)}) "
            f"over {pairs} paired requests ({pct(ratio.estimate - 1)}); allowed -{allowed:.0%}"
        )
        context = (
            f"absolute: {config} {pct(absolute.estimate - 1)} and plain {ref} {pct(ref_change.estimate - 1)} "
            f"vs stored ({median_interval(record.decode_tps_per_request, conf).estimate:.1f} tok/s now, {figs.decode_tps_median:.1f} stored)"
        )
        figures = {
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
        conf = self.deployment.gates.confidence
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
        head = (
            f"{config} accept length {tau.estimate:.3f} vs stored {figs.accept_length:.3f}: paired ratio "
            f"{ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] ({pct(ratio.estimate - 1)}); allowed -{tol:.0%}"
        )
        figures = {"ratio_to_stored": ratio.as_dict(), "now": tau.as_dict(), "stored": figs.accept_length}
        # Boots of one build accept alike only nearly (near-tie flips part the answers; draft-side
        # numerics could too): that spread belongs inside the tolerance, not inside this interval
        # (results/2026-12-02-h200-answers).
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


def other_machine(then: str, now: str) -> str | None:
    """A note where two host ids (provenance.host_id: GPU UUIDs joined by commas, or
    "machine-id:…") name different machines, or None. Ids of different kinds are not compared
    (a GPU host whose NVML failed once falls back to its machine id), nor an unknown one; GPUs
    are compared as sets, and the note names the GPUs that differ."""
    if not then or not now or "unknown" in (then, now) or then.startswith("machine-id:") != now.startswith("machine-id:"):
        return None
    before, after = set(then.split(",")), set(now.split(","))
    if before == after:
        return None
    gone, new = sorted(before - after), sorted(after - before)
    return (
        f"the baseline was stored on another machine ({', '.join(gone)} then; {', '.join(new)} now; the same GPU "
        "model, driver and SGLang): absolute speeds differ between machines of one fingerprint, and the declared "
        "between-boot spread covers boots of one machine; a baseline stored on this runner compares like with like"
    )


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


def baseline_document(
    judge: Judge, provenance: dict, excluded: dict[str, str] | None = None, golden: GoldenAnswers | None = None
) -> dict:
    """The stored form of this run's measurements: estimates, intervals and raw samples; and
    where the deployment takes its reference from the stored baseline, the reference's golden
    answers (specgate.equivalence.golden)."""
    dep = judge.deployment
    conf = dep.gates.confidence
    configs: dict[str, dict] = {}
    excluded = excluded or {}
    for (config, concurrency), record in sorted(judge.meter.results.items()):
        if not record.samples or config in excluded:
            continue
        summary = summarise_speed(record, judge.meter.results.get((dep.reference_of(config), concurrency)), conf)
        ordered = [s for samples in record.by_boot().values() for s in samples]
        entry = configs.setdefault(
            config, {"args_digest": dep.configs[config].args_digest(dep.launch), "concurrency": {}}
        )
        if sha := (judge.drafters().get(config) or {}).get("sha256"):
            entry["drafter_sha256"] = sha
        if version := judge.server_version(config):
            entry["server_version"] = version
        booted = [b.seconds for b in judge.plan.pool.boots if b.config == config and b.ok]
        if booted:
            entry["boot_seconds"] = round(booted[0], 2)
        entry["concurrency"][str(concurrency)] = {
            "n": len(record.samples),
            "decode_tps": summary.decode_tps_median.as_dict(),
            "ttft_s": summary.ttft_s.as_dict(),
            "accept_length": summary.accept_length.as_dict() if summary.accept_length else None,
            "ratio_to_reference": summary.ratio_to_reference.as_dict() if summary.ratio_to_reference else None,
            "samples": {
                "decode_tps": [round(s.decode_tps, 3) for s in ordered],
                "ttft_s": [round(s.ttft_s, 6) for s in ordered],
                "completion_tokens": [s.completion_tokens for s in ordered],
                "verify_ct": [s.verify_ct for s in ordered],
                "boot": [s.boot for s in ordered],
            },
        }
    document = {
        "provenance": provenance,
        "workload_digest": judge.meter.workload_digest,
        "configs": configs,
        "excluded": excluded,
        "equivalence": "checked"
        if dep.equivalence.enabled
        else f"NOT CHECKED (the deployment says: {dep.equivalence.skip_reason})",
    }
    if golden is not None:
        document["golden"] = golden.as_dict()
    return document
