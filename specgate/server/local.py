"""The `local` launcher: SGLang (or the simulator) as a child process group.

Each server gets its own process group so that teardown reaches the scheduler and
detokenizer processes SGLang forks, not only the launcher. Teardown is SIGTERM to the
group, then SIGKILL after the shutdown timeout, then a wait until the GPU memory those
processes held is released, before the next boot may start. Each server runs under a
supervisor (`supervise.py`, in a session of its own) that kills the group when specgate
dies by a means that leaves it no teardown (SIGKILL of specgate or of its process group).
"""

from __future__ import annotations

import ctypes
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

import psutil

from specgate import project
from specgate.atomic import open_own
from specgate.deployment import Deployment, ServerConfig, expand_placeholders
from specgate.errors import ServerBootError, SpecgateError
from specgate.hardware import memory_used_mib, wait_gpu_released
from specgate.secrets import api_key, copy_masked, key_to_mask, redact, redact_file
from specgate.server import affinity
from specgate.server.launcher import BootProgress, ServerHandle, ready_or_stopped
from specgate.server.orphans import REAPED, RunRecord, reap_orphans

_PR_SET_PDEATHSIG = 1
_handed_out: set[int] = set()
# Run by path, not as a module: the server's environment may set PYTHONPATH to anything.
SUPERVISOR = Path(__file__).with_name("supervise.py")
# The supervisor is a fresh Python: on a loaded 2-core runner it can take seconds to say it started.
SUPERVISOR_START_S = 60.0
# How long an ended server's last output may take to reach its log through the masker.
COPIER_DRAIN_S = 5.0


# SGLang derives further ports from --port (0.5.11: a gRPC port at port + 10000, which
# must stay <= 65535), so ports come from a range with that much room above it.
PORT_RANGE = (20000, 55000)
DERIVED_PORT_OFFSETS = (10000,)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now (nor on the ports SGLang derives from it),
    never the same twice in one session."""
    rng = random.Random()
    for _ in range(2000):
        port = rng.randrange(*PORT_RANGE)
        if port in _handed_out or not _bindable(port):
            continue
        if all(_bindable(port + off) for off in DERIVED_PORT_OFFSETS):
            _handed_out.add(port)
            return port
    raise ServerBootError(f"no free port found in {PORT_RANGE[0]}-{PORT_RANGE[1]} after 2000 tries")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if specgate itself is killed (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def signal_name(signum: int) -> str:
    """SIGKILL for 9: a death by signal is read by its name (the OOM killer's is SIGKILL)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "a signal this platform does not name"


def tail(path: Path | None, lines: int = 30) -> str:
    if path is None or not path.exists():
        return "(no log)"
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 64 * 1024))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def open_log(log_path: Path, config: str, append: bool) -> BinaryIO:
    """A server's log, opened as atomic.open_own does (never through a link); ServerBootError
    naming the log and the config where it cannot be (a folder in its place, no space)."""
    try:
        return open_own(log_path, append=append)
    except OSError as exc:
        raise ServerBootError(f"config {config!r}: cannot write its log {log_path}: {exc.strerror or exc}") from None


def group_pids(pgid: int) -> set[int]:
    """Every live (not zombie) process in process group `pgid`."""
    pids = set()
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                pids.add(proc.pid)
        except (OSError, psutil.Error):  # gone between the listing and the look
            continue
    return pids


class LocalLauncher:
    def __init__(self, deployment: Deployment, log_dir: Path, shares_the_gpu: bool = False) -> None:
        """`shares_the_gpu`: processes not ours start and stop on the GPU meanwhile, so total memory
        in use says nothing about whether a stopped server released its share; only its processes
        are watched then."""
        self.deployment = deployment
        self.log_dir = log_dir
        self._procs: dict[int, subprocess.Popen] = {}
        # Per server: the thread copying its output into its log through the masker.
        self._copiers: dict[int, threading.Thread] = {}
        self._lock = threading.RLock()  # stop_all may run from a signal handler on this thread
        self.unreleased: str | None = None  # set when a stopped server's GPU memory stayed taken
        self._logged: set[str] = set()  # configs whose log this session already started
        # Kept for the run's report and terminal summary: under pytest this stderr is captured.
        self.reaped = reap_orphans()
        for killed in self.reaped:
            print(f"specgate: {REAPED} {killed}", file=sys.stderr)
        self._record = RunRecord()
        # GPU memory in use before any server of ours
        self._idle_used_mib = None if shares_the_gpu else memory_used_mib()

    def command_for(self, config: ServerConfig, port: int, nccl_port: int) -> list[str]:
        launch = self.deployment.launch
        values = {"python": sys.executable, "repo": str(project.current().root), "model": self.deployment.model}
        parts = [expand_placeholders(p, values) for p in (*config.launch_command(launch), *launch.args, *config.args)]
        key = api_key(launch.api_key_env)
        secret = ["--api-key", key] if key else []
        return parts + secret + ["--host", "127.0.0.1", "--port", str(port), "--nccl-port", str(nccl_port)]

    def cpus_for(self, server: str) -> list[int]:
        """The CPU slice `server` is pinned to (launch.cpu_affinity = "split"), or [] for none:
        a slice of every server that may be up beside it, so each boot gets the same one."""
        if self.deployment.launch.cpu_affinity != "split":
            return []
        servers = affinity.side_by_side(self.deployment) or [server]
        return affinity.split(servers, affinity.available_cpus()).get(server, [])

    def start(self, config: ServerConfig) -> ServerHandle:
        if self.unreleased:
            raise ServerBootError(f"not booting {config.name!r}: {self.unreleased}")
        port, nccl_port = free_port(), free_port()
        try:
            command = self.command_for(config, port, nccl_port)
        except SpecgateError as exc:  # the key's variable is unset
            raise ServerBootError(f"config {config.name!r}: {exc}") from None
        # What is written and shown: the command without its key.
        shown = [redact(part, self._key) for part in command]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{config.name}.log"
        env = self._record.mark({**os.environ, **self.deployment.launch.env, **config.env})
        env.setdefault("PYTHONUNBUFFERED", "1")
        env["SPECGATE_CONFIG"] = config.name  # lets a server (the simulator) know which config it is
        cpus = self.cpus_for(config.name)
        if cpus:
            env[affinity.CPUS_ENV] = affinity.cpu_list(cpus)
        pinned = f" (pinned to CPUs {affinity.cpu_list(cpus)})" if cpus else ""
        # A fresh log per session; a reboot in the same session (servers that cannot
        # coexist) appends, so the whole session's story stays in one file.
        append = config.name in self._logged
        self._logged.add(config.name)
        key = self._key
        # Never into a link planted at the log's name. `note`: the supervisor's own lines, which
        # must reach the log after specgate (and its masker) died.
        with open_log(log_path, config.name, append) as log, open_log(log_path, config.name, True) as note:
            log.write(f"\n=== specgate: starting {config.name}{pinned}: {' '.join(shown)}\n".encode())
            log.flush()
            status_r, status_w = os.pipe()
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-P", str(SUPERVISOR), "--status-fd", str(status_w), "--note-fd", str(note.fileno()), "--", *command],
                    # The server's output reaches the log only through the masker, key or none: SGLang
                    # prints its server_args (admin_api_key too) whether or not a key was given.
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    # The supervisor's lifeline: only this process writes it, so it ends when specgate does.
                    stdin=subprocess.PIPE,
                    env=env,
                    cwd=str(project.current().root),
                    start_new_session=True,  # outside specgate's group: a kill of that group must not take it
                    pass_fds=(status_w, note.fileno()),
                )
            except OSError as exc:
                os.close(status_r)
                raise ServerBootError(
                    f"config {config.name!r}: cannot start the server's supervisor {sys.executable!r} "
                    f"({exc.strerror}); command: {' '.join(shown)}"
                ) from None
            finally:
                os.close(status_w)
        copier = threading.Thread(target=copy_masked, args=(proc.stdout, log_path, key), daemon=True)
        copier.start()  # before the start is confirmed: a supervisor that cannot start says why in the log
        server_pid = self._server_pid(proc, status_r, config.name, shown, log_path, copier)
        with self._lock:
            self._procs[server_pid] = proc
            self._copiers[server_pid] = copier
        return ServerHandle(config.name, f"http://127.0.0.1:{port}", log_path, shown, server_pid)

    def _server_pid(
        self, proc: subprocess.Popen, status_r: int, name: str, shown: list[str], log_path: Path, copier: threading.Thread
    ) -> int:
        """The server's pid (its process group's id), as the supervisor reports it once the server
        is started; a command that cannot start is raised here, named, as if started directly."""
        line = b""
        try:
            deadline = time.monotonic() + SUPERVISOR_START_S
            while not line.endswith(b"\n") and time.monotonic() < deadline:
                if select.select([status_r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    chunk = os.read(status_r, 256)
                    if not chunk:
                        break
                    line += chunk
        finally:
            os.close(status_r)
        word, _, rest = line.decode(errors="replace").strip().partition(" ")
        if word == "ok" and rest.isdigit():
            return int(rest)
        self._discard(proc)
        copier.join(timeout=COPIER_DRAIN_S)  # what it said, in the log's tail below
        if word == "error":
            strerror = rest.partition(" ")[2]
            raise ServerBootError(
                f"config {name!r}: cannot start {shown[0]!r} ({strerror}); command: {' '.join(shown)}"
            )
        raise ServerBootError(
            f"config {name!r}: the server's supervisor ({SUPERVISOR}) did not report the server started "
            f"within {SUPERVISOR_START_S:g} s (it said {line[:200]!r}); command: {' '.join(shown)}\n"
            f"--- last lines of the log ---\n{redact(tail(log_path), self._key)}"
        )

    @staticmethod
    def _discard(proc: subprocess.Popen) -> None:
        """Reap a supervisor whose server is gone; closing its lifeline makes it kill what is left."""
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def _key(self) -> str | None:
        return key_to_mask(self.deployment.launch.api_key_env)

    def _proc(self, handle: ServerHandle) -> subprocess.Popen | None:
        return self._procs.get(handle.pid or -1)

    def alive(self, handle: ServerHandle) -> bool:
        proc = self._proc(handle)
        return proc is not None and proc.poll() is None

    def _drained(self, handle: ServerHandle) -> None:
        """Wait (briefly) for an ended server's last lines to reach its log through the copier:
        its log's tail is what a failure shows."""
        copier = self._copiers.get(handle.pid or -1)
        if copier is not None:
            copier.join(timeout=COPIER_DRAIN_S)

    def exit_description(self, handle: ServerHandle) -> str:
        proc = self._proc(handle)
        if proc is not None and proc.poll() is not None:
            self._drained(handle)
        if proc is None:
            how = "was stopped by specgate"
        else:
            code = proc.poll()
            if code is None:
                how = "was still running (alive, not ready)"
            elif code < 0:
                how = f"was killed by signal {-code} ({signal_name(-code)})"
            else:
                how = f"exited with code {code}"
        return (
            f"{handle.describe()} {how}.\ncommand: {' '.join(handle.command)}\nlog: {handle.log_path}\n"
            f"--- last lines of the log ---\n{redact(tail(handle.log_path), self._key)}"
        )

    def wait_ready(self, handle: ServerHandle, progress: BootProgress | None) -> None:
        timeout = self.deployment.launch.boot_timeout_s

        def check_alive() -> None:
            if not self.alive(handle):
                raise ServerBootError(
                    f"{handle.config!r} never became ready: {self.exit_description(handle)}", died=True
                )

        status = lambda: redact(tail(handle.log_path, 1), self._key)  # noqa: E731
        ready_or_stopped(self, handle, timeout, progress, status, check_alive, "the server was stopped", self.deployment)

    def stop(self, handle: ServerHandle) -> None:
        # The process stays in the table until its group is gone, so an interrupt in
        # the middle of this (Ctrl-C while waiting) still leaves it to stop_all.
        with self._lock:
            proc = self._procs.get(handle.pid or -1)
        if proc is None:
            return
        pgid = handle.pid or proc.pid
        members = group_pids(pgid) | {pgid}
        launch = self.deployment.launch
        self._signal_group(pgid, signal.SIGTERM)
        self._signal_group(pgid, signal.SIGCONT)  # a stopped (frozen) process acts on SIGTERM only once continued
        if not self._wait_group_gone(proc, pgid, launch.shutdown_timeout_s):
            self._signal_group(pgid, signal.SIGKILL)
            self._wait_group_gone(proc, pgid, 10.0)
        self._discard(proc)
        self._drained(handle)  # the whole log, before it is masked again
        with self._lock:
            self._procs.pop(pgid, None)
            self._copiers.pop(pgid, None)
            others_running = bool(self._procs)
        if handle.log_path is not None:
            redact_file(handle.log_path, self._key)  # SGLang logs its server_args, key included
        # Only when none of ours runs can memory in use be compared with the idle level.
        idle = self._idle_used_mib if not others_running else None
        left = wait_gpu_released(members, launch.gpu_release_timeout_s, idle)
        if left:
            # The next boot would size its KV cache against memory that is still taken.
            self.unreleased = (
                f"GPU memory of {handle.config!r} was not released within "
                f"launch.gpu_release_timeout_s = {launch.gpu_release_timeout_s:g} s ({left})"
            )
            print(f"specgate: {self.unreleased}", file=sys.stderr)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    @staticmethod
    def _wait_group_gone(proc: subprocess.Popen, pgid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader so it does not linger as a zombie
            if not group_pids(pgid):
                return True
            time.sleep(0.05)
        proc.poll()
        return not group_pids(pgid)

    def stop_all(self) -> None:
        """Last-resort cleanup (atexit, signals): no wait for GPU release."""
        with self._lock:
            procs = list(self._procs.items())
            self._procs.clear()
        for pgid, proc in procs:
            self._signal_group(pgid, signal.SIGKILL)
            self._discard(proc)
        self._record.remove()
        if self._key:
            for log in self.log_dir.glob("*.log"):
                redact_file(log, self._key)
