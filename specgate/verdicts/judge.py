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

from dataclasses import replace

from specgate.deployment import bucket_label
from specgate.equivalence.golden import GoldenAnswers
from specgate.errors import GateKindError
from specgate.gate_kinds import PlannedGate, calling, kind_named, where
from specgate.measure.summary import summarise_speed
from specgate.verdicts import own_time
from specgate.verdicts.ab_gate import AbGates
from specgate.verdicts.accept_gate import AcceptFloorGates
from specgate.verdicts.beats_gate import BeatsGates
from specgate.verdicts.evidence import other_machine
from specgate.verdicts.gate_base import SIMULATED_TAU_ENV, simulated_tau
from specgate.verdicts.gates import Status, Verdict
from specgate.verdicts.regression_gate import RegressionGates

# Read from here by the CLI, the plugin and the self-tests.
__all__ = ["SIMULATED_TAU_ENV", "Judge", "baseline_document", "other_machine", "simulated_tau"]


class Judge(BeatsGates, AcceptFloorGates, RegressionGates, AbGates):
    """The run's judge: one kind of gate per module (specgate.gate_kinds names them) over the shared
    sampler (sampler.py) and store of stored evidence (evidence.py); gate_base.py holds what the
    kinds share. Its verdicts are recorded in `verdicts`."""

    def decide(self, gate: PlannedGate, test: str = "") -> Verdict:
        """The verdict of one planned gate, by its kind, judged by gate test `test` (its pytest item
        name, which ties the test's failure to this verdict); kept among the run's verdicts whether
        or not the kind recorded it: a verdict the report never saw would leave its gate out of the
        table while its test passed."""
        kind = kind_named(gate.kind)
        before = len(self.verdicts)
        asked, bucket = gate, ""
        if gate.context:
            # A context bucket's gate is the kind's own, decided on this bucket's records and named
            # with the bucket (gate_kinds.run_gates): the kind names its verdict as it always does.
            if gate.context != self.context:
                raise GateKindError(f"{gate.name}: a gate of context {gate.context} asked of the judge of {self.context}")
            bucket = f"@{bucket_label(gate.context)}"
            asked = replace(gate, name=gate.name.removesuffix(bucket), context=0)
        try:
            with own_time.bounded(), calling(kind, f"decide (of {gate.name})"):
                verdict = kind.decide(self, asked)
        except own_time.OwnTimeExceeded:
            del self.verdicts[before:]
            raise GateKindError(
                f"{where(kind)}: decide (of {gate.name}) ran past {own_time.OWN_TIME_S:g} s of its own (its "
                "measurements not counted): it hangs; the gate has no verdict"
            ) from None
        recorded = self.verdicts[before:]
        del self.verdicts[before:]  # kept below, once, if it is what the gate decided
        if not isinstance(verdict, Verdict):
            raise GateKindError(f"{where(kind)}: decide returned {type(verdict).__name__}, not a Verdict ({gate.name})")
        if verdict.gate != asked.name or verdict.config != gate.config:
            raise GateKindError(
                f"{where(kind)}: decide of {gate.name!r} (config {gate.config!r}) returned a verdict of "
                f"{verdict.gate!r} (config {verdict.config!r})"
            )
        if not isinstance(verdict.status, Status):
            raise GateKindError(f"{where(kind)}: decide of {gate.name!r} returned status {verdict.status!r}, not a Status")
        if any(v is not verdict for v in recorded):
            raise GateKindError(
                f"{where(kind)}: decide of {gate.name!r} recorded {len(recorded)} verdict(s) other than the one it "
                "returned: one gate, one verdict"
            )
        verdict.test = test
        verdict.figures["concurrency"] = gate.concurrency
        if self.buckets > 1:
            verdict.figures["false_alarm_share"] = round(1 - self.confidence, 6)
            verdict.notes.append(
                f"false-alarm share {1 - self.confidence:.2%} of the run's {1 - self.deployment.gates.confidence:.1%} "
                f"(split over {self.buckets} context buckets)"
            )
        if bucket:
            verdict.gate = gate.name
            verdict.figures["context"] = gate.context
            # The first screen names the bucket where it lost: "eagle3-prefill at 32K: ...".
            at = f"{gate.config} at {bucket_label(gate.context)}"
            verdict.summary = f"{at}: {_after_subject(verdict.summary, gate.config)}"
        self._record(verdict)
        return verdict


def _after_subject(summary: str, config: str) -> str:
    """`summary` without its leading config name, which the bucket's "X at 8K:" now says; a
    possessive keeps the name ("X's accept length ..."): cut, it would read "'s accept length"."""
    rest = summary.removeprefix(config)
    if rest == summary or rest.startswith(("'s", "\u2019s")):
        return summary
    return rest.lstrip(" :")


def baseline_document(
    judge: Judge,
    provenance: dict,
    excluded: dict[str, str] | None = None,
    golden: GoldenAnswers | None = None,
    buckets: tuple[Judge, ...] = (),
) -> dict:
    """The stored form of this run's measurements: estimates, intervals and raw samples; and
    where the deployment takes its reference from the stored baseline, the reference's golden
    answers (specgate.equivalence.golden). `buckets`: the judges of the context buckets, each
    stored under `contexts.<prompt tokens>` (none: no such key, the document as before)."""
    excluded = excluded or {}
    document = {
        "provenance": provenance,
        "workload_digest": judge.meter.workload_digest,
        "configs": _configs_section(judge, excluded),
        "excluded": excluded,
        "equivalence": "checked"
        if judge.deployment.equivalence.enabled
        else f"NOT CHECKED (the deployment says: {judge.deployment.equivalence.skip_reason})",
    }
    if buckets:
        document["contexts"] = {
            str(b.context): {
                "workload_digest": b.meter.workload_digest,
                "configs": _configs_section(b, excluded),
                **({"chars_per_token": b.meter.built_at} if b.meter.built_at is not None else {}),
            }
            for b in buckets
        }
    if golden is not None:
        document["golden"] = golden.as_dict()
    return document


def _configs_section(judge: Judge, excluded: dict[str, str]) -> dict[str, dict]:
    """Each measured config's figures and samples, as one judge's meter holds them."""
    dep = judge.deployment
    conf = dep.gates.confidence
    configs: dict[str, dict] = {}
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
    return configs
