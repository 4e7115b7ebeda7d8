"""A private OpenSSH server on localhost for the ssh launcher's self-tests.

Debian's openssh-server, started as the current user on a free port with a throwaway host
key and one authorized client key, all in a temporary folder: no system configuration is
read or changed (as root, sshd insists on its privilege-separation folder /run/sshd, which
is created when missing, as the package's service would). Where sshd is not installed the
tests fail, not skip: a gate whose ssh launcher was never exercised must not look green.
SPECGATE_NO_SSHD=1 says it is known to be absent, and then they skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
NO_SSHD_ENV = "SPECGATE_NO_SSHD"


def require_sshd() -> None:
    missing = [p for p in (str(SSHD), "ssh", "ssh-keygen") if shutil.which(p) is None]
    if not missing:
        return
    if os.environ.get(NO_SSHD_ENV) == "1":
        pytest.skip(f"{NO_SSHD_ENV}=1: OpenSSH ({', '.join(missing)}) is known to be absent here")
    pytest.fail(
        f"the ssh launcher's tests need OpenSSH ({', '.join(missing)} not found): install openssh-server and "
        f"openssh-client (.ci/run does), or set {NO_SSHD_ENV}=1 to skip them knowingly"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specgate-test", "-f", str(path)], check=True)
    return path


class LocalSshd:
    def __init__(self, folder: Path) -> None:
        require_sshd()
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        host_key = keygen(folder / "host_key")
        self.identity = keygen(folder / "client_key")
        (folder / "authorized_keys").write_text(Path(f"{self.identity}.pub").read_text())
        self.port = _free_port()
        host_pub = Path(f"{host_key}.pub").read_text().split()[:2]
        self.known_hosts = folder / "known_hosts"
        self.known_hosts.write_text(
            "".join(f"[{name}]:{self.port} {' '.join(host_pub)}\n" for name in ("127.0.0.1", "localhost"))
        )
        config = folder / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nLogLevel ERROR\n"
            "MaxStartups 50\nMaxSessions 50\n"
        )
        if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
            Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self.log = folder / "sshd.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with code {self.proc.returncode}: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not listen on port {self.port} within 15 s: {self.log.read_text()}")

    def ssh_table(self, hosts: list[str] | None = None, **extra: object) -> dict:
        """A `[launch.ssh]` table that reaches this server (as the current user)."""
        options = [
            "-F", "/dev/null",  # the user's own ~/.ssh/config must not change what the tests do
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes",
        ]  # fmt: skip
        table = {
            "hosts": hosts or ["127.0.0.1"],
            "port": self.port,
            "identity_file": str(self.identity),
            "options": options + list(extra.pop("options", [])),  # type: ignore[call-overload]
        }
        return {**table, **extra}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
