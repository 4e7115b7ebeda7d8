"""The first lines a user reads of a run (the CLI's closing line, report.md's head, the GitHub
step summary) say what failed and what to change before anything else: a missing stored
baseline is a next step said after the failure, not the headline of a FAIL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import light_kimi_twin

from specgate.exits import Exit
from specgate.resources import SOURCE_ROOT as REPO_ROOT


def test_a_failure_leads_the_first_lines_and_the_missing_baseline_follows(tmp_path):
    # The Kimi twin without its stored baseline: prefill mode loses to the reference, the
    # diagnosis names decode attention mode, and no baseline is there to compare with.
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "PYTHONPATH": str(REPO_ROOT), "SPECGATE_ALLOW_DIRTY": "1"}
    twin = light_kimi_twin(tmp_path / "deployments")
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(twin),
         "--report-dir", str(tmp_path / "report"), "--baselines-dir", str(tmp_path / "none")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, env=env,
    )
    assert run.returncode == Exit.FAIL, run.stdout[-3000:]
    closing = next(line for line in run.stdout.splitlines() if line.startswith("specgate: FAIL"))
    assert closing.startswith("specgate: FAIL (beats:eagle3-prefill-beats-baseline: FAIL"), closing
    assert "try `--speculative-attention-mode decode`" in closing and "NEXT STEP" not in closing, closing
    lines = run.stdout.splitlines()
    before = lines[lines.index(closing) - 1]  # the closing line is the last word, the next step above it
    assert before.startswith("specgate: NEXT STEP: no stored baseline"), before
    assert not any(line.startswith("specgate: NEXT STEP") for line in lines[lines.index(closing) :]), lines[-5:]
    for text in ((tmp_path / "report" / "report.md").read_text(), summary.read_text()):
        head = text[: text.index("**What to change**") + 200]
        assert "NEXT STEP" not in head and "`--speculative-attention-mode decode`" in head
        assert "**Why FAIL:**" in head and "beats:eagle3-prefill-beats-baseline: FAIL" in head
        assert text.index("**What to change**") < text.index("**NEXT STEP:** no stored baseline")
    import json

    reasons = json.loads((tmp_path / "report" / "report.json").read_text())["overall_reasons"]
    assert not reasons[0].startswith("NEXT STEP") and reasons[-1].startswith("NEXT STEP: no stored baseline")


def test_refused_input_is_bad_input_in_the_label_the_report_and_the_exit_code(tmp_path):
    import json



    # Refused by the plugin once it holds the report folder: a stored baseline that is not JSON.
    broken = tmp_path / "baselines" / "sim" / "broken.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "--report-dir", str(tmp_path / "report"),
         "--baselines-dir", str(tmp_path / "baselines")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert run.returncode == Exit.BAD_INPUT, run.stdout[-2000:] + run.stderr[-2000:]
    closing = run.stdout.strip().splitlines()[-1]
    assert closing.startswith("specgate: BAD INPUT — ") and str(broken) in closing, closing
    assert "ERROR" not in closing and "exit code 4" not in closing
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["overall"] == "BAD INPUT" and str(broken) in report["error"]
    assert report["simulator"] is True  # the deployment was read: a stored document was refused
    assert (tmp_path / "report" / "report.md").read_text().startswith("# specgate: BAD INPUT")


def test_a_refused_fault_injection_is_named_in_the_closing_line(tmp_path):


    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "--report-dir", str(tmp_path / "report")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECGATE_SIM_FAULTS": "nope:diverge-at=5"},
    )
    assert run.returncode == Exit.BAD_INPUT, run.stdout[-2000:] + run.stderr[-2000:]
    closing = run.stdout.strip().splitlines()[-1]
    assert closing.startswith("specgate: BAD INPUT — ") and "SPECGATE_SIM_FAULTS names no config" in closing, closing
    assert "sim.toml:" not in closing  # the variable is wrong, not the deployment file
    # The deployment was read: its refusal says it is the simulator's, as a full report would.
    assert closing.endswith("— SIMULATOR run, not SGLang"), closing
    assert json.loads((tmp_path / "report" / "report.json").read_text())["simulator"] is True
    assert (tmp_path / "report" / "report.md").read_text().startswith("# specgate: BAD INPUT (SIMULATOR run)")


def test_the_failing_configs_lever_leads_and_the_closing_line_says_simulator(sim_deployment, tmp_path):
    # eagle3-decode's drafter collapses; eagle3-prefill is slow as ever but no gate holds it to
    # beating anything: the first screen's lever is eagle3-decode's, not the healthy sibling's.
    d = sim_deployment()
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(d.path), "--report-dir", str(d.report_dir),
         "--baselines-dir", str(tmp_path / "none"), "--allow-uncompared"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECGATE_SIM_FAULTS": "eagle3-decode:accept-collapse",
             "SPECGATE_TEST_TAG": d.tag},
    )  # fmt: skip
    assert run.returncode == Exit.FAIL, run.stdout[-3000:]
    closing = next(line for line in run.stdout.splitlines() if line.startswith("specgate: FAIL"))
    assert "eagle3-decode: try " in closing and "eagle3-prefill: try" not in closing, closing
    assert closing.endswith("— SIMULATOR run, not SGLang"), closing
    text = (d.report_dir / "report.md").read_text()
    assert text.splitlines()[0].endswith("(SIMULATOR run)")
    levers = text[text.index("**What to change**") :].split("\n\n")[1].splitlines()
    assert levers[0].startswith("- **eagle3-decode**: try "), levers
    assert "**`a drafter" not in text  # prose is no flag: not shown as code
