"""The `url` launcher: attach to servers someone else started; never stop them."""

from __future__ import annotations

from specgate.deployment import Deployment, ServerConfig
from specgate.errors import ServerBootError
from specgate.server.launcher import BootProgress, ServerHandle, poll_until_ready


class UrlLauncher:
    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment

    def start(self, config: ServerConfig) -> ServerHandle:
        assert config.url is not None  # checked when the deployment was read
        return ServerHandle(config.name, config.url.rstrip("/"), log_path=None)

    def wait_ready(self, handle: ServerHandle, progress: BootProgress | None) -> None:
        timeout = self.deployment.launch.boot_timeout_s
        if not poll_until_ready(handle, timeout, progress, lambda: f"waiting for {handle.base_url}"):
            raise ServerBootError(
                f"config {handle.config!r}: {handle.base_url}/health_generate did not answer 200 within "
                f"launch.boot_timeout_s = {timeout:g} s (configs.{handle.config}.url in {self.deployment.path})"
            )

    def alive(self, handle: ServerHandle) -> bool:
        return True

    def exit_description(self, handle: ServerHandle) -> str:
        return f"{handle.describe()} (attached by URL; its log is wherever its owner keeps it)"

    def stop(self, handle: ServerHandle) -> None:
        pass  # not ours to stop

    def stop_all(self) -> None:
        pass
