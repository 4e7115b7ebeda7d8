"""The report folder: specgate writes only into a folder it owns, removes only what it wrote
there, and lets one run at a time use it.

A folder is specgate's when it holds the marker file (`.specgate-report.json`), which specgate
writes into a folder that was empty or did not exist. The marker's manifest lists the files
specgate wrote there: the report's own names, and what appeared during a run under the names
specgate writes (server logs, the golden file, benchmark.json). A new run removes exactly
those, so the previous run's report never stands beside this run's logs, and nothing else in
the folder is touched. A folder that holds files but no marker (the project's root as
`report_dir = "."`, a folder of an older specgate) is refused, naming it and the setting.

One run at a time: the marked folder's lock file is held (flock) for the run's whole life; a
second run is refused with the holder's pid. The kernel releases a lock whose process died, so
a run that was killed leaves no lock to clear by hand; the next run says whose it took over.

Links are never written through: the lock is truncated and rewritten, and the servers' logs are
written into `logs/`, so a lock that is a symbolic or hard link, or a `logs` that is a symbolic
link (or not a folder), is refused, naming it, before anything there is removed or written. A
link at a file's name (`logs/<config>.log`, report.md) is removed, not followed: the claim removes
those it finds, and every writer opens its file through atomic.open_own or writes it whole
through a rename, which replace the link and leave the file it points to as it was.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import islice
from pathlib import Path

from specgate.atomic import write_json_atomic
from specgate.documents import parse_json
from specgate.errors import SpecgateError

MARKER = ".specgate-report.json"
LOCK = ".specgate-report.lock"
FORMAT = "specgate-report-folder/1"
# Written by every run that gets as far as its report (listed before they exist: a run killed
# after writing one still has it removed by the next).
REPORT_FILES = ("report.md", "report.json", "report.png", "context.png", "benchmark.json")
# The names specgate writes into a report folder: only a file of these names that appeared
# during a run is recorded as written by it.
WRITTEN_NAMES = (*REPORT_FILES, "history.png", "*-golden.json", "logs/*.log")  # history.png: a run with history
LOGS = "logs"  # the servers' logs: the one folder inside that specgate writes into


class ReportFolderError(SpecgateError):
    """The report folder cannot be used: not specgate's, in use by another run, or unwritable."""


@dataclass
class ReportFolder:
    path: Path
    source: str  # where it was named: "--report-dir", "report_dir in …/specgate.toml"
    lock_fd: int
    before: frozenset[str]  # files there once the previous run's were removed: not this run's
    notes: list[str] = field(default_factory=list)  # what the claim did that the user should know
    depth: int = 1  # claims of it in this process (the CLI's, then its in-process pytest's)

    def record(self) -> None:
        """Write the manifest: the report files and what this run wrote under specgate's names."""
        now = _files(self.path)
        written = sorted({*REPORT_FILES, *(f for f in now - self.before if _ours(f))})
        write_json_atomic(self.path / MARKER, {"format": FORMAT, "written": written})

    def release(self) -> None:
        self.depth -= 1
        if self.depth:
            return
        _held.pop(self.path, None)
        try:
            self.record()
        except OSError as exc:  # the run's own verdict stands; the next run says what it could not remove
            print(f"specgate: {self.source} ({self.path}): manifest not written: {exc}", file=sys.stderr)
        finally:
            os.ftruncate(self.lock_fd, 0)  # an empty lock file: released, not left by a dead run
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
            os.close(self.lock_fd)


_held: dict[Path, ReportFolder] = {}


def _walk(folder: Path) -> Iterator[str]:
    """Every file under `folder` (relative, '/'-separated), the marker, its temp files and the lock aside."""
    for path in folder.rglob("*"):
        if path.is_file() or path.is_symlink():
            rel = path.relative_to(folder).as_posix()
            if rel not in (MARKER, LOCK) and not rel.startswith(f".{Path(MARKER).stem}."):
                yield rel


def _files(folder: Path) -> set[str]:
    return set(_walk(folder))


def _ours(rel: str) -> bool:
    return any(rel.count("/") == name.count("/") and fnmatchcase(rel, name) for name in WRITTEN_NAMES)


def require_writable(folder: Path, source: str, holds: str) -> Path:
    """`folder` made where it is missing and shown writable by writing into it, before any server
    boots: a read-only one (a tmpfs mounted ro, a chmod 555 folder) would otherwise fail at the
    first log a boot opens, as a traceback. Raises ReportFolderError naming it and what it is for."""
    import tempfile

    folder = folder.resolve()
    try:
        if folder.exists() and not folder.is_dir():
            raise _refuse(folder, source, "it is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise _refuse(
            folder, source, f"expected a folder this user can write ({holds} go there), got: {exc.strerror or exc}"
        ) from None
    return folder


def _refuse(folder: Path, source: str, what: str) -> ReportFolderError:
    return ReportFolderError(f"{source} ({folder}): cannot be used as the report folder: {what}")


def claim(folder: Path, source: str) -> ReportFolder:
    """Take `folder` for this run: refuse it where it is not specgate's or another run holds it,
    then remove what the previous run wrote there. A second claim in this process (the CLI's
    pytest) shares the first; each claim is paired with a `release`."""
    folder = folder.resolve()
    if folder in _held:
        _held[folder].depth += 1
        return _held[folder]
    try:
        if folder.exists() and not folder.is_dir():
            raise _refuse(folder, source, "it is a file, not a folder")
        if not (folder / MARKER).is_file():
            # The first few are enough to name (a project's root can hold a great many).
            strangers = list(islice(_walk(folder), 4)) if folder.is_dir() else []
            if strangers:
                shown = ", ".join(strangers[:3]) + (", …" if len(strangers) > 3 else "")
                raise _refuse(
                    folder,
                    source,
                    f"it holds files specgate did not write ({shown}) and no {MARKER} marker. specgate writes its "
                    "report only into an empty or new folder, and removes only what it wrote there; name another "
                    "folder (e.g. specgate-report), or empty this one (an older specgate's report folder has no "
                    "marker: delete it)",
                )
        check_logs_folder(folder, source)
        folder.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(folder, source)
    except OSError as exc:
        raise _refuse(folder, source, str(exc) + _stale_removed(folder, source, exc)) from None
    try:
        notes = _lock(fd, folder, source)
        # Held: the previous run's files go first, so that a write this run cannot make (a full
        # disk) leaves no report of that run standing beside its refusal.
        written = _manifest(folder, source)
        for rel in written:
            (folder / rel).unlink(missing_ok=True)
        _unlink_links(folder)
        _write_holder(fd)
        write_json_atomic(folder / MARKER, {"format": FORMAT, "written": list(REPORT_FILES)})
    except OSError as exc:
        os.close(fd)
        raise _refuse(folder, source, str(exc)) from None
    except BaseException:
        os.close(fd)
        raise
    claimed = ReportFolder(folder, source, fd, frozenset(_files(folder)), notes)
    _held[folder] = claimed
    return claimed


def _unlink_links(folder: Path) -> None:
    """Remove every link at a name specgate writes (the link, never its file): pytest-benchmark
    opens benchmark.json itself, following what it finds; specgate's own writers open_own."""
    for rel in _walk(folder):
        if _ours(rel):
            found = (folder / rel).lstat()
            if stat.S_ISLNK(found.st_mode) or found.st_nlink != 1:
                (folder / rel).unlink(missing_ok=True)


def _stale_removed(folder: Path, source: str, exc: OSError) -> str:
    """Where the lock could not even be made for want of space, no run holds the folder (a holder
    keeps its lock file): the previous run's report is removed, freeing space rather than taking
    it, so its PASS cannot stand beside this run's refusal. Said as a clause of the refusal."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or (folder / LOCK).exists() or not (folder / MARKER).is_file():
        return ""
    try:
        removed = [rel for rel in _manifest(folder, source) if (folder / rel).is_file()]
        for rel in removed:
            (folder / rel).unlink()
    except (OSError, SpecgateError):
        return ""
    return f"; the previous run's report ({', '.join(removed)}) was removed so that it cannot stand for this run" if removed else ""


def check_logs_folder(folder: Path, source: str) -> None:
    """Refuse a `logs` in `folder` that is a symbolic link or not a folder: the servers' logs
    would be written, and the previous run's removed, wherever it points."""
    logs = folder / LOGS
    if logs.is_symlink():
        raise _refuse(
            folder, source, f"{logs}: is a symbolic link (to {os.readlink(logs)}): specgate writes the servers' logs "
            "only into a folder of its own there; remove the link"
        )
    if logs.exists() and not logs.is_dir():
        raise _refuse(folder, source, f"{logs}: is not a folder: specgate writes the servers' logs there; remove it")


def _open_lock(folder: Path, source: str) -> int:
    """The lock file, opened only where it is a plain file of its own: it is truncated and
    rewritten, so a link planted there would empty whatever it points to. O_NOFOLLOW refuses a
    symbolic link at the open itself (no check-then-open race); O_NONBLOCK keeps a FIFO from
    hanging it; a hard link (two names, one content) is refused by its link count."""
    path = folder / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise _refuse(folder, source, f"{path}: is a symbolic link, not specgate's lock file; remove it") from None
    found = os.fstat(fd)
    problem = (
        "is not a regular file" if not stat.S_ISREG(found.st_mode)
        else f"has {found.st_nlink} names (a hard link: another file's content)" if found.st_nlink != 1
        else None
    )
    if problem:
        os.close(fd)
        raise _refuse(folder, source, f"{path}: {problem}, not specgate's lock file; remove it")
    return fd


def _lock(fd: int, folder: Path, source: str) -> list[str]:
    """Hold the folder's lock; the holder's pid in the refusal; a dead holder's lock said taken over."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        who = f"pid {holder.get('pid', '?')} ({holder.get('command', 'a specgate run')})" if holder else "another run"
        raise _refuse(
            folder,
            source,
            f"in use by {who}, which holds {folder / LOCK}: two runs in one folder would remove each other's logs "
            "and reports. Wait for it to end, or give this run another folder",
        ) from None
    notes = []
    previous = _holder(fd)
    if previous:
        notes.append(
            f"{folder}: took over the report folder's lock of pid {previous.get('pid', '?')}, which ended without "
            "releasing it (killed?): its files there are removed as usual"
        )
    return notes


def _write_holder(fd: int) -> None:
    """This run's pid in the lock it holds, for a second run's refusal to name."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "started": time.time(), "command": " ".join(sys.argv)}).encode(), 0)


def _holder(fd: int) -> dict:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        found = parse_json(text) if text else {}
    except (OSError, ValueError):
        return {"pid": "?"}
    return found if isinstance(found, dict) else {"pid": "?"}


def _manifest(folder: Path, source: str) -> list[str]:
    """What the marker says specgate wrote there; only names specgate writes, inside the folder."""
    marker = folder / MARKER
    try:
        document = parse_json(marker.read_text(encoding="utf-8")) if marker.is_file() else {"written": []}
    except (OSError, ValueError) as exc:
        raise _refuse(folder, source, f"{marker} cannot be read ({exc}); delete it if the folder is specgate's") from None
    written = document.get("written") if isinstance(document, dict) else None
    if not isinstance(written, list) or not all(isinstance(w, str) for w in written):
        raise _refuse(folder, source, f"{marker}: field 'written': expected a list of file names")
    return [w for w in written if _ours(w)]  # a hand-edited manifest cannot name a file elsewhere


def held(folder: Path) -> ReportFolder | None:
    return _held.get(folder.resolve())
