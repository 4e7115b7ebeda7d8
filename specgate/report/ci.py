"""What a run leaves for its CI beside the report folder: the step summary GitHub shows
($GITHUB_STEP_SUMMARY) and pytest's junit XML (--junitxml); both go out through the one masker
(secrets.py), as everything else specgate writes does."""

from __future__ import annotations

import errno
import os
import stat

from specgate.secrets import redact

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def append_step_summary(text: str) -> str | None:
    """Append `text` to the step summary where the variable names one; what went wrong, else None.

    Only a regular file (or a path where none is yet, made one) is written: opening a FIFO for
    writing waits for a reader that never comes, hanging the run after its report, and a device
    would take the text anywhere. O_NONBLOCK makes the open of a FIFO fail or return at once
    (the file's type is then read from what was opened, so nothing can be swapped in between)."""
    summary_file = os.environ.get(STEP_SUMMARY_ENV)
    if not summary_file:
        return None
    try:
        fd = os.open(summary_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no process reads
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: it is a FIFO, not a regular file"
        return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: {exc}"
    with os.fdopen(fd, "w", encoding="utf-8") as summary:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: it is not a regular file"
        try:
            summary.write(redact(text))
            summary.flush()
        except OSError as exc:
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: {exc}"
    return None
