"""A server whose spec counters contradict each other (a faked spec_verify_ct): the accept gates
cross-check the verify count against the server's other counters and FAIL, never PASS."""

from __future__ import annotations

import httpx
import pytest

from specgate.client import GenerateRequest, SglangClient
from specgate.errors import MalformedAnswer
from specgate.measure.accept_counts import contradiction, sample_problem
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.sim.faults import parse_faults


def sample(tokens: int, verify: int, accepted: int | None = None, server: float | None = None, hist=None):
    return SpeedSample(
        decode_tps=100.0, ttft_s=0.01, e2e_s=0.5, completion_tokens=tokens, prompt_tokens=20, verify_ct=verify,
        server_e2e_s=None, chunks=tokens, accept_histogram=hist, accepted_drafts=accepted,
        server_accept_length=server,
    )  # fmt: skip


def test_consistent_counters_of_a_healthy_drafter_and_of_one_accepting_nothing_pass():
    # 40 tokens: the prefill's, then 18 steps accepting 21 drafts (the simulator's arithmetic), cut at the limit
    assert sample_problem(sample(40, 18, 21, 40 / 18, (3, 7, 8)), 3) is None
    assert sample_problem(sample(40, 39, 0, 40 / 39, (39, 0, 0)), 3) is None  # every draft rejected: honest 1.03
    assert sample_problem(sample(40, 13, None, None), None) is None  # nothing to cross-check with


@pytest.mark.parametrize(
    ("faked", "expected"),
    [
        (sample(40, 16, 0, 40 / 39, (39, 0, 0)), "accepted 0 drafts"),  # a drafter accepting nothing, 2.5 claimed
        (sample(40, 16, None, 40 / 39), "spec_accept_length is 1.026"),
        (sample(40, 16, None, None, (39, 0, 0)), "histogram counts 39 verify steps"),
        (sample(40, 8, None, None), "at most 3 tokens"),  # 5 per step from 2 draft steps
        (sample(40, 41, None, None), "at least one token"),
    ],
)
def test_a_verify_count_its_other_counters_contradict_is_named(faked, expected):
    assert expected in (sample_problem(faked, 3) or "")
    record = ConfigSpeed("eagle3-decode", 1, [sample(40, 18, 21), faked])
    assert "in 1 of its 2 measured requests" in (contradiction(record, 3) or "")


def test_the_fault_that_fakes_the_count():
    assert parse_faults(["fake-verify-ct=2.5"]).fake_verify_ct == 2.5
    with pytest.raises(ValueError, match="accept length from 1 to 100"):
        parse_faults(["fake-verify-ct=0.5"])


def test_a_faked_verify_count_fails_the_accept_floor_of_a_drafter_that_accepts_nothing(sim_deployment, pytester):
    """Before: 40 tokens over a faked 16 verify steps passed the floor of 1.8 on a drafter accepting
    nothing. The healthy config's floor, judged in the same run, still passes."""
    floors = [{"config": "eagle3-decode", "at_least": 1.8}, {"config": "eagle3-prefill", "at_least": 1.8}]
    d = sim_deployment({"gates": {"accept_length": floors}})
    result = d.run(
        pytester, "-k", "accept_length_floor", faults="eagle3-decode:accept-collapse;eagle3-decode:fake-verify-ct=2.5"
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    gates = {g["gate"]: g for g in d.report()["gates"]}
    faked = gates["accept:eagle3-decode-accepts-1.8"]
    assert faked["status"] == "fail", faked
    assert "counters contradict each other" in faked["summary"] and "accepted 0 drafts" in faked["summary"], faked
    assert gates["accept:eagle3-prefill-accepts-1.8"]["status"] == "pass"


def _answer(meta: dict) -> SglangClient:
    body = ('{"text": "ab", "output_ids": [1, 2], "meta_info": {"completion_tokens": 2, "spec_verify_ct": 1, '
            + ", ".join(f'"{k}": {v}' for k, v in meta.items()) + "}}").encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"}))
    return SglangClient("http://sglang.test", transport=transport)


@pytest.mark.parametrize("field", ["e2e_latency", "decode_throughput", "spec_accept_length"])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1.5", '"fast"', "true"])
def test_a_figure_the_server_measured_that_is_no_number_is_a_misbehaving_server_named(field, value):
    """A NaN e2e_latency reached the statistics and ended the run as an ERROR with no report; a
    word was read as no figure at all. Either is the server's answer, refused naming the field."""
    with pytest.raises(MalformedAnswer, match=rf"http://sglang.test/generate: meta_info\.{field}: expected a finite number >= 0") as err:
        _answer({field: value}).generate(GenerateRequest(max_new_tokens=2, text="hi"))
    assert err.value.url == "http://sglang.test/generate"


def test_figures_the_server_measured_are_read_as_numbers():
    result = _answer({"e2e_latency": 0.25, "decode_throughput": 120, "spec_accept_length": 2.0}).generate(
        GenerateRequest(max_new_tokens=2, text="hi")
    )
    assert (result.server_e2e_s, result.server_decode_tps, result.spec and result.spec.server_accept_length) == (0.25, 120.0, 2.0)


# In the gate's own process: every answer's meta_info carries e2e_latency NaN, as a server's would.
_NAN_LATENCY = """
import specgate.client as client

_result = client.SglangClient._result


def _with_nan(self, request, text, output_ids, meta, *rest, **kw):
    return _result(self, request, text, output_ids, {**meta, "e2e_latency": float("nan")}, *rest, **kw)


client.SglangClient._result = _with_nan
"""


def test_a_run_against_a_server_answering_nan_latency_ends_with_a_report_naming_it(sim_deployment, pytester):
    """Before: the NaN reached the statistics and the run ended ERROR with no report."""
    pytester.makepyfile(nan_latency=_NAN_LATENCY)
    d = sim_deployment()
    result = d.run(pytester, "-p", "nan_latency", "-k", "speed and baseline")
    assert result.ret != 0, result.stdout.str()[-3000:]
    report = d.report()
    assert report["overall"] not in ("PASS", "ERROR"), report["overall_reasons"]
    causes = " ".join(f["cause"] for f in report["failed_tests"]) + " ".join(report["overall_reasons"])
    assert "meta_info.e2e_latency: expected a finite number >= 0, got nan" in causes, causes[-2000:]
