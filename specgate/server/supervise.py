"""The small process each local server runs under, so that the server dies with its run.

specgate starts `python -P supervise.py --status-fd N [--note-fd M] -- COMMAND...` in a session of its own,
with its stdin a pipe whose only writer is specgate. The supervisor starts COMMAND in a process
group of its own and waits. When specgate goes away by any means (SIGKILL of specgate, SIGKILL
of specgate's whole process group, the OOM killer) the kernel closes that pipe: the supervisor
reads end-of-file and SIGKILLs the server's group and every process descending from it.

Why not the parent-death signal on the server itself: it reaches only the direct child, so a
wrapper command (`bash -c …`, docker, torchrun) shields the server proper; and it fires when the
*thread* that forked exits, so it cannot be set from a boot started on another thread. The pipe
is tied to specgate's process, not a thread, and the supervisor sits outside specgate's process
group, so a kill aimed at that group does not take the supervisor before it acts.

It is a child subreaper (Linux prctl), so a server process that detaches (double fork, setsid)
is reparented to it and is still found among its descendants. It exits with the server's status
(a server killed by signal S kills it with S too), so specgate reads the server's exit as before.

Run as a script by path (-P: its folder is not put on sys.path) and standard library only, with
psutil where importable: the server's environment may override PYTHONPATH, and this must start.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading

_PR_SET_CHILD_SUBREAPER = 36
# How often the parent is looked at besides the pipe: a process forked from specgate without
# exec (multiprocessing's fork) would hold the pipe open after specgate died.
_PARENT_POLL_S = 1.0


def _descendants() -> list[int]:
    try:
        import psutil
    except ImportError:
        return []
    try:
        return [p.pid for p in psutil.Process().children(recursive=True)]
    except psutil.Error:
        return []


def _kill_everything(server_pgid: int) -> None:
    for pid in _descendants():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(server_pgid, signal.SIGKILL)
    except OSError:
        pass


def _watch_parent(parent: int, server_pgid: int, note: int | None) -> None:
    """Returns only when specgate is gone: its pipe (our stdin) ended, or we were reparented.
    Why the server ends is said in its log (`note`, opened for appending): the server's output
    reaches the log through specgate's masker, which went with specgate."""
    while os.getppid() == parent:
        ready, _, _ = select.select([0], [], [], _PARENT_POLL_S)
        if ready and not os.read(0, 4096):
            break
    said = f"specgate supervisor: specgate (pid {parent}) is gone; killing the server's processes\n"
    try:
        if note is not None:
            os.write(note, said.encode())
        else:
            print(said, end="", file=sys.stderr, flush=True)
    except OSError:
        pass  # stderr was a pipe into the specgate that died
    _kill_everything(server_pgid)
    os._exit(137)


# The CPU slice the server is pinned to (specgate.server.affinity), in the kernel's list syntax.
CPUS_ENV = "SPECGATE_CPUS"


def parse_cpu_list(text: str) -> set[int]:
    """ "0-2,5" → {0, 1, 2, 5}; ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.partition("-")
        first, last = int(low), int(high) if dash else int(low)
        if first < 0 or last < first:
            raise ValueError(f"not a CPU range: {part!r}")
        cpus.update(range(first, last + 1))
    return cpus


def main(argv: list[str]) -> int:
    note: int | None = None
    if len(argv) > 4 and argv[2] == "--note-fd":
        note, argv = int(argv[3]), [*argv[:2], *argv[4:]]
    if len(argv) < 4 or argv[0] != "--status-fd" or argv[2] != "--":
        print("usage: supervise.py --status-fd N [--note-fd M] -- COMMAND...", file=sys.stderr)
        return 2
    status = os.fdopen(int(argv[1]), "w")
    command = argv[3:]
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: detached processes escape; the group is still killed
    cpus = os.environ.pop(CPUS_ENV, "")
    if cpus:
        # Pinned before the server starts, so it and every process it spawns inherit the slice.
        try:
            os.sched_setaffinity(0, parse_cpu_list(cpus))
        except (OSError, ValueError) as exc:
            status.write(f"error 22 cannot pin to CPUs {cpus}: {exc}\n")
            status.close()
            return 127
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, process_group=0)
    except OSError as exc:
        status.write(f"error {exc.errno} {exc.strerror}\n")
        status.close()
        return 127
    try:
        status.write(f"ok {child.pid}\n")
        status.close()
    except OSError:
        # Nobody reads the status any more: specgate gave up on this boot (stopped, interrupted,
        # gone). The server it would never track goes at once, not with the lifeline later.
        _kill_everything(child.pid)
        child.wait()
        return 1
    threading.Thread(target=_watch_parent, args=(parent, child.pid, note), daemon=True).start()

    def stopped(signum: int, _frame: object) -> None:
        # Whoever stops the supervisor itself means the server too (specgate signals the server's group).
        _kill_everything(child.pid)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stopped)
    code = child.wait()
    # What the server leaves behind (its group, detached helpers) goes with it.
    _kill_everything(child.pid)
    if code < 0:
        _die_by(-code)
    return code


def _die_by(signum: int) -> None:
    """End the supervisor by the signal that ended the server, so specgate reads the same death.

    SIGKILL and SIGSTOP cannot be caught: setting their disposition raises, and they need none
    (they are always default). Where the signal still does not end this process (it was ignored
    or blocked by whoever started us), exit as a shell reports a death by signal: 128 + signum."""
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # uncatchable (SIGKILL, SIGSTOP) or not a signal this platform names
    if signum not in _STOP_SIGNALS:  # these would freeze the supervisor, not end it
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
    os._exit(128 + signum)


_STOP_SIGNALS = frozenset({signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
