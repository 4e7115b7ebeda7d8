"""The `url` launcher: attach to servers someone else started; never stop them."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from specgate.deployment import Deployment, ServerConfig
from specgate.errors import ServerBootError, ServerUnavailable, SpecgateError
from specgate.secrets import expand_url, redact
from specgate.server.launcher import BootProgress, ServerHandle, last_probe, poll_until_ready


class UrlLauncher:
    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment

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
        if not poll_until_ready(handle, timeout, progress, lambda: f"waiting for {shown}", deployment=self.deployment):
            raise ServerUnavailable(
                f"config {handle.config!r}: {shown}/health_generate did not answer 200 within "
                f"launch.boot_timeout_s = {timeout:g} s (configs.{handle.config}.url in {self.deployment.path})"
                f"{redact(last_probe(handle))}"
            )

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
        pass
