"""The first verdicts a user sees: url servers interleaved, servers that take turns booted once
each, the host's drift during a run measured, "cannot tell" told apart from "got worse", and
the user's own story (the Kimi twin) on the first screen of its report."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import light_kimi_twin, sim_deployment_dict

from specgate.cli.closing import close_run
from specgate.deployment import parse_deployment
from specgate.exits import Exit
from specgate.measure.drift import measure_drift
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.report.build import TestTally, overall_verdict
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, NOT_COMPARED, PASS, RunVerdict, Verdict


# --- url servers are up together -------------------------------------------------------------
def _url_deployment(coexist: bool | None) -> dict:
    data = sim_deployment_dict()
    data["launch"] = {"launcher": "url", **({} if coexist is None else {"coexist": coexist})}
    for i, config in enumerate(data["configs"].values()):
        config["url"] = f"http://127.0.0.1:{31000 + i}"  # its args say how it was started
    return data


@pytest.mark.parametrize("coexist", [None, True])
def test_servers_attached_by_url_are_measured_interleaved(coexist):
    # (an explicit `coexist = false` beside them is refused: test_deployment.py)
    dep = parse_deployment(_url_deployment(coexist), Path("url.toml"))
    assert dep.launch.coexist  # up together by definition
    plan = SamplingPlan(dep, SimpleNamespace(live={}), SimpleNamespace(), list(dep.configs), seed=1)
    assert plan.interleaved


# --- the reference's drift during the run --------------------------------------------------------
class _Meter:
    """A meter whose servers slow by `slow` between the first measurement and the second look."""

    def __init__(self, slow: float):
        self.records: dict[str, ConfigSpeed] = {}
        self.slow = slow
        self.sampled: list[tuple[str, int]] = []

    def record(self, config, concurrency):
        return self.records.setdefault(config, ConfigSpeed(config, concurrency))

    context = 0  # the short workload (SpeedMeter.context: the bucket it measures)

    def prepare(self):  # the pinned requests: the plan builds them before it acquires a server
        pass

    def measure(self, server, concurrency, count):
        rec = self.record(server.config, concurrency)
        for _ in range(count):
            i = rec.count(server.boot)
            rec.samples.append(SpeedSample(100.0 + i, 0.0, 0.0, 8, 1, None, None, 1, boot=server.boot, index=i))

    def sample(self, server, concurrency, count):
        self.sampled.append((server.name, server.pid))
        return [
            SpeedSample((100.0 + i) * self.slow, 0.0, 0.0, 8, 1, None, None, 1, boot=1, index=i) for i in range(count)
        ]


class _Pool:
    def __init__(self, coexist: bool):
        self.coexist = coexist
        self.live: dict[str, SimpleNamespace] = {}
        self.boots: list[str] = []

    def acquire(self, name):
        if name not in self.live:
            if not self.coexist:
                self.live.clear()
            self.boots.append(name)
            self.live[name] = SimpleNamespace(name=name, config=name, boot=1, pid=len(self.boots))
        return self.live[name]


def _plan(coexist: bool, slow: float, drift_check: bool = True):
    dep = SimpleNamespace(
        configs={"baseline": None, "a": None},
        launch=SimpleNamespace(boots=1, coexist=coexist, drift_check=drift_check),
        workload=SimpleNamespace(max_repeats=6, repeats=4),
    )
    pool, meter = _Pool(coexist), _Meter(slow)
    return SamplingPlan(dep, pool, meter, ["baseline", "a"], seed=3), pool, meter


def test_servers_that_take_turns_boot_once_each_and_the_reference_again_at_the_end_with_the_reason():
    plan, pool, meter = _plan(coexist=False, slow=0.8)
    for config in ("baseline", "a"):
        plan.ensure([config], 1, 4)
    assert not plan.more(["a", "baseline"], 1, cap_per_boot=6, batch=2)  # a later look boots nothing
    drift = plan.drift("baseline", 1, 0.95)
    assert pool.boots == ["baseline", "a", "baseline"]  # reference, configs, reference (ABBA)
    assert drift is not None and drift.where == "a second boot" and drift.moved
    assert drift.ratio.estimate == pytest.approx(0.8)
    assert "-20.0%" in drift.sentence()
    assert plan.log.reboots and "drift" in plan.log.reboots[0] and "launch.drift_check" in plan.log.reboots[0]
    assert plan.drift("baseline", 1, 0.95) is drift and pool.boots.count("baseline") == 2  # measured once


def test_interleaved_servers_measure_drift_on_the_same_server_without_a_boot():
    plan, pool, meter = _plan(coexist=True, slow=1.0)
    plan.ensure(["baseline", "a"], 1, 4)
    drift = plan.drift("baseline", 1, 0.95)
    assert sorted(pool.boots) == ["a", "baseline"] and drift.where == "the same server" and not drift.moved
    assert plan.log.reboots == [] and plan.log.as_dict()["drift"][0]["ratio"]["estimate"] == pytest.approx(1.0)


def test_drift_says_how_many_rounds_it_covers():
    # Measured at the first gate that asks: a later gate's looks add rounds after it, which the
    # report must not let the figure claim to cover.
    plan, pool, meter = _plan(coexist=True, slow=1.0)
    plan.ensure(["baseline", "a"], 1, 4)
    drift = plan.drift("baseline", 1, 0.95)
    assert drift.after_round == plan.log.rounds == 4
    plan.ensure(["baseline", "a"], 1, 6)
    assert plan.log.rounds == 6 and plan.log.as_dict()["drift"][0]["after_round"] == 4


def test_drift_check_off_costs_no_boot():
    plan, pool, _ = _plan(coexist=False, slow=0.5, drift_check=False)
    plan.ensure(["baseline"], 1, 4)
    plan.ensure(["a"], 1, 4)
    assert plan.drift("baseline", 1, 0.95) is None and pool.boots == ["baseline", "a"]


def test_drift_needs_two_paired_requests():
    assert measure_drift("baseline", 1, [100.0], [90.0], 0.95, "the same server") is None


# --- cannot tell is not got worse ---------------------------------------------------------------
def _v(gate, status, summary="s", test=""):
    return Verdict(gate, "c", status, summary, test=test)


def test_a_gate_that_cannot_tell_makes_the_run_inconclusive_not_fail():
    got, reasons = overall_verdict(TestTally(5, failed=1), [_v("g", PASS), _v("r", INCONCLUSIVE, "cannot")], {})
    assert got == RunVerdict.INCONCLUSIVE
    assert reasons[0].startswith("1 test(s) failed") and "1 cannot tell" in reasons[0]
    decided, _ = overall_verdict(TestTally(4, failed=2), [_v("b", FAIL), _v("r", INCONCLUSIVE)], {})
    assert decided == RunVerdict.FAIL


def test_why_fail_puts_failures_first_groups_repeated_causes_and_counts_tests_as_pytest_does():
    missing = "no stored baseline for deployment 'x'; record one with: specgate baseline update x.toml"
    verdicts = [
        _v(f"regression:{i}", NOT_COMPARED, missing, test=f"test_no_regression_against_stored_baseline[{i}]") for i in range(6)
    ] + [_v("beats:p", FAIL, "0.68x — FAILS", test="test_speculation_beats_reference[p]")]
    failed = [f"test_no_regression_against_stored_baseline[{i}]: Failed: NOT COMPARED: {missing}" for i in range(6)]
    failed.append("test_speculation_beats_reference[p]: AssertionError: 0.68x — FAILS")
    got, reasons = overall_verdict(TestTally(8, failed=7), verdicts, {"uncompared_allowed": False}, failed)
    assert got == RunVerdict.FAIL
    assert reasons[0].startswith("7 test(s) failed")  # as pytest counts them
    assert reasons[1] == "beats:p: FAIL — 0.68x — FAILS"  # the failure before what did not compare
    assert reasons[2].startswith("NOT COMPARED ×6 (") and reasons[2].endswith(missing)
    assert len(reasons) == 3  # the gate tests' own failures are not told twice


def test_a_gate_test_that_raised_before_judging_is_told_as_a_failure():
    # A url server that hung mid-run: its gate tests fail with no verdict of their own.
    failed = ["test_speculation_beats_reference[e]: ServerDiedError: config 'e': the server hung after 6 requests"]
    got, reasons = overall_verdict(TestTally(4, failed=1), [_v("accept:e", PASS)], {}, failed)
    assert got == RunVerdict.FAIL and any("the server hung" in r for r in reasons), reasons


@pytest.mark.parametrize(("overall", "code"), [("INCONCLUSIVE", Exit.INCONCLUSIVE), ("FAIL", Exit.FAIL)])
def test_inconclusive_and_fail_exit_apart(tmp_path, overall, code, capsys):
    import json
    import time

    report = _minimal_report(overall)
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert close_run(tmp_path, 1, time.time(), partial_allowed=False) == code
    assert capsys.readouterr().out.startswith(f"specgate: {overall}")


def _minimal_report(overall: str) -> dict:
    from specgate.report.build import build_report
    from specgate.report.model import Report

    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    status = INCONCLUSIVE if overall == "INCONCLUSIVE" else FAIL
    built: Report = build_report(
        dep,
        SimpleNamespace(results={}, label=lambda s: ""),
        [_v("regression:baseline:c1:decode_tps", status)],
        {},
        [],
        None,
        {},
        TestTally(0, failed=1),
        {},
        {},
        [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []},
    )
    assert built.overall == overall
    return built.document()


# --- the user's story on the first run -------------------------------------------------------------
def test_the_kimi_twin_tells_its_story_on_the_first_screen(tmp_path):
    # The shipped stored baseline makes every gate compare: prefill mode fails near 0.8x, decode
    # mode passes, the lever leads, and each config boots once (the reference once more, said why).
    twin = light_kimi_twin(tmp_path / "deployments")
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(twin), "--report-dir", str(tmp_path / "report")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == Exit.FAIL, run.stdout[-3000:]
    head = "\n".join((tmp_path / "report" / "report.md").read_text().splitlines()[:14])
    assert "**FAIL**" in head and "`--speculative-attention-mode decode`" in head
    assert re.search(r"beats:eagle3-prefill-beats-baseline: FAIL — eagle3-prefill decodes at 0\.[78]\d\dx", head), head
    assert "NOT COMPARED" not in head and "no stored baseline" not in head
    import json

    report = json.loads((tmp_path / "report" / "report.json").read_text())
    by_gate = {g["gate"]: g["status"] for g in report["gates"]}
    assert by_gate["beats:eagle3-decode-beats-baseline"] == "pass"
    assert [b["config"] for b in report["boots"]] == ["baseline", "eagle3-prefill", "eagle3-decode", "baseline"]
    assert report["plan"]["reboots"] and report["plan"]["drift"][0]["where"] == "a second boot"


def test_a_first_baseline_update_is_not_partial_for_what_it_is_recording():
    """A baseline update's first record has nothing stored before it: its regression gates are
    uncompared by nature, which must not turn the update PARTIAL; any other uncompared gate still does."""
    first = Verdict("regression:e:c1:decode_tps", "e", NOT_COMPARED, "nothing stored", figures={"first_record": True})
    completeness = {"expected": {"gates": 2}, "ran": {"gates": 1}, "uncompared_allowed": False}
    got, reasons = overall_verdict(TestTally(1), [_v("beats:e", PASS), first], completeness)
    assert (got, reasons) == (RunVerdict.PASS, [])
    other = Verdict("regression:e:c1:decode_tps", "e", NOT_COMPARED, "other flags")
    got, reasons = overall_verdict(TestTally(1), [_v("beats:e", PASS), other], completeness)
    assert got == RunVerdict.PARTIAL and any("other flags" in r for r in reasons)


def test_wrong_outputs_are_said_before_a_speed_regression():
    verdicts = [
        _v("regression:d:c1:decode_tps", FAIL, "REGRESSED -30%", test="test_no_regression_against_stored_baseline[d-c1-decode_tps]")
    ]
    failed = [
        "test_no_regression_against_stored_baseline[d-c1-decode_tps]: Failed: REGRESSED -30%",
        "test_speculative_output_is_greedy_baseline[p]: AssertionError: decisive divergence at output token 5",
    ]
    got, reasons = overall_verdict(TestTally(8, failed=2), verdicts, {"uncompared_allowed": False}, failed)
    assert got == RunVerdict.FAIL
    assert reasons[1].startswith("failed: test_speculative_output_is_greedy_baseline[p]: "), reasons
    assert reasons[2] == "regression:d:c1:decode_tps: FAIL — REGRESSED -30%", reasons
