"""The launcher interface: how a config's server comes to exist and goes away.

`local` starts SGLang as a child process group on this machine; `url` attaches to a
server someone else runs; `ssh` starts it on remote hosts, one ssh session per node
(SGLang's multi-node mode where launch.ssh.hosts names several), each in a remote
process group of its own, and reaches its port through `ssh -L` or directly.

Every launcher answers the same calls (Launcher below): start returns at once, so boots
overlap; wait_ready fails with the log's tail; stop leaves nothing running, and is safe to
call twice; stop_all is the fast last resort of a run that is interrupted or dies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from specgate.client import HEALTH_PROBE_S, UNAUTHORIZED, SglangClient
from specgate.deployment import Deployment, ServerConfig
from specgate.errors import ServerBootError, Unauthorized
from specgate.secrets import redact


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
    last_probe: str = ""  # why the last readiness probe failed, for the boot timeout's message

    def describe(self) -> str:
        where = f"pid {self.pid}, " if self.pid else ""
        return f"server for config {self.config!r} ({where}{redact(self.base_url)})"


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
    if deployment.launch.launcher == "ssh":
        from specgate.server.ssh import SshLauncher

        return SshLauncher(deployment, log_dir)
    from specgate.server.local import LocalLauncher

    return LocalLauncher(deployment, log_dir)


def unauthorized(deployment: Deployment, server: str, status: int, what: str) -> str:
    """"config 'x': unauthorized (HTTP 401): <what> ...", naming the credential fields specgate
    sent the server's requests with (or that it sent none), and where they are set."""
    config = server.rpartition("@")[0] if "@" in server else server  # a replicate boot's name: CONFIG@K
    url = deployment.configs[config].url if config in deployment.configs else None
    sent = []
    if deployment.launch.api_key_env is not None:
        sent.append(
            f"launch.api_key_env (${deployment.launch.api_key_env}, sent as the Bearer key: it must hold "
            "the key the server was started with, --api-key)"
        )
    if url is not None and (urlsplit(url).username or urlsplit(url).password):
        sent.append(f"configs.{config}.url's user:password (sent as Basic authorization)")
    credentials = (
        "check " + " and ".join(sent)
        if sent
        else "specgate sent no credentials: set launch.api_key_env to the variable that holds the server's "
        f"--api-key, or put user:password@ in configs.{config}.url where a proxy in front asks for them"
    )
    return (
        f"config {config!r}: unauthorized (HTTP {status}): {what} refused specgate's credentials; "
        f"{credentials} (in {deployment.path})"
    )


def ready_or_stopped(
    launcher: Launcher,
    handle: ServerHandle,
    timeout_s: float,
    progress: BootProgress | None,
    status_line: Callable[[], str],
    check_alive: Callable[[], None],
    stopped: str,
    deployment: Deployment,
) -> None:
    """Wait for the server; one that is not ready in time, or that refuses specgate's
    credentials, is described (log tail while it is still there), stopped, and raised as
    ServerBootError saying what was `stopped`."""
    try:
        ready = poll_until_ready(handle, timeout_s, progress, status_line, check_alive, deployment)
    except Unauthorized as exc:
        launcher.stop(handle)
        raise Unauthorized(f"{exc} ({stopped})") from None
    if ready:
        return
    description = launcher.exit_description(handle)
    launcher.stop(handle)
    raise ServerBootError(
        f"{handle.config!r} was not ready after launch.boot_timeout_s = {timeout_s:g} s "
        f"(/health_generate never answered 200{last_probe(handle)}; {stopped}).\n{description}"
    )


def last_probe(handle: ServerHandle) -> str:
    """", the last probe: <why it failed>" where a probe failed for a reason worth naming."""
    return f"; the last probe: {handle.last_probe}" if handle.last_probe else ""


def poll_until_ready(
    handle: ServerHandle,
    timeout_s: float,
    progress: BootProgress | None,
    status_line: Callable[[], str],
    check_alive: Callable[[], None] = lambda: None,
    deployment: Deployment | None = None,
) -> bool:
    """Poll /health_generate until it answers 200 (True) or `timeout_s` passes (False).

    `check_alive` raises when the server is gone, so a dead process fails the boot at
    once instead of at the timeout; a server that refuses the credentials (HTTP 401 or 403)
    raises Unauthorized at once, as waiting would not change its answer. No probe outlasts the time left (a server that answers
    headers and trickles the body would hold it forever). Sets `handle.boot_s` and
    `handle.last_probe` either way."""
    started = time.monotonic()
    client = SglangClient(handle.base_url, timeout_s=HEALTH_PROBE_S)
    handle.boot_s = 0.0
    try:
        while True:
            elapsed = time.monotonic() - started
            check_alive()
            ready = client.is_ready(within_s=max(0.5, min(HEALTH_PROBE_S, timeout_s - elapsed)))
            handle.last_probe = client.last_probe
            if client.last_status in UNAUTHORIZED and deployment is not None:
                what = f"GET {redact(handle.base_url)}/health_generate"
                raise Unauthorized(unauthorized(deployment, handle.config, client.last_status, what))
            if ready:
                handle.boot_s = time.monotonic() - handle.started_at
                return True
            if elapsed > timeout_s:
                handle.boot_s = time.monotonic() - handle.started_at
                return False
            if progress is not None:
                progress.update(handle.config, elapsed, status_line())
            time.sleep(0.2 if elapsed < 5 else 1.0)
    finally:
        if not handle.boot_s:  # a boot that died (check_alive raised) took time too
            handle.boot_s = time.monotonic() - handle.started_at
        client.close()
