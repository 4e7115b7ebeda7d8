"""tools/noise_calibration.py (lab): the `[gates.between_boot]` block it prints is chosen per
machine, so which machine a folder of rounds is from, and a folder that holds none, matter."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ("baseline", "eagle3-decode", "eagle3-decode-twin", "eagle3-decode-drawn")


def _folder(path: Path, gpu_line: str, rounds: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    (path / "provenance.txt").write_text(f"date: d\ngpus (name, driver, memory.total, uuid):\n{gpu_line}\nboot-id abcdef12\n")
    prompts = [f"p{i}" for i in range(12)]
    for r in range(1, rounds + 1):
        level = math.exp(rng.normal(0, 0.02))
        benches = [
            {"extra_info": {"config": c, "prompt": prompts,
                            "decode_tps": [500.0 * level * math.exp(rng.normal(0, 0.03)) for _ in prompts]}}
            for c in CONFIGS
        ]  # fmt: skip
        (path / f"round-{r:02d}-quiet").mkdir()
        (path / f"round-{r:02d}-quiet" / "benchmark.json").write_text(json.dumps({"benchmarks": benches}))
    return path


def _run(*folders: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "noise_calibration.py"), *map(str, folders)],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip


def test_rounds_of_two_h100s_are_two_machines_not_one_unknown_one(tmp_path):
    """Only an "NVIDIA H200" line named the machine: two H100s' rounds both read "?" and pooled
    into one frame, their between-machine difference taken for between-boot noise."""
    a = _folder(tmp_path / "a", "0, NVIDIA H100 80GB HBM3, 580.1, 81559 MiB, GPU-aaaaaaaa-0000-0000-0000-000000000000", 3, 1)
    b = _folder(tmp_path / "b", "0, NVIDIA H100 80GB HBM3, 580.1, 81559 MiB, GPU-bbbbbbbb-0000-0000-0000-000000000000", 3, 2)
    done = _run(a, b)
    assert done.returncode == 0, done.stderr
    assert "- GPU-aaaaaaaa: 3 rounds" in done.stdout and "- GPU-bbbbbbbb: 3 rounds" in done.stdout, done.stdout
    assert "- ?:" not in done.stdout


def test_a_folder_that_is_missing_or_holds_no_round_is_named(tmp_path):
    done = _run(tmp_path / "nope")
    assert done.returncode == 2 and "nope: no such folder" in done.stderr
    empty = tmp_path / "trials-only"
    empty.mkdir()
    (empty / "provenance.txt").write_text("date: d\n")
    done = _run(empty)
    assert done.returncode == 1
    assert f"{empty}: no A/A round" in done.stderr and "nothing to declare" in done.stderr


def test_a_round_packed_again_in_a_later_calls_archive_counts_once(tmp_path):
    """gpu_noise.sh packs its whole work folder: a later call's archive on the same machine holds
    the earlier rounds again. Over the kept H200 calls 2 and 3 that counted rounds 2-3 twice: 6
    rounds, a whole spread of 3.11% instead of the 4.81% of the 4 rounds there are."""
    import shutil

    gpu = "0, NVIDIA H200, 580.1, 143771 MiB, GPU-cccccccc-0000-0000-0000-000000000000"
    first = _folder(tmp_path / "call-2", gpu, 2, 3)
    later = _folder(tmp_path / "call-3", gpu, 4, 4)
    for name in ("round-01-quiet", "round-02-quiet"):  # the later archive repacks the first call's rounds
        shutil.rmtree(later / name)
        shutil.copytree(first / name, later / name)
    done = _run(first, later)
    assert done.returncode == 0, done.stderr
    assert "- GPU-cccccccc: 4 rounds" in done.stdout, done.stdout
    assert "round-01-quiet left out, the same round as in an earlier folder" in done.stderr
    alone = _run(later)
    assert alone.stdout.split("[gates.between_boot]")[1] == done.stdout.split("[gates.between_boot]")[1]
