"""The run's outcome, decided once: every gate's status, the tests as pytest counts them, what did
not run and why, whether the run was interrupted; and from it the run's verdict and exit code.

The report says the verdict and its reasons (report.build words them from this), the CLI exits by
specgate.exits (README and docs/ci.md, "Exit codes"), and CI's annotations read the typed failures
the report keeps (report.json's `failed_tests`): no module decides a verdict again, and none
reads one back out of a sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specgate.exits import exit_code
from specgate.verdicts.gates import FAIL, NOT_RUN, RunVerdict, Status, Verdict, verdicts_of_failure


@dataclass
class TestTally:
    """The gate tests of a run as pytest counts them."""

    __test__ = False  # a tally, not a test class (pytest collects Test* from the self-tests' imports)

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0


@dataclass(frozen=True)
class FailedTest:
    """A gate test that failed or errored, by its pytest id (the last part of its node id), and
    why; said "test: cause" wherever a sentence names it."""

    test: str
    cause: str

    def __str__(self) -> str:
        return f"{self.test}: {self.cause}"

    @classmethod
    def said(cls, line: str | FailedTest) -> FailedTest:
        """One given as the sentence "test: cause" (a hand-made tally, a self-test's case)."""
        if isinstance(line, FailedTest):
            return line
        test, _, cause = line.partition(": ")
        return cls(test, cause)


@dataclass(frozen=True)
class RunFacts:
    """What ran of what the deployment asks for, beside the verdicts (plugin._run_facts): a run
    that was cut short, selected some tests or could not compare something never says PASS."""

    interrupted: str | None = None  # why nothing after an interruption was judged
    expected: Mapping[str, int] = field(default_factory=dict)  # phase -> gate tests the deployment asks for
    ran: Mapping[str, int] = field(default_factory=dict)  # phase -> those that passed, failed or errored
    equivalence_declared_off: bool = False
    # Why sampling equivalence, a headline check, did not run where the deployment did not turn it
    # off itself (a reference not booted, say): never a PASS, as an uncompared gate is not.
    sampling_not_checked: str | None = None
    uncompared_allowed: bool = True
    # A reference not booted whose stored stand-in could not be used: never a PASS.
    stand_in_problem: str | None = None
    equivalence_not_checked: Mapping[str, int] = field(default_factory=dict)  # config -> cases without a stored answer
    equivalence_refused: Mapping[str, Sequence[str]] = field(default_factory=dict)  # config -> edges it refused
    baseline_not_written: str | None = None  # a baseline update that stored nothing, and why
    unavailable: Mapping[str, str] = field(default_factory=dict)  # config attached by url -> why it never answered
    cut_short: Mapping[str, str] = field(default_factory=dict)  # phase -> the config whose test a signal stopped


@dataclass(frozen=True)
class Shortfall:
    """A phase in which fewer gate tests ran than the deployment asks for."""

    phase: str
    ran: int
    expected: int


@dataclass(frozen=True)
class RunOutcome:
    tests: TestTally
    facts: RunFacts
    gates: tuple[Verdict, ...]  # every gate's verdict, NOT RUN rows included
    failed: tuple[Verdict, ...]  # gates that decided against the change
    undecided: tuple[Verdict, ...]  # gates that cannot tell
    not_run: tuple[Verdict, ...]
    unjudged: tuple[Verdict, ...]  # NOT COMPARED or VACUOUS (a baseline update's first records aside)
    failed_tests: tuple[FailedTest, ...]  # failures no gate verdict tells (a test that raised before judging)
    shortfalls: tuple[Shortfall, ...]

    @property
    def verdict(self) -> RunVerdict:
        return _verdict(self)

    @property
    def statuses(self) -> dict[str, Status]:
        return {v.gate: v.status for v in self.gates}

    def exit_code(self, partial_allowed: bool, pytest_ok: bool = True) -> int:
        return exit_code(self.verdict, partial_allowed, pytest_ok)


def decide(
    tally: TestTally, verdicts: Sequence[Verdict], facts: RunFacts, failed_tests: Sequence[str | FailedTest] = ()
) -> RunOutcome:
    """PASS only when every gate ran, compared and passed. Otherwise, in this order: INTERRUPTED
    (a signal stopped the run), ERROR (a server it needed never answered), FAIL (a baseline update
    stored nothing; a gate decided against the change; a test failed that no excuse covers),
    INCONCLUSIVE (a gate cannot tell), PARTIAL (something did not run or compare)."""
    # A baseline update's first record has nothing before it to compare with: not a gap in the run.
    first_record = [v for v in verdicts if v.figures.get("first_record")]
    failures = [FailedTest.said(f) for f in failed_tests]
    return RunOutcome(
        tests=tally,
        facts=facts,
        gates=tuple(verdicts),
        failed=tuple(v for v in verdicts if v.status == FAIL),
        undecided=tuple(v for v in verdicts if v.undecided),
        not_run=tuple(v for v in verdicts if v.status == NOT_RUN),
        unjudged=tuple(v for v in verdicts if v.unjudged and v not in first_record),
        # A gate test's failure is told by its verdict; one that raised before judging (a server that
        # died or hung) has none, and is told as a failure of its own.
        failed_tests=tuple(f for f in failures if not verdicts_of_failure(f.test, list(verdicts))),
        shortfalls=_shortfalls(facts, len(first_record)),
    )


def _shortfalls(facts: RunFacts, first_records: int) -> tuple[Shortfall, ...]:
    out = []
    for phase, want in facts.expected.items():
        got = facts.ran.get(phase, 0)
        if phase == "gates":
            want -= first_records
        if got < want:
            out.append(Shortfall(phase, got, want))
    return tuple(out)


def _verdict(o: RunOutcome) -> RunVerdict:
    facts = o.facts
    if facts.interrupted:
        return RunVerdict.INTERRUPTED
    if facts.unavailable:
        return RunVerdict.ERROR
    if facts.baseline_not_written:
        # A baseline update that stored nothing did not do what it was run for, whatever passed.
        return RunVerdict.FAIL
    # An uncompared gate fails its test (unless allowed) without being a failed comparison, and
    # an undecided one fails its test without being a regression: neither makes the run FAIL.
    excused = (0 if facts.uncompared_allowed else len(o.unjudged)) + len(o.undecided)
    if o.failed or o.tests.errors or o.failed_tests or o.tests.failed > excused:
        return RunVerdict.FAIL
    if o.undecided:
        return RunVerdict.INCONCLUSIVE
    incomplete = (
        o.tests.failed
        or o.not_run
        or o.unjudged
        or o.shortfalls
        or facts.equivalence_declared_off
        or facts.sampling_not_checked
        or facts.stand_in_problem
        or facts.equivalence_not_checked
        or facts.equivalence_refused
        or not o.gates
    )
    return RunVerdict.PARTIAL if incomplete else RunVerdict.PASS
