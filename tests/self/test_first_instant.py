"""A stop signal at the command's first instant: the report folder says INTERRUPTED, never the
previous run's PASS beside a traceback (specgate.interrupts holds a signal until `run` has taken
its folder). The signal is sent by the process itself right after specgate's first line
(SPECGATE_TEST_SIGNAL_AT_START): deterministic, where one timed from outside races the imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import default_sigint

from specgate.interrupts import TEST_START_SIGNAL_ENV
from specgate.report.folder import MARKER


def previous_pass_report(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# specgate — sim: **PASS**\n")
    (folder / "report.json").write_text(json.dumps({"overall": "PASS"}))
    (folder / MARKER).write_text(json.dumps({"format": "specgate-report-folder/1", "written": ["report.md", "report.json"]}))


def specgate_signalled_at_start(sig: signal.Signals, *words: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, TEST_START_SIGNAL_ENV: sig.name, "SPECGATE_ALLOW_DIRTY": "1"}
    return subprocess.run(
        [sys.executable, "-m", "specgate.cli", *words],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, preexec_fn=default_sigint,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_at_the_first_instant_leaves_no_old_pass_report(tmp_path, sig):
    folder = tmp_path / "specgate-report"
    previous_pass_report(folder)
    proc = specgate_signalled_at_start(sig, "run", "sim", "--report-dir", str(folder), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out
    assert "Traceback" not in out and f"specgate: INTERRUPTED (the run was interrupted ({sig.name})" in out
    report = json.loads((folder / "report.json").read_text())
    assert report["overall"] == "INTERRUPTED" and sig.name in report["error"]
    assert (folder / "report.md").read_text().startswith("# specgate: INTERRUPTED")


def test_a_signal_at_the_first_instant_of_a_command_without_a_report_is_one_line(tmp_path):
    proc = specgate_signalled_at_start(signal.SIGTERM, "check", "sim", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.strip() == "specgate: check interrupted (SIGTERM)"


def test_a_second_signal_during_the_shutdown_the_first_began_is_recorded_not_raised():
    """Round 3: Ctrl-C twice (or SIGTERM after Ctrl-C) broke the shutdown into tracebacks, exit 1."""
    import subprocess
    import sys

    code = (
        "import os, signal\n"
        "from specgate import interrupts\n"
        "interrupts.install()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "except KeyboardInterrupt:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # during the shutdown\n"
        "    print('shut down cleanly', interrupts.count())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "shut down cleanly 2" in done.stdout, done.stderr
