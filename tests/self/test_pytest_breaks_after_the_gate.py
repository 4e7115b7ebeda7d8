"""Round 3: a pytest option that fails at the session's end (junitxml to a path it cannot write) lost a
finished run's report with a traceback and exit 1. The report is written first, and the run is ERROR."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from specgate.exits import Exit
from specgate.resources import SOURCE_ROOT as REPO_ROOT


def test_a_plugin_breaking_at_the_session_end_leaves_the_report_and_says_error(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "--report-dir", str(tmp_path / "report"),
         "--", "-k", "beats", "--junitxml=/proc/no-such-dir/junit.xml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=200, env=env,
    )  # fmt: skip
    assert run.returncode == Exit.ERROR, run.stdout[-2000:] + run.stderr[-2000:]
    assert "pytest failed after the gate" in run.stdout + run.stderr
    assert json.loads((tmp_path / "report" / "report.json").read_text())["overall"] in ("PASS", "PARTIAL")
