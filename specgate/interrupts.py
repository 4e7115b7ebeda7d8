"""The run's stop signals (SIGINT, SIGTERM, SIGHUP): one handler, from a command's start to its end.

Every signal is remembered, so the report on disk can always say INTERRUPTED when one came,
whenever it came. Until the run's end is reached (`seal`), a signal raises KeyboardInterrupt
where the main thread is, which pytest and the CLI unwind (servers stopped, report written).
From the run's end on (pytest's own handling of the first interrupt, the report being written,
the closing line) a signal is only recorded: a second KeyboardInterrupt raised there escapes
pytest.main and loses the report; whoever writes the report reads `received()` and writes it
again as INTERRUPTED. Callbacks (`on_signal`) run at every signal, sealed or not: the server
pool uses one to stop its servers at once, so a cancelled job never orphans a GPU server.

From the command's first line (`specgate.cli.main` installs the handler before it imports
anything else) until the report folder is taken, a signal is held: recorded, not raised (`hold`,
`release`). The previous run's report is removed by the taking, so a signal in those first
milliseconds can no longer leave its PASS beside a traceback: the command takes the folder, then
stops, writing INTERRUPTED. What no handler covers is the interpreter's own start, before
specgate's first line runs (site-packages' .pth hooks included: tens of milliseconds, above 0.1 s
on a loaded machine): a signal then ends the process by Python's default (exit -2 or -15, or
Python's KeyboardInterrupt traceback from inside `site`, exit 1), the previous report untouched,
as after `kill -9`; the next run removes that report.

A signal that its parent left ignored (SIG_IGN: `nohup` for SIGHUP, a background job of a
non-interactive shell for SIGINT) stays ignored: that was asked for.

The exit code and the report always agree. Up to the CLI's last look at the signals (`settle`,
once its closing line is said) a signal marks the report INTERRUPTED and the exit follows it.
From `settle` on, the outcome is final: a signal is recorded (and said, `late`), and the process
exits with the report's code. For that, the command that is this process's own (`installed` with
`to_exit`: the console script, `python -m specgate.cli`) keeps the handler, sealed, to the very
exit, instead of giving Python's default back, under which a signal in that last moment killed
the process (exit -15, or -2 with a traceback) beside a report that said PARTIAL or PASS.
"""

from __future__ import annotations

import os
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
_held = False  # from install until the report folder is taken: a signal is recorded, not raised
_settled: int | None = None  # how many signals had come when the outcome became final
_callbacks: list[Callable[[int], None]] = []
_installed = False
_previous: dict[int, Any] = {}  # the handlers found at install, given back at uninstall
_previous_hook = sys.unraisablehook
_STOPPED = "specgate: stopped by "
# The self-tests' hook: the signal (a name, "SIGTERM") this process sends itself at `test_point`.
TEST_SIGNAL_ENV = "SPECGATE_TEST_SIGNAL_AT_EXIT"
TEST_START_SIGNAL_ENV = "SPECGATE_TEST_SIGNAL_AT_START"  # the same at the command's first instant


def _handle(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    for callback in list(_callbacks):
        callback(signum)
    # Only the first is raised: a second (Ctrl-C again, a CI runner's SIGTERM after it) lands inside
    # the shutdown the first began, whose stops and report are bounded by their own timeouts, and
    # raised there it broke them off into tracebacks and exit 1 instead of INTERRUPTED (exit 5).
    if not _sealed and not _held and len(_received) == 1:
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


def install(held: bool = False) -> bool:
    """Handle the stop signals from now on, with a fresh record; False (nothing changed) where
    they are already handled here or this is not the main thread (Python allows no handler there).
    `held`: a signal is recorded and not raised until `release`."""
    global _installed, _sealed, _held, _settled, _previous_hook
    if _installed or threading.current_thread() is not threading.main_thread():
        return False
    _installed = True
    _received.clear()
    _sealed = False
    _held = held
    _settled = None
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN:
            _previous[sig] = current
            signal.signal(sig, _handle)
    _previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    return True


def uninstall() -> None:
    """Give the signals back to the handlers found at install (a nested or later run in this process)."""
    global _installed, _held
    _held = False
    for sig, previous in _previous.items():
        signal.signal(sig, signal.SIG_DFL if previous is None else previous)  # None: set outside Python
    _previous.clear()
    sys.unraisablehook = _previous_hook
    _installed = False


@contextmanager
def installed(to_exit: bool = False, held: bool = False) -> Iterator[None]:
    """The stop signals handled inside the block, given back after it if it installed them.
    `to_exit`: the block is this process's whole command, whose end is the process's exit: the
    handler is kept, sealed, and the outcome settled, so no signal can change the exit code now.
    `held`: signals are held (recorded, not raised) until `release`."""
    own = install(held)
    try:
        yield
    finally:
        if own and to_exit:
            seal()
            settle()
        elif own:
            uninstall()


def release() -> None:
    """Signals are raised again from here (the report folder is taken, or the command takes none);
    one held since install is raised now, as KeyboardInterrupt, where the caller stands."""
    global _held
    if not _held:
        return
    _held = False
    signum = stopping()
    if signum is not None:
        raise KeyboardInterrupt(f"{_STOPPED}{name(signum)}")


def seal() -> None:
    """The run is ending: from now on a signal is recorded (and its callbacks run), never raised."""
    global _sealed
    _sealed = True


def settle() -> None:
    """The command's outcome (its report and exit code) is final: a later signal is only `late`."""
    global _settled
    if _settled is None:
        _settled = len(_received)


def ignore_to_exit() -> None:
    """The process is about to exit with its settled code: the stop signals are ignored from here.
    Python's finalization gives a signal it handled back to its default action, under which a
    SIGINT or SIGTERM in those last milliseconds killed the process (-2, -15) beside a report that
    said PASS. A signal already ignored stays so through finalization."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def late() -> list[int]:
    """The signals that came after `settle`: recorded, said, and changing nothing."""
    return [] if _settled is None else _received[_settled:]


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


def start_test_point() -> None:
    """Where the self-tests hit the command's first instant: right after the handler is installed,
    before any import, parse or report folder, the process sends itself the signal
    SPECGATE_TEST_SIGNAL_AT_START names."""
    wanted = os.environ.get(TEST_START_SIGNAL_ENV)
    if wanted:
        os.kill(os.getpid(), signal.Signals[wanted])


def test_point() -> None:
    """Where the self-tests hit the command's last moment: the process sends itself the signal
    SPECGATE_TEST_SIGNAL_AT_EXIT names. Deterministic, where a signal timed from outside races."""
    wanted = os.environ.get(TEST_SIGNAL_ENV)
    if wanted:
        os.kill(os.getpid(), signal.Signals[wanted])
