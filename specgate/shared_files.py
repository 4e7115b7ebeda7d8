"""One lock for every file that runs share and change: the equivalence replay files (greedy and
sampling), the runner's history, a sweep's state.

Each is read, changed and written back whole (atomic.write_json_atomic). Two runs doing that
at once each write what they read plus their own change, and the later write drops the
other's: a replay case lost, a sweep's points gone. So every such change reads and writes under
`locked`, an exclusive lock on the folder that holds the file (flock on the folder itself):
- not on the file: the write replaces it by a rename, and a lock on the old file does not
  hold the new one;
- not on a lock file beside it (as the `filelock` package makes): the folders are committed
  (baselines/), and a lock file there would be too;
- the kernel releases the lock of a process that died, so a killed run leaves nothing to clear.

Re-entrant within one process (a sweep holds its folder for its whole run and saves its state
under that hold; flock would otherwise make one process wait for itself); other threads of
the process wait as other processes do.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specgate.errors import SpecgateError


class FolderInUse(SpecgateError):
    """Another process holds the lock of a shared file's folder, and this one was not to wait."""


_guard = threading.Lock()
_thread_locks: dict[Path, threading.RLock] = {}
_held: dict[Path, tuple[int, int]] = {}  # folder -> (its open fd holding the flock, depth)


@contextmanager
def locked(path: Path, wait: bool = True, in_use: str = "") -> Iterator[None]:
    """Hold the exclusive lock that every change of `path` (a file in a shared folder) takes:
    read it, change it and write it inside. `wait=False`: raise FolderInUse, naming the folder
    and `in_use` (what holding it means), instead of waiting for the holder."""
    folder = path.parent.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with _guard:
        thread_lock = _thread_locks.setdefault(folder, threading.RLock())
    if not thread_lock.acquire(blocking=wait):
        raise _in_use(folder, in_use)
    try:
        fd, depth = _held.get(folder, (-1, 0))
        if not depth:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                raise _in_use(folder, in_use) from None
        _held[folder] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = _held.pop(folder)
            if depth > 1:
                _held[folder] = (fd, depth - 1)
            else:
                os.close(fd)  # closing the last descriptor of the open file releases its flock
    finally:
        thread_lock.release()


def _in_use(folder: Path, in_use: str) -> FolderInUse:
    return FolderInUse(f"{folder}: in use by another specgate process, which holds the folder's lock" + (f": {in_use}" if in_use else ""))
