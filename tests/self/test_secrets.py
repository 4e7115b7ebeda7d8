"""API keys: the servers get theirs from an environment variable the deployment names, the client
sends it, and it appears nowhere specgate writes or prints (the simulator enforces it as SGLang does)."""

from __future__ import annotations

import os

import pytest

from specgate.client import GenerateRequest, curl_command
from specgate.errors import DeploymentError
from specgate.secrets import redact
from tests.self.test_side_by_side import _dep

KEY = "sk-specgate-test-7f3a9c21e5"


def test_a_keyed_server_is_gated_and_the_key_is_written_nowhere(sim_deployment, pytester):
    d = sim_deployment({"launch": {"api_key_env": "SPECGATE_TEST_API_KEY"}})
    result = d.run(pytester, "-k", "equivalence or speed or beats", env={"SPECGATE_TEST_API_KEY": KEY})
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert KEY not in result.stdout.str() + result.stderr.str()
    leaked = [p for p in d.report_dir.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []
    logs = "".join(p.read_text() for p in (d.report_dir / "logs").glob("*.log"))
    assert "--api-key ***" in logs  # the server was given a key, and the kept log masks it


def test_without_the_variable_the_run_says_which_one_to_set(sim_deployment, pytester):
    d = sim_deployment({"launch": {"api_key_env": "SPECGATE_TEST_API_KEY"}})
    os.environ.pop("SPECGATE_TEST_API_KEY", None)
    result = d.run(pytester, "-k", "speed and baseline")
    assert result.ret != 0
    assert "launch.api_key_env names SPECGATE_TEST_API_KEY, which is not set" in result.stdout.str()


def test_a_key_in_the_deployment_file_is_refused():
    with pytest.raises(DeploymentError, match="must not hold --api-key"):
        _dep({"launch": {"args": ["--api-key", "abc"]}})
    with pytest.raises(DeploymentError, match="not an environment variable name"):
        _dep({"launch": {"api_key_env": "MY-KEY"}})


def test_reproducers_name_the_variable_and_hide_url_passwords():
    line = curl_command("http://user:hunter2@gpu-box:30000", GenerateRequest(max_new_tokens=4, text="p"), "SGLANG_KEY")
    assert "hunter2" not in line and "user:***@gpu-box" in line and '"Authorization: Bearer $SGLANG_KEY"' in line
    assert redact(f"server_args api_key='{KEY}'", KEY) == "server_args api_key=***"


def test_failed_gates_become_github_annotations_on_a_pull_request(tmp_path):
    import subprocess
    import sys

    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    env = {**os.environ, "GITHUB_ACTIONS": "true", "SPECGATE_SIM_FAULTS": "eagle3-decode:accept-collapse"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "sim", "--report-dir", str(tmp_path / "r"),
         "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "accept_length_floor"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=240,
    )  # fmt: skip
    assert run.returncode == 1
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert any(line.startswith("::error title=specgate FAIL%3A accept%3Aeagle3-decode-accepts-1.8::") for line in errors)
    assert errors[0].startswith("::error title=specgate FAIL::")
    assert all("\n" not in line for line in errors)
    assert any(line.startswith("::error title=specgate FAIL::") for line in errors)


def test_escaped_and_quoted_forms_of_the_key_are_masked_and_short_keys_refused(monkeypatch):
    from specgate.errors import SpecgateError
    from specgate.secrets import api_key

    odd = 'sk\\REV"IEW-123456789'
    line = "server_args=ServerArgs(api_key=" + repr(odd) + ", port=1) " + __import__("json").dumps({"api_key": odd})
    masked = redact(line, odd)
    assert "REV" not in masked and "IEW-123456789" not in masked, masked
    monkeypatch.setenv("SHORT_KEY", "a")
    with pytest.raises(SpecgateError, match="too short to mask safely"):
        api_key("SHORT_KEY")
    assert redact("http://u:p@ss@host:1/x") == "http://u:***@host:1/x"
