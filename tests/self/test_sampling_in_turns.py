"""Sampling equivalence on the user's own shape: servers that take turns (launch.coexist = false, the
Kimi deployment) are checked, each speculative config drawing its samples while it is up and its
reference scoring them in its own turn; and a headline check that did not run is never a PASS
unless the deployment turned it off itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import light_kimi_twin

from specgate.resources import SOURCE_ROOT as REPO_ROOT


def _gate(tmp_path, deployment, *extra, faults: str = ""):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECGATE_SIM_FAULTS": faults}
    report = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO_ROOT / "tests" / "gate"), "-p", "specgate.plugin", "-q",
         f"--specgate-deployment={deployment}", f"--specgate-report-dir={report}",
         f"--specgate-baselines-dir={tmp_path / 'none'}", "--specgate-case-seed=0", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, env=env,
    )  # fmt: skip
    return run, json.loads((report / "report.json").read_text())


def test_the_kimi_twin_checks_sampling_in_turns_and_a_sampler_fault_fails_it(tmp_path):
    import tomllib

    import tomli_w

    twin = light_kimi_twin(tmp_path / "deployments")
    data = tomllib.loads(twin.read_text())
    # One setting a fault of the temperature shows at, on fewer draws: the twin decodes at ~11 ms a token.
    data["sampling"] = {"enabled": True, "skip": ["t1.0-penalties", "top_p0.9", "top_k20", "min_p0.1"], "prompts": 6, "samples": 48, "max_new_tokens": 16}
    twin.write_text(tomli_w.dumps(data))
    run, report = _gate(tmp_path, twin, "-k", "sampling", faults="eagle3-decode:temperature-twice")
    rows = {r["config"]: r for r in report["sampling"]}
    assert rows["eagle3-decode"]["status"] == "FAIL", rows["eagle3-decode"]
    assert rows["eagle3-prefill"]["status"] == "PASS", rows["eagle3-prefill"]
    assert run.returncode == 1, run.stdout[-2000:]
    assert report["overall"] == "FAIL"


def test_a_headline_check_that_did_not_run_is_no_pass_unless_turned_off(tmp_path):
    from dataclasses import replace

    from specgate.deployment import load_deployment
    from specgate.plugin import sampling_not_waived

    shipped = load_deployment("sim-stored-reference")  # turns sampling off itself, said in the report
    stored = replace(shipped, sampling=replace(shipped.sampling, enabled=True))
    why = "the reference is not booted"
    assert sampling_not_waived(stored, why) == why  # not the deployment's choice: PARTIAL
    off = replace(stored, sampling=replace(stored.sampling, enabled=False))
    assert sampling_not_waived(off, why) is None  # turned off by the deployment: waived, and said
    from specgate.verdicts.gates import PASS, Verdict
    from specgate.verdicts.outcome import RunFacts, RunOutcome, TestTally

    passing = Verdict("beats:x", "x", PASS, "fine")

    def verdict(facts):
        return RunOutcome(TestTally(1), facts, (passing,), (), (), (), (), (), ()).verdict

    assert verdict(RunFacts(sampling_not_checked=why)).name == "PARTIAL"
    assert verdict(RunFacts()).name == "PASS"


def test_check_states_the_sampling_settings_it_holds_servers_side_by_side_to():
    """`check` on the shipped sampling deployment (servers side by side) said nothing of sampling
    equivalence, its whole purpose: now it states the settings (logit_bias among them) and the draws."""
    from specgate.cli.check import describe
    from specgate.deployment import load_deployment
    from specgate.resources import builtin_deployments_dir

    text = describe(load_deployment(str(builtin_deployments_dir() / "smollm2-sampling-h200.toml")))
    line = next(line for line in text.splitlines() if line.startswith("  sampling equivalence: "))
    assert "6 setting(s), 8 prompt(s) x 64 sample(s) per side" in line, line
    assert "t1.0-bias (temperature 1, logit_bias on 3 token(s))" in line, line
    assert "in turns" not in text
