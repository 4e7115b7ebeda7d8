"""One way to write a stored JSON document: whole or not at all, shareable, no litter.

Baselines, calibration records and the equivalence replay file are committed by users;
a write killed half-way must leave the old file intact and no temp file that
`git add baselines/` would pick up.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

from specgate.secrets import redact_document


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: Path, document: object) -> None:
    """Write `document` to `path` through a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A write killed before its rename (SIGKILL, power loss) leaves its temp file: the next
    # write of the same file clears what earlier ones left.
    for stale in path.parent.glob(f".{path.stem}.*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); these files are shared like any committed file.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(redact_document(document), f, indent=2)  # no credential in any stored document
            f.write("\n")
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
