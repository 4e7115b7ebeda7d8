"""`specgate sweep` on the SIMULATOR: ranks the grid, resumes after a stop, fails loudly on bad input.

The simulator honours SGLANG_SIMULATE_ACC_LEN and the attention-mode cost as SGLang has
them, so the sweep must find what the H200 showed: prefill mode loses where decode mode wins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tomli_w
from helpers import SimDeployment

SMALL_GRID = {
    "sweep": {
        "num_steps": [1, 2],
        "parallel": 3,
        "repeats": 4,
        "env": {"SGLANG_SIMULATE_ACC_LEN": ["1.5", "3.0"]},
    }
}


def sweep(d: SimDeployment, *extra: str, faults: str = "") -> subprocess.CompletedProcess:
    env = {"SPECGATE_TEST_TAG": d.tag, "SPECGATE_SIM_FAULTS": faults}
    return subprocess.run(
        [sys.executable, "-m", "specgate.cli", "sweep", str(d.path), "--report-dir", str(d.report_dir), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def state(d: SimDeployment) -> dict:
    return json.loads((d.report_dir / "sweep.json").read_text())


def test_sweep_ranks_every_point_and_finds_where_speculation_wins(sim_deployment):
    d = sim_deployment(SMALL_GRID)
    run = sweep(d)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    points = {p["name"]: p for p in state(d)["points"]}
    assert len(points) == 8 and all(p["status"] == "measured" for p in points.values())
    # prefill mode loses at a low accept length; decode mode with a high one wins, with an interval
    assert points["prefill-s1-k1-d2-simulate_acc_len1.5"]["ratio"]["high"] < 1.0
    assert points["decode-s2-k1-d3-simulate_acc_len3.0"]["ratio"]["low"] > 1.0
    table = (d.report_dir / "sweep.md").read_text()
    first_row = next(line for line in table.splitlines() if line.startswith("| 1 |"))
    assert "decode-s2-k1-d3-simulate_acc_len3.0" in first_row  # ranked by the ratio
    assert "## Where speculation starts to beat the baseline" in table


def test_a_stopped_sweep_resumes_with_only_the_missing_points(sim_deployment):
    d = sim_deployment(SMALL_GRID)
    first = sweep(d, "--max-seconds", "0.01")  # one wave, then out of time
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    assert "run the same command again to resume" in first.stdout
    partial = state(d)
    measured_first = {p["name"] for p in partial["points"]}
    assert 0 < len(measured_first) < 8
    second = sweep(d)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    final = state(d)
    assert len(final["points"]) == 8 and len(final["sessions"]) == 2
    second_session = final["sessions"][1]["id"]
    resumed = {p["name"] for p in final["points"] if p["session"] == second_session}
    assert resumed == {p["name"] for p in final["points"]} - measured_first  # nothing measured twice
    assert final["sessions"][1]["baselines"], "each session measures its own baseline"
    third = sweep(d)  # nothing left: no boot, same table
    assert third.returncode == 0 and len(state(d)["sessions"]) == 2


def test_a_point_that_dies_is_recorded_and_the_rest_go_on(sim_deployment):
    d = sim_deployment(SMALL_GRID)
    run = sweep(d, faults="decode-s1-k1-d2-simulate_acc_len3.0:crash-after=0")
    assert run.returncode == 0, run.stdout[-3000:]
    points = {p["name"]: p for p in state(d)["points"]}
    assert points["decode-s1-k1-d2-simulate_acc_len3.0"]["status"] == "failed"
    assert sum(p["status"] == "measured" for p in points.values()) == 7
    assert "Failed or unpaired points" in (d.report_dir / "sweep.md").read_text()


def test_bad_sweep_input_names_the_file(sim_deployment, tmp_path):
    d = sim_deployment({})
    no_sweep = SimDeployment(tmp_path / "nosweep", {})
    no_sweep.data.pop("sweep")
    no_sweep.path.write_text(tomli_w.dumps(no_sweep.data))
    run = sweep(no_sweep)
    assert run.returncode == 2 and "[sweep] table" in run.stderr and str(no_sweep.path) in run.stderr

    d.report_dir.mkdir(parents=True)
    (d.report_dir / "sweep.json").write_text("{not json")
    run = sweep(d)
    assert run.returncode == 2 and "sweep.json" in run.stderr and "move it away" in run.stderr

    (d.report_dir / "sweep.json").write_text(
        json.dumps({"format": 2, "deployment": "sim", "plan_digest": "other", "sessions": [], "points": []})
    )
    run = sweep(d)
    assert run.returncode == 2 and "grid" in run.stderr


@pytest.mark.parametrize(
    "table, field",
    [
        ({"base": "baseline"}, "sweep.base"),
        ({"base": "nope"}, "sweep.base"),
        ({"base": "eagle3-decode", "attention_mode": ["fast"]}, "sweep.attention_mode"),
        ({"base": "eagle3-decode", "topk": [1, 4]}, "sweep.draft_tokens"),
        ({"base": "eagle3-decode", "env": {"X": []}}, "sweep.env.X"),
        ({"base": "eagle3-decode", "paralel": 2}, "sweep.paralel"),
    ],
)
def test_bad_sweep_table_is_a_deployment_error(table, field, tmp_path):
    from specgate.deployment import load_deployment
    from specgate.errors import DeploymentError

    d = SimDeployment(tmp_path / "d", {})
    d.data["sweep"] = table
    d.path.write_text(tomli_w.dumps(d.data))
    with pytest.raises(DeploymentError) as err:
        load_deployment(str(d.path))
    assert field in str(err.value)


def test_a_corrupt_entry_of_a_sweep_state_names_its_field(tmp_path):
    """The state is read through its document model: a resumed sweep never computes on garbage."""
    from specgate.errors import SweepStateError
    from specgate.sweep.state import SweepState

    point = {"name": "p", "axes": {}, "status": "measured", "session": "s1", "gpu": "0", "decode_tps": [1.0, "x"]}
    doc = {"format": 2, "deployment": "sim", "plan_digest": "g", "sessions": [{"id": "s1", "provenance": {}}], "points": [point]}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SweepStateError, match=r"field 'points\[0\]\.decode_tps\[1\]': expected a number, got 'x'"):
        SweepState.open(path, "sim", "g")
    point["decode_tps"] = [1.0, 2.0]
    path.write_text(json.dumps(doc))
    assert SweepState.open(path, "sim", "g").points["p"].median_tps == 1.5


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-seconds", "nan"], "--max-seconds"),
        (["--gpus", ",,x"], "--gpus"),
        (["--gpus", "0,"], "--gpus"),
        (["--gpus", "GPU-"], "--gpus"),
        (["--gpus", "0,0"], "--gpus"),
    ],
)
def test_sweep_refuses_flags_that_would_run_nothing_it_was_asked_for(tmp_path, capsys, flags, named):
    """NaN seconds ran a whole sweep; `--gpus ,,x` ran every point 'on GPU x', which on a GPU host
    hides every GPU: both refused before anything boots, naming the flag."""
    from specgate import cli

    code = cli.main(["sweep", "sim", "--report-dir", str(tmp_path / "r"), *flags])
    assert code == 2 and f"--{named.lstrip('-')}: expected" in capsys.readouterr().err
    assert not (tmp_path / "r" / "logs").exists()
