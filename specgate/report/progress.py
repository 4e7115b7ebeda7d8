"""Boot and measuring progress, shown while pytest's output capture is suspended.

A GPU server boot takes minutes (weights, CUDA graphs, JIT); a silent terminal for
that long looks like a hang. This prints who is booting, for how long, and the last
line of its log, with rich when it is there; and while decode speed is measured (many
minutes on a big model), how many requests of the current look are done and the time
left at the pace so far.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from specgate.report.visible import visible
from specgate.secrets import redact

try:
    from rich.console import Console
except ImportError:  # rich is a dependency, but a display must never break a run
    Console = None  # type: ignore[assignment,misc]


class BootDisplay:
    def __init__(
        self, capture_manager: Any | None, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capman = capture_manager
        self._every = every_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._look: tuple[str, float, float, bool] | None = None  # (what, started, last said, said any)
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

    def measuring(self, what: str, done: int, total: int) -> None:
        """One look's measuring (plan.SamplingPlan.on_measured): said every `every_s` with the
        requests done and the time left at the pace so far, and once at its end where it was said
        at all; a look shorter than `every_s` says nothing."""
        with self._lock:
            now = self._clock()
            if done == 0 or self._look is None or self._look[0] != what:
                self._look = (what, now, now, False)
                return
            _, started, said, said_any = self._look
            elapsed = now - started
            if done >= total:
                self._look = None
                if said_any:
                    self._print(f"specgate: measured {what}: {total} requests in {elapsed:.0f} s", "cyan")
                return
            if now - said < self._every:
                return
            left = elapsed / done * (total - done)
            self._look = (what, started, now, True)
            self._print(
                f"specgate: measuring {what}: {done} of {total} requests, {elapsed:.0f} s so far, about {left:.0f} s left",
                "cyan",
            )

    def update(self, config: str, elapsed: float, last_log_line: str) -> None:
        with self._lock:
            now = self._clock()
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
