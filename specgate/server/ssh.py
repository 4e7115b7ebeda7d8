"""The `ssh` launcher: SGLang (or the simulator) on remote hosts, one ssh session per node.

Each node of a server is one `ssh HOST sh -c BOOT_SCRIPT` (specgate/server/ssh_command.py):
the remote side runs the server in a process group of its own and reports its id, the
session's output is the server's log (copied here through the key masker), and the
session's input stays open for as long as specgate wants the server: when it closes,
because specgate stopped, died or lost the connection, the remote side stops the group.
Stopping is explicit as well: a second ssh connection sends TERM to the group, then
KILL after launch.shutdown_timeout_s, and waits until the group is gone.

With several hosts the server is SGLang's multi-node mode: every node gets the same
command with `--nnodes N --node-rank I --dist-init-addr HOSTS[0]:PORT`; rank 0 serves
HTTP. The server counts as alive only while every node's session (and the port forward)
is; a node that fails to boot fails the server, and every node is stopped.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from specgate import project
from specgate.atomic import open_own
from specgate.deployment import Deployment, ServerConfig, SshSpec, expand_placeholders
from specgate.errors import ServerBootError, SpecgateError
from specgate.secrets import api_key, copy_masked, key_to_mask, redact, redact_file
from specgate.server.launcher import BootProgress, ServerHandle, ready_or_stopped
from specgate.server.local import _die_with_parent, free_port, open_log, tail
from specgate.server.ssh_command import (
    CD_FAILED_EXIT,
    GONE_MARK,
    PGID_MARK,
    boot_command,
    boot_input,
    forward_command,
    kill_command,
)

SSH_FAILED_EXIT = 255  # ssh's own failure: connection, authentication, host key
PGID_WAIT_S = 20.0  # a boot session reports its group within one connection (ConnectTimeout 15 s)
KILL_EXTRA_S = 30.0  # beyond the shutdown timeout: the kill connection's own time


@dataclass
class _Node:
    rank: int
    host: str
    proc: subprocess.Popen
    log_path: Path
    reader: threading.Thread | None = None
    pgid: int | None = None
    reported: threading.Event = field(default_factory=threading.Event)  # pgid known, or the session ended

    @property
    def field(self) -> str:
        return f"launch.ssh.hosts[{self.rank}]"

    def name(self, nodes: int) -> str:
        return f"node {self.rank} of {nodes} ({self.host}, {self.field})"


@dataclass
class _Server:
    handle: ServerHandle
    nodes: list[_Node]
    forward: subprocess.Popen | None = None
    forward_errors: collections.deque = field(default_factory=lambda: collections.deque(maxlen=20))


class SshLauncher:
    def __init__(self, deployment: Deployment, log_dir: Path) -> None:
        assert deployment.launch.ssh is not None  # checked when the deployment was read
        self.deployment = deployment
        self.spec: SshSpec = deployment.launch.ssh
        self.log_dir = log_dir
        self._servers: dict[str, _Server] = {}
        self._lock = threading.RLock()  # stop_all may run from a signal handler on this thread
        self._logged: set[str] = set()

    # --- starting ---------------------------------------------------------------------------
    @property
    def _key(self) -> str | None:
        return key_to_mask(self.deployment.launch.api_key_env)

    def _local_values(self) -> dict[str, str]:
        return {"python": sys.executable, "repo": str(project.current().root)}

    @property
    def directory(self) -> str | None:
        """The remote working directory, with this machine's {repo} and {python} filled in."""
        d = self.spec.directory
        return expand_placeholders(d, self._local_values()) if d is not None else None

    def node_argv(self, config: ServerConfig, rank: int, port: int, nccl_port: int, dist_port: int) -> list[str]:
        """The server's command on node `rank`, with the flags the launcher owns (key not included)."""
        launch = self.deployment.launch
        values = {
            "python": expand_placeholders(self.spec.python, self._local_values()),
            "repo": self.directory or "",
            "model": self.deployment.model,
        }
        parts = [expand_placeholders(p, values) for p in (*config.launch_command(launch), *launch.args, *config.args)]
        # forward: the server listens on the remote loopback only, reached through the tunnel.
        bind = "127.0.0.1" if self.spec.reach == "forward" else "0.0.0.0"
        parts += ["--host", bind, "--port", str(port), "--nccl-port", str(nccl_port)]
        if self.spec.nodes > 1:
            dist_host = self.spec.dist_init_host or self.spec.hosts[0]
            dist_host = f"[{dist_host}]" if ":" in dist_host else dist_host
            parts += ["--nnodes", str(self.spec.nodes), "--node-rank", str(rank)]
            parts += ["--dist-init-addr", f"{dist_host}:{dist_port}"]
        return parts

    def _env(self, config: ServerConfig) -> dict[str, str]:
        env = {"PYTHONUNBUFFERED": "1"}
        for name in self.spec.forward_env:
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(self.deployment.launch.env)
        env.update(config.env)
        env["SPECGATE_CONFIG"] = config.name  # lets a server (the simulator) know which config it is
        return env

    def start(self, config: ServerConfig) -> ServerHandle:
        try:
            key = api_key(self.deployment.launch.api_key_env)
        except SpecgateError as exc:  # the key's variable is unset
            raise ServerBootError(f"config {config.name!r}: {exc}") from None
        port, nccl_port = free_port(), free_port()
        dist_port = free_port() if self.spec.nodes > 1 else 0
        env = self._env(config)
        try:
            preamble = boot_input(key, env)
        except ValueError as exc:
            raise ServerBootError(f"config {config.name!r}: {exc}") from None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        mode = "ab" if config.name in self._logged else "wb"
        self._logged.add(config.name)
        if self.spec.reach == "forward":
            base_url = f"http://127.0.0.1:{free_port()}"
        else:
            host = self.spec.hosts[0]
            base_url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        handle = ServerHandle(config.name, base_url, self.log_dir / f"{config.name}.log")
        server = _Server(handle, [])
        with self._lock:
            self._servers[config.name] = server
        try:
            for rank, host in enumerate(self.spec.hosts):
                argv = self.node_argv(config, rank, port, nccl_port, dist_port)
                shown = f"ssh {host}: {' '.join(redact(a, key) for a in argv)}"
                if rank == 0:
                    handle.command = [shown]
                log_path = self.log_dir / (f"{config.name}.log" if rank == 0 else f"{config.name}.node{rank}.log")
                server.nodes.append(self._start_node(config, rank, host, argv, shown, log_path, mode, preamble, env))
            if self.spec.reach == "forward":
                server.forward = self._start_forward(server, int(base_url.rsplit(":", 1)[1]), port)
        except BaseException:
            self.stop(handle)
            raise
        return handle

    def _popen(self, command: list[str], **kwargs) -> subprocess.Popen:  # noqa: ANN003
        # pdeathsig is tied to the thread that forks: only safe from the main thread. With it, a
        # specgate killed outright takes its ssh sessions along, and their remote ends stop the servers.
        on_main = threading.current_thread() is threading.main_thread()
        return subprocess.Popen(
            command,
            start_new_session=True,  # Ctrl-C in the terminal reaches specgate, which stops the servers in order
            preexec_fn=_die_with_parent if on_main else None,
            **kwargs,
        )

    def _start_node(
        self,
        config: ServerConfig,
        rank: int,
        host: str,
        argv: list[str],
        shown: str,
        log_path: Path,
        mode: str,
        preamble: bytes,
        env: dict[str, str],
    ) -> _Node:
        command = boot_command(self.spec, host, self.directory, argv, self.deployment.launch.shutdown_timeout_s)
        with open_log(log_path, config.name, mode == "ab") as log:  # never into a link planted at the log's name
            where = f" in {self.directory}" if self.directory else ""
            log.write(
                f"\n=== specgate: starting {config.name} node {rank} of {self.spec.nodes} on {host}{where} over ssh "
                f"(environment: {', '.join(sorted(env))}): {shown}\n".encode()
            )
        try:
            proc = self._popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ServerBootError(
                f"config {config.name!r}: cannot start 'ssh' for node {rank} ({host}, launch.ssh.hosts[{rank}]): "
                f"{exc.strerror}"
            ) from None
        node = _Node(rank, host, proc, log_path)
        node.reader = threading.Thread(target=self._copy_output, args=(node,), daemon=True)
        node.reader.start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(preamble)  # key and environment: never on a command line
            proc.stdin.flush()  # stdin stays open: closing it tells the remote side to stop the server
        except OSError:
            pass  # ssh already exited (a wrong host): the boot fails with its message in the log
        return node

    def _copy_output(self, node: _Node) -> None:
        """The session's output into the node's log, masked; its first marker line is the group id."""
        stream = node.proc.stdout
        assert stream is not None
        key = self._key or ""
        try:
            with open_own(node.log_path, append=True, buffering=0) as log:
                for raw in iter(stream.readline, b""):
                    line = raw.decode("utf-8", "replace")
                    if line.startswith(PGID_MARK):
                        node.pgid = int(line[len(PGID_MARK) :].strip())
                        node.reported.set()
                        break
                    log.write(redact(line, key).encode())
            copy_masked(stream, node.log_path, key)
        except (OSError, ValueError):
            pass
        finally:
            node.reported.set()

    def _start_forward(self, server: _Server, local_port: int, remote_port: int) -> subprocess.Popen:
        host = self.spec.hosts[0]
        try:
            proc = self._popen(
                forward_command(self.spec, host, local_port, remote_port),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise ServerBootError(
                f"config {server.handle.config!r}: cannot start 'ssh -L' to {host}: {exc.strerror}"
            ) from None

        def keep_errors() -> None:
            assert proc.stderr is not None
            for raw in iter(proc.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                # Connections tried before the server listens fail on the remote side: expected while booting.
                if "open failed" not in line and "connect failed" not in line:
                    server.forward_errors.append(line)

        threading.Thread(target=keep_errors, daemon=True).start()
        return proc

    # --- watching ---------------------------------------------------------------------------
    def _server(self, handle: ServerHandle) -> _Server | None:
        server = self._servers.get(handle.config)
        return server if server is not None and server.handle is handle else None

    def alive(self, handle: ServerHandle) -> bool:
        server = self._server(handle)
        if server is None:
            return False
        if server.forward is not None and server.forward.poll() is not None:
            return False
        return all(node.proc.poll() is None for node in server.nodes)

    def _how(self, node: _Node) -> str:
        code = node.proc.poll()
        if code is None:
            return "is still running (alive, not ready)"
        if code < 0:
            return f"lost its ssh session (ssh was killed by signal {-code} on this machine)"
        if code == SSH_FAILED_EXIT:
            started = "after the server had started" if node.pgid is not None else "before the server started"
            return (
                f"lost its ssh session {started}: ssh failed (exit 255: connection refused or lost, unknown host, "
                f"authentication, host key); check {node.field}, launch.ssh.user, port, identity_file and options"
            )
        if code == CD_FAILED_EXIT and node.pgid is None:
            return f"could not enter launch.ssh.directory ({self.directory!r}) on {node.host}"
        if node.pgid is None and code == 127:
            return "could not start the server's command on the remote host (exit 127: a program not found there)"
        return f"exited with code {code}"

    def exit_description(self, handle: ServerHandle) -> str:
        server = self._server(handle)
        if server is None:
            return f"{handle.describe()} was stopped by specgate."
        nodes = self.spec.nodes
        lines = [f"{handle.describe()} on {nodes} node(s) over ssh:"]
        for node in server.nodes:
            group = f", remote process group {node.pgid}" if node.pgid is not None else ""
            lines.append(f"  {node.name(nodes)}{group}: {self._how(node)}")
        if server.forward is not None and server.forward.poll() is not None:
            errors = "; ".join(server.forward_errors) or "no message"
            lines.append(
                f"  the port forward (ssh -L to {self.spec.hosts[0]}) ended with code {server.forward.poll()}: {errors}"
            )
        lines.append(f"command: {' '.join(handle.command)}")
        # The log of the node that ended first is the one that says why; rank 0's when none did.
        dead = [n for n in server.nodes if n.proc.poll() is not None]
        for node in dead[:1] or server.nodes[:1]:
            if node.reader is not None:
                node.reader.join(timeout=2.0)  # the last lines of a session that just ended
            lines.append(f"log of {node.name(nodes)}: {node.log_path}")
            lines.append(f"--- last lines of the log ---\n{redact(tail(node.log_path), self._key)}")
        return "\n".join(lines)

    def wait_ready(self, handle: ServerHandle, progress: BootProgress | None) -> None:
        timeout = self.deployment.launch.boot_timeout_s

        def check_alive() -> None:
            if not self.alive(handle):
                description = self.exit_description(handle)
                self.stop(handle)  # every node, not only the one that failed
                raise ServerBootError(
                    f"{handle.config!r} never became ready: {description}\n(every node was stopped)", died=True
                )

        status = lambda: redact(tail(handle.log_path, 1), self._key)  # noqa: E731
        ready_or_stopped(self, handle, timeout, progress, status, check_alive, "every node was stopped", self.deployment)

    # --- stopping ---------------------------------------------------------------------------
    def stop(self, handle: ServerHandle) -> None:
        # The server stays in the table until every node is stopped, so an interrupt in the
        # middle of this still leaves it to stop_all.
        with self._lock:
            server = self._server(handle)
        if server is None:
            return
        problems: list[str] = []
        threads = [
            threading.Thread(target=lambda n=node: problems.extend(self._stop_node(n)), daemon=True)
            for node in server.nodes
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._end_local(server)
        with self._lock:
            if self._servers.get(handle.config) is server:
                del self._servers[handle.config]
        for node in server.nodes:
            redact_file(node.log_path, self._key)  # SGLang logs its server_args, key included
        for problem in problems:
            print(f"specgate: {handle.config}: {problem}", file=sys.stderr)

    def _stop_node(self, node: _Node) -> list[str]:
        """TERM the node's remote group, KILL it after the shutdown timeout; problems, if any."""
        grace = self.deployment.launch.shutdown_timeout_s
        node.reported.wait(timeout=PGID_WAIT_S if node.proc.poll() is None else 2.0)
        if node.pgid is None:
            return []  # nothing started remotely (or the session is stuck connecting: ending it suffices)
        command = kill_command(self.spec, node.host, node.pgid, grace)
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=grace + KILL_EXTRA_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [
                f"could not confirm node {node.rank} ({node.host}) stopped: {exc}; its ssh session is ended instead"
            ]
        if GONE_MARK not in done.stdout.decode(errors="replace"):
            said = (done.stdout + done.stderr).decode(errors="replace").strip()
            return [
                f"node {node.rank} ({node.host}, {node.field}): process group {node.pgid} not confirmed gone "
                f"(ssh exit {done.returncode}: {said[-300:]}); its ssh session is ended instead, which stops it "
                "where the connection still works"
            ]
        return []

    def _end_local(self, server: _Server) -> None:
        """End this machine's side: each node's session (closing its input), then the forward."""
        for node in server.nodes:
            try:
                if node.proc.stdin is not None:
                    node.proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 5.0
        for proc in [n.proc for n in server.nodes] + ([server.forward] if server.forward else []):
            if proc is server.forward:
                proc.terminate()
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for node in server.nodes:
            if node.reader is not None:
                node.reader.join(timeout=2.0)

    def stop_all(self) -> None:
        """Last-resort cleanup (atexit, signals): KILL every remote group at once, end every session."""
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        kills = []
        for server in servers:
            for node in server.nodes:
                if node.pgid is None:
                    continue
                try:
                    kills.append(
                        subprocess.Popen(
                            kill_command(self.spec, node.host, node.pgid, 0.5, "KILL"),
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                except OSError:
                    pass
        for server in servers:
            # Closing a session's input makes its remote side stop the group too, should the kill not get there.
            self._end_local(server)
        deadline = time.monotonic() + 10.0
        for kill in kills:
            try:
                kill.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill.kill()
        if self._key:
            for log in self.log_dir.glob("*.log"):
                redact_file(log, self._key)
