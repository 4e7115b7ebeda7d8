"""Every stored document of a deployment, read before anything boots.

A run reads its stored baselines, calibration records, runner histories and equivalence replay files (greedy and sampling) only when a
gate or the first equivalence test needs them: after the servers booted and much was measured. A
broken file then failed those tests with a stack into specgate, minutes in. Read here at the start
of the run (the plugin's configure, `specgate check`), any of them that cannot be used is one error
naming the file and the field, before a server starts. Every file is read as the run would read it,
the calibration records of other machines included: a committed record is a claim about a machine,
and a broken one is as wrong on this runner as on its own.
"""

from __future__ import annotations

from pathlib import Path

from specgate.equivalence.oracle import REPLAY_FILE, load_replay
from specgate.sampling.replay import SAMPLING_REPLAY_FILE, load_sampling_replay
from specgate.verdicts.baselines import load_baseline
from specgate.verdicts.calibration import load_calibration
from specgate.verdicts.history import load_history


def check_stored_documents(baselines_root: Path, deployment: str) -> int:
    """Read every stored document of `deployment` under `baselines_root`; BaselineError names the
    first file that cannot be used, and its field. Returns how many files were read."""
    folder = baselines_root / deployment
    if not folder.is_dir():
        return 0  # nothing stored yet: the run says so (NEXT STEP), it is no error
    baselines = sorted(folder.glob("*.json"))
    for path in baselines:
        load_baseline(path, deployment)
    records = sorted((folder / "calibration").glob("*.json"))
    for path in records:
        load_calibration(path)
    histories = sorted((folder / "history").glob("*.json"))  # a passing run and calibrate append to them
    for path in histories:
        load_history(path)
    replay = folder / REPLAY_FILE
    load_replay(replay)
    sampling_replay = folder / SAMPLING_REPLAY_FILE  # the sampling test's failed cases, asked first
    load_sampling_replay(sampling_replay)
    return len(baselines) + len(records) + len(histories) + replay.is_file() + sampling_replay.is_file()
