"""Standard streams whose reader has gone: `specgate run | head` closes the pipe after ten lines.

Python raises BrokenPipeError at the next write. Raised inside pytest's terminal writer, it ended
the run as pytest's internal error (exit 1) while the report on disk said PARTIAL. The exit code
is the verdict's, whoever still reads the output: a write to a closed pipe redirects that stream
to the null device, as the Python documentation's recipe for SIGPIPE does, and the run goes on.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class ClosedPipeSafe:
    """A text stream whose writes after its reader has gone are dropped; the rest is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(text)
        except BrokenPipeError:
            self._to_null_device()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_null_device()

    def _to_null_device(self) -> None:
        """The stream's file descriptor made the null device's: what is still buffered, and what
        Python flushes at exit, goes nowhere instead of raising again (an exit code of 120)."""
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def safe_standard_streams() -> None:
    """stdout and stderr of this process, from now on, survive their reader's going."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ClosedPipeSafe):
            setattr(sys, name, ClosedPipeSafe(stream))


def flush_standard_streams() -> None:
    """Flushed before the exit, through the wrappers: a closed pipe found now changes no exit code."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
