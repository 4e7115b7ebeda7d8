"""`specgate run` starts pytest in its own process after reading the deployment, which imports
pytest plugins' packages (specgate, Hypothesis, anyio through httpx): pytest warned on every run
that they "cannot be rewritten". The CLI names those modules' warnings off, and no other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_STARTED_AS_THE_CLI = """
import sys
import anyio, hypothesis  # what reading a deployment imports before pytest starts
import pytest
from specgate.cli.run import _imported_plugins_not_rewritten
extra = _imported_plugins_not_rewritten() if sys.argv[1] == "cli" else []
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:specgate.plugin", "test_one.py", *extra]))
"""


def _run(tmp_path: Path, how: str) -> str:
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    done = subprocess.run([sys.executable, "-c", _STARTED_AS_THE_CLI, how], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_cli_run_prints_no_rewrite_warnings_for_what_it_imported_itself(tmp_path):
    assert "cannot be rewritten; hypothesis" in _run(tmp_path, "plain")  # the warning this silences
    out = _run(tmp_path, "cli")
    assert "cannot be rewritten" not in out and "1 passed" in out, out
