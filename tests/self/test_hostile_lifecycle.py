"""Hostile runs of the run's lifecycle: the report folder, signals, exit codes and the lock.

Under each: only files specgate wrote are removed, the report on disk says what the exit code
says (an interrupted run's report says INTERRUPTED, whenever the signal came), and no signal is
lost. Each signal is sent at the moment named, found by watching a file or a log line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import default_sigint

from specgate.report.folder import LOCK, MARKER, ReportFolderError, claim

SPEED_OF_BASELINE = ["--", "-k", "speed and baseline"]  # one config, one test: the smallest run


def wait_for(predicate, what, proc=None, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def cli(d, command, *extra):
    """`specgate COMMAND` (run, or baseline for `baseline update`) on `d`, started as a CI job would."""
    words = ["baseline", "update"] if command == "baseline" else [command]
    argv = [sys.executable, "-m", "specgate.cli", *words, str(d.path), "--report-dir", str(d.report_dir)]
    argv += ["--baselines-dir", str(d.baselines_dir), *extra]
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag, "SPECGATE_SIM_FAULTS": "", "SPECGATE_ALLOW_DIRTY": "1"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint
    )


def finish(proc, timeout_s=120):
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out


def reports(folder: Path) -> tuple[dict, str]:
    return json.loads((folder / "report.json").read_text()), (folder / "report.md").read_text()


def previous_pass_report(folder: Path) -> None:
    """What an earlier run left: a PASS report in a folder specgate marked as its own."""
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# specgate — sim: **PASS**\n")
    (folder / "report.json").write_text(json.dumps({"overall": "PASS"}))
    (folder / MARKER).write_text(json.dumps({"format": "specgate-report-folder/1", "written": ["report.md", "report.json"]}))


# --- the report folder --------------------------------------------------------------------------
def test_a_report_dir_holding_the_projects_files_is_refused_untouched(tmp_path):
    """report_dir = "." in specgate.toml: the project's own logs and report are no run's to remove."""
    (tmp_path / "specgate.toml").write_text('report_dir = "."\n')
    (tmp_path / "logs").mkdir()
    own = {"logs/app.log": "the app's log\n", "report.md": "# our own report\n", "report.json": "{}\n"}
    for name, text in own.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"report_dir in {tmp_path / 'specgate.toml'} ({tmp_path})" in proc.stderr
    assert "files specgate did not write" in proc.stderr and "Traceback" not in proc.stderr
    assert {name: (tmp_path / name).read_text() for name in own} == own
    assert not (tmp_path / MARKER).exists() and not (tmp_path / LOCK).exists()


def test_a_marked_folder_loses_only_what_specgate_wrote(tmp_path):
    folder = tmp_path / "r"
    first = claim(folder, "--report-dir")
    (folder / "logs").mkdir()
    (folder / "logs" / "baseline.log").write_text("server log")
    (folder / "report.json").write_text("{}")
    first.release()
    (folder / "logs" / "app.log").write_text("the user's")  # put there between runs: not specgate's
    (folder / "notes.txt").write_text("the user's")
    second = claim(folder, "--report-dir")
    try:
        assert not (folder / "logs" / "baseline.log").exists() and not (folder / "report.json").exists()
        assert (folder / "logs" / "app.log").read_text() == "the user's" == (folder / "notes.txt").read_text()
    finally:
        second.release()


def _marked_folder(tmp_path: Path) -> Path:
    """A report folder an earlier run left, its server log listed in the manifest."""
    folder = tmp_path / "r"
    first = claim(folder, "--report-dir")
    (folder / "logs").mkdir()
    (folder / "logs" / "baseline.log").write_text("server log")
    first.release()
    return folder


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path, link):
    folder = _marked_folder(tmp_path)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's")
    (folder / LOCK).unlink()
    (folder / LOCK).symlink_to(precious) if link == "symlink" else os.link(precious, folder / LOCK)
    with pytest.raises(ReportFolderError, match=f"{folder / LOCK}: .*link"):
        claim(folder, "--report-dir")
    assert precious.read_text() == "the user's" and (folder / "logs" / "baseline.log").exists()


def test_a_logs_folder_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path):
    folder = _marked_folder(tmp_path)
    elsewhere = tmp_path / "userlogs"
    elsewhere.mkdir()
    (elsewhere / "baseline.log").write_text("the user's")
    for log in (folder / "logs").iterdir():
        log.unlink()
    (folder / "logs").rmdir()
    (folder / "logs").symlink_to(elsewhere)
    with pytest.raises(ReportFolderError, match=f"{folder / 'logs'}: .*symbolic link"):
        claim(folder, "--report-dir")
    assert [p.name for p in elsewhere.iterdir()] == ["baseline.log"]
    assert (elsewhere / "baseline.log").read_text() == "the user's"


# --- one run at a time --------------------------------------------------------------------------
HOLD = (
    "import sys, time; from pathlib import Path; from specgate.report.folder import claim; "
    "claim(Path(sys.argv[1]), '--report-dir'); print('held', flush=True); time.sleep(120)"
)


def test_a_second_run_on_a_folder_in_use_is_refused_naming_the_holder(sim_deployment):
    d = sim_deployment()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(d.report_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (d.report_dir / "report.json").write_text('{"overall": "PASS"}')  # the holder's, mid-run
        second = cli(d, "run")
        out = finish(second)
        assert second.returncode == 2, out
        assert f"in use by pid {holder.pid}" in out and "--report-dir" in out
        assert (d.report_dir / "report.json").read_text() == '{"overall": "PASS"}'
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_killed_run_is_taken_over_and_said(tmp_path):
    folder = tmp_path / "r"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    taken = claim(folder, "--report-dir")
    try:
        assert any(f"took over the report folder's lock of pid {holder.pid}" in note for note in taken.notes)
    finally:
        taken.release()
    with pytest.raises(ReportFolderError, match="is a file, not a folder"):
        claim(folder / MARKER, "--report-dir")


# --- signals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_pytest_starts_ends_cleanly_and_no_old_report_stands(sim_deployment, sig):
    d = sim_deployment()
    previous_pass_report(d.report_dir)
    proc = cli(d, "run")
    assert proc.stdout.readline().startswith("deployment ")  # described: pytest is being imported
    proc.send_signal(sig)
    out = finish(proc)
    assert proc.returncode == 5, out
    assert "Traceback" not in out and "INTERRUPTED" in out
    report, markdown = reports(d.report_dir)
    assert report["overall"] == "INTERRUPTED" and sig.name in report["error"]
    assert markdown.startswith("# specgate: INTERRUPTED")


def test_a_signal_right_after_the_report_is_written_marks_it_interrupted(sim_deployment):
    d = sim_deployment()
    proc = cli(d, "run", *SPEED_OF_BASELINE)
    wait_for(lambda: (d.report_dir / "report.json").exists(), "report.json", proc)
    proc.send_signal(signal.SIGHUP)
    out = finish(proc)
    assert proc.returncode == 5, out[-3000:]
    report, markdown = reports(d.report_dir)
    assert report["overall"] == "INTERRUPTED" and "SIGHUP" in report["interrupted"]
    assert "**INTERRUPTED**" in markdown.splitlines()[0]
    assert "specgate: INTERRUPTED" in out and "Traceback" not in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_after_the_closing_line_leaves_the_exit_code_the_reports(sim_deployment, monkeypatch, sig):
    """The last moment a signal can hit (the command's outcome final, the process about to exit),
    reached deterministically through the interrupts' test hook: it is recorded and said, and the
    process exits by the report's verdict, not killed by the signal beside a report saying PARTIAL."""
    from specgate.interrupts import TEST_SIGNAL_ENV

    d = sim_deployment()
    monkeypatch.setenv(TEST_SIGNAL_ENV, sig.name)
    proc = cli(d, "run", *SPEED_OF_BASELINE)
    out = finish(proc)
    report, markdown = reports(d.report_dir)
    assert report["overall"] == "PARTIAL" and markdown.startswith("# specgate") and "PARTIAL" in markdown.splitlines()[0]
    assert proc.returncode == 4, out[-3000:]  # PARTIAL's exit code
    assert f"{sig.name} came after the run's outcome was final" in out and "Traceback" not in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_from_the_closing_line_to_the_exit_never_kill_the_process(sim_deployment, sig):
    """Past the hook above: Python's finalization gives a handled signal back to its default
    action, so one in the process's last milliseconds killed it (-2) beside a report that said
    PARTIAL. Signals sent without pause from the closing line until the process is gone."""
    d = sim_deployment()
    proc = cli(d, "run", *SPEED_OF_BASELINE)
    said: list[str] = []
    for line in proc.stdout:
        said.append(line)
        if line.startswith("specgate: PARTIAL"):
            break
    while proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            break
        time.sleep(0.002)
    out = "".join(said) + finish(proc)
    report, _ = reports(d.report_dir)
    # The closing line's verdict and code, never -2 or -15: the outcome was settled before it was said.
    assert (report["overall"], proc.returncode) == ("PARTIAL", 4), (proc.returncode, out[-3000:])
    assert "Traceback" not in out


def test_sigint_while_a_baseline_update_writes_its_report(sim_deployment):
    """Whether the baseline was written before the signal or not, the report and the exit say
    INTERRUPTED, and the report's first line says which."""
    d = sim_deployment()
    proc = cli(d, "baseline")
    wait_for(lambda: (d.report_dir / "report.json").exists(), "report.json", proc, timeout_s=180)
    proc.send_signal(signal.SIGINT)
    out = finish(proc, timeout_s=180)
    assert proc.returncode == 5, out[-3000:]
    report, markdown = reports(d.report_dir)
    assert report["overall"] == "INTERRUPTED" and "**INTERRUPTED**" in markdown.splitlines()[0]
    stored = list(d.baselines_dir.glob("*/*.json"))
    lead = report["overall_reasons"][0]
    assert lead.startswith("BASELINE RECORDED: " if stored else "BASELINE NOT RECORDED: "), lead
    assert "PASS" not in out.splitlines()[-1]


def test_three_sigints_mid_run_end_in_one_interrupted_report(sim_deployment):
    d = sim_deployment()
    previous_pass_report(d.report_dir)
    proc = cli(d, "run")
    log = d.report_dir / "logs" / "eagle3-decode.log"
    wait_for(lambda: log.exists() and "Decode batch" in log.read_text(errors="replace"), "a decode step", proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)  # while the first one unwinds
    wait_for(lambda: (d.report_dir / "report.json").exists(), "report.json", proc)
    proc.send_signal(signal.SIGINT)  # while the report is written
    out = finish(proc)
    assert proc.returncode == 5, out[-3000:]
    assert "Traceback" not in out and "before the gate started" not in out
    report, _ = reports(d.report_dir)
    assert report["overall"] == "INTERRUPTED" and "before every test ran" in report["interrupted"]


# --- baseline destinations and the update's verdict ----------------------------------------------
def test_a_baseline_update_to_an_unwritable_folder_is_refused_before_anything_boots(sim_deployment, tmp_path):
    d = sim_deployment()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    d.baselines_dir = blocker / "baselines"
    proc = cli(d, "baseline")
    out = finish(proc)
    assert proc.returncode == 2, out
    assert f"--baselines-dir ({blocker / 'baselines'})" in out and "a file, not a folder" in out
    assert not (d.report_dir / "logs").exists() or not list((d.report_dir / "logs").iterdir())


def test_an_update_that_stored_nothing_fails():
    from specgate.report.build import TestTally, overall_verdict
    from specgate.verdicts.gates import RunVerdict

    verdict, reasons = overall_verdict(TestTally(3, 0, 0, 0), [], {"baseline_not_written": "read-only file system"})
    assert verdict == RunVerdict.FAIL and "stored nothing" in reasons[0]


# --- collect-only and the sweep -----------------------------------------------------------------
def test_collect_only_leaves_the_report_folder_alone(sim_deployment, pytester):
    d = sim_deployment()
    previous_pass_report(d.report_dir)
    result = d.run(pytester, "--co")
    assert result.ret == 0
    assert (d.report_dir / "report.md").read_text() == "# specgate — sim: **PASS**\n"
    assert not (d.report_dir / LOCK).exists()


def test_ctrl_c_in_a_sweep_keeps_its_state_and_says_how_to_resume(sim_deployment):
    d = sim_deployment(
        {"sweep": {"num_steps": [1, 2], "parallel": 2, "repeats": 4, "env": {"SGLANG_SIMULATE_ACC_LEN": ["1.5", "3.0"]}}}
    )
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag, "SPECGATE_SIM_FAULTS": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specgate.cli", "sweep", str(d.path), "--report-dir", str(d.report_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,
    )
    state = d.report_dir / "sweep.json"

    def one_point_saved():
        try:
            return bool(json.loads(state.read_text())["points"])
        except (OSError, ValueError, KeyError):
            return False

    wait_for(one_point_saved, "the first measured point in sweep.json", proc)
    proc.send_signal(signal.SIGINT)
    out = finish(proc)
    assert proc.returncode == 5, out[-3000:]
    assert "Traceback" not in out and "run the same command again to resume" in out and str(state) in out
    assert json.loads(state.read_text())["points"]


@pytest.mark.parametrize("command", ["calibrate", "sweep"])
def test_calibrate_and_sweep_refuse_a_symlinked_logs_folder_before_anything_boots(tmp_path, monkeypatch, capsys, command):
    from specgate.cli import main

    monkeypatch.setenv("SPECGATE_ALLOW_DIRTY", "1")
    elsewhere = tmp_path / "userlogs"
    elsewhere.mkdir()
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "logs").symlink_to(elsewhere)
    assert main([command, "sim", "--report-dir", str(tmp_path / "r")]) == 2
    assert f"{tmp_path / 'r' / 'logs'}: is a symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []


def test_ctrl_c_while_init_waits_on_a_url_ends_in_one_line(tmp_path):
    """init asks each url's /get_server_info (up to a minute): a Ctrl-C there was a traceback."""
    import select
    import socket

    listeners = [socket.socket(), socket.socket()]
    for listener in listeners:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # takes the connection, never answers
    spec, ref = (f"http://127.0.0.1:{listener.getsockname()[1]}" for listener in listeners)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specgate.cli", "init", str(tmp_path), "--url", spec, "--reference-url", ref,
             "--model", "M"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint,
        )  # fmt: skip
        wait_for(lambda: select.select(listeners, [], [], 0)[0], "init's request to a url", proc, timeout_s=60)
        proc.send_signal(signal.SIGINT)
        out = finish(proc, timeout_s=60)
    finally:
        for listener in listeners:
            listener.close()
    assert proc.returncode == 5 and "Traceback" not in out, out
    assert "specgate: init interrupted (Ctrl-C)" in out and not (tmp_path / "specgate.toml").exists()


def _no_space(*_args):
    """A write to a full disk."""
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_refusal_leaves_no_previous_pass_report_standing(tmp_path, monkeypatch):
    """No space for the lock (so no run holds the folder): the refusal removes the previous run's
    report, as the unlink frees space, instead of leaving its PASS beside an exit 2."""
    from specgate.report import folder as report_folder

    previous_pass_report(tmp_path / "r")
    monkeypatch.setattr(report_folder, "_open_lock", _no_space)
    with pytest.raises(ReportFolderError, match="No space left on device.*previous run's report .* was removed"):
        claim(tmp_path / "r", "--report-dir")
    assert not (tmp_path / "r" / "report.md").exists() and not (tmp_path / "r" / "report.json").exists()


def test_a_full_disk_after_the_lock_is_held_leaves_no_previous_pass_report_standing(tmp_path, monkeypatch):
    """The lock file is kept between runs, so on a full disk it opens and locks, and writing this
    run's pid into it fails: the previous run's report is already gone by then."""
    from specgate.report import folder as report_folder

    previous_pass_report(tmp_path / "r")
    (tmp_path / "r" / LOCK).write_text("{}")  # left by the previous run
    monkeypatch.setattr(report_folder, "_write_holder", _no_space)
    with pytest.raises(ReportFolderError, match="No space left on device"):
        claim(tmp_path / "r", "--report-dir")
    assert not (tmp_path / "r" / "report.md").exists() and not (tmp_path / "r" / "report.json").exists()
