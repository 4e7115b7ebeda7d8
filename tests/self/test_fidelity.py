"""The fidelity witness: SGLang's "Decode batch" log lines, read across releases."""

from datetime import datetime
from pathlib import Path

from specgate.measure.fidelity import AGREES, CONTRADICTED, UNCHECKED, check_fidelity, fidelity_of, parse_decode_lines
from specgate.measure.speed import ConfigSpeed, SpeedSample

# Verbatim from SGLang 0.5.11 on the H200 (results/2026-11-29-h200-smoke/logs) and an older release's form.
LOG = """\
[2026-11-29 11:07:30] Decode batch, #running-req: 1, #token: 200, token usage: 0.01, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 0
[2026-11-29 11:07:35] Decode batch, #running-req: 1, #token: 106, token usage: 0.01, cuda graph: True, gen throughput (token/s): 110.95, #queue-req: 0
[2026-11-29 11:07:36] Decode batch, #running-req: 1, #token: 136, token usage: 0.01, cuda graph: True, gen throughput (token/s): 700.00, #queue-req: 0
[2026-11-29 11:07:37] Decode batch, #running-req: 2, #token: 178, token usage: 0.02, accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 320.97, #queue-req: 0
[2026-11-29 11:07:38 DP0 TP0] Decode batch. #running-req: 1, #token: 190, token usage: 0.01, gen throughput (token/s): 690.00, #queue-req: 0
[2026-11-29 11:09:00] Decode batch, #running-req: 1, #token: 64, token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0
[2026-11-29 11:07:39] Prefill batch, #new-seq: 1, #new-token: 40
"""


def test_decode_lines_of_old_and_new_releases_are_read():
    lines = parse_decode_lines(LOG)
    assert [(ln.running, ln.tokens, ln.tps) for ln in lines] == [
        (1, 200, 500.0),
        (1, 106, 110.95),
        (1, 136, 700.0),
        (2, 178, 320.97),
        (1, 190, 690.0),
        (1, 64, 1.0),
    ]


def _sample(tps: float, at: float) -> SpeedSample:
    return SpeedSample(
        decode_tps=tps,
        ttft_s=0.02,
        e2e_s=1.0,
        completion_tokens=128,
        prompt_tokens=40,
        verify_ct=None,
        server_e2e_s=0.99,
        chunks=128,
        sent_at=at,
    )


def test_only_single_request_lines_inside_the_measured_window_count(tmp_path: Path):
    log = tmp_path / "baseline.log"
    log.write_text(LOG)
    t0 = datetime(2026, 11, 29, 11, 7, 35).timestamp()
    record = ConfigSpeed("baseline", 1, samples=[_sample(700.0, t0), _sample(702.0, t0 + 2)])
    f = fidelity_of(record, log)
    assert f is not None
    # In the window 11:07:34-11:07:38: the line where a new request began (tokens fell 200 -> 106)
    # and the two-request line are out; the 11:07:30 and 11:09 lines are outside the window.
    assert f.log_lines == 2 and f.log_decode_tps == 695.0 and f.log_lines_low == 0
    assert abs(f.log_gap - (701.0 / 695.0 - 1)) < 1e-9
    assert abs(f.client_overhead_ms - 10.0) < 1e-6 and abs(f.e2e_gap + 0.01) < 1e-9


def test_no_log_and_concurrent_runs_say_so(tmp_path: Path):
    record = ConfigSpeed("baseline", 1, samples=[_sample(700.0, 1.0)])
    f = fidelity_of(record, tmp_path / "missing.log")
    assert f is not None and f.log_decode_tps is None and f.log_gap is None
    assert fidelity_of(ConfigSpeed("baseline", 4, samples=[_sample(700.0, 1.0)]), None) is None


def test_the_servers_per_request_figure_is_rescaled_to_the_suites_tokens():
    # 128 tokens, the first chunk held 1: the server's 128/dt becomes 127/dt
    s = _sample(700.0, 1.0)
    s = SpeedSample(**{**s.__dict__, "server_decode_tps": 128 / 127 * 700.0, "first_chunk_tokens": 1})
    f = fidelity_of(ConfigSpeed("baseline", 1, samples=[s, s]), None)
    assert abs(f.meta_decode_tps - 700.0) < 1e-9 and abs(f.meta_gap) < 1e-12


def test_fewer_clean_log_windows_than_requests_are_not_compared(tmp_path: Path):
    log = tmp_path / "standalone.log"
    log.write_text(LOG)
    t0 = datetime(2026, 11, 29, 11, 7, 35).timestamp()
    record = ConfigSpeed("standalone", 1, samples=[_sample(700.0, t0 + k * 0.1) for k in range(5)])
    f = fidelity_of(record, log)
    assert f.log_decode_tps is None and f.log_gap is None
    assert f.log_note == "only 1 clean log window(s) for 5 requests: too few to compare"


def _metered(tps: float, server_tps: float | None) -> SpeedSample:
    s = _sample(tps, 1.0)
    return SpeedSample(**{**s.__dict__, "server_decode_tps": server_tps, "first_chunk_tokens": 0})


def test_the_suites_figure_is_checked_against_the_bound_either_way():
    def state(ours, theirs):
        record = ConfigSpeed("c", 1, samples=[_metered(ours, theirs)] * 3)
        return check_fidelity("c", 1, fidelity_of(record, None))

    assert state(700.0, 690.0).state == AGREES
    assert state(700.0, 700.0 / 1.45).state == AGREES  # inside the 1.5x bound
    burst = state(1400.0, 700.0)  # a stream delivered in two bursts: twice as fast at the client
    assert burst.state == CONTRADICTED and burst.witness == "meta_info.decode_throughput"
    assert "+100%" in burst.contradiction() and "buffering proxy" in burst.contradiction()
    assert state(700.0, 700.0 * 1.6).state == CONTRADICTED  # a client too slow to read is no figure either
    # the user's report: the server's figures 7352% lower than the suite's
    assert "+7352%" in state(74.52 * 100, 100.0).contradiction()


def test_without_a_figure_of_the_servers_the_fidelity_is_unchecked_and_says_why(tmp_path: Path):
    record = ConfigSpeed("baseline", 1, samples=[_metered(700.0, None)])
    found = check_fidelity("baseline", 1, fidelity_of(record, tmp_path / "missing.log"))
    assert found.state == UNCHECKED and "--enable-metrics" in found.why and "no single-request decode lines" in found.why
    concurrent = check_fidelity("baseline", 4, fidelity_of(ConfigSpeed("baseline", 4, samples=[_sample(700.0, 1.0)]), None))
    assert concurrent.state == UNCHECKED and "concurrency 4" in concurrent.why


def _judge_over(record: ConfigSpeed, tmp_path: Path):
    from types import SimpleNamespace

    from specgate.deployment import load_deployment
    from specgate.verdicts.judge import Judge

    plan = SimpleNamespace(pool=SimpleNamespace(log_dir=tmp_path), meter=SimpleNamespace(record=lambda c, n: record))
    return Judge(load_deployment("sim"), plan, tmp_path)  # type: ignore[arg-type]


def test_a_pass_resting_on_a_contradicted_figure_fails_for_that_reason(tmp_path: Path):
    from specgate.verdicts.gates import FAIL, NOT_COMPARED, PASS, Verdict

    burst = ConfigSpeed("eagle3-decode", 1, samples=[_metered(1400.0, 700.0)] * 3)
    judge = _judge_over(burst, tmp_path)
    held = judge._held_to_fidelity(Verdict("beats:x", "eagle3-decode", PASS, "2.0x baseline"), ["eagle3-decode"], 1)
    assert held.status == FAIL and held.failed
    assert held.summary.startswith("2.0x baseline — FAILS on fidelity: the server's own figure contradicts")
    assert held.figures["fidelity"]["eagle3-decode"]["state"] == CONTRADICTED
    # a gate that compared nothing stays what it was: never a pass either way
    untouched = judge._held_to_fidelity(Verdict("r", "eagle3-decode", NOT_COMPARED, "none"), ["eagle3-decode"], 1)
    assert untouched.status == NOT_COMPARED and "fidelity" not in untouched.figures


def test_a_pass_the_server_cannot_check_stays_a_pass_and_says_so(tmp_path: Path):
    from specgate.verdicts.gates import PASS, Verdict

    unmetered = ConfigSpeed("eagle3-decode", 1, samples=[_metered(700.0, None)] * 3)
    held = _judge_over(unmetered, tmp_path)._held_to_fidelity(
        Verdict("beats:x", "eagle3-decode", PASS, "1.5x"), ["eagle3-decode"], 1
    )
    assert held.status == PASS
    assert any("fidelity of eagle3-decode's decode tok/s UNCHECKED" in n and "--enable-metrics" in n for n in held.notes)
