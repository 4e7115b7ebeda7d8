"""The ways specgate writes a file, none of which writes through a link.

Whole files (`write_json_atomic`, `write_bytes_atomic`): a temp file in the same folder and a
rename, so a write killed half-way leaves the old file intact, and no temp file that `git add
baselines/` would pick up. The rename replaces the name, never what a link there points to.

Files written as they grow (a server's log) or rewritten in place (`open_own`): a symbolic or
hard link, a FIFO or a device found at the name is removed first (the file it points to, or
shares its content with, is the user's and stays as it is), and the open refuses a link that
appears meanwhile (O_NOFOLLOW, then the link count of what was opened), so a link planted in a
used report folder (`logs/<config>.log` -> ~/notes.txt) never has a server log written into it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from specgate.secrets import redact_document


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: Path, document: object) -> None:
    """Write `document` to `path` through a temp file in the same folder and a rename."""
    text = json.dumps(redact_document(document), indent=2) + "\n"  # no credential in any stored document
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A write killed before its rename (SIGKILL, power loss) leaves its temp file: the next
    # write of the same file clears what earlier ones left.
    for stale in path.parent.glob(f".{path.stem}.*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); these files are shared like any committed file.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ensure_writable(folder: Path) -> None:
    """Raise OSError unless a file can be written into `folder` (made later where it is missing),
    leaving nothing behind: checked before a run whose end writes there, not after it."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder, is in the way", str(existing))
    with tempfile.TemporaryFile(dir=existing):
        pass


# Attempts at removing a link that something keeps putting back at the name, before giving up.
_OPEN_ATTEMPTS = 3


def _unlink_not_own(path: Path) -> None:
    """Remove what stands at `path` unless it is a plain file of its own (one name): a link is
    removed, never what it points to. A folder there is refused, naming it."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way of a file specgate writes", str(path))
    if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
        path.unlink(missing_ok=True)


def open_own(path: Path, append: bool = False, buffering: int = -1) -> BinaryIO:
    """`path` opened for writing (binary; emptied unless `append`) as a plain file of its own:
    whatever link stands there is removed first, and one that appears meanwhile is refused at
    the open (O_NOFOLLOW) or by the link count of what was opened, then removed in turn. The
    file is emptied only once it is known to be its own (never O_TRUNC through a hard link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    for _ in range(_OPEN_ATTEMPTS):
        _unlink_not_own(path)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symbolic link, a FIFO nobody reads: put there meanwhile
                continue
            raise
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode) and found.st_nlink == 1:
            if not append:
                os.ftruncate(fd, 0)
            os.set_blocking(fd, True)
            return os.fdopen(fd, "ab" if append else "wb", buffering=buffering)
        os.close(fd)
    raise OSError(errno.EEXIST, "a link or special file keeps being put at the name of a file specgate writes", str(path))
