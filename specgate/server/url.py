"""The `url` launcher: attach to servers someone else started; never stop them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from specgate.deployment import Deployment, ServerConfig
from specgate.errors import ServerBootError, ServerUnavailable, SpecgateError
from specgate.secrets import expand_url, redact
from specgate.server.launcher import BootProgress, ServerHandle, last_probe, poll_until_ready


class UrlLauncher:
    # Servers someone else runs are up (or starting) on their own: waiting for one after another
    # would add their boot_timeout_s together, so the pool waits for all of them at once.
    concurrent_waits = True

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self._stop_waiting = threading.Event()  # set by stop_all: waits in other threads end at their next probe

    def start(self, config: ServerConfig) -> ServerHandle:
        assert config.url is not None  # checked when the deployment was read
        try:
            url = expand_url(config.url, f"configs.{config.name}.url in {self.deployment.path}")
        except SpecgateError as exc:
            raise ServerBootError(f"config {config.name!r}: {exc}") from None
        return ServerHandle(config.name, url.rstrip("/"), log_path=None)

    def wait_ready(self, handle: ServerHandle, progress: BootProgress | None) -> None:
        timeout = self.deployment.launch.boot_timeout_s
        self._resolvable(handle)
        shown = redact(handle.base_url)
        between_probes = self._between_probes(handle, progress, timeout)
        ready = poll_until_ready(
            handle, timeout, progress, lambda: f"waiting for {shown}", between_probes, deployment=self.deployment
        )
        if not ready:
            raise ServerUnavailable(
                f"config {handle.config!r}: {shown}/health_generate did not answer 200 within "
                f"launch.boot_timeout_s = {timeout:g} s (configs.{handle.config}.url in {self.deployment.path})"
                f"{redact(last_probe(handle))}"
            )

    def _between_probes(self, handle: ServerHandle, progress: BootProgress | None, timeout: float) -> Callable[[], None]:
        """Run before each probe: ends the wait where the run stopped waiting (stop_all), and says
        at once, naming the url, that nothing took the connection, which a wrong address and a
        server still loading its weights both look like (so the wait goes on to boot_timeout_s)."""
        said = False

        def check() -> None:
            nonlocal said
            if self._stop_waiting.is_set():
                raise ServerUnavailable(f"config {handle.config!r}: the run stopped waiting for {redact(handle.base_url)}")
            if handle.unreached and not said and progress is not None:
                said = True
                progress.notice(
                    f"specgate: {handle.config}: nothing takes the connection at {redact(handle.base_url)} "
                    f"({handle.last_probe.rpartition(': ')[2]}); waiting up to launch.boot_timeout_s = {timeout:g} s "
                    f"in case it is starting (configs.{handle.config}.url in {self.deployment.path})"
                )

        return check

    def _resolvable(self, handle: ServerHandle) -> None:
        """A host name that does not resolve will not start resolving while we wait: say so
        now, not after boot_timeout_s of "waiting for" (a refused connection is waited out: the
        server may still be starting)."""
        parts = urlsplit(handle.base_url)
        if not parts.hostname:
            raise ServerBootError(
                f"config {handle.config!r}: {redact(handle.base_url)} names no host (configs.{handle.config}.url in {self.deployment.path})"
            )
        try:
            socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        except (socket.gaierror, UnicodeError) as exc:
            raise ServerUnavailable(
                f"config {handle.config!r}: the host of {redact(handle.base_url)} does not resolve ({exc}); "
                f"check configs.{handle.config}.url in {self.deployment.path}"
            ) from None

    def alive(self, handle: ServerHandle) -> bool:
        return True

    def exit_description(self, handle: ServerHandle) -> str:
        return f"{handle.describe()} (attached by URL; its log is wherever its owner keeps it)"

    def stop(self, handle: ServerHandle) -> None:
        pass  # not ours to stop

    def stop_all(self) -> None:
        self._stop_waiting.set()  # nothing of theirs to stop: only the waits for them
