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
    assert "context bucket 32K: a request of config" in out and "Raise workload.request_timeout_s to at least 7" in out
