"""Hostile runs of the whole gate (issue 11: items 1, 2, 3): a baseline update cancelled
by a signal, a server that hangs mid-run, a server and an environment that used to crash
the session's end. Under each: no stored baseline changed, no process left behind, and a
report whose verdict says what happened."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers import default_sigint

from specgate.report.folder import MARKER
from specgate.resources import SOURCE_ROOT as REPO_ROOT


def digest_tree(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def wait_for(predicate, what, timeout_s=180.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def decode_lines(log):
    return log.read_text(errors="replace").count("Decode batch") if log.exists() else 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cancelled_baseline_update_keeps_the_stored_baseline(sim_deployment, sig):
    d = sim_deployment()
    shutil.copytree(REPO_ROOT / "baselines", d.baselines_dir)
    before = digest_tree(d.baselines_dir)
    assert any(k.startswith("sim/") for k in before)
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag, "SPECGATE_SIM_FAULTS": "eagle3-decode:slowdown=3", "SPECGATE_ALLOW_DIRTY": "1"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    command = [sys.executable, "-m", "specgate.cli", "baseline", "update", str(d.path)]
    command += ["--baselines-dir", str(d.baselines_dir), "--report-dir", str(d.report_dir)]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint
    )
    try:
        # Cancel once the last config is being measured: every earlier figure is in memory.
        wait_for(lambda: decode_lines(d.report_dir / "logs" / "eagle3-decode.log") >= 3, "eagle3-decode to decode")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out[-3000:]
    assert digest_tree(d.baselines_dir) == before, out[-3000:]
    assert "baseline NOT written: the run was interrupted" in out
    report = d.report()
    assert report["overall"] == "INTERRUPTED" and "interrupted" in report["interrupted"]
    assert "before every test ran" in report["interrupted"]  # cancelled mid-measurement, not at teardown
    assert "INTERRUPTED" in (d.report_dir / "report.md").read_text()
    assert not list(d.baselines_dir.rglob("*.tmp"))


def test_hanging_server_fails_its_config_once_and_the_run_ends(sim_deployment, pytester):
    # From its 4th request on, eagle3-decode answers with keep-alives only: no read ever times out.
    d = sim_deployment({"workload": {"request_timeout_s": 2}})
    result = d.run(pytester, faults="eagle3-decode:trickle-after=3")
    assert result.ret == 1
    out = result.stdout.str()
    assert "request_timeout_s = 2 s" in out and "the server hangs" in out
    report = d.report()
    assert report["overall"] == "FAIL"
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 2  # its equivalence and its speed test
    # Hypothesis neither retried nor shrank the case: only the first hang's requests (one case,
    # up to equivalence.concurrency copies of it) ever reached the hung server.
    hung = (d.report_dir / "logs" / "eagle3-decode.log").read_text().count("keep-alives only")
    assert 1 <= hung <= max(d.data["equivalence"]["concurrency"])
    healthy = {r["config"] for r in report["speed"]}
    assert {"baseline", "eagle3-prefill"} <= healthy


def test_session_end_survives_odd_server_info_and_an_unwritable_step_summary(sim_deployment, pytester, tmp_path):
    d = sim_deployment()
    # The previous run's PASS report must not survive into this run.
    d.report_dir.mkdir(parents=True)
    (d.report_dir / "report.md").write_text("# specgate — sim: **PASS**\n")
    (d.report_dir / "report.json").write_text(json.dumps({"overall": "PASS"}))
    (d.report_dir / MARKER).write_text(json.dumps({"format": "specgate-report-folder/1", "written": ["report.md", "report.json"]}))
    summary = tmp_path / "summary-is-a-folder"
    summary.mkdir()
    result = d.run(
        pytester, "--specgate-update-baselines", faults="*:server-info-list", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    out = result.stdout.str()
    assert f"$GITHUB_STEP_SUMMARY ({summary}) NOT written" in out
    report = d.report()
    assert (
        report["overall"] in ("PASS", "FAIL", "PARTIAL")  # an update run compares nothing: PARTIAL
        and (d.report_dir / "report.md").read_text() != "# specgate — sim: **PASS**\n"
    )
    # A server info that is not an object counts as none given; the unwritable summary does not
    # stop the baseline write that follows it.
    assert result.ret == (1 if report["overall"] == "FAIL" else 0), out[-3000:]
    assert "baseline written:" in out
    assert len(list(d.baselines_dir.glob("*/*.json"))) == 1


def test_report_folder_under_a_regular_file_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "--report-dir", str(blocker / "report")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "--report-dir" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("group", [False, True], ids=["specgate", "its-process-group"])
def test_servers_behind_a_wrapper_die_with_a_killed_specgate(sim_deployment, tmp_path, group):
    # `bash -c '…; exit $?'` stays the servers' parent, as docker or torchrun would: the
    # parent-death signal would reach bash, not the server it started. SIGKILL leaves specgate no
    # teardown; SIGKILL of its whole group (`timeout -s KILL`, a CI runner) takes whatever shares it.
    wrapper = ["bash", "-c", '{python} -m specgate.sim "$@"; exit $?', "sglang-wrapper"]
    d = sim_deployment({"launch": {"command": wrapper}})
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag, "SPECGATE_STATE_DIR": str(tmp_path / "state")}
    env["SPECGATE_SIM_FAULTS"] = ""
    command = [sys.executable, "-m", "specgate.cli", "run", str(d.path), "--report-dir", str(d.report_dir)]
    command += ["--baselines-dir", str(d.baselines_dir)]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    logs = [d.report_dir / "logs" / f"{c}.log" for c in ("baseline", "eagle3-prefill", "eagle3-decode")]
    try:
        wait_for(lambda: all(p.exists() and "fired up" in p.read_text(errors="replace") for p in logs), "three servers")
        assert len([p for p in d.leftovers() if "specgate.sim" in p and "bash" not in p]) == 3, d.leftovers()
    finally:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
    # Nothing else runs after the kill: no next start reaps them, the servers go by themselves.
    wait_for(lambda: not d.leftovers(), "the servers of the killed run to be gone", timeout_s=30)
    assert all("specgate (pid" in p.read_text(errors="replace") for p in logs)  # the log says why it ended


def test_a_baseline_needs_every_config_measured_in_full(tmp_path):
    from specgate.deployment import load_deployment
    from specgate.measure.speed import ConfigSpeed, SpeedSample
    from specgate.session import GateSession

    dep = load_deployment(None)

    class Meter:
        results = {}

    sample = SpeedSample(100.0, 0.01, 0.5, 64, 10, None, None, 8)
    for c in dep.configs:
        Meter.results[(c, 1)] = ConfigSpeed(c, 1, [sample] * dep.workload.max_repeats)
    Meter.results[("eagle3-decode", 1)].samples = [sample] * 8  # cancelled after 8 of 30
    gate = GateSession(dep, None, None, Meter(), None, None, None)  # type: ignore[arg-type]
    for c in dep.speculative_configs:
        gate.config_outcomes[("equivalence", c)] = {"passed": 1}
    reason = gate.why_no_baseline()
    assert reason is not None and "eagle3-decode at concurrency 1 (8 of 30)" in reason
    Meter.results[("eagle3-decode", 1)].samples = [sample] * 30
    assert gate.why_no_baseline() is None


def test_a_report_that_cannot_be_built_leaves_an_error_report(tmp_path):
    from specgate.plugin import _write_error_report

    messages = []
    (tmp_path / "report.md").write_text("# specgate — sim: **PASS**\n")
    _write_error_report(tmp_path, ValueError("invalid literal for int() with base 10: 'two'"), messages)
    assert json.loads((tmp_path / "report.json").read_text())["overall"] == "ERROR"
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("# specgate: ERROR") and "'two'" in text
    assert messages and "report NOT built" in messages[0]
