"""Servers left behind by a specgate that was killed outright (SIGKILL, OOM killer).

The parent-death signal reaches only the direct child; with a wrapper launch command
(`bash -c …`, docker, torchrun) the server proper is a grandchild and lives on, holding
its port and GPU memory. So each run records itself in a small file, marks every
process it starts with its run id in the environment (inherited through any wrapper),
and the next start stops the marked processes of every recorded run whose specgate
is gone. Runs whose specgate still lives (another user's, or a parallel job) are left
alone.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import psutil

RUN_ID_ENV = "SPECGATE_RUN_ID"
STATE_DIR_ENV = "SPECGATE_STATE_DIR"


def state_dir() -> Path:
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specgate" / "runs"


class RunRecord:
    """This process's entry: written when it starts its first server, removed when it ends cleanly."""

    def __init__(self) -> None:
        self.run_id = uuid.uuid4().hex
        self.path = state_dir() / f"{self.run_id}.json"
        self._written = False

    def mark(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for a server about to start, with this run's id; records the run first."""
        if not self._written:
            me = psutil.Process()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(
                    json.dumps({"run_id": self.run_id, "owner_pid": me.pid, "owner_created": me.create_time()})
                )
                self._written = True
            except OSError:
                pass  # without a record only this safety net is lost; the run itself is fine
        return {**env, RUN_ID_ENV: self.run_id}

    def remove(self) -> None:
        if self._written:
            self.path.unlink(missing_ok=True)
            self._written = False


def _owner_alive(record: dict) -> bool:
    try:
        return psutil.Process(int(record["owner_pid"])).create_time() == float(record["owner_created"])
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _marked(run_ids: set[str]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_ID_ENV) in run_ids:
                found.append(proc)
        except psutil.Error:
            continue  # gone, a zombie, or another user's
    return found


def reap_orphans(wait_s: float = 10.0) -> list[str]:
    """Kill the servers of recorded runs whose specgate is dead; returns what was killed."""
    folder = state_dir()
    if not folder.is_dir():
        return []
    dead: dict[str, Path] = {}
    for path in folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if not isinstance(record, dict) or not _owner_alive(record):
            dead[str(record.get("run_id") if isinstance(record, dict) else "")] = path
    if not dead:
        return []
    victims = _marked(set(dead))
    killed = []
    for proc in victims:
        try:
            killed.append(f"pid {proc.pid} ({' '.join(proc.cmdline())[:120]})")
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(victims, timeout=wait_s)
    for path in dead.values():
        path.unlink(missing_ok=True)
    return killed
