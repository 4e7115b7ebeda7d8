"""A FIFO (or a folder, a device) where specgate expects a document: reading a FIFO blocks until
someone writes to it, so a run would hang at the gates. Every reader refuses it at once, with an
error naming the path and what was expected there."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specgate.equivalence.oracle import load_replay
from specgate.errors import BaselineError, ReportError, SweepStateError
from specgate.prompts import load_prompt_file
from specgate.report.model import read_report
from specgate.sweep.state import SweepState
from specgate.verdicts.baselines import find_baselines
from specgate.verdicts.calibration import calibration_path, find_calibration
from specgate.verdicts.fingerprint import Fingerprint

FP = Fingerprint("NVIDIA H200", 1, "570.1", "13.0", "0.5.11", "SmolLM2-135M")
# Far above an instant refusal: a reader still blocked then is blocked on the FIFO.
BLOCKED_S = 10.0


def _baseline(root: Path) -> tuple[Path, Callable[[], Any]]:
    return root / "sim" / f"{FP.slug}.json", lambda: find_baselines("sim", FP, root)


def _calibration(root: Path) -> tuple[Path, Callable[[], Any]]:
    return calibration_path(root, "sim", FP), lambda: find_calibration(root, "sim", FP)


def _replay(root: Path) -> tuple[Path, Callable[[], Any]]:
    path = root / "sim" / "equivalence" / "replay.json"
    return path, lambda: load_replay(path)


def _prompts(root: Path) -> tuple[Path, Callable[[], Any]]:
    path = root / "mine.jsonl"
    return path, lambda: load_prompt_file(path, "mine")


def _sweep(root: Path) -> tuple[Path, Callable[[], Any]]:
    path = root / "sweep-state.json"
    return path, lambda: SweepState.open(path, "sim", "digest")


def _report(root: Path) -> tuple[Path, Callable[[], Any]]:
    path = root / "report.json"
    return path, lambda: read_report(path)


READERS = {
    "baseline": (_baseline, BaselineError, "a stored baseline"),
    "calibration": (_calibration, BaselineError, "a calibration record"),
    "replay": (_replay, BaselineError, "the equivalence replay file"),
    "prompt-file": (_prompts, ValueError, "a JSONL prompt file"),
    "sweep-state": (_sweep, SweepStateError, "a sweep state"),
    "report": (_report, ReportError, "a specgate report.json"),
}


def refused(read: Callable[[], Any], fifo: Path | None = None) -> BaseException | None:
    """What `read` raised; fails the test where it blocks (and then unblocks it with an empty write)."""
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            read()
        except BaseException as exc:  # noqa: BLE001 - handed to the test as it is
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BLOCKED_S)
    if thread.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the reader gets end-of-file and returns
        thread.join(BLOCKED_S)
        pytest.fail(f"reading {fifo} blocked: a FIFO was read as if it were a file")
    return outcome.get("error")


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_where_a_document_belongs_is_refused_by_name(tmp_path, reader):
    place, error_type, expected = READERS[reader]
    path, read = place(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    error = refused(read, path)
    assert isinstance(error, error_type), repr(error)
    assert f"{path} is a FIFO (named pipe), not a regular file: expected {expected}" in str(error)


@pytest.mark.parametrize("reader", ["baseline", "calibration", "replay"])
def test_a_folder_where_a_stored_document_belongs_is_refused_not_skipped(tmp_path, reader):
    place, error_type, expected = READERS[reader]
    path, read = place(tmp_path)
    path.mkdir(parents=True)
    error = refused(read)
    assert isinstance(error, error_type), repr(error)
    assert f"{path} is a folder, not a regular file: expected {expected}" in str(error)
