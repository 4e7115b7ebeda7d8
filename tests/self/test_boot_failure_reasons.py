"""After a boot failure the report's reasons are its cause, then one line for what could not run
for want of that server, not a bullet per test and gate repeating the cause (one of which, an
equivalence test, read as wrong output)."""

from __future__ import annotations

from specgate.report.build import reasons_of
from specgate.server.pool import unusable
from specgate.verdicts.gates import NOT_COMPARED, NOT_RUN, Verdict
from specgate.verdicts.outcome import FailedTest, RunFacts, TestTally, decide

CAUSE = "'eagle3-decode' never became ready: the server exited with code 1"


def test_what_failed_for_want_of_a_server_is_one_line_and_the_rest_stays():
    refused = f"specgate.errors.ServerBootError: {unusable('eagle3-decode')}: {CAUSE}"
    failed = [
        FailedTest("test_speculative_output_is_greedy_baseline[eagle3-decode]", refused),
        FailedTest("test_decode_speed[eagle3-decode-c1]", f"SpecgateError: config 'eagle3-decode' could not be measured: {refused}"),
        FailedTest("test_speculation_beats_reference[eagle3-decode-beats-baseline]", refused),
        FailedTest("test_speculative_output_is_greedy_baseline[eagle3-prefill]", "AssertionError: diverged at token 3"),
    ]
    verdicts = [
        Verdict(g, "eagle3-decode", NOT_RUN, f"the server of 'eagle3-decode' never served: {CAUSE}")
        for g in ("beats:eagle3-decode-beats-baseline", "accept:eagle3-decode-accepts-1.8")
    ] + [Verdict("regression:baseline:c1:decode_tps", "baseline", NOT_COMPARED, "no stored baseline")]
    outcome = decide(TestTally(passed=2, failed=4), verdicts, RunFacts(), failed)
    reasons = reasons_of(outcome, ["eagle3-decode"])
    assert reasons[1] == (
        "did not run, for want of the server(s) above: 2 gate(s) (accept:eagle3-decode-accepts-1.8, "
        "beats:eagle3-decode-beats-baseline) and 3 test(s) (report.md's gate table lists each gate, report.json's "
        "failed_tests each test)"
    ), reasons
    assert not any("eagle3-decode" in r for r in reasons[2:]), reasons
    # What failed for its own reason is still said: another config's divergence, the uncompared gate.
    assert "failed: test_speculative_output_is_greedy_baseline[eagle3-prefill]: AssertionError: diverged at token 3" in reasons
    assert any(r.startswith("regression:baseline:c1:decode_tps: NOT COMPARED") for r in reasons), reasons
    # Without a boot failure, every failure keeps its own line.
    assert sum(r.startswith("failed: ") for r in reasons_of(outcome)) == 4


def test_where_the_reasons_send_the_reader_for_each_gate_and_test_is_true():
    """The boot-failure line said "report.md's gate table and failed tests list each", but report.md
    has no failed-tests list: the tests are in report.json's failed_tests alone. The pointer names
    what holds each, and report.md's gate table does hold each gate."""
    from pathlib import Path

    from specgate.deployment import parse_deployment
    from specgate.report.build import WHERE_EACH_IS, build_report
    from specgate.report.markdown import render_markdown
    from specgate.server.pool import BootRecord
    from tests.self.helpers import sim_deployment_dict

    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    refused = f"specgate.errors.ServerBootError: {unusable('eagle3-decode')}: {CAUSE}"
    failed = [FailedTest("test_speculation_beats_reference[eagle3-decode-beats-baseline]", refused)]
    boot = BootRecord("eagle3-decode", 1.0, ok=False, cause=CAUSE)
    report = build_report(
        dep, _Meter(), [], {}, [boot], None, {"host": "h", "date": "d", "commit": "c", "command": "specgate run"},
        TestTally(1, failed=1), {}, {}, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []}, failed_servers={"eagle3-decode": CAUSE}, failed_tests=failed,
    )  # fmt: skip
    (line,) = [r for r in report.overall_reasons if r.startswith("did not run, for want of")]
    assert line.endswith(f"({WHERE_EACH_IS})"), line
    md = render_markdown(report)
    assert "failed tests list" not in md and "failed_tests" in line
    gate_table = md.split("## Gates")[1]
    assert all(g.gate in gate_table for g in report.gates if g.config == "eagle3-decode"), gate_table
    assert [f.test for f in report.failed_tests] == [failed[0].test]


class _Meter:
    results: dict = {}

    @staticmethod
    def label(sample: object) -> str:
        return ""
