"""A server that stops answering mid-run (SIGSTOP after it served some requests) is said to have
stopped after N requests, timed out after the request's deadline, naming the config and the
phase it stopped in; its gates are NOT RUN because it stopped mid-run, not because it "never
served" (issue 32: 18)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
from helpers import merge, sim_deployment_dict

from specgate.client import GenerateRequest
from specgate.deployment import parse_deployment
from specgate.errors import RequestTimeout
from specgate.server.pool import ServerPool
from specgate.verdicts.not_run import with_not_run

SERVED = 3
TIMEOUT_S = 2


def test_a_server_stopped_after_serving_requests_is_said_to_have_stopped_not_never_served(tmp_path):
    data = merge(sim_deployment_dict(), {"workload": {"request_timeout_s": TIMEOUT_S}})
    dep = parse_deployment(data, tmp_path / "sim.toml")
    pool = ServerPool(dep, tmp_path / "logs")
    stopped = None
    try:
        server = pool.acquire("eagle3-decode")
        pool.phase = "speed"  # what the plugin sets as each gate test runs
        request = GenerateRequest(max_new_tokens=4, text="hi", stream=True)
        for _ in range(SERVED):
            server.generate(request)
        stopped = server.handle.pid
        assert stopped is not None
        os.killpg(stopped, signal.SIGSTOP)  # alive, port open, answering nothing
        with pytest.raises(RequestTimeout):
            server.generate(request)
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):  # the pool stopped it already: it hung
                os.killpg(stopped, signal.SIGCONT)
        pool.close()
    why = pool.failed["eagle3-decode"]
    assert why.startswith(
        f"the server stopped answering after serving {SERVED} request(s) (a request of the speed phase); the timeout "
        "ended its part of the run (raise workload.request_timeout_s if the short workload's answers need longer): POST "
    ), why
    assert f"within workload.request_timeout_s = {TIMEOUT_S} s" in why
    verdicts = with_not_run(dep, [], pool.failed, set())
    summaries = {v.gate: v.summary for v in verdicts}
    said = summaries["regression:eagle3-decode:c1:decode_tps"]
    assert said.startswith("the server of 'eagle3-decode' stopped mid-run: the server stopped answering after serving 3"), said
    assert all("never served" not in s for s in summaries.values()), summaries


def test_a_server_that_never_booted_still_never_served():
    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    failed = {"eagle3-decode": "'eagle3-decode' never became ready: exited with code 1."}
    said = {v.gate: v.summary for v in with_not_run(dep, [], failed, set())}
    assert said["regression:eagle3-decode:c1:decode_tps"].startswith("the server of 'eagle3-decode' never served: ")
    # One that died before serving anything never served either.
    failed = {"eagle3-decode": "the server died after serving 0 request(s).\nlog"}
    said = {v.gate: v.summary for v in with_not_run(dep, [], failed, set())}
    assert said["regression:eagle3-decode:c1:decode_tps"].startswith("the server of 'eagle3-decode' never served: ")


def test_a_server_that_hangs_in_a_context_bucket_is_said_with_the_bucket(tmp_path):
    """A request of the 1K bucket that outlived request_timeout_s was said "(a request of the speed
    phase)", as if the short workload's had: a bucket's long prompt is what outlasts a timeout."""
    dep = parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml")
    pool = ServerPool(dep, tmp_path / "logs")
    try:
        pool.phase, pool.bucket = "speed", "1K"  # what the plugin sets as a bucket's speed test runs
        pool.fail_hung("baseline", "no complete answer")
        pool.phase, pool.bucket = "speed", ""
        pool.fail_hung("eagle3-decode", "no complete answer")
    finally:
        pool.close()
    assert pool.failed["baseline"] == (
        "the server stopped answering after serving 0 request(s) (a request of the speed phase, at the 1K context "
        "bucket); the timeout ended its part of the run (raise workload.request_timeout_s if the 1K bucket's answers "
        "need longer): no complete answer"
    )
    assert "(a request of the speed phase); the timeout ended its part of the run" in pool.failed["eagle3-decode"]


def test_a_hang_in_a_bucket_is_said_whole_where_the_report_cuts_its_reason(tmp_path):
    """The report's line and NOT RUN rows keep a lost server's first 400 characters: the hang's
    reason (which bucket, that the timeout ended the server's part, the field to raise, what the
    request missed) fits, with the client's own advice left to the failed test that met it."""
    from specgate.client import SglangClient

    dep = parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml")
    client = SglangClient("http://127.0.0.1:30000", timeout_s=0.14)
    timeout = client._timeout("http://127.0.0.1:30000/generate", "still streaming after 63 chunk(s)")
    client.close()
    assert "the server hangs, or that deadline is too short" in str(timeout)
    pool = ServerPool(dep, tmp_path / "logs")
    try:
        pool.phase, pool.bucket = "speed", "32K"
        pool.fail_hung("baseline", timeout.missed)
    finally:
        pool.close()
    why = pool.failed["baseline"]
    assert len(why) <= 400 and why.endswith("(still streaming after 63 chunk(s))"), why


def test_gates_judged_on_figures_measured_whole_before_the_loss_keep_their_verdicts():
    """The baseline hung in the 2K bucket after its short-workload and 1K speed tests had passed:
    its gates there were NOT COMPARED on whole figures (no stored bucket), and read NOT RUN as if
    the loss had kept them from running. Only the 2K gates, whose figures the loss cut short, and a
    gate of a server that never measured whole, are NOT RUN."""
    from specgate.verdicts.gates import NOT_COMPARED, NOT_RUN, Verdict

    data = merge(sim_deployment_dict(), {"workload": {"context_buckets": ["1K", "2K"]}})
    dep = parse_deployment(data, Path("sim.toml"))
    failed = {"baseline": "the server stopped answering after serving 25 request(s) (a request of the speed phase, at the 2K context bucket): x"}
    judged = [
        Verdict("regression:baseline:c1:decode_tps", "baseline", NOT_COMPARED, "no stored baseline"),
        Verdict("regression:baseline:c1:decode_tps@1K", "baseline", NOT_COMPARED, "stored without the 1K bucket"),
        Verdict("regression:baseline:c1:decode_tps@2K", "baseline", NOT_COMPARED, "stored without the 2K bucket"),
    ]
    measured = {("baseline", 0), ("baseline", 1024), ("eagle3-decode", 0), ("eagle3-decode", 1024)}
    status = {v.gate: v.status for v in with_not_run(dep, judged, failed, set(), measured)}
    assert status["regression:baseline:c1:decode_tps"] == NOT_COMPARED
    assert status["regression:baseline:c1:decode_tps@1K"] == NOT_COMPARED
    assert status["regression:baseline:c1:decode_tps@2K"] == NOT_RUN
    assert status["beats:eagle3-decode-beats-baseline@2K"] == NOT_RUN  # no verdict: the loss kept it from running
    # Nothing measured whole (the server was lost in its short workload): the loss decided them all.
    status = {v.gate: v.status for v in with_not_run(dep, judged, failed, set(), {("eagle3-decode", 0)})}
    assert status["regression:baseline:c1:decode_tps"] == NOT_RUN
    assert status["regression:baseline:c1:decode_tps@1K"] == NOT_RUN


def test_the_session_knows_which_speed_figures_were_measured_whole():
    """What with_not_run and the results history read: a (config, bucket) is measured whole once its
    speed tests passed, and not where any of them failed (the loss cut it short)."""
    from types import SimpleNamespace

    from specgate.plugin import _record_outcome
    from specgate.session import GateSession

    def outcome(test: str, passed: bool) -> pytest.TestReport:
        return pytest.TestReport(
            f"tests/gate/test_speed.py::{test}", ("x", 0, test), {}, "passed" if passed else "failed",
            None if passed else "died", "call",
        )  # fmt: skip

    gate = SimpleNamespace(phase_seconds={}, config_outcomes={}, failed_tests=[], speed_whole={})
    _record_outcome(gate, "speed", "baseline", outcome("test_decode_speed[baseline-c1]", True))
    _record_outcome(gate, "speed", "baseline", outcome("test_decode_speed[baseline-c1-at-1K]", True))
    _record_outcome(gate, "speed", "baseline", outcome("test_decode_speed[baseline-c1-at-2K]", False))
    _record_outcome(gate, "equivalence", "eagle3-decode", outcome("test_speculative_output_is_greedy_baseline[eagle3-decode]", True))
    assert GateSession.measured_whole(gate) == {("baseline", 0), ("baseline", 1024)}


def test_a_gate_judged_before_its_server_was_lost_keeps_its_verdict():
    """eagle3-decode's speed test failed on its own (its figures not whole), and its server hung
    later, in the gates phase, while another gate asked it for more: a gate NOT COMPARED before
    that still read NOT RUN. The session records which servers were lost when each gate test
    began; one judged before its server's loss keeps its verdict, one judged after reads NOT RUN."""
    from types import SimpleNamespace

    from specgate.plugin import _PHASES, _SESSION, pytest_runtest_call
    from specgate.session import GateSession
    from specgate.verdicts.gates import NOT_COMPARED, NOT_RUN, Verdict

    gate = SimpleNamespace(
        lost_before={}, plan=SimpleNamespace(errors={}), pool=SimpleNamespace(failed={}, phase="", bucket="")
    )
    gate.lost_now = lambda: GateSession.lost_now(gate)
    stash = pytest.Stash()
    stash[_SESSION] = gate
    first, later = (f"test_no_regression_against_stored_baseline[eagle3-decode-c1-{f}]" for f in ("accept_length", "decode_tps"))
    stash[_PHASES] = {first: ("gates", "eagle3-decode"), later: ("gates", "eagle3-decode")}
    for test in (first, later):
        call = pytest_runtest_call(SimpleNamespace(name=test, nodeid=test, config=SimpleNamespace(stash=stash)))
        next(call)  # the gate test runs here
        if test == first:
            gate.pool.failed["eagle3-decode"] = "the server stopped answering after serving 40 request(s) (a request of the gates phase): x"
        with contextlib.suppress(StopIteration):
            call.send(None)
    assert gate.lost_before == {first: frozenset(), later: frozenset({"eagle3-decode"})}

    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    judged = [
        Verdict("regression:eagle3-decode:c1:accept_length", "eagle3-decode", NOT_COMPARED, "no baseline", test=first),
        Verdict("regression:eagle3-decode:c1:decode_tps", "eagle3-decode", NOT_COMPARED, "no baseline", test=later),
    ]
    status = {v.gate: v.status for v in with_not_run(dep, judged, gate.pool.failed, set(), (), gate.lost_before)}
    assert status["regression:eagle3-decode:c1:accept_length"] == NOT_COMPARED
    assert status["regression:eagle3-decode:c1:decode_tps"] == NOT_RUN
