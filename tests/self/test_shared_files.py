"""Files that runs share (the replay files, the runner's history, a sweep's state) are changed
under one lock (specgate.shared_files): two runs each keep what they add, and a second sweep into
a folder in use is refused, naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import sim_deployment_dict

from specgate.deployment import parse_deployment
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.oracle import EquivalenceOracle
from specgate.sampling.check import SamplingPrompt
from specgate.sampling.replay import SamplingReplay
from specgate.sampling_spec import SamplingSetting
from specgate.shared_files import FolderInUse, locked
from specgate.sweep.run import run_sweep

HOLD = (
    "import sys, time; from pathlib import Path; from specgate.shared_files import locked\n"
    "with locked(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)"
)


@pytest.fixture
def held_by_another_process():
    holders = []

    def hold(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()


def test_a_folder_held_by_another_process_is_refused_by_name_when_not_waiting(tmp_path, held_by_another_process):
    held_by_another_process(tmp_path / "shared" / "state.json")
    with pytest.raises(FolderInUse, match=f"{tmp_path / 'shared'}: in use by another specgate process"):
        with locked(tmp_path / "shared" / "other.json", wait=False):
            pass


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with locked(tmp_path / "a.json", wait=False), locked(tmp_path / "b.json", wait=False):
        pass
    with locked(tmp_path / "a.json", wait=False):  # released: taken again at once
        pass


def test_a_second_sweep_into_a_folder_in_use_is_refused_naming_it(tmp_path, held_by_another_process):
    """The issue's case: two sweeps into one folder both ran, and sweep.json kept only the
    second's points. The second is refused before it reads the state or boots anything."""
    report = tmp_path / "sweep-report"
    held_by_another_process(report / "sweep.json")  # as a running sweep holds it
    dep = parse_deployment(sim_deployment_dict(), tmp_path / "dep.toml")
    with pytest.raises(FolderInUse, match=f"{report}: in use .*a sweep is measuring into it"):
        run_sweep(dep, report / "sweep.json", report / "logs")
    assert not (report / "logs").exists()


def test_two_runs_sharing_a_greedy_replay_file_each_keep_their_case(tmp_path):
    """Each run reads replay.json at its start; the second's write kept only its own case."""
    dep = parse_deployment(sim_deployment_dict(), tmp_path / "dep.toml")
    path = tmp_path / "baselines" / "sim" / "equivalence" / "replay.json"
    runs = [EquivalenceOracle(dep, None, tmp_path, 1, replay_path=path) for _ in range(2)]  # type: ignore[arg-type]
    for run in runs:
        run.replay_cases()  # read once, at the run's start
    for n, run in enumerate(runs):
        run.remember_failure("eagle3", GenerationCase(f"case {n}", f"prompt {n}", 8, (), 1), "diverged")
    stored = json.loads(path.read_text())["cases"]
    assert sorted(entry["case"]["text"] for entry in stored) == ["prompt 0", "prompt 1"]


def test_two_runs_sharing_a_sampling_replay_file_each_keep_their_case(tmp_path):
    path = tmp_path / "equivalence" / "sampling-replay.json"
    runs = [SamplingReplay(path, "sim") for _ in range(2)]
    for run in runs:
        assert run.cases == []  # read once, at the run's start
    setting = SamplingSetting("t1", 1.0)
    for n, run in enumerate(runs):
        run.remember("eagle3", setting, SamplingPrompt(f"p{n}", f"prompt {n}"), 1, "biased")
    stored = json.loads(path.read_text())["cases"]
    assert sorted(case["prompt"] for case in stored) == ["p0", "p1"]
