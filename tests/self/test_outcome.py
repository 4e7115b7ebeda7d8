"""The run's outcome, decided once (specgate.verdicts.outcome): each mix of gate statuses, test
counts and what did not run gives one verdict and one exit code (specgate.exits); the report,
the exit code and CI's annotations all read it, never a sentence."""

from __future__ import annotations

import pytest

from specgate.exits import EXIT_CODES, Exit, exit_code, exit_code_without_report
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, NOT_COMPARED, NOT_RUN, PASS, VACUOUS, RunVerdict, Verdict
from specgate.verdicts.noise import BootSpread, ratio_interval_held
from specgate.verdicts.outcome import FailedTest, RunFacts, Shortfall, TestTally, decide


def _v(status, gate="g", summary="s", test="", **figures):
    return Verdict(gate, "c", status, summary, figures=figures, test=test)


RAISED = "test_speculation_beats_reference[e]: ServerDiedError: the server hung"
# (tests as pytest counts them, gate statuses, facts, failed tests) -> verdict, exit code (partial not allowed)
CASES = [
    ("all passed", TestTally(3), [_v(PASS), _v(PASS)], RunFacts(), [], RunVerdict.PASS, 0),
    ("a gate failed", TestTally(2, failed=1), [_v(PASS), _v(FAIL)], RunFacts(), [], RunVerdict.FAIL, 1),
    ("a gate cannot tell", TestTally(2, failed=1), [_v(PASS), _v(INCONCLUSIVE)], RunFacts(), [], RunVerdict.INCONCLUSIVE, 3),
    ("fail beats cannot tell", TestTally(1, failed=2), [_v(FAIL), _v(INCONCLUSIVE)], RunFacts(), [], RunVerdict.FAIL, 1),
    ("uncompared, allowed", TestTally(2), [_v(PASS), _v(NOT_COMPARED)], RunFacts(), [], RunVerdict.PARTIAL, 4),
    ("uncompared, not allowed", TestTally(1, failed=1), [_v(PASS), _v(NOT_COMPARED)],
     RunFacts(uncompared_allowed=False), [], RunVerdict.PARTIAL, 4),
    ("vacuous", TestTally(1, failed=1), [_v(PASS), _v(VACUOUS)], RunFacts(uncompared_allowed=False), [],
     RunVerdict.PARTIAL, 4),
    ("a failure no excuse covers", TestTally(0, failed=2), [_v(NOT_COMPARED)], RunFacts(uncompared_allowed=False), [],
     RunVerdict.FAIL, 1),
    ("a test errored", TestTally(2, errors=1), [_v(PASS)], RunFacts(), [], RunVerdict.FAIL, 1),
    ("raised before judging", TestTally(1, failed=1), [_v(PASS)], RunFacts(), [RAISED], RunVerdict.FAIL, 1),
    ("not run", TestTally(1), [_v(PASS), _v(NOT_RUN)], RunFacts(), [], RunVerdict.PARTIAL, 4),
    ("no gate ran", TestTally(4), [], RunFacts(), [], RunVerdict.PARTIAL, 4),
    ("a selection", TestTally(1), [_v(PASS)], RunFacts(expected={"gates": 3}, ran={"gates": 1}), [],
     RunVerdict.PARTIAL, 4),
    ("equivalence declared off", TestTally(1), [_v(PASS)], RunFacts(equivalence_declared_off=True), [],
     RunVerdict.PARTIAL, 4),
    ("interrupted", TestTally(1, failed=1), [_v(FAIL)], RunFacts(interrupted="SIGTERM"), [], RunVerdict.INTERRUPTED, 5),
    ("a url server never answered", TestTally(1), [_v(PASS)], RunFacts(unavailable={"e": "refused"}), [],
     RunVerdict.ERROR, 6),
    ("interrupted beats unavailable", TestTally(1), [_v(PASS)],
     RunFacts(interrupted="SIGINT", unavailable={"e": "refused"}), [], RunVerdict.INTERRUPTED, 5),
    ("a baseline update stored nothing", TestTally(3), [_v(PASS)], RunFacts(baseline_not_written="read-only"), [],
     RunVerdict.FAIL, 1),
    ("a first record is no gap", TestTally(1), [_v(PASS), _v(NOT_COMPARED, first_record=True)],
     RunFacts(expected={"gates": 2}, ran={"gates": 1}, uncompared_allowed=False), [], RunVerdict.PASS, 0),
]  # fmt: skip


@pytest.mark.parametrize(("tally", "verdicts", "facts", "failed", "verdict", "code"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_each_mix_of_gate_statuses_gives_one_verdict_and_one_exit_code(tally, verdicts, facts, failed, verdict, code):
    outcome = decide(tally, verdicts, facts, failed)
    assert outcome.verdict == verdict
    assert outcome.exit_code(partial_allowed=False) == code
    assert outcome.statuses == {v.gate: v.status for v in verdicts}
    assert outcome.tests == tally  # as pytest counts them


def test_the_outcome_holds_what_did_not_run_and_the_failures_no_gate_tells():
    told = "test_speculation_beats_reference[p]: AssertionError: 0.68x — FAILS"
    verdicts = [
        _v(FAIL, "beats:p", "0.68x — FAILS", test="test_speculation_beats_reference[p]"),
        _v(NOT_RUN, "accept:e", "its server never served"),
    ]
    facts = RunFacts(expected={"gates": 4, "speed": 2}, ran={"gates": 2, "speed": 2})
    outcome = decide(TestTally(0, failed=2), verdicts, facts, [told, RAISED])
    # The gate's own failure is told by its verdict; the one that raised before judging is kept typed.
    assert outcome.failed_tests == (FailedTest("test_speculation_beats_reference[e]", "ServerDiedError: the server hung"),)
    assert outcome.shortfalls == (Shortfall("gates", 2, 4),)
    assert [v.gate for v in outcome.failed] == ["beats:p"] and [v.gate for v in outcome.not_run] == ["accept:e"]


def test_a_partial_run_exits_0_only_where_allowed_and_pytest_succeeded():
    assert exit_code(RunVerdict.PARTIAL, partial_allowed=True, pytest_ok=True) == Exit.PASS
    assert exit_code(RunVerdict.PARTIAL, partial_allowed=True, pytest_ok=False) == Exit.PARTIAL
    assert exit_code(RunVerdict.FAIL, partial_allowed=True) == Exit.FAIL  # only PARTIAL is excused
    assert exit_code("ERROR", partial_allowed=False) == Exit.ERROR  # an ErrorReport's word


def test_every_run_verdict_has_its_exit_code_and_a_run_without_report_its_own():
    from specgate.report.files import BAD_INPUT

    assert set(EXIT_CODES) == {v.value for v in RunVerdict} | {BAD_INPUT}  # and the short report of refused input
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)  # no two verdicts exit alike
    assert exit_code_without_report(4) == Exit.BAD_INPUT  # pytest's usage error
    assert exit_code_without_report(3) == Exit.ERROR  # pytest's internal error
    assert exit_code_without_report(5) == Exit.PARTIAL  # no gate test collected
    # --allow-uncompared waives uncompared gates, never a run in which no gate test ran.
    assert (exit_code_without_report(0), exit_code_without_report(5)) == (Exit.PARTIAL, Exit.PARTIAL)


def test_a_field_the_facts_do_not_have_is_refused_not_read_as_absent():
    from specgate.report.build import overall_verdict

    with pytest.raises(TypeError, match="uncompared_alowed"):
        overall_verdict(TestTally(1), [_v(PASS)], {"uncompared_alowed": False})


def test_whether_an_interval_holds_the_noise_between_boots_is_a_field_not_a_sentence():
    one_boot = {1: [1.2, 1.21, 1.19, 1.2, 1.22]}
    _, bare = ratio_interval_held(one_boot, 0.95, None, boots_other=1)
    _, spread = ratio_interval_held(one_boot, 0.95, BootSpread(0.05, "calibration x.json"), boots_other=1)
    _, boots = ratio_interval_held({**one_boot, 2: [1.1, 1.12, 1.11, 1.1, 1.09]}, 0.95, None)
    # Two replicas of one run hold each server's own noise, not what the servers of a run share.
    assert (bare.covers_between_boot, spread.covers_between_boot, boots.covers_between_boot) == (False, True, False)
    assert bare.plus("; plus drift").covers_between_boot is False


def _report_with(verdicts, failed_tests):
    """report.json as build_report writes it for these verdicts and failed tests."""
    from pathlib import Path
    from types import SimpleNamespace

    from helpers import sim_deployment_dict

    from specgate.deployment import parse_deployment
    from specgate.report.build import build_report
    from specgate.report.model import Report

    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    built = build_report(
        dep, SimpleNamespace(results={}, label=lambda s: ""), verdicts, {}, [], None,
        {"host": "h", "date": "2026-12-04", "commit": "c", "command": "specgate run"},
        TestTally(0, failed=len(failed_tests)), {}, {}, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []}, failed_tests=failed_tests,
    )  # fmt: skip
    return Report.model_validate(built.document(), context={"complete": True})


def test_ci_annotations_name_the_failed_tests_the_report_keeps_typed():
    """A cause holding ": " and a reason that merely starts "failed: " are read as what they are:
    the annotation comes from report.json's failed_tests, never from the reasons' sentences."""
    from specgate.cli.closing import github_annotations

    raised = FailedTest("test_speculation_beats_reference[e]", "ServerDiedError: config 'e': the server hung")
    report = _report_with([_v(PASS, "accept:e")], [raised])
    assert [(f.test, f.cause) for f in report.failed_tests] == [(raised.test, raised.cause)]
    assert f"failed: {raised}" in report.overall_reasons
    report = report.model_copy(update={"overall_reasons": [*report.overall_reasons, "failed: a sentence, no test"]})
    failed = [line for line in github_annotations(report) if "specgate test failed" in line]
    assert failed == [
        "::error title=specgate test failed%3A test_speculation_beats_reference[e]::"
        "ServerDiedError: config 'e': the server hung"
    ]


def test_the_report_and_its_markdown_read_the_between_boot_flag():
    from specgate.report.markdown import render_markdown

    blind = Verdict("regression:baseline:c1:decode_tps", "baseline", PASS, "s", noise="words that say nothing of it",
                    covers_between_boot=False)  # fmt: skip
    report = _report_with([blind], [])
    assert report.gates[0].covers_between_boot is False
    assert "1 timing gate(s) judged on intervals that do not hold the noise between boots" in render_markdown(report)
    held = Verdict(blind.gate, "baseline", PASS, "s", noise="NOT the between-boot noise, as words", covers_between_boot=True)
    assert "do not hold the noise between boots" not in render_markdown(_report_with([held], []))


def test_a_failed_test_is_tied_to_the_verdict_it_judged_not_to_a_like_sentence():
    """Two gates may say the same words; a failure is told by the verdict its own test judged."""
    judged = _v(FAIL, "beats:a", "0.68x — FAILS", test="test_speculation_beats_reference[a]")
    alike = "test_speculation_beats_reference[b]: AssertionError: 0.68x — FAILS"  # b's test, a's words
    outcome = decide(TestTally(0, failed=2), [judged], RunFacts(), ["test_speculation_beats_reference[a]: x", alike])
    assert outcome.failed_tests == (FailedTest("test_speculation_beats_reference[b]", "AssertionError: 0.68x — FAILS"),)
