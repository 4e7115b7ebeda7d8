"""What `specgate check` says a run's context buckets will cost (specgate/cli/bucket_cost.py):
their requests and tokens, and a bucket whose requests can outlast the client's request timeout."""

from __future__ import annotations

import tomli_w

from specgate.cli.bucket_cost import ASSUMED_PREFILL_TPS, TIMEOUT_HEADROOM, timeout_warnings
from specgate.deployment import load_deployment
from tests.self.helpers import merge, sim_deployment_dict


def _dep(tmp_path, workload):
    data = merge(sim_deployment_dict(), {"workload": workload})
    data["launch"]["args"] += ["--context-length", "65536"]
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return load_deployment(str(path))


def test_a_bucket_whose_estimated_request_can_pass_the_timeout_is_warned_naming_bucket_config_estimate_and_field(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["1K", "32K"], "request_timeout_s": 10, "max_new_tokens": 64})
    speeds = {"baseline": 40.0, "eagle3-prefill": 16.0, "eagle3-decode": 80.0}
    (warning,) = timeout_warnings(dep, speeds)  # 1K: 0.1 s + 4 s, within half of 10 s; 32K is not
    estimate = 32768 / ASSUMED_PREFILL_TPS + 64 / 16.0
    assert warning.startswith(f"  WARNING: {dep.path}: context bucket 32K: a request of config 'eagle3-prefill' ")
    assert f"estimated at {estimate:.1f} s" in warning and "calibrated 16.0 tok/s" in warning
    assert "workload.request_timeout_s = 10 s" in warning
    assert f"at least {int(estimate * TIMEOUT_HEADROOM) + 1}" in warning
    # Without a calibration the prefill alone is the estimate, said so.
    (alone,) = timeout_warnings(_dep(tmp_path, {"context_buckets": ["32K"], "request_timeout_s": 5}), {})
    assert "its answer not counted: no calibration" in alone and "estimated at 3.3 s" in alone
    # A timeout with room for it says nothing.
    assert timeout_warnings(_dep(tmp_path, {"context_buckets": ["1K", "32K"], "request_timeout_s": 300}), speeds) == []


def test_check_prints_the_timeout_warning(tmp_path, capsys, monkeypatch):
    from specgate.cli import main

    monkeypatch.chdir(tmp_path)
    _dep(tmp_path, {"context_buckets": ["32K"], "request_timeout_s": 5})
    assert main(["check", "dep.toml"]) == 0
    out = capsys.readouterr().out
    assert "context bucket 32K: a request of config" in out and "Raise workload.request_timeout_s to at least 6.6 (2x" in out


def test_each_buckets_cost_counts_the_warmup_its_meter_really_runs(tmp_path, capsys, monkeypatch):
    """check's per-bucket lines said "(warmup not counted)"; each bucket's meter warms every server
    up on its own prompts (3 to 12 requests at sim.toml's workload.warmup), which they now count."""
    from specgate.cli import main

    monkeypatch.chdir(tmp_path)
    _dep(tmp_path, {"context_buckets": ["32K"], "context_repeats": 3})
    assert main(["check", "dep.toml"]) == 0
    out = capsys.readouterr().out
    # 3 servers: 9 measured, 3 x 3 to 3 x 12 warmup.
    # "9 measured request(s) and 3 to 12 warmup request(s) per server" read as 9 measured per server.
    assert "32K: 9 measured request(s) (3 per server) and 3 to 12 warmup request(s) per server (workload.warmup), " \
        "18 to 45 request(s) in all: " \
        f"about {18 * 32768:,} to {45 * 32768:,} prompt and {18 * 64:,} to {45 * 64:,} answer tokens" in out, out


def test_the_warmup_bounds_check_states_are_those_the_meter_sends(tmp_path):
    from types import SimpleNamespace

    from specgate.measure.speed import SpeedMeter, warmup_requests

    dep = _dep(tmp_path, {"context_buckets": ["1K"]})
    fewest, most = warmup_requests(dep.workload.warmup)
    for figures, expected in (([100.0], fewest), ([100.0, 150.0], most)):  # settled at once / never
        meter = SpeedMeter(dep, 1024)
        sent = iter(figures * 100)
        meter._round = lambda server, concurrency, index, sent=sent: [SimpleNamespace(decode_tps=next(sent))]  # type: ignore[method-assign]
        meter._built = ([], [], 0, "")
        server = SimpleNamespace(config="baseline", handle=SimpleNamespace(base_url="u", pid=len(figures)))
        record = meter.warm_up(server, 1)  # type: ignore[arg-type]
        assert record is not None and record.requests == expected


def test_the_gpu_time_counts_the_warmup_too(tmp_path, monkeypatch):
    import specgate.verdicts.planned
    from specgate.cli.bucket_cost import context_cost, request_seconds

    speeds = {"baseline": 40.0, "eagle3-prefill": 16.0, "eagle3-decode": 80.0}
    monkeypatch.setattr(specgate.verdicts.planned, "decode_speeds", lambda dep, where: speeds)
    dep = _dep(tmp_path, {"context_buckets": ["8K"], "context_repeats": 3, "max_new_tokens": 64})
    (line,) = [x for x in context_cost(dep) if x.strip().startswith("8K:")]
    per_request = sum(request_seconds(8192, 64, tps) for tps in speeds.values())
    assert f"about {per_request * (3 + 3) / 60:.1f} to {per_request * (3 + 12) / 60:.1f} GPU-minute(s)" in line, line


def test_a_sub_second_estimate_asks_for_a_timeout_at_twice_it_not_for_a_whole_second(tmp_path):
    """A 1K bucket's prefill alone is ~0.1 s: the warning asked for "at least 1 (2x the
    estimate)", ten times the estimate; it now asks for twice it, to a tenth of a second."""
    (warning,) = timeout_warnings(_dep(tmp_path, {"context_buckets": ["1K"], "request_timeout_s": 0.15}), {})
    assert "estimated at 0.1 s" in warning
    assert "at least 0.3 (2x the estimate, rounded up)" in warning, warning  # 2 x 0.1024 s = 0.2048 s
