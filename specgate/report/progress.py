"""Boot progress, shown while pytest's output capture is suspended.

A GPU server boot takes minutes (weights, CUDA graphs, JIT); a silent terminal for
that long looks like a hang. This prints who is booting, for how long, and the last
line of its log, with rich when it is there.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import nullcontext
from typing import Any

from specgate.report.visible import visible
from specgate.secrets import redact

try:
    from rich.console import Console
except ImportError:  # rich is a dependency, but a display must never break a run
    Console = None  # type: ignore[assignment,misc]


class BootDisplay:
    def __init__(self, capture_manager: Any | None, every_s: float = 10.0) -> None:
        self._capman = capture_manager
        self._every = every_s
        self._last: dict[str, float] = {}
        self._console = Console(file=sys.__stderr__, highlight=False) if Console is not None else None
        # Servers attached by url are waited on from one thread each: one line at a time, and one
        # suspension of pytest's capture at a time (its capture manager is not thread-safe).
        self._lock = threading.RLock()

    def _print(self, text: str, style: str = "") -> None:
        text = visible(redact(text))  # a log's last line may hold a credential, or control characters
        ctx = self._capman.global_and_fixture_disabled() if self._capman else nullcontext()
        with self._lock, ctx:
            if self._console is not None:
                self._console.print(text, style=style or None, markup=False)
            else:
                print(text, file=sys.__stderr__, flush=True)

    def notice(self, text: str) -> None:
        """A line the user must see now (not after the run), e.g. a leftover server that was stopped."""
        self._print(text, "bold yellow")

    def update(self, config: str, elapsed: float, last_log_line: str) -> None:
        with self._lock:
            now = time.monotonic()
            if config not in self._last:
                self._last[config] = now
                self._print(f"specgate: booting {config} …", "bold cyan")
                return
            if now - self._last[config] >= self._every:
                self._last[config] = now
                self._print(f"specgate: {config} booting for {elapsed:.0f} s — {last_log_line.strip()[:120]}", "cyan")

    def finished(self, config: str, seconds: float, ok: bool, why: str = "") -> None:
        with self._lock:
            self._last.pop(config, None)
            if ok:
                self._print(f"specgate: {config} ready after {seconds:.1f} s", "green")
                return
            # The cause's first line (a boot's log tail follows it in the test error and the report).
            cause = why.strip().splitlines()[0] if why.strip() else "see the test error"
            self._print(
                f"specgate: {config} FAILED to boot after {seconds:.1f} s: {cause} (the log's last lines are in report.md's Boot failures)",
                "bold red",
            )
