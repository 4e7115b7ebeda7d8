"""The reference taken from the stored baseline instead of booted (`launch.reference_from = "stored"`).

For a model whose boot takes many minutes, booting the plain reference on every merge nearly
doubles the time to a verdict. Such a deployment may let the stored baseline of this machine
stand in for it: the reference's per-request figures (the pinned sequence, in order) and its
golden answers for a fixed case list. What it gives up: the reference's drift between the
stored run and now is not seen, and every timing comparison with it crosses boots.

The stand-in is used only where it is the reference this run would have booted: the same
fingerprint (GPU, count, driver, CUDA, model, and the SGLang release, read from a booted
speculative config of the same install) and the same launch digest of the reference. Anything
else is a StoredReferenceError naming what differs: the run fails closed (or, where the user
allows uncompared gates, warns loudly), and never boots the reference to make up for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specgate.deployment import Deployment
from specgate.equivalence.golden import GoldenAnswers, case_settings_digest
from specgate.errors import SpecgateError
from specgate.measure.speed import ConfigSpeed, SpeedMeter, SpeedSample
from specgate.options import ALLOW_FINGERPRINT_MISMATCH
from specgate.verdicts.baselines import BaselineLookup, StoredBaseline, StoredFigures
from specgate.verdicts.fingerprint import Fingerprint

# Said wherever a timing gate crosses boots because the reference was not booted.
NOT_BOOTED = 'the reference was not booted (launch.reference_from = "stored")'


class StoredReferenceError(SpecgateError):
    """The stored baseline cannot stand in for the reference: no baseline, another machine or
    install, other launch flags of the reference, or no golden answers."""


@dataclass(frozen=True)
class StoredReference:
    reference: str
    baseline: StoredBaseline
    figures: dict[int, StoredFigures]  # concurrency -> the reference's stored figures
    fingerprint_from: str  # the booted config whose server gave this run's fingerprint
    note: str = ""  # e.g. compared although the fingerprint differs (the user allowed it)

    @property
    def path(self) -> Path:
        return self.baseline.path

    @property
    def commit(self) -> str:
        return str(self.baseline.provenance.get("commit", "?"))

    def answers(self, deployment: Deployment, min_cases: int = 0) -> GoldenAnswers:
        """The reference's golden answers, or why they cannot stand in (equivalence then cannot
        run): none stored, drawn from other settings than this deployment's, or fewer cases
        than this run asks for (a recording with --examples 1 checks one prompt)."""
        golden = self._stored_answers()
        now = case_settings_digest(deployment)
        if golden.case_settings != now:
            raise StoredReferenceError(
                f"{self.path}'s golden answers were drawn from other equivalence settings or prompts "
                f"({golden.case_settings or 'not recorded'} then, {now} now: [equivalence] max_new_tokens, stop_strings, "
                "concurrency, top_logprobs, or the workload's prompts and format changed): they check nothing this "
                "deployment asks. Record them again: specgate baseline update <deployment> on this machine"
            )
        distinct = len({(e.case.key, e.case.concurrency) for e in golden.entries})
        if distinct < min_cases:
            raise StoredReferenceError(
                f"{self.path} holds golden answers for {distinct} distinct case(s); this run asks for {min_cases} "
                "(--specgate-examples / [equivalence] examples / the Hypothesis profile): record the baseline with at "
                "least that many"
            )
        return golden

    def _stored_answers(self) -> GoldenAnswers:
        golden = self.baseline.golden
        if golden is None:
            raise StoredReferenceError(
                f"{self.path} holds no golden answers of the reference {self.reference!r} "
                f"({self.baseline.format}; answers are stored by a baseline update of a deployment with "
                'launch.reference_from = "stored"): equivalence cannot be checked without booting the reference. '
                f"Record them with: specgate baseline update <deployment> on this machine"
            )
        return golden

    def records(self) -> dict[tuple[str, int], ConfigSpeed]:
        """The stored figures as measurement records, for the report's tables and the diagnosis
        only (never for a gate: those pair with stored figures knowingly, see Judge)."""
        out = {}
        for concurrency, figs in self.figures.items():
            boots = figs.boots or (1,) * len(figs.decode_tps_samples)
            index: dict[int, int] = {}
            samples = []
            for k, (tps, tokens, boot) in enumerate(zip(figs.decode_tps_samples, figs.completion_tokens, boots)):
                position = index.get(boot, 0)
                index[boot] = position + 1
                ttft = figs.ttft_samples[k] if figs.ttft_samples else float("nan")
                samples.append(
                    SpeedSample(
                        decode_tps=tps,
                        ttft_s=ttft,
                        e2e_s=float("nan"),
                        completion_tokens=tokens,
                        prompt_tokens=0,
                        verify_ct=None,
                        server_e2e_s=None,
                        chunks=0,
                        boot=boot,
                        index=position,
                    )
                )
            out[(self.reference, concurrency)] = ConfigSpeed(self.reference, concurrency, samples)
        return out


def resolve_stored_reference(
    deployment: Deployment,
    fingerprint: Fingerprint,
    fingerprint_from: str,
    lookup: BaselineLookup,
    baselines_root: Path,
    allow_fingerprint_mismatch: bool,
) -> StoredReference:
    """The stored baseline that stands in for the reference, checked; StoredReferenceError if none can."""
    ref = deployment.reference
    note = ""
    baseline = lookup.exact
    if baseline is None and not lookup.others:
        raise StoredReferenceError(
            f"{NOT_BOOTED}, and there is no stored baseline for deployment {deployment.name!r} under "
            f"{baselines_root / deployment.name} to take its figures and answers from; record one on this machine "
            f"with: specgate baseline update {deployment.path} --baselines-dir {baselines_root}"
        )
    if baseline is None:
        newest = lookup.others[0]
        diff = "; ".join(fingerprint.differences(newest.fingerprint))
        if not allow_fingerprint_mismatch:
            raise StoredReferenceError(
                f"{NOT_BOOTED}, and the stored baselines are for other hardware/software: {newest.path.name} differs "
                f"in {diff} (this run's fingerprint read from the booted {fingerprint_from!r}). A reference measured "
                "elsewhere says nothing about this machine: record a baseline here (specgate baseline update), or "
                f"pass {ALLOW_FINGERPRINT_MISMATCH.said} to use it anyway"
            )
        baseline = newest
        note = f"the stored reference is from {newest.path.name} although the fingerprint differs ({diff}): allowed by the user"
    figures = {c: f for (name, c), f in baseline.figures.items() if name == ref}
    if not figures:
        why = f" ({baseline.excluded[ref]})" if ref in baseline.excluded else ""
        raise StoredReferenceError(f"{NOT_BOOTED}, and {baseline.path.name} holds no figures of the reference {ref!r}{why}")
    digest = deployment.configs[ref].args_digest(deployment.launch)
    stored_digests = {f.args_digest for f in figures.values()}
    if baseline.golden is not None:
        stored_digests.add(baseline.golden.args_digest)
    if stored_digests != {digest}:
        raise StoredReferenceError(
            f"{NOT_BOOTED}, and its launch flags or environment changed since {baseline.path.name} was recorded "
            f"(digest {', '.join(sorted(stored_digests - {digest}))} then, {digest} now): the stored figures and "
            "answers are another server's. Update the baseline (specgate baseline update) after changing the reference"
        )
    if baseline.golden is not None and baseline.golden.reference != ref:
        raise StoredReferenceError(
            f"{baseline.path.name}'s golden answers are {baseline.golden.reference!r}'s, not the reference {ref!r}'s"
        )
    return StoredReference(ref, baseline, figures, fingerprint_from, note)


@dataclass(frozen=True)
class MeasuredView:
    """What the report and the diagnosis read measurements from: this run's records, plus the
    stored reference's where it was not booted (rows marked as stored by the report)."""

    results: dict[tuple[str, int], ConfigSpeed]
    meter: SpeedMeter  # this run's: the stored requests are its pinned ones (the digests match)

    def label(self, sample: SpeedSample) -> str:
        return self.meter.label(sample)
