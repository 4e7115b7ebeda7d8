"""Gate decisions, direction-aware and honest about noise and about what was compared.

Each decision looks at a confidence interval, not a point estimate: PASS when the
whole interval clears the bar, FAIL when the whole interval misses it, INCONCLUSIVE
when it straddles. The sampling plan then measures more (up to a cap); a gate still
inconclusive at the cap stays INCONCLUSIVE, with the interval shown: it fails its test,
because a merge gate that cannot show a pass must not give one, but it is no regression,
and the run says so apart (its own verdict and exit code), so that "this got worse" and
"this cannot tell" never read alike.

Two outcomes are neither pass nor fail, and neither ever counts as a pass:
NOT_COMPARED (nothing to compare with: no baseline, other flags, other workload,
other machine) and VACUOUS (the gate could not have failed: a bar below what the
quantity can ever reach, an accept length fixed by SGLang's simulation, a config
compared with itself). The run exits non-zero on either unless the user allows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

from specgate.measure.stats import Interval, IntervalFigure


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # cannot tell: the interval straddles the bar at the cap (never a pass)
    NOT_COMPARED = "not compared"
    VACUOUS = "vacuous"
    NOT_RUN = "not run"  # its server (or its reference's) never served, or was lost before it was judged on whole figures (not_run.py)


class RunVerdict(StrEnum):
    """A whole run's verdict (report.json's `overall`), and a config's row in the speed table:
    upper case, the headline. A gate's own verdict is a Status."""

    PASS = "PASS"
    FAIL = "FAIL"  # a gate decided against the change, or a test failed
    INCONCLUSIVE = "INCONCLUSIVE"  # no gate failed, but one cannot tell (its interval straddles its bar)
    PARTIAL = "PARTIAL"  # not every gate ran or compared
    INTERRUPTED = "INTERRUPTED"
    ERROR = "ERROR"  # the run itself broke: a server it needed was unavailable (nothing said of the change)


# The words a report's first reason may start with, said right under its title (report.model):
NEXT_STEP = "NEXT STEP: "  # no stored baseline to compare with: the command that records one
BASELINE_RECORDED = "BASELINE RECORDED: "  # a baseline update stored one: where, which configs, how many samples
BASELINE_NOT_RECORDED = "BASELINE NOT RECORDED: "  # a baseline update that stored nothing, and why
LEADS = (NEXT_STEP, BASELINE_RECORDED, BASELINE_NOT_RECORDED)
# How a run that could not reach a server attached by url says so (its first reason, an
# unmeasured row's cause): the run broke (RunVerdict.ERROR, exit 6), nothing was said of the change.
UNAVAILABLE = "SERVER UNAVAILABLE: "


PASS, FAIL, INCONCLUSIVE = Status.PASS, Status.FAIL, Status.INCONCLUSIVE
NOT_COMPARED, VACUOUS, NOT_RUN = Status.NOT_COMPARED, Status.VACUOUS, Status.NOT_RUN
# Outcomes that mean "this gate did not judge the change": never a pass, never silent.
UNJUDGED = (NOT_COMPARED, VACUOUS)


class GateFigures(TypedDict, total=False):
    """The figures a verdict carries (report.json's `gates[].figures`), one shape for every gate kind:
    each key means one thing, and a kind fills the keys it has. Intervals are `IntervalFigure`s."""

    # What was compared, and the bar.
    ratio: IntervalFigure  # beats: the config's decode tok/s over the other config's, paired per request
    required: float  # the bar: beats, the ratio asked for; accept, the floor
    n: int | list[int]  # requests judged (beats in this run: [the config's, the other's])
    now: IntervalFigure  # this run's figure that the gate judges (decode tok/s, accept length) against a bar or a stored figure
    stored: float | None  # the stored figure it is compared with
    baseline_file: str  # the stored baseline compared with (its file name)
    accept_length: IntervalFigure | None  # the config's pooled accept length in this run
    ratio_to_stored: IntervalFigure  # regression: now over stored, paired per request
    speedup_now: IntervalFigure  # regression of a speculative config: its speedup over its reference now
    speedup_stored: IntervalFigure  # … and as stored
    absolute_ratio_to_stored: IntervalFigure  # … its decode tok/s now over stored
    reference_ratio_to_stored: IntervalFigure  # … its reference's decode tok/s now over stored
    accept_ratio: IntervalFigure  # ab: the candidate's pooled accept length over the base's, paired per prompt
    # Context buckets (workload.context_buckets): the bucket judged, and the gate's share of the
    # run's false-alarm budget where the run judges several buckets.
    context: int  # the bucket's prompt tokens; absent for the short workload
    # The concurrency the gate judged at (PlannedGate.concurrency): its speed row's. Absent in a
    # verdict no planned gate decided, read as 1 (a declaration's default).
    concurrency: int
    false_alarm_share: float
    # What the verdict rests on, and what it could detect.
    fidelity: dict[str, dict[str, Any]]  # per config: the server's own figure against the suite's (measure.fidelity)
    counters: str  # the spec counters' contradiction that voided an accept length (measure.accept_counts)
    history: dict[str, Any]  # what the runner's history pools of this comparison (verdicts.history)
    detects: dict[str, float | None]  # the regression this design catches with 80% power, and its false-alarm rate
    sensitivity: dict[str, Any] | None  # the between-boot spread it was designed on (verdicts.sensitivity)
    uncalibrated: bool  # INCONCLUSIVE where no calibration told the between-boot spread
    first_record: bool  # NOT COMPARED because this run records the first baseline (expected, not missing)
    # The accept-length floor's evidence of the drafter (measure.drafters, measure.answer_end).
    answers_only: bool  # accept length over the model's answers alone (workload.ignore_eos = false)
    past_answer_end: dict[str, Any]  # requests that ran past the model's end of sequence
    walked_tau: float  # the accept length training's walk predicts for these prompts
    served_over_walked: IntervalFigure
    served_over_walked_unparted: IntervalFigure
    answers_parted_from_walk: int
    answers_compared_by_token_ids: int
    answers_parted_by_token_ids: int
    answers_walked_by_token_ids: int


@dataclass
class Verdict:
    gate: str  # e.g. "beats:eagle3-decode-beats-baseline", "regression:eagle3-decode:c1:decode_tps"
    config: str
    status: Status
    summary: str
    notes: list[str] = field(default_factory=list)
    figures: GateFigures = field(default_factory=lambda: GateFigures())
    # Which noise the interval holds, in words ("requests within one boot; between-boot spread
    # 4.1% from calibration …"): a reader must know what a narrow interval does not cover.
    noise: str = ""
    # Whether that interval holds the noise between boots of one build (verdicts.noise.HeldNoise):
    # False where it holds one boot's requests alone, None where the gate is no timing across boots.
    covers_between_boot: bool | None = None
    # The gate test that judged it (pytest's item name, "test_…[id]"; Judge.decide sets it): a
    # failed test is tied to its verdict by this, so no reader matches a verdict's sentence.
    test: str = ""

    @property
    def failed(self) -> bool:
        """No pass: a decided failure or a gate that cannot tell (both fail their test)."""
        return self.status in (FAIL, INCONCLUSIVE)

    @property
    def undecided(self) -> bool:
        return self.status == INCONCLUSIVE

    @property
    def unjudged(self) -> bool:
        return self.status in UNJUDGED


# A baseline update's first record of a gate: NOT COMPARED because nothing was stored before it,
# which the run's verdict does not count as a gap (outcome.decide); a tally says it apart.
FIRST_RECORD = "first record"


def speed_row_of(v: Verdict) -> tuple[str, int, int]:
    """The speed row a verdict stands for: its config's at the concurrency and context bucket it
    judged (figures the judge and the NOT RUN rows stamp from its planned gate; absent, 1 and the
    short workload). A row counts these gates alone: a concurrency-4 row never stands for a gate
    judged at concurrency 1."""
    return v.config, v.figures.get("concurrency", 1), v.figures.get("context", 0)


def gate_tally(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """How many of `verdicts` stand at each status (a Status's value, or FIRST_RECORD), in the
    order first seen: what a speed row's verdict is decided from and what its cell says."""
    tally: dict[str, int] = {}
    for v in verdicts:
        key = FIRST_RECORD if v.status == NOT_COMPARED and v.figures.get("first_record") else str(v.status.value)
        tally[key] = tally.get(key, 0) + 1
    return tally


def tally_verdict(tally: Mapping[str, int]) -> RunVerdict | None:
    """The one word for a set of gates, by the run's own rule (outcome.decide): FAIL where one
    failed, INCONCLUSIVE where one cannot tell, PARTIAL where one did not run or judge, PASS only
    where every one passed (a first record apart); None where there is no gate."""
    if not tally:
        return None
    if tally.get(FAIL.value):
        return RunVerdict.FAIL
    if tally.get(INCONCLUSIVE.value):
        return RunVerdict.INCONCLUSIVE
    if any(n for status, n in tally.items() if status not in (PASS.value, FIRST_RECORD)):
        return RunVerdict.PARTIAL
    return RunVerdict.PASS


def verdicts_of_failure(test: str, verdicts: list[Verdict]) -> list[Verdict]:
    """The gate verdicts a failed test (pytest's item name, "test_…[id]") judged and did not pass,
    or [] where it failed otherwise (a gate test that raised before judging: a server that died or
    hung). Tied by the test that judged each verdict (`Verdict.test`), never by its wording."""
    return [v for v in verdicts if v.test and v.test == test and v.status != PASS]


def at_least(interval: Interval, bar: float) -> Status:
    """Is the true value >= bar? Judged on the whole interval."""
    if interval.low >= bar:
        return PASS
    if interval.high < bar:
        return FAIL
    return INCONCLUSIVE


def at_most(interval: Interval, bar: float) -> Status:
    """Is the true value <= bar? Judged on the whole interval."""
    if interval.high <= bar:
        return PASS
    if interval.low > bar:
        return FAIL
    return INCONCLUSIVE


def within(interval: Interval, low_bar: float, high_bar: float) -> Status:
    """Is the true value inside [low_bar, high_bar]?"""
    if interval.low >= low_bar and interval.high <= high_bar:
        return PASS
    if interval.high < low_bar or interval.low > high_bar:
        return FAIL
    return INCONCLUSIVE


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def planned_looks(have: int, cap: int, batch: int) -> int:
    """How many times a gate may look at its interval: once now, once per batch to the cap."""
    remaining = max(0, cap - have)
    return 1 + -(-remaining // batch) if remaining and batch > 0 else 1


def per_look_confidence(confidence: float, looks: int) -> float:
    """Split the error budget over the looks (Bonferroni): measuring more while
    undecided must not turn a 5% chance of a wrong verdict into 10%."""
    return 1 - (1 - confidence) / max(1, looks)


def decide_sequentially(
    interval_at: Callable[[float], Interval],
    decide: Callable[[Interval], Status],
    measure_more: Callable[[], bool],
    confidence: float,
    looks: int,
) -> tuple[Status, Interval, int]:
    """Look, and while undecided measure more and look again; returns (status,
    interval at the last look, looks taken). `measure_more` returns False at the cap."""
    level = per_look_confidence(confidence, looks)
    taken = 0
    while True:
        taken += 1
        interval = interval_at(level)
        status = decide(interval)
        if status != INCONCLUSIVE or taken >= looks or not measure_more():
            return status, interval, taken
