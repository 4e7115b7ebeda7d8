"""`specgate run | head`: a reader that goes changes no exit code (specgate/cli/pipes.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from specgate.cli.pipes import ClosedPipeSafe


def test_a_write_to_a_closed_pipe_is_dropped_and_the_stream_goes_to_the_null_device():
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = os.fdopen(write_end, "w", buffering=1)
    safe = ClosedPipeSafe(stream)
    try:
        assert safe.write("a line nobody reads\n") == len("a line nobody reads\n")
        safe.write("and another\n")
        safe.flush()
        assert os.path.samestat(os.fstat(write_end), os.stat(os.devnull))
    finally:
        stream.close()


def test_a_run_whose_stdout_is_closed_exits_by_its_outcome(tmp_path):
    """pytest's terminal writer met the closed pipe and the run ended as pytest's internal error
    (exit 1, a traceback). Selecting no test keeps it short: exit 4, as with stdout open."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    argv = [sys.executable, "-m", "specgate.cli", "run", "sim", "--report-dir", str(tmp_path / "r"), "--", "-k", "no_such_test"]
    try:
        proc = subprocess.run(
            argv, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
            env={**os.environ, "SPECGATE_ALLOW_DIRTY": "1"}, cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr
