"""A config that failed to boot has its cause and the last lines of its server log in report.md
and report.json, masked and escaped like other server text, not only in the test error
(issue 32: 9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tomli_w
from helpers import FAST, merge, sim_deployment_dict

from specgate.report.markdown import render_markdown
from specgate.report.model import read_report
from specgate.resources import SOURCE_ROOT as REPO_ROOT

KEY = "sk-boot-failure-key-0123456789"
# The simulator logs the flags it ignores: a way to put server text of our choosing into its log.
ODD = "odd\x1b[2Jvalue\u202e"


def test_a_failed_boot_has_its_cause_and_log_tail_in_the_report(tmp_path):
    data = merge(sim_deployment_dict(), FAST)
    data["launch"]["api_key_env"] = "SPECGATE_TEST_BOOT_KEY"
    data["configs"]["eagle3-prefill"]["args"] += ["--no-such-flag", ODD]
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    # Dies while booting, every time: the marker file it would create has no folder to go in.
    faults = f"eagle3-prefill:boot-crash-once={tmp_path / 'no-such-folder' / 'marker'}"
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(tmp_path / "dep.toml"), "--report-dir", str(tmp_path / "r"),
         "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "speed and c1"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECGATE_SIM_FAULTS": faults, "SPECGATE_TEST_BOOT_KEY": KEY},
    )  # fmt: skip
    shown = run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == 1, shown
    raw = (tmp_path / "r" / "report.json").read_text()
    md = (tmp_path / "r" / "report.md").read_text()
    assert KEY not in raw and KEY not in md and KEY not in run.stdout + run.stderr
    failed = [b for b in json.loads(raw)["boots"] if b["config"] == "eagle3-prefill"]
    assert failed and not any(b["ok"] for b in failed), raw[-2000:]
    first = failed[0]
    assert first["cause"].startswith("'eagle3-prefill' never became ready: ") and "exited with code 1" in first["cause"]
    assert any("FileNotFoundError" in line for line in first["log_tail"]), first["log_tail"]
    assert any(ODD in line for line in first["log_tail"])  # report.json keeps server text raw (masked)
    assert any("--api-key ***" in line for line in first["log_tail"]), first["log_tail"]
    # report.md: the cause, then the log's last lines, escaped as every server text there.
    section = md.split("## Boot failures", 1)[1].split("\n## ", 1)[0]
    assert f"**eagle3-prefill** after {first['seconds']:.1f} s: {first['cause']}" in section, section
    assert "lines of its log (`logs/eagle3-prefill.log`)" in section and "FileNotFoundError" in section
    assert "odd\\x1b[2Jvalue\\u202e" in section and "\x1b" not in md and "\u202e" not in md
    assert md.index("## Boot failures") < md.index("## Decode speed")
    # The terminal's FAILED line gives the cause and points to the report for the log.
    assert "specgate: eagle3-prefill FAILED to boot after " in run.stderr and "report.md" in run.stderr, run.stderr[-2000:]
    # What report.json holds renders the same (the Markdown is made from the typed document).
    assert "## Boot failures" in render_markdown(read_report(tmp_path / "r" / "report.json"))  # type: ignore[arg-type]


def test_a_log_holding_backtick_fences_cannot_close_the_block():
    from specgate.report.markdown import _fenced

    block = _fenced("```\n# heading from a log")
    fence = block.split("text", 1)[0]
    assert len(fence) == 4 and block.endswith("\n" + fence)
