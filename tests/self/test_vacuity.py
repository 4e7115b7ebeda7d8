"""Gates that cannot fail must not pass: a threshold under which no plausible figure fails its
gate is VACUOUS, in `specgate check` (a warning naming the file, the field, the value and why)
and in the run (the gate's verdict, listed as not judged, the run PARTIAL), before any figure."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import merge, sim_deployment_dict

from specgate.cli.check import describe
from specgate.deployment import parse_deployment
from specgate.report.build import TestTally as Tally  # noqa: I001
from specgate.report.build import build_report, overall_verdict
from specgate.report.markdown import render_markdown
from specgate.verdicts import vacuity
from specgate.verdicts.beats_gate import beats_ratio
from specgate.verdicts.gates import VACUOUS
from specgate.verdicts.judge import Judge


def _dep(overrides: dict | None = None):
    return parse_deployment(merge(sim_deployment_dict(), overrides or {}), Path("deploy/sim-vacuous.toml"))


class _Untouched:
    """A sampling plan the judge must not ask for anything: a vacuous gate is decided unmeasured."""

    def __getattr__(self, name):
        raise AssertionError(f"a vacuous gate asked the plan for {name!r}")


def _judge(dep) -> Judge:
    return Judge(dep, _Untouched(), Path("/nonexistent-baselines"))  # type: ignore[arg-type]


def test_sane_thresholds_are_not_vacuous():
    dep = _dep()
    assert vacuity.vacuities(dep) == []
    assert "VACUOUS" not in describe(dep).replace("SGLANG_SIMULATE_ACC_LEN", "")


def test_a_speed_tolerance_of_099_is_vacuous_in_check_and_in_the_gate_row():
    dep = _dep({"gates": {"tolerance": {"decode_tps": 0.99}}})
    text = describe(dep)
    assert "WARNING: deploy/sim-vacuous.toml: gates.tolerance.decode_tps = 0.99 makes its gate VACUOUS" in text
    assert "fall to 1% of the stored figure" in text
    judge = _judge(dep)
    for config in dep.configs:
        verdict = judge.regression(config, 1, "decode_tps")
        assert verdict.status == VACUOUS, verdict
        assert "gates.tolerance.decode_tps = 0.99 in deploy/sim-vacuous.toml" in verdict.summary
    # the accept-length gates keep their own (sane) tolerance: not vacuous, so they would measure
    assert vacuity.accept_tolerance(dep, "eagle3-decode") is None
    report = build_report(
        dep, SimpleNamespace(results={}), judge.verdicts, {}, [], None,
        {"date": "d", "commit": "c", "host": "h", "command": "x"}, Tally(passed=3), {}, {}, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []},
    )  # fmt: skip
    assert report.overall == "PARTIAL"
    assert {g.status for g in report.gates} == {VACUOUS}
    md = render_markdown(report)
    assert "| regression:eagle3-decode:c1:decode_tps | VACUOUS |" in md
    assert "### Not judged (NOT COMPARED or VACUOUS: never a pass)" in md


def test_half_is_still_a_gate_and_by_config_tolerances_are_named():
    # at 0.5 a halving sits on the bar and fails it (the self-tests' load-tolerant 0.5 is still a gate)
    assert vacuity.speed_tolerance(_dep({"gates": {"tolerance": {"decode_tps": 0.5}}}), "baseline") is None
    dep = _dep({"gates": {"tolerance": {"decode_tps_by_config": {"eagle3-prefill": 0.51}}}})
    found = vacuity.speed_tolerance(dep, "eagle3-prefill")
    assert found is not None and found.field == "gates.tolerance.decode_tps_by_config.eagle3-prefill"
    assert vacuity.speed_tolerance(dep, "eagle3-decode") is None


def test_a_beats_ratio_of_00001_is_vacuous_and_never_measured():
    dep = _dep({"gates": {"beats": [{"config": "eagle3-decode", "over": "baseline", "ratio": 0.0001}]}})
    assert "gates.beats[0].ratio = 0.0001 makes its gate VACUOUS" in describe(dep)
    verdict = _judge(dep).beats(dep.gates.beats[0])
    assert verdict.status == VACUOUS and verdict.unjudged and not verdict.failed
    assert "passes at 0.0001x baseline" in verdict.summary
    # 0 itself, once refused by the parser, is the same case: vacuous, said, never a pass
    zero = _dep({"gates": {"beats": [{"config": "eagle3-decode", "over": "baseline", "ratio": 0.0}]}})
    assert _judge(zero).beats(zero.gates.beats[0]).status == VACUOUS
    assert beats_ratio(dep, BeatsLike(0.1)) is None


def BeatsLike(ratio):  # noqa: N802 - a gate of the deployment's kind with another ratio
    from specgate.verdicts.beats_gate import BeatsGate

    return BeatsGate("eagle3-decode", "baseline", ratio, 1)


@pytest.mark.parametrize("floor", [1.0, 0.5])
def test_an_accept_floor_at_or_below_one_is_vacuous(floor):
    dep = _dep({"gates": {"accept_length": [{"config": "eagle3-decode", "at_least": floor}]}})
    assert f"gates.accept_length[0].at_least = {floor:g} makes its gate VACUOUS" in describe(dep)
    verdict = _judge(dep).accept_floor(dep.gates.accept_length[0])
    assert verdict.status == VACUOUS and "passes a drafter that accepts nothing" in verdict.summary


def test_an_accept_tolerance_that_lets_tau_reach_one_is_vacuous_whatever_is_stored():
    # 2 draft steps: at most 3 tokens per verify step; 3 x (1 - 0.67) = 0.99 <= 1
    dep = _dep({"gates": {"tolerance": {"accept_length": 0.67}}})
    found = vacuity.accept_tolerance(dep, "eagle3-decode")
    assert found is not None and "0.990, at or below 1" in found.why
    assert _judge(dep).regression("eagle3-decode", 1, "accept_length").status == VACUOUS
    assert vacuity.accept_tolerance(_dep({"gates": {"tolerance": {"accept_length": 0.6}}}), "eagle3-decode") is None
    assert describe(dep).count("gates.tolerance.accept_length = 0.67") == 1  # one field, one warning


def test_a_vacuous_gate_makes_the_run_partial_not_pass():
    dep = _dep({"gates": {"tolerance": {"decode_tps": 0.99}}})
    verdict = _judge(dep).regression("baseline", 1, "decode_tps")
    overall, reasons = overall_verdict(Tally(passed=4, failed=1), [verdict], {"uncompared_allowed": False})
    assert overall == "PARTIAL" and any("VACUOUS" in r for r in reasons)
