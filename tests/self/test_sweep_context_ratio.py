"""A sweep's context axis keeps, per bucket result, the characters per token its prompts were built
at (measure.density), so a resumed sweep whose sessions counted the tokenizer apart never mixes
prompts of two ratios in one bucket's column silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tomli_w

from specgate.deployment import load_deployment
from specgate.sweep.plan import plan_sweep, result_name
from specgate.sweep.state import PointResult, SweepState
from specgate.sweep.table import render_sweep
from tests.self.helpers import SimDeployment, merge, sim_deployment_dict


def _plan(tmp_path):
    data = merge(sim_deployment_dict(), {"sweep": {"base": "eagle3-decode", "num_steps": [2], "context_buckets": ["1K"]}})
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return plan_sweep(load_deployment(str(path)))


def _put(state, plan, point, context, built_at):
    name = result_name(point, context)
    axes = {**point.axes(), **({"context": context} if context else {})}
    ratio = {"estimate": 1.2, "low": 1.1, "high": 1.3, "confidence": 0.95}
    state.points[name] = PointResult(name, axes, "measured", "s1", "", decode_tps=[100.0], ratio=ratio, chars_per_token=built_at)


def test_a_bucket_built_at_two_ratios_is_said_under_the_table_naming_each_ratios_points(tmp_path):
    plan = _plan(tmp_path)
    first, second = plan.points[:2]
    state = SweepState(tmp_path / "s.json", "sim", plan.digest)
    for point, built_at in ((first, 5.0), (second, 5.05)):
        _put(state, plan, point, 0, None)
        _put(state, plan, point, 1024, built_at)
    table = render_sweep(plan, state, complete=True)
    said = next(line for line in table.splitlines() if line.startswith("**NOT one workload at 1K**"))
    assert f"5.00: {result_name(first, 1024)}; 5.05: {result_name(second, 1024)}" in said, said
    # Kept in the state file, and read back.
    state.save()
    again = SweepState.open(state.path, "sim", plan.digest)
    assert again.points[result_name(second, 1024)].chars_per_token == 5.05
    # One ratio: nothing to say.
    _put(state, plan, second, 1024, 5.0)
    assert "NOT one workload" not in render_sweep(plan, state, complete=True)


def test_a_state_from_before_the_ratio_was_kept_reads_as_not_recorded(tmp_path):
    plan = _plan(tmp_path)
    first, second = plan.points[:2]
    state = SweepState(tmp_path / "s.json", "sim", plan.digest)
    _put(state, plan, first, 1024, 5.0)
    _put(state, plan, second, 1024, 5.0)
    state.save()
    doc = json.loads(state.path.read_text())
    del doc["points"][1]["chars_per_token"]  # as an older specgate wrote it
    state.path.write_text(json.dumps(doc))
    old = SweepState.open(state.path, "sim", plan.digest)
    assert old.points[result_name(second, 1024)].chars_per_token is None
    assert f"not recorded: {result_name(second, 1024)}" in render_sweep(plan, old, complete=True)


def test_a_sweeps_bucket_results_carry_the_ratio_they_were_built_at(tmp_path):
    d = SimDeployment(tmp_path, {"sweep": {"base": "eagle3-decode", "num_steps": [1], "attention_mode": ["decode"],
                                           "repeats": 3, "context_buckets": ["1K"]}})  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "sweep", str(d.path), "--report-dir", str(d.report_dir)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "SPECGATE_TEST_TAG": d.tag},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    points = json.loads((d.report_dir / "sweep.json").read_text())["points"]
    built = {p["name"]: p["chars_per_token"] for p in points}
    buckets = [name for name in built if name.endswith("@1K")]
    assert buckets and all(built[n] and built[n] > 4.5 for n in buckets), built  # the simulator's ~5
    assert all(built[n] is None for n in built if n not in buckets)
    assert "prompts built at" in run.stdout
