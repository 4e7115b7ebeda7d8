"""The launcher interface: how a config's server comes to exist and goes away.

`local` starts SGLang as a child process group on this machine; `url` attaches to a
server someone else runs. An `ssh` launcher would implement the same two calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from specgate.deployment import Deployment, ServerConfig


class BootProgress(Protocol):
    """Told how boots go, for a progress display."""

    def update(self, config: str, elapsed: float, last_log_line: str) -> None: ...

    def finished(self, config: str, seconds: float, ok: bool) -> None: ...


@dataclass
class ServerHandle:
    config: str
    base_url: str
    log_path: Path | None
    command: list[str] = field(default_factory=list)
    pid: int | None = None
    started_at: float = field(default_factory=time.monotonic)  # boots overlap: time from start, not from wait
    boot_s: float = 0.0
    requests_served: int = 0

    def describe(self) -> str:
        where = f"pid {self.pid}, " if self.pid else ""
        return f"server for config {self.config!r} ({where}{self.base_url})"


class Launcher(Protocol):
    def start(self, config: ServerConfig) -> ServerHandle:
        """Begin starting the server; returns before it is ready."""

    def wait_ready(self, handle: ServerHandle, progress: BootProgress | None) -> None:
        """Block until ready; raise ServerBootError (with the log's tail) otherwise."""

    def alive(self, handle: ServerHandle) -> bool:
        """False once the server has exited (always True where that cannot be known)."""

    def exit_description(self, handle: ServerHandle) -> str:
        """Why the server is gone, with the log's tail, for error messages."""

    def stop(self, handle: ServerHandle) -> None:
        """Stop it and release what it held; must be safe to call twice."""

    def stop_all(self) -> None:
        """Last-resort cleanup from atexit or a signal: kill whatever is left, fast."""


def make_launcher(deployment: Deployment, log_dir: Path) -> Launcher:
    if deployment.launch.launcher == "url":
        from specgate.server.url import UrlLauncher

        return UrlLauncher(deployment)
    from specgate.server.local import LocalLauncher

    return LocalLauncher(deployment, log_dir)
