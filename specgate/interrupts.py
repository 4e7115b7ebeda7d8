"""The run's stop signals (SIGINT, SIGTERM, SIGHUP): one handler, from a command's start to its end.

Every signal is remembered, so the report on disk can always say INTERRUPTED when one came,
whenever it came. Until the run's end is reached (`seal`), a signal raises KeyboardInterrupt
where the main thread is, which pytest and the CLI unwind (servers stopped, report written).
From the run's end on (pytest's own handling of the first interrupt, the report being written,
the closing line) a signal is only recorded: a second KeyboardInterrupt raised there escapes
pytest.main and loses the report; whoever writes the report reads `received()` and writes it
again as INTERRUPTED. Callbacks (`on_signal`) run at every signal, sealed or not: the server
pool uses one to stop its servers at once, so a cancelled job never orphans a GPU server.

A signal that its parent left ignored (SIG_IGN: `nohup` for SIGHUP, a background job of a
non-interactive shell for SIGINT) stays ignored: that was asked for.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []
_sealed = False
_callbacks: list[Callable[[int], None]] = []
_installed = False
_previous: dict[int, Any] = {}  # the handlers found at install, given back at uninstall
_previous_hook = sys.unraisablehook
_STOPPED = "specgate: stopped by "


def _handle(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    for callback in list(_callbacks):
        callback(signum)
    if not _sealed:
        raise KeyboardInterrupt(f"{_STOPPED}{name(signum)}")


def _unraisable(info: Any) -> None:
    """Python drops an exception raised where it cannot propagate (a gc callback, the logging
    module's after-fork hook while a server is started) and prints it as "Exception ignored".
    Ours is not lost: the signal is recorded, and the run stops at its next check of it (the pool
    refuses to boot, pytest's next test does not start), so it is not printed as a crash."""
    if isinstance(info.exc_value, KeyboardInterrupt) and str(info.exc_value).startswith(_STOPPED):
        return
    _previous_hook(info)


def name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def install() -> bool:
    """Handle the stop signals from now on, with a fresh record; False (nothing changed) where
    they are already handled here or this is not the main thread (Python allows no handler there)."""
    global _installed, _sealed, _previous_hook
    if _installed or threading.current_thread() is not threading.main_thread():
        return False
    _installed = True
    _received.clear()
    _sealed = False
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN:
            _previous[sig] = current
            signal.signal(sig, _handle)
    _previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    return True


def uninstall() -> None:
    """Give the signals back to the handlers found at install (a nested or later run in this process)."""
    global _installed
    for sig, previous in _previous.items():
        signal.signal(sig, signal.SIG_DFL if previous is None else previous)  # None: set outside Python
    _previous.clear()
    sys.unraisablehook = _previous_hook
    _installed = False


@contextmanager
def installed() -> Iterator[None]:
    """The stop signals handled inside the block, given back after it if it installed them."""
    own = install()
    try:
        yield
    finally:
        if own:
            uninstall()


def seal() -> None:
    """The run is ending: from now on a signal is recorded (and its callbacks run), never raised."""
    global _sealed
    _sealed = True


def received() -> int | None:
    """The first stop signal since install, or None."""
    return _received[0] if _received else None


def stopping() -> int | None:
    """The stop signal that is stopping the run now (handled here, received, the run's end not yet
    reached), or None; a signal recorded by an earlier run in this process is not one."""
    return received() if _installed and not _sealed else None


@contextmanager
def interruption_wins() -> Iterator[None]:
    """Whatever the block raises once a stop signal came is raised as the interruption it is.
    Hypothesis collects the KeyboardInterrupt of one explicit example into "found 2 distinct
    failures", and a KeyboardInterrupt that lands inside a lock's release surfaces as a RuntimeError
    it reports (shrinks, then calls Flaky): the test would end FAILED, the run blamed on the server."""
    try:
        yield
    except BaseException:
        signum = stopping()
        if signum is None:
            raise
        # Raised afresh even over a KeyboardInterrupt: Hypothesis adds "Falsifying example" notes to it.
        raise KeyboardInterrupt(f"{_STOPPED}{name(signum)}") from None  # what followed the signal is no finding


def count() -> int:
    return len(_received)


def on_signal(callback: Callable[[int], None]) -> Callable[[], None]:
    """Run `callback(signum)` at every stop signal; returns what removes it."""
    _callbacks.append(callback)

    def remove() -> None:
        if callback in _callbacks:
            _callbacks.remove(callback)

    return remove
