"""Servers left behind by a specgate that was killed outright (SIGKILL, OOM killer).

The parent-death signal reaches only the direct child; with a wrapper launch command
(`bash -c …`, docker, torchrun) the server proper is a grandchild and lives on, holding
its port and GPU memory. So each run records itself in a small file, marks every
process it starts with its run id in the environment (inherited through any wrapper),
and the next start stops the marked processes of every recorded run whose specgate
is gone. Runs whose specgate still lives (another user's, or a parallel job) are left
alone.

A run records itself twice: in its state folder (SPECGATE_STATE_DIR, which CI jobs and
the self-tests set apart) and in one registry per user and machine (the runtime folder,
else the cache), so a later run with another state folder still finds what it left.

A state folder may be shared with other files (SPECGATE_STATE_DIR pointed at a folder of the
user's): only a record specgate wrote is ever removed there, one whose name is a run id
(`<32 hex digits>.json`) and whose content reads as a record of that run (`_Record`). Anything
else is left as it is, even a file that cannot be read.
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, ValidationError

from specgate.atomic import write_json_atomic
from specgate.secrets import redact

RUN_ID_ENV = "SPECGATE_RUN_ID"
STATE_DIR_ENV = "SPECGATE_STATE_DIR"
MACHINE_DIR_ENV = "SPECGATE_MACHINE_STATE_DIR"  # the self-tests keep their registry apart too
CONFIG_ENV = "SPECGATE_CONFIG"  # the config a server was started for (server/local.py sets it)
REAPED = "stopped a server left by a killed earlier run:"  # how each reaped server is announced
_RECORD_NAME = re.compile(r"[0-9a-f]{32}\.json")  # uuid4().hex: the only names a record has


class _Record(BaseModel):
    """A run's record as `RunRecord.mark` writes it, nothing more and nothing less."""

    model_config = ConfigDict(extra="forbid", strict=True)
    run_id: str
    owner_pid: int
    owner_created: float
    copies: list[str]
    # What the run was, for the notice of the run that reaps its servers; absent in older records.
    command: str | None = None
    started: str | None = None


def _cache_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specgate" / "runs"


def state_dir() -> Path:
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    return _cache_dir()


def machine_dir() -> Path:
    """The registry every run of this user on this machine shares, whatever its state folder:
    the runtime folder where there is one (it is emptied at reboot, when no pid is valid any more)."""
    if os.environ.get(MACHINE_DIR_ENV):
        return Path(os.environ[MACHINE_DIR_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "specgate" / "runs"
    return _cache_dir()


def record_dirs() -> list[Path]:
    """Where a run records itself, and where the next start looks: its state folder and the registry."""
    return list(dict.fromkeys((state_dir(), machine_dir())))


class RunRecord:
    """This process's entry: written when it starts its first server, removed when it ends cleanly."""

    def __init__(self) -> None:
        self.run_id = uuid.uuid4().hex
        self.paths = [folder / f"{self.run_id}.json" for folder in record_dirs()]
        self._written: list[Path] = []

    def mark(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for a server about to start, with this run's id; records the run first."""
        if not self._written:
            me = psutil.Process()
            record = _Record(
                # Every copy's path: the run that reaps this one removes them all, wherever it looked.
                run_id=self.run_id,
                owner_pid=me.pid,
                owner_created=me.create_time(),
                copies=[str(p) for p in self.paths],
                command=redact(" ".join(sys.argv))[:300],
                started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            ).model_dump()
            for path in self.paths:
                try:
                    # Whole or not at all: a half-written record would not read as one, and stay.
                    write_json_atomic(path, record)
                    self._written.append(path)
                except OSError:
                    pass  # without a record only this safety net is lost; the run itself is fine
        return {**env, RUN_ID_ENV: self.run_id}

    def remove(self) -> None:
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written = []


def _owner_alive(record: _Record) -> bool:
    try:
        return psutil.Process(record.owner_pid).create_time() == record.owner_created
    except (psutil.Error, ValueError):
        return False


def _read_record(path: Path) -> _Record | None:
    """The run record `path` holds, or None where it is not one specgate wrote (then it stays)."""
    if not _RECORD_NAME.fullmatch(path.name) or path.is_symlink() or not path.is_file():
        return None
    try:
        record = _Record.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None
    return record if record.run_id == path.stem else None


def _marked(run_ids: set[str]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_ID_ENV) in run_ids:
                found.append(proc)
        except psutil.Error:
            continue  # gone, a zombie, or another user's
    return found


def _dead_runs() -> dict[str, tuple[_Record, list[Path]]]:
    """Run id -> (its record, the files that hold it) for every recorded run whose specgate is gone."""
    dead: dict[str, tuple[_Record, list[Path]]] = {}
    for folder in record_dirs():
        if not folder.is_dir():
            continue
        for path in folder.glob("*.json"):
            record = _read_record(path)
            if record is None or _owner_alive(record):
                continue
            # Only copies that read as this same record: a record cannot have other files removed.
            copies = [Path(c) for c in record.copies]
            copies = [c for c in copies if c != path and (r := _read_record(c)) is not None and r.run_id == record.run_id]
            dead.setdefault(record.run_id, (record, []))[1].extend([path, *copies])
    return dead


def reap_orphans(wait_s: float = 10.0) -> list[str]:
    """Kill the servers of recorded runs whose specgate is dead; says what was killed, and whose."""
    dead = _dead_runs()
    if not dead:
        return []
    victims = _marked(set(dead))
    killed = []
    for proc in victims:
        try:
            env = proc.environ()
            run_id = env.get(RUN_ID_ENV, "")
            record, paths = dead[run_id]
            config = env.get(CONFIG_ENV)
            what = f"config {config!r}: " if config else ""
            started = f", started {record.started}" if record.started else ""
            command = f" `{record.command}`" if record.command else ""
            killed.append(
                f"pid {proc.pid} ({what}{redact(' '.join(proc.cmdline()))[:120]}) of run {run_id}{command}{started}, "
                f"whose specgate (pid {record.owner_pid}) is gone (recorded in {paths[0]})"
            )
            proc.kill()
        except (psutil.Error, KeyError):
            continue
    psutil.wait_procs(victims, timeout=wait_s)
    for _, paths in dead.values():
        for path in dict.fromkeys(paths):
            path.unlink(missing_ok=True)  # each read above as this run's record
    return killed
