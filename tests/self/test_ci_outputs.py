"""What a run leaves for its CI beside the report folder (specgate/report/ci.py): the step summary
and pytest's junit XML, each masked, neither able to hang the run's end."""

from __future__ import annotations

import os
import threading

import pytest

from specgate.report.ci import STEP_SUMMARY_ENV, append_step_summary

BLOCKED_S = 5.0


def test_a_fifo_as_the_step_summary_is_refused_by_name_not_waited_on(tmp_path, monkeypatch):
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(fifo))
    outcome: dict[str, str | None] = {}
    thread = threading.Thread(target=lambda: outcome.update(said=append_step_summary("# specgate: PASS\n")), daemon=True)
    thread.start()
    thread.join(BLOCKED_S)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # the writer gets its reader and returns
        thread.join(BLOCKED_S)
        pytest.fail(f"writing the step summary {fifo} blocked: a FIFO was written as if it were a file")
    said = outcome["said"]
    assert said is not None and f"${STEP_SUMMARY_ENV} ({fifo}) NOT written" in said and "not a regular file" in said


def test_the_step_summary_is_appended_to_a_file_or_made_where_missing(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(summary))
    assert append_step_summary("one\n") is None
    summary.write_text(summary.read_text() + "theirs\n")
    assert append_step_summary("two\n") is None
    assert summary.read_text() == "one\ntheirs\ntwo\n"
