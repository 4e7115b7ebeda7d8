"""A newcomer's first run in their own repository (issue 32, item 7): `specgate init --launch`
on a machine without SGLang, then a plain `pytest` there; `specgate check`'s word on the launch
command's Python; init's and the report's next step; what a baseline update says it stored.

This machine has no SGLang: every `python -m sglang.launch_server` here cannot boot.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

LAUNCH = (
    "python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path D --speculative-num-steps 2"
)
USERS_TEST = "def test_their_own():\n    assert 1 + 1 == 2\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SPECGATE_", "PYTEST_"))}


def _run(args: list[str], cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def _specgate(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "specgate.cli", *args], cwd)


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd)


@pytest.fixture
def launched(tmp_path: Path) -> Path:
    """A fresh repository after `specgate init --launch "python -m sglang.launch_server ..."`, with a
    test of the user's own."""
    repo = tmp_path / "their-repo"
    repo.mkdir()
    init = _specgate("init", "--launch", LAUNCH, cwd=repo)
    assert init.returncode == 0, init.stdout + init.stderr
    (repo / "test_theirs.py").write_text(USERS_TEST)
    return repo


def test_plain_pytest_after_init_launch_runs_the_users_tests_and_passes_without_sglang(launched):
    result = _pytest(launched)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout and "failed" not in result.stdout, result.stdout[-3000:]
    assert not (launched / "specgate-report" / "report.json").exists()  # no server, no session, no report
    assert tomllib.loads((launched / "specgate.toml").read_text())["gate"] is False


def test_a_gate_asked_for_where_it_cannot_boot_is_skipped_with_one_reason_and_specgate_run_fails(launched):
    settings = launched / "specgate.toml"
    settings.write_text(settings.read_text().replace("gate = false", "gate = true ", 1))
    result = _pytest(launched)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # The user's own test passes and every gate test is skipped (their number grows with the suite).
    assert re.search(r"\b1 passed, \d+ skipped in", result.stdout), result.stdout[-3000:]
    reasons = [line for line in result.stdout.splitlines() if "gate SKIPPED" in line]
    assert len(reasons) == 1, result.stdout[-3000:]
    assert "cannot import 'sglang'" in reasons[0] and "specgate run" in reasons[0], reasons
    # Asked for by name (as on the GPU runner) the gate is never skipped: it fails, loudly.
    assert _run(["git", "init", "-q"], launched).returncode == 0
    run = _specgate("run", cwd=launched)
    assert run.returncode == 1 and "FAIL" in run.stdout and "gate SKIPPED" not in run.stdout, run.stdout[-3000:]
    # The cause leads (not each test's 'exited with code 1'): one line for every config it stopped.
    closing = next(line for line in run.stdout.splitlines() if line.startswith("specgate: FAIL"))
    assert closing.startswith("specgate: FAIL (did not boot: baseline, eagle3-prefill, eagle3-decode — "), closing
    assert "No module named 'sglang'" in closing, closing


def test_init_launch_names_the_baseline_update_to_run_on_the_gpu_runner(launched, tmp_path):
    again = _specgate("init", "--launch", LAUNCH, "--force", cwd=launched)
    assert again.returncode == 0, again.stderr
    closing = again.stdout[again.stdout.index("next:") :]
    assert "specgate baseline update deployments/mine.toml" in closing and "GPU runner" in closing, closing
    served = tmp_path / "served"
    served.mkdir()
    by_url = _specgate(
        "init", "--url", "http://gpu:30001", "--reference-url", "http://gpu:30000", "--model", "M", cwd=served
    )
    assert by_url.returncode == 0 and "specgate baseline update deployments/mine.toml" in by_url.stdout, by_url.stdout
    assert tomllib.loads((served / "specgate.toml").read_text())["gate"] is False


def _with_command(repo: Path, command: list[str], env: dict[str, str] | None = None) -> None:
    path = repo / "deployments" / "mine.toml"
    data = re.sub(r"(?m)^command = .*$", lambda _: f"command = {json.dumps(command)}", path.read_text(), count=1)
    data = re.sub(r"(?m)^env = .*\n", "", data)
    if env:
        data = data.replace("[launch]\n", "[launch]\nenv = " + "{ " + ", ".join(f'{k} = "{v}"' for k, v in env.items()) + " }\n")
    path.write_text(data)


@pytest.mark.parametrize(
    "command",
    [
        ["python", "-m", "sglang.launch_server"],
        ["python3", "-m", "sglang.launch_server"],
        [sys.executable, "-u", "-m", "sglang.launch_server"],
        ["env", "CUDA_VISIBLE_DEVICES=0", "python3", "-m", "sglang.launch_server"],
        ["bash", "-c", 'cd /tmp && exec python3 -m sglang.launch_server "$@"', "x"],
    ],
    ids=["python", "python3", "absolute", "env", "bash-c"],
)
def test_check_warns_where_the_commands_python_cannot_import_sglang(launched, command):
    _with_command(launched, command)
    check = _specgate("check", cwd=launched)
    assert check.returncode == 0, check.stderr
    warnings = [line for line in check.stdout.splitlines() if "WARNING" in line]
    assert any("cannot import 'sglang'" in w and "no server boots" in w for w in warnings), check.stdout


def test_check_names_a_missing_python_and_is_quiet_where_it_imports(launched):
    _with_command(launched, ["env", "CUDA_VISIBLE_DEVICES=0", "/nowhere/venv/bin/python", "-m", "sglang.launch_server"])
    missing = _specgate("check", cwd=launched)
    assert "'/nowhere/venv/bin/python' not found on this host" in missing.stdout, missing.stdout
    fake = launched / "fake"
    (fake / "sglang").mkdir(parents=True)
    (fake / "sglang" / "__init__.py").write_text("")
    for python in ("{python}", "python3"):  # the server's environment is the one asked: launch.env's PYTHONPATH
        _with_command(launched, [python, "-m", "sglang.launch_server"], env={"PYTHONPATH": "{repo}/fake"})
        found = _specgate("check", cwd=launched)
        assert found.returncode == 0 and "WARNING" not in found.stdout, found.stdout
    sim = _specgate("check", "sim", cwd=launched)
    assert sim.returncode == 0 and "WARNING" not in sim.stdout, sim.stdout


def test_a_baseline_update_says_what_it_stored_and_a_run_without_one_names_the_update(sim_deployment, capsys):
    from specgate.cli.closing import close_run

    recorded = sim_deployment()
    result = recorded.run(None, "--specgate-update-baselines")
    assert result.ret == 0, "\n".join(result.outlines[-40:])
    (stored,) = (recorded.baselines_dir / "sim").glob("*.json")
    head = (recorded.report_dir / "report.md").read_text().splitlines()[:4]
    assert head[0].startswith("# specgate") and "BASELINE RECORDED" in "\n".join(head), head
    lead = next(line for line in head[1:] if line.strip())
    assert str(stored) in lead and "samples of 3 config(s)" in lead, lead
    assert all(name in lead for name in ("baseline", "eagle3-prefill", "eagle3-decode")), lead
    report = recorded.report()
    assert report["overall_reasons"][0].startswith("BASELINE RECORDED: ")
    for text in ((recorded.report_dir / "report.md").read_text(), json.dumps(report)):
        assert "record one with" not in text and "no stored baseline" not in text

    fresh = sim_deployment()  # the same deployment, nothing stored
    result = fresh.run(None)
    assert result.ret == 0, "\n".join(result.outlines[-40:])  # uncompared allowed (the helper's default)
    lines = [line for line in (fresh.report_dir / "report.md").read_text().splitlines() if line.strip()]
    assert "NEXT STEP" in lines[1] and "specgate baseline update" in lines[1], lines[:3]
    assert close_run(fresh.report_dir, 0, 0.0, True) == 0
    closing = capsys.readouterr().out.strip().splitlines()[-1]
    assert closing.startswith("specgate: PARTIAL (NEXT STEP: ") and "specgate baseline update" in closing, closing
