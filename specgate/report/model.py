"""report.json as a typed document: one definition for what `build_report` writes, what the
renderers read, what `specgate spread` and the CLI's closing line read back, and
`docs/report.schema.json` (`specgate schema report`).

Versions (`schema_version`): 1 is the first written through these models; 2 adds an
equivalence row's `refused` (edge requests its config refused); 3 the run's `ignore_eos` (whether
speed requests ran past the model's end of sequence or measured answers alone); 4 a near-tie flip's
`spec_gap` and an equivalence row's `divergences` (each decisive parting at a token, with the
baseline's ranking there and how the same context parted elsewhere in the run); 5 an equivalence
row's `kept` (the first failing and excused answers with their baseline, for `specgate rejudge`); 6 the
plan's `drift` (how far each reference moved during the run) and `reboots`, the run verdict
INCONCLUSIVE (a gate that cannot tell, told apart from FAIL), and a fidelity row's `state`, `witness`
and `check_note` (whether the server's own figure bore out the suite's, against measure.fidelity's
bound; older rows read as unchecked); 7 a drift's `after_round` (how many rounds its re-send
followed: a later look's rounds are not covered by it); 8 the run's `sampling` (the sampling
equivalence test: per config and setting what was compared, the statistics and the verdict); 9 the run's `reaped`
(servers of killed earlier runs it stopped at its start); 10 the sampling test's
two stages: a row's `confirm_alpha` and `false_alarm_rate`, a setting's `confirmation`; 11 the run's
`failed_tests` (the failures no gate verdict tells, by test and cause: what CI annotates) and a
gate's `covers_between_boot` (whether its interval holds the noise between boots); 12 a boot's
`cause` and `log_tail` (why a server never came up, and the end of its log); 13 the sampling test's
violation test (a setting's and a confirmation's `violation_p`, a row's `violation_threshold`: the
speculative side's tokens outside the setting against the reference's own); 14 a sampling setting's
`within_chance` (more breaks than the reference's, below the bar of a failure) and a short report's
`simulator`; 15 a speed row's `accept_histogram`, `draft_accept_rate` (the server's own per-request
counters, pooled), `cycle_ms` (time per verify cycle) and `degenerate` (measured answers that loop), a kept
case's `features` and `params`, and the `ab` gate kind; 18 the run's `context_prompts` (the
characters per token the context buckets' prompts were built at, as the reference's server counted
them: measure.density); 19 a speed row's `gates` (how many of the gates it stands for stand at each
status: its verdict reads PASS only where every one passed) and the run's `unbucketed_gates` (the
declared gates no context bucket judges); 20 an unmeasured row's `context` (the bucket whose
figures a lost server never gave: 0, the short workload) and a verdict's `figures.concurrency`
(the concurrency it judged at: a speed row's `gates` are its own concurrency's). Reports written
before them carry no `schema_version` and read as version 0: the fields that arrived since the
first GPU runs (e.g. `plan`, `unmeasured`, a gate's `noise`) have defaults for them, as the
baseline reader keeps defaults for its older format, and the first runs' verdict words are
read as today's (migrate_v0). `results/` holds such reports (a self-test reads every one). A version-1 report must hold every field: it is read with the
context `complete`, and a missing field is an error naming it, not a default, unless it arrived
in a later version (a part's `_since`).

The writer and the reader share the models, so a report this version would refuse is never
written: `build_report` validates what it assembles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, model_validator

from specgate.documents import problem, read_json
from specgate.errors import ReportError
from specgate.verdicts.gates import RunVerdict, Status

SCHEMA_VERSION: Literal[20] = 20
SCHEMA_ID = "https://specgate.invalid/report.schema.json"

# The enums are written as their values; read back from JSON they arrive as strings, which strict
# mode would refuse.
_RunVerdict = Annotated[RunVerdict, Field(strict=False)]
_Status = Annotated[Status, Field(strict=False)]
# 0 is a report written before this model, which has no such field: it reads, and is never written.
_Version = Annotated[
    Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
    Field(json_schema_extra={"const": SCHEMA_VERSION, "description": "absent (0) in reports older than the model"}),
]


class _Part(BaseModel):
    """Every part of the report: strict types, and unknown keys kept (a newer writer's additions
    survive a read, as in the other stored documents). The defaults exist only for reports that
    predate a field; `complete` in the validation context (a report of schema_version >= 1)
    turns each missing field back into an error."""

    # No NaN or infinity in a typed figure: json.loads accepts them, and a NaN compares false with
    # everything, so a gate reading it could neither pass nor fail (the open parts may hold them).
    model_config = ConfigDict(
        extra="allow", strict=True, allow_inf_nan=False, json_schema_serialization_defaults_required=True
    )

    # Fields that arrived after schema_version 1, with the version that brought them: a report of
    # an earlier version lacks them (and reads their default); one of this version must hold them.
    _since: ClassVar[dict[str, int]] = {}

    def document(self) -> dict[str, Any]:
        """The JSON-ready dict the file holds. Python mode, not pydantic's JSON mode: the open parts
        go to json.dumps as they are (JSON mode would write an infinite figure as null)."""
        return self.model_dump()

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> _Part:
        if info.context and info.context.get("complete"):
            version = info.context.get("version", SCHEMA_VERSION)
            missing = [
                name
                for name in type(self).model_fields
                if name not in self.model_fields_set and self._since.get(name, 1) <= version
            ]
            if missing:
                raise ValueError(
                    f"lacks {', '.join(repr(m) for m in missing)}, which every report of schema_version "
                    f"{info.context.get('version')} holds"
                )
        return self


class Interval(_Part):
    """An estimate with its bootstrap interval (specgate.measure.stats.Interval.as_dict)."""

    estimate: float
    low: float
    high: float
    confidence: float


class Tally(_Part):
    """The pytest tally of the run's gate tests."""

    passed: int
    failed: int
    skipped: int
    errors: int


class Drift(_Part):
    """A reference's decode tok/s at the end of the run over the start (specgate.measure.drift)."""

    config: str
    concurrency: int
    ratio: Interval
    requests: int
    where: str
    moved: bool
    _since: ClassVar[dict[str, int]] = {"after_round": 7}

    after_round: int = 0  # rounds measured when the re-send went out; 0: not known


class Plan(_Part):
    """How the figures were gathered (specgate.measure.plan.PlanLog)."""

    interleaved: bool
    boots: int
    rounds: int
    orders: list[list[str]]  # the first rounds' orders, as evidence
    _since: ClassVar[dict[str, int]] = {"drift": 6, "reboots": 6}

    drift: list[Drift] = []  # how far each reference moved during the run (specgate.measure.drift)
    reboots: list[str] = []  # why a config booted more than once where servers take turns


# Fingerprint and Settings mirror dataclasses of the run on purpose: those are the run's objects,
# these the stored forms read strictly (pydantic validates a stdlib dataclass strictly only from an
# instance, not from the JSON a report holds); test_report_model holds their fields equal.
class Fingerprint(_Part):
    """The machine the figures are from (specgate.verdicts.fingerprint.Fingerprint)."""

    gpu: str
    gpu_count: int
    driver: str
    cuda: str
    sglang: str
    model: str


class StandIn(_Part):
    """Where the reference was not booted (`launch.reference_from = "stored"`): which stored
    baseline stood in for it, what that saved, and what it could not show (plugin._stand_in).
    Every field but the few that hold whatever the deployment says is None where the stored
    baseline could not be used (`problem` says why)."""

    reference: str
    baseline_file: str | None
    commit: str | None
    recorded: str | None
    host: str | None
    fingerprint_from: str | None
    args_digest: str
    golden_cases: int | None
    note: str
    problem: str | None
    noise: dict[str, str]  # gate -> which noise its interval against the stored figures holds
    boots_saved: int
    stored_boot_seconds: float | None
    not_checked: dict[str, list[str]]  # config -> equivalence cases with no stored answer


class SetAccept(_Part):
    accept_length: float  # pooled tokens / verify steps
    requests: int


class SpeedRow(_Part):
    """One measured config at one concurrency."""

    config: str
    concurrency: int
    speculative: bool
    n: int
    decode_tps: Interval
    ratio_to_reference: Interval | None  # None for the reference, or where it was not measured
    accept_length: Interval | None  # None where the server reported no verify counters
    accept_length_by_set: dict[str, SetAccept] | None = None  # prompt set -> pooled accept length
    ttft_ms: Interval
    warmup_requests: int
    warmup_settled: bool | None
    warmup_first_tps: float | None = None
    warmup_last_tps: float | None = None
    cv: float | None = None  # per-request spread of decode tok/s
    boots: int | None = None
    verdict: _RunVerdict | Literal["—"]  # "—": no gate judged the config
    # The gates the row stands for (its config's, at its concurrency and context: gates.speed_row_of), by status (a Status's value, or
    # "first record": verdicts.gates.gate_tally): the verdict is decided from it (tally_verdict).
    gates: dict[str, int] = {}
    stored: str | None = None  # the stored baseline whose figures stand in for an unbooted reference
    # Verify cycles by drafts accepted (index k: cycles that accepted k), pooled over the measured
    # requests, and accepted drafts over proposed ones: where the server counts them per request.
    accept_histogram: list[int] | None = None
    draft_accept_rate: float | None = None
    # Time per verify cycle, ms: per request its accept length (the server's counters) over its
    # decode speed; speed = accept length / cycle time, so a change splits into the two.
    cycle_ms: Interval | None = None
    # Measured answers that loop (distinct 4-grams of their ids under measure.speed.LOOP_FLOOR):
    # speed and accept length computed from them are untrusted. None: no answer could be told.
    degenerate: int | None = None
    # The context bucket the row measures (workload.context_buckets: its target prompt tokens, at
    # concurrency 1); 0: the short workload. And the median prompt tokens the server counted for
    # the row's requests (None where it did not say).
    context: int = 0
    prompt_tokens: int | None = None
    _since: ClassVar[dict[str, int]] = {
        "accept_histogram": 15, "draft_accept_rate": 15, "cycle_ms": 15, "degenerate": 15, "context": 17,
        "prompt_tokens": 17, "gates": 19,
    }  # fmt: skip


class ContextPrompts(_Part):
    """The characters per token the context buckets' prompts were built at (measure.density)."""

    chars_per_token: float  # what they were built at: the measured ratio rounded, or the fallback
    measured: float | None  # characters over the prompt tokens the server counted; None: not measured
    config: str | None  # whose server counted them (the reference's)
    chars: int  # the calibration prompt's characters
    prompt_tokens: int | None  # what the server counted for it
    fallback: str | None  # why chars_per_token is not the measured ratio (None: it is)


class Unmeasured(_Part):
    """A config whose server never booted, or died before a figure: its row, with the cause; one
    per concurrency and context bucket it has no figures of."""

    config: str
    concurrency: int
    error: str
    context: int = 0  # the context bucket (its prompt tokens), as a SpeedRow's; 0: the short workload
    _since: ClassVar[dict[str, int]] = {"context": 20}


class GateEntry(_Part):
    gate: str
    config: str
    status: _Status
    summary: str
    notes: list[str]
    # Open: each kind of gate records its own figures (intervals, bars, tolerances, the stored
    # run's values); the summary and notes are what a reader is meant to read.
    figures: dict[str, Any]
    noise: str = ""  # which noise the interval holds, in words
    _since: ClassVar[dict[str, int]] = {"covers_between_boot": 11}

    # Whether that interval holds the noise between boots of one build (false: one boot's requests
    # alone); null where the gate is no timing across boots, and in reports older than the field.
    covers_between_boot: bool | None = None


class FailedTestEntry(_Part):
    """A gate test that failed or errored and that no gate verdict tells (one that raised before
    judging, an equivalence failure): its pytest id and why (specgate.verdicts.outcome.FailedTest)."""

    test: str
    cause: str


class Flip(_Part):
    """A near-tie flip: the baseline's top-1/top-2 margin was below the tie margin."""

    prompt: str
    position: int
    baseline_token: int
    spec_token: int
    margin: float
    spec_gap: float | None = None  # the logprob of the baseline's token minus the speculative token's
    _since: ClassVar[dict[str, int]] = {"spec_gap": 4}


class Divergence(_Part):
    """A decisive parting at a token (specgate.equivalence.check.TokenDivergence), told."""

    prompt: str
    position: int
    baseline_token: int
    spec_token: int
    requests: int  # how many requests parted so (Hypothesis replays a failing case; a batch parts alike)
    margin: float | None  # the baseline's top-1/top-2 margin there
    spec_rank: int | None  # the speculative token's rank in the baseline's top logprobs (None: not listed)
    spec_gap: float | None  # the logprob of the baseline's token minus the speculative token's
    baseline_choices: str  # the baseline's top logprobs there, e.g. "767 'ff' top, 359 'ver' -0.25"
    met_elsewhere: list[str]  # how every judged answer that reached the same context chose there
    second_opinion: str  # the speculative server asked again with logprobs ("" where it was not asked)


class KeptAnswer(_Part):
    """One server's answer as judged (specgate.equivalence.evidence.kept_answer)."""

    text: str
    output_ids: list[Annotated[int, Field(ge=0)]]
    completion_tokens: Annotated[int, Field(ge=0)]
    finish_reason: Literal["stop", "length", "abort", "unknown"]
    matched: int | str | None  # the stop token or string it ended on
    top_ids: list[list[int]] | None  # per position, the listed tokens best first (the baseline's only)
    top_logprobs: list[list[float]] | None  # their logprobs, in the same order

    @model_validator(mode="after")
    def _aligned(self) -> KeptAnswer:
        # A margin is read from these: misaligned or unordered lists would judge another answer.
        if (self.top_ids is None) != (self.top_logprobs is None):
            raise ValueError("top_ids and top_logprobs: both or neither")
        for i, (ids, values) in enumerate(zip(self.top_ids or [], self.top_logprobs or [], strict=False)):
            if len(ids) != len(values):
                raise ValueError(f"top_ids[{i}] and top_logprobs[{i}] differ in length")
            if any(a < b for a, b in zip(values, values[1:], strict=False)):
                raise ValueError(f"top_logprobs[{i}]: expected best first, got {values}")
        if len(self.top_ids or []) != len(self.top_logprobs or []):
            raise ValueError("top_ids and top_logprobs differ in length")
        return self


class KeptCase(_Part):
    label: str
    text: str  # the prompt's first evidence.PROMPT_CHARS_KEPT characters
    text_chars: Annotated[int, Field(ge=0)]  # the whole prompt's length
    max_new_tokens: Annotated[int, Field(ge=1)]
    stop: list[str]
    concurrency: Annotated[int, Field(ge=1)]
    # The request features the case drew and their sampling params (GenerationCase.as_dict).
    features: list[str] = []
    params: dict[str, Any] = {}
    _since: ClassVar[dict[str, int]] = {"features": 15, "params": 15}


class KeptPair(_Part):
    """A judged answer and its baseline, to be judged again (`specgate rejudge`)."""

    case: KeptCase
    kind: Literal["divergence", "invariant", "tolerated", "near-tie-flip"]  # how the run judged it
    shape: str | None  # the failure shape it was given (specgate.equivalence.known), if any
    copies: Annotated[int, Field(ge=1)]  # identical answers of the run it stands for (a batch answers alike)
    baseline: KeptAnswer
    speculative: KeptAnswer


DIVERGENCES_KEPT = 20
TOLERATED_KEPT = 500  # tolerated answers' lines kept per config in report.json (repeats collapse in report.md)


class EquivalenceRow(_Part):
    known_defects: list[str] = []  # known upstream defects this config's failure shapes match
    unused_tolerances: list[str] = []  # declared tolerances that matched nothing here
    server_version: str | None = None
    shapes: dict[str, int] = {}  # named shape of a failure or tolerated answer -> count
    config: str
    cases: int
    requests: int
    exact_matches: int
    not_checked: list[str] = []  # cases with no stored answer of the reference
    edges: list[str] = []  # the edge cases checked (and those LEFT OUT or REFUSED, saying so)
    refused: list[str] = []  # edge requests this config refused that the reference answered: NOT CHECKED
    seconds_by_feature: dict[str, float] = {}  # request feature ("none": a case without) -> seconds its cases took
    _since: ClassVar[dict[str, int]] = {
        "refused": 2, "divergences": 4, "distinct_divergences": 4, "kept": 5, "seconds_by_feature": 16,
    }  # fmt: skip
    near_tie_flips: int
    decisive_failures: int
    tolerated: list[str] = []
    tokens_compared: int
    flips: list[Flip]
    failures: list[str]
    failure_details: list[str] = []
    divergence_margins: list[float] = []
    divergences: list[Divergence] = []  # the first DIVERGENCES_KEPT distinct decisive partings at a token
    distinct_divergences: int = 0  # how many distinct ones there were
    kept: list[KeptPair] = []  # the first failing, excused and near-tie answers with their baseline


class Margins(_Part):
    """The baseline's top-1/top-2 margins (specgate.equivalence.margins.MarginSummary)."""

    positions: int
    below_tie: int
    quantum: float | None
    tie_margin: float
    warning: str | None


class Boot(_Part):
    config: str
    seconds: float
    ok: bool
    note: str = ""
    cause: str = ""  # a failed boot's: why it never served
    log_tail: list[str] = []  # a failed boot's last server log lines, masked (none for a url server)

    _since: ClassVar[dict[str, int]] = {"cause": 12, "log_tail": 12}


class FidelityRow(_Part):
    """The suite's single-stream figures against the server's own (specgate.measure.fidelity)."""

    config: str
    suite_decode_tps: float
    log_decode_tps: float | None
    log_lines: int
    log_lines_low: int
    log_gap: float | None
    log_note: str = ""
    meta_decode_tps: float | None = None
    meta_gap: float | None = None
    client_overhead_ms: float | None
    e2e_gap: float | None
    # measure.fidelity.check_fidelity: "agrees", "contradicted" (beyond its bound: the speed gates
    # resting on the figure FAIL) or "unchecked" (the server gave no figure; every row before version 6)
    state: Literal["agrees", "contradicted", "unchecked"] = "unchecked"
    witness: str | None = None
    check_note: str = ""

    _since: ClassVar[dict[str, int]] = {"state": 6, "witness": 6, "check_note": 6}


class Settings(_Part):
    """What a server runs as, read from its own server info (specgate.diagnosis.settings)."""

    version: str | None
    algorithm: str | None
    num_steps: int | None
    topk: int | None
    draft_tokens: int | None
    attention_mode: str | None
    attention_backend: str | None
    prefill_backend: str | None
    decode_backend: str | None
    cuda_graph_disabled: bool | None
    cuda_graph_max_bs: int | None
    overlap_disabled: bool | None
    tp_size: int | None
    context_length: int | None
    draft_model_path: str | None


class Cycle(_Part):
    """The cycle model (specgate.diagnosis.cycle.CycleModel)."""

    config: str
    concurrency: int
    tau: Interval
    t_d_ms: Interval
    t_c_ms: Interval
    cycle_cost: float
    break_even_tau: float
    predicted_speedup: float
    measured_speedup: Interval
    efficiency: float
    model_gap: float


class Lever(_Part):
    key: str
    action: str
    why: str
    evidence: list[str]
    strength: Literal["measured", "observed", "setting"]
    gain: float | None
    sibling: str | None


class Diagnosis(_Part):
    config: str
    concurrency: int
    settings: Settings
    cycle: Cycle
    underperforms: list[str]
    levers: list[Lever]
    notes: list[str]


# An `overall_reasons` entry that starts so is the run's lead, not a reason for its verdict: the
# build puts it first, report.md shows it under the title and the CLI's closing line names it.


class SamplingLikelihood(_Part):
    """Mean log-likelihood per token under the reference of each side's samples, the shift
    (speculative minus reference, nats) with its interval, and the rank test's z and p."""

    reference: float
    speculative: float
    shift: float
    low: float
    high: float
    z: float
    p: float


class SamplingConfirmation(_Part):
    """Stage 2 of one setting that stage 1 rejected on its statistics: both sides redrawn under
    fresh seeds and tested at the row's confirm_alpha; the setting fails only if this rejects too."""

    _since: ClassVar[dict[str, int]] = {"violation_p": 13}

    likelihood: SamplingLikelihood  # p: one-sided, in the direction of stage 1's shift
    likelihood_threshold: float
    position_threshold: float
    positions_tested: int
    positions_rejected: int
    violations: dict[str, int]
    violations_reference: dict[str, int]
    violation_p: float | None = None  # one-sided: the speculative side breaks the setting more (None: no filter)
    rejected: bool  # it confirmed what stage 1 rejected
    seconds: float
    evidence: str


class SamplingSettingRow(_Part):
    """One sampling setting of one config: what was compared, the statistics, the verdict, and
    for a failure the prompt, the seed, the evidence and a curl reproducer."""

    _since: ClassVar[dict[str, int]] = {"confirmation": 10, "violation_p": 13, "within_chance": 14}

    setting: str
    described: str
    params: dict[str, float]
    status: str  # PASS or FAIL
    prompts: int
    samples: int  # continuations per prompt per side
    tokens: int  # per continuation
    likelihood: SamplingLikelihood
    top1_reference: float  # share of sampled tokens that are the reference's top-1 there
    top1_speculative: float
    violations: dict[str, int]  # filter -> speculative tokens that break it
    violations_reference: dict[str, int]
    # One-sided p of the speculative side's violations against the reference's own, given their
    # sum (sampling.stats.violation_test); None where the setting has no filter to break.
    violation_p: float | None = None
    checked_tokens: int
    positions_tested: int
    positions_rejected: int
    aa_shift: float  # the reference against itself under other seeds
    aa_p: float
    aa_passed: bool
    detectable_shift: float  # nats per token, 80% power, from the A/A's spread
    detectable_violation_rate: float  # failed with 80% power against a clean reference (1: no filter)
    seconds: float  # the config's own draws
    reference_seconds: float  # the reference's draws for this setting (shared by every config)
    evidence: list[str]
    prompt: str | None
    seed: int | None
    reproducer: str | None
    confirmation: SamplingConfirmation | None = None  # stage 2, where stage 1 rejected on statistics
    # More speculative tokens break the setting than the reference's, below the bar of a failure:
    # said beside the verdict, never a failure; None where there are no more.
    within_chance: str | None = None


class SamplingRow(_Part):
    """The sampling equivalence test of one speculative config."""

    _since: ClassVar[dict[str, int]] = {"confirm_alpha": 10, "false_alarm_rate": 10, "violation_threshold": 13}

    config: str
    reference: str
    status: str  # PASS, FAIL, NOT CHECKED or INTERRUPTED (not_checked then says what it had drawn)
    alpha: float  # stage 1's false-alarm rate over the whole test
    confirm_alpha: float = 0.0  # stage 2's level per setting stage 1 rejected (0: no stage 2, as before 9)
    false_alarm_rate: float | None = None  # the bound the whole test runs at: alpha x confirm_alpha
    tests: int  # statistics tested under it (likelihood per setting, dense positions)
    likelihood_threshold: float
    position_threshold: float
    violation_threshold: float | None = None  # stage 1's bar for a setting's violation_p (None: no filters)
    not_checked: str | None
    settings: list[SamplingSettingRow]


# What marks a line of Report.standing as figures kept out of the results history, not a rank
# (history.records.records_of writes it; markdown renders those lines apart from the ranks).
LEFT_OUT = "left out of the results history"


class Report(_Part):
    """report.json: one run's measurements and verdicts; report.md and report.png are rendered
    from it, so what a person reads and what a machine reads cannot disagree."""

    schema_version: _Version = 0
    deployment: str
    deployment_file: str
    description: str
    simulator: bool
    overall: _RunVerdict
    overall_reasons: list[str] = []
    tests: Tally
    plan: Plan | None = None
    calibration: str | None = None  # the calibration record's file name, where one widened the intervals
    fingerprint: Fingerprint | None
    reference_from_stored: StandIn | None = None
    # Open: what specgate.provenance records has grown over versions (host_id came later), and the
    # baseline and calibration documents keep it open as well.
    provenance: dict[str, Any]
    tie_margin: float
    speed: list[SpeedRow]
    unmeasured: list[Unmeasured] = []
    gates: list[GateEntry]
    equivalence: list[EquivalenceRow]
    equivalence_not_checked: str | None = None  # why the deployment declares outputs uncomparable
    baseline_problems: list[str]
    baseline_margins: Margins | None
    boots: list[Boot]
    phase_seconds: dict[str, float]
    fidelity: list[FidelityRow] = []
    diagnosis: list[Diagnosis] = []
    # Open: per server, the SGLang settings of build.SETTINGS_SHOWN as the server reports them,
    # whatever their JSON type in that release.
    server_settings: dict[str, dict[str, Any]]
    interrupted: str | None = None  # why nothing after an interruption was judged
    # Open: per speculative config, the drafter's identity as specgate.measure.drafters records it
    # (path, checksum, and the training record's fields, which depend on how it was made).
    drafters: dict[str, dict[str, Any]] | None = None
    # workload.ignore_eos: speed requests ran to max_new_tokens past the end of sequence (true),
    # or stopped where each answer ended (false: τ and tok/s over answers alone)
    ignore_eos: bool = True
    sampling: list[SamplingRow] = []
    # The servers of killed earlier runs that this run stopped at its start (server.orphans), each
    # with its pid, config and run: they held a port and GPU memory that this run's figures share.
    reaped: list[str] = []
    # The failed tests no gate verdict tells, each once (overall_reasons says the first of them).
    failed_tests: list[FailedTestEntry] = []
    # Where this run stands in the runner's results history (specgate.history.standing), one line
    # per figure said on the first screen; [] where the history holds too few earlier runs. A line
    # holding LEFT_OUT names figures kept out of that history instead (a server lost mid-run).
    standing: list[str] = []
    # How the context buckets' prompts were sized on the reference's tokenizer (measure.density);
    # None where the run has no bucket, or measured none.
    context_prompts: ContextPrompts | None = None
    # The declared gates no context bucket judges (gate_kinds.unbucketed_gates: declared at another
    # concurrency, while buckets are single-stream); [] where the run has no bucket or none is left out.
    unbucketed_gates: list[str] = []
    _since: ClassVar[dict[str, int]] = {
        "ignore_eos": 3, "sampling": 8, "reaped": 9, "failed_tests": 11, "standing": 16, "context_prompts": 18,
        "unbucketed_gates": 19,
    }  # fmt: skip


class ErrorReport(_Part):
    """The short form report.json takes where no full report exists: the report itself could not
    be built (ERROR), the run was stopped before its gate session began (INTERRUPTED), or its
    input was refused before anything booted (BAD INPUT, exit 2)."""

    _since: ClassVar[dict[str, int]] = {"simulator": 14}

    schema_version: _Version = 0
    overall: Literal["ERROR", "INTERRUPTED", "BAD INPUT"]
    error: str  # the cause: exception type and message, which signal stopped the run and when, or which input was refused and why
    # The deployment's `simulator` flag, as a full report says it; None where no deployment was read.
    simulator: bool | None = None


class _Dated(_Part):
    date: str  # ISO 8601, UTC


class _SpeedFigures(_Part):
    config: str
    concurrency: int
    decode_tps: Interval
    ratio_to_reference: Interval | None
    accept_length: Interval | None
    context: int = 0  # schema 17 on: a context bucket's row (0: the short workload, as every older row)


class ReportFigures(_Part):
    """The part of a report every version has held, schema_version 0 included:
    what reads reports across versions (`specgate spread`) reads, so that reports older than the
    rest of this model (another verdict vocabulary) still compare."""

    deployment: str
    fingerprint: dict[str, Any] | None = None  # compared whole between reports, never read by field
    provenance: _Dated
    speed: list[_SpeedFigures]


AnyReport = Report | ErrorReport
_ANY = TypeAdapter[AnyReport](AnyReport)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path, "a specgate report.json")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ReportError(path, f"not a specgate report.json ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ReportError(path, f"not a specgate report.json (expected a JSON object, got {type(data).__name__})")
    version = data.get("schema_version", 0)
    if type(version) is not int or not 0 <= version <= SCHEMA_VERSION:  # JSON's true and 1.0 are no version
        newer = type(version) is int and version > SCHEMA_VERSION
        raise ReportError(
            path,
            f"field 'schema_version': expected at most {SCHEMA_VERSION}, got {version!r}: "
            + ("a report of a newer specgate" if newer else "not a version this or an older specgate wrote"),
        )
    return data


# The verdict words of reports without schema_version, before the gate statuses were split:
# a gate that could not compare said "skip" (now "not compared": nothing to compare with), and a
# speed row's verdict was written in lower case.
_OLD_GATE_STATUS = {"skip": "not compared"}


def migrate_v0(data: dict[str, Any]) -> dict[str, Any]:
    """A report without schema_version in the words this version reads (a copy; the file is
    never rewritten): the old gate status `skip`, and lower-case speed-row verdicts."""
    out = dict(data)
    if isinstance(out.get("gates"), list):
        out["gates"] = [
            {**g, "status": _OLD_GATE_STATUS.get(str(g.get("status")), g.get("status"))} if isinstance(g, dict) else g
            for g in out["gates"]
        ]
    if isinstance(out.get("speed"), list):
        out["speed"] = [
            {**r, "verdict": r["verdict"].upper()} if isinstance(r, dict) and r.get("verdict") in ("pass", "fail") else r
            for r in out["speed"]
        ]
    return out


def read_report(path: Path) -> AnyReport:
    """report.json read through the models; an error names the file and the field, and says
    where the file predates the model. A report older than the model is read through migrate_v0."""
    data = _load(path)
    version = data.get("schema_version", 0)
    if version == 0:
        data = migrate_v0(data)
    # A full report says ERROR too (a server it needed was unavailable): the short form has no speed table.
    short = "speed" not in data and (data.get("overall") == "ERROR" or "error" in data)
    kind: type[Report] | type[ErrorReport] = ErrorReport if short else Report
    try:
        return kind.model_validate(data, context={"complete": version >= 1, "version": version})
    except ValidationError as exc:
        what = (
            f"of schema_version {version}"
            if version
            else "(written before schema_version 1: it has no such field, and this version cannot read it)"
        )
        raise ReportError(path, f"not a specgate report.json {what}: {problem(exc)}") from None


def read_run_figures(path: Path) -> ReportFigures:
    """The figures every version of report.json holds (ReportFigures), from a report of any version."""
    data = _load(path)
    try:
        return ReportFigures.model_validate(data)
    except ValidationError as exc:
        raise ReportError(path, f"not a specgate report.json: {problem(exc)}") from None


def report_schema() -> dict[str, Any]:
    """The JSON Schema of what this version writes (every field required: the defaults above are
    for reading older reports)."""
    schema = _ANY.json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "specgate report.json",
        "description": f"Generated by `specgate schema report` from specgate.report.model (schema_version "
        f"{SCHEMA_VERSION}). A run whose report could not be built writes the short ERROR form, one stopped "
        "before its gate session began the short INTERRUPTED form.",
        **schema,
    }
