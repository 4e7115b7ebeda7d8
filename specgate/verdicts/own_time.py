"""A bound on a gate kind's own time in `decide`: a kind that hangs (a loop, a sleep, a lock never
released) stopped the whole run with no verdict and no report. Its measurements are not its own
time: each request has its deadline, and a sequential gate may measure for many minutes. So the
clock runs while the kind computes and stops while the judge measures for it (`measuring`).

SIGALRM, which interrupts the main thread wherever it is (a sleep, a loop in Python), as the
interrupts' handler does for a Ctrl-C: a thread cannot be stopped from outside. The alarm comes
again each second after the first, so a kind that swallows what is raised still meets it at its
next Python line; it is a BaseException, which `except Exception` does not catch, and the judge
turns it into the kind's GateKindError. Off the main thread, or where the platform has no
SIGALRM, there is no bound: said here, as it cannot be said in a run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

# The most a kind may spend in decide outside its measurements: the built-ins' bootstrap intervals
# take well under a second a look, so this is minutes of headroom, not a judgement on the kinds.
OWN_TIME_S = 120.0
_AGAIN_S = 1.0


class OwnTimeExceeded(BaseException):
    """Raised into a kind's decide when its own time is up."""


class _Clock:
    def __init__(self, limit_s: float) -> None:
        self.left_s = limit_s
        self.running = False

    def start(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, max(self.left_s, 1e-3), _AGAIN_S)
        self.running = True

    def stop(self) -> None:
        left, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        self.left_s = left if left > 0 else 0.0
        self.running = False


_clock: _Clock | None = None


def _ring(signum: int, frame: FrameType | None) -> None:
    raise OwnTimeExceeded


@contextmanager
def bounded(limit_s: float | None = None) -> Iterator[None]:
    """The block (a kind's decide) raises OwnTimeExceeded once it has spent `limit_s` (OWN_TIME_S)
    outside `measuring`."""
    global _clock
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    # A timer someone else set (pytest-timeout's signal method) is theirs, and bounds the test already.
    if not usable or _clock is not None or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
        yield
        return
    previous: Any = signal.signal(signal.SIGALRM, _ring)
    _clock = _Clock(OWN_TIME_S if limit_s is None else limit_s)
    try:
        _clock.start()
        yield
    finally:
        _clock.stop()
        _clock = None
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def measuring() -> Iterator[None]:
    """The judge measures for the kind: its requests have their own deadlines, and are not its time."""
    clock = _clock
    if clock is None or not clock.running:
        yield
        return
    clock.stop()
    try:
        yield
    finally:
        clock.start()
