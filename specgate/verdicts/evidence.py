"""The judge's store of stored evidence: the machine's fingerprint, stored baselines, calibration,
the runner's history of boots, the stored reference and which drafter each config ran."""

from __future__ import annotations

from dataclasses import dataclass, field

from specgate import provenance as run_provenance
from specgate.measure.drafters import drafters
from specgate.measure.drift import ReferenceDrift
from specgate.measure.pairing import Series
from specgate.options import ALLOW_FINGERPRINT_MISMATCH
from specgate.verdicts.baselines import BaselineLookup, StoredBaseline, find_baselines
from specgate.verdicts.calibration import Calibration, find_calibration
from specgate.verdicts.fingerprint import Fingerprint, collect_fingerprint, unread_fields
from specgate.verdicts.gates import PASS, GateFigures
from specgate.verdicts.history import (
    BootValue,
    Entry,
    RunnerHistory,
    append,
    calibration_entries,
    history_path,
    load_history,
    own_boots,
    pool,
    pooled_spread,
)
from specgate.verdicts.noise import BootSpread
from specgate.verdicts.sampler import Sampler
from specgate.verdicts.stored_reference import (
    NOT_BOOTED,
    StoredReference,
    StoredReferenceError,
    resolve_stored_reference,
)


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


@dataclass
class Evidence(Sampler):
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
            found = find_baselines(self.deployment.name, self.fingerprint(), self.baselines_root)
            # A bucket's judge compares with that bucket's stored figures alone (none stored: NOT
            # COMPARED, as a config new since the baseline is).
            self._lookup = BaselineLookup(
                found.exact.at_context(self.context) if found.exact is not None else None,
                [o.at_context(self.context) for o in found.others],
            )
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
        calibrated = found.spread_of(config, kind, digest) if found is not None else None
        if pooled_now is not None and (pooled_now.runs or pooled_now.calibrations > 1):
            where = history_path(self.baselines_root, self.deployment.name, self.fingerprint()).name
            # The history pools levels, not their split: the calibration's split and lag carry over.
            return BootSpread(
                pooled_now.log_sd_upper,
                pooled_now.describe(f"runner history {where}"),
                calibrated.split_at(pooled_now.log_sd_upper) if calibrated is not None else None,
                calibrated.request_lag1 if calibrated is not None else None,
            )
        if calibrated is not None:
            return calibrated
        declared = self.deployment.gates.between_boot
        if declared is not None:
            sd = declared.decode_tps_log_sd if kind == "decode_tps" else declared.speedup_log_sd
            shared = declared.decode_tps_shared_log_sd if kind == "decode_tps" else declared.speedup_shared_log_sd
            return BootSpread(
                sd, f"declared in the deployment ([gates.between_boot]: {declared.source})", shared, declared.request_lag1
            )
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
                shared_log_sd=0.0,  # replicas of one run differ by each server's own part alone
                covers_runs=False,
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

    def _first_record_mark(self) -> GateFigures:
        """figures of a gate left uncompared because this is the first record: expected there, so
        the run's verdict does not count it as missing."""
        return GateFigures(first_record=True) if self._first_record() else GateFigures()

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
        if unread := unread_fields(self.fingerprint(), newest.fingerprint):
            # Not another machine: this run could not read what the stored one could. A baseline
            # recorded now would be filed under 'unknown', and no later run would find it.
            return None, (
                f"not compared: this run could not read the {', '.join(unread)} that {newest.path.name} records "
                f"({diff}): the reference server's /get_server_info (or the GPUs) did not tell it; fix that, do not "
                "record a baseline under 'unknown'"
            )
        return None, (
            f"stored baselines are for other hardware/software, not compared: {newest.path.name} differs in {diff}. "
            f"Pass {ALLOW_FINGERPRINT_MISMATCH.said} to compare anyway, or record a baseline for this machine."
        )

    def host_drift(self, config: str, concurrency: int) -> ReferenceDrift | None:
        """How far `config`'s reference moved during this run (measured once, at the first gate
        that asks); None where the reference is not booted in this run."""
        if self.reference_stored:
            return None
        return self.plan.drift(self.deployment.reference_of(config), concurrency, self.confidence)

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

    def update_command(self) -> str:
        """The command that records this deployment's baseline for this machine."""
        return f"specgate baseline update {self.deployment.path} --baselines-dir {self.baselines_root}"
