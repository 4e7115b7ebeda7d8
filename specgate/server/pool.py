"""One server per config for the whole session, booted on first use and reused.

When the deployment says configs cannot coexist (one GPU, big model), asking for a
config stops whichever other server is up first. A config whose server failed to boot
or died is remembered, so every later test of it fails at once with the same reason
instead of booting again or hanging.
"""

from __future__ import annotations

import atexit
import queue
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specgate import interrupts
from specgate.client import UNAUTHORIZED, ClientError, GenerateRequest, GenerateResult, SglangClient
from specgate.deployment import Deployment, ServerConfig
from specgate.errors import (
    HTTPStatusError,
    RequestTimeout,
    ServerBootError,
    ServerDiedError,
    ServerUnavailable,
    SpecgateError,
    Unauthorized,
)
from specgate.secrets import api_key, key_to_mask, redact
from specgate.server.launcher import BootProgress, ServerHandle, make_launcher, unauthorized
from specgate.server.local import tail
from specgate.server.served import check_served

# A port picked free can be taken before the server binds it (SGLang binds only after loading
# the weights, minutes later): SGLang, uvicorn and the simulator all say so in these words.
PORT_TAKEN = re.compile(r"address already in use|errno 98", re.IGNORECASE)
PORT_ATTEMPTS = 3

# A replicate server of a config (`launch.boots` > 1) is named CONFIG@K, K from 2: the
# first boot keeps the config's own name, so a one-boot run looks as it always did.
REPLICA_MARK = "@"


# How long a run ending mid-wait gives each url wait's thread to see it was stopped: its probe in
# flight is bounded by HEALTH_PROBE_S; a daemon thread still in one does not hold the exit.
WAIT_THREAD_JOIN_S = 2.0


def _next_ended(ended: queue.Queue) -> Any:
    """The next ended wait. Read in short slices so a signal's KeyboardInterrupt, raised only in
    the main thread, is not held behind a blocking read."""
    while True:
        try:
            return ended.get(timeout=0.2)
        except queue.Empty:
            continue


def _first_line(text: str) -> str:
    """An error's first line: a boot error's later lines are its command, log path and log tail."""
    return text.strip().split("\n", 1)[0]


def server_name(config: str, boot: int) -> str:
    return config if boot == 1 else f"{config}{REPLICA_MARK}{boot}"


def split_server_name(name: str) -> tuple[str, int]:
    """`eagle3-decode@2` → ("eagle3-decode", 2); a plain config name is boot 1."""
    config, mark, boot = name.rpartition(REPLICA_MARK)
    if mark and boot.isdigit():
        return config, int(boot)
    return name, 1


# How much of a failed boot's server log the report keeps: enough for a traceback's end.
BOOT_LOG_LINES = 20


def unusable(config: str) -> str:
    """How every request for a server that failed to boot is refused: the report tells the failures
    it caused from the others by these words (report/build.py)."""
    return f"config {config!r} is unusable in this session"


@dataclass
class BootRecord:
    config: str
    seconds: float
    ok: bool
    note: str = ""
    cause: str = ""  # a failed boot's: why it never served (its error's first line)
    log_tail: list[str] = field(default_factory=list)  # a failed boot's last server log lines, masked


@dataclass
class LiveServer:
    """A ready server: its handle, a client, and what SGLang says about itself."""

    handle: ServerHandle
    client: SglangClient
    pool: ServerPool
    server_info: dict[str, Any] = field(default_factory=dict)
    model_info: dict[str, Any] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)  # what it did not tell of itself, and why

    @property
    def name(self) -> str:
        """The server's own name: the config's, or CONFIG@K for its K-th replicate boot."""
        return self.handle.config

    @property
    def config(self) -> str:
        return split_server_name(self.handle.config)[0]

    @property
    def boot(self) -> int:
        return split_server_name(self.handle.config)[1]

    def generate(self, request: GenerateRequest) -> GenerateResult:
        if self.pool.live.get(self.name) is not self:
            # Stopped by the pool (servers that take turns, a failure, the run's end): its client
            # is closed, and httpx would only say so, not why or what to do.
            why = self.pool.failed.get(self.name) or (
                "another config's server was booted in its place (this deployment's servers do not coexist)"
                if not self.pool.deployment.launch.coexist
                else "the pool stopped it"
            )
            raise ServerDiedError(f"config {self.config!r}: this server was stopped ({why}); ask for it again")
        try:
            result = self.client.generate(request)
        except RequestTimeout as exc:
            self.pool.fail_hung(self.name, exc.missed)
            raise
        except ClientError as exc:
            if exc.status in UNAUTHORIZED:
                raise HTTPStatusError(
                    unauthorized(self.pool.deployment, self.name, exc.status, f"POST {redact(exc.url or '')}"),
                    url=exc.url,
                    status=exc.status,
                ) from None
            self.pool.raise_if_dead(self.name, during=str(exc))
            if self.name in self.pool.failed:
                # A concurrent request already found the server dead (or hung) and stopped it,
                # which broke this one's connection: that death is the cause, not the broken read.
                raise ServerDiedError(f"config {self.config!r}: {self.pool.failed[self.name]}") from None
            raise
        self.handle.requests_served += 1
        return result


class ServerPool:
    def __init__(self, deployment: Deployment, log_dir: Path, progress: BootProgress | None = None) -> None:
        self.deployment = deployment
        self.log_dir = log_dir
        self.progress = progress
        self.launcher = make_launcher(deployment, log_dir)
        # Servers of killed earlier runs the launcher stopped at its start (only a local one reaps):
        # the report and the terminal name each.
        self.reaped: list[str] = list(getattr(self.launcher, "reaped", []))
        self.live: dict[str, LiveServer] = {}
        self.failed: dict[str, str] = {}
        # Of those, servers attached by url that never answered: the run could not reach them, which
        # is the run broken (exit 6), not a verdict on the change.
        self.unavailable: dict[str, str] = {}
        self.boots: list[BootRecord] = []
        self.server_infos: dict[str, dict[str, Any]] = {}  # kept after a server stops: the report needs them
        self.model_infos: dict[str, dict[str, Any]] = {}
        self._closed = False  # closed or cancelled: no server may boot any more
        self._death_lock = threading.Lock()
        self.cancelled = False  # a signal (SIGINT, SIGTERM, SIGHUP) asked the run to stop: its figures are partial
        # Configs this run must never boot, with why (a reference taken from the stored baseline):
        # asking for one is a bug, and it fails loudly instead of quietly paying the boot.
        self.never: dict[str, str] = {}
        # The run's phase (golden, speed, equivalence, sampling, gates) while its tests ask for
        # servers, set by the plugin: a server that stops answering is said with the phase it stopped in.
        self.phase = ""
        # The context bucket ("2K") the running test measures, "" for the short workload: a bucket's
        # long prompts are what outlast a request timeout, so the hang is said with it.
        self.bucket = ""
        atexit.register(self.launcher.stop_all)
        self._install_signal_handlers()

    def _install_signal_handlers(self) -> None:
        """SIGTERM/SIGHUP (a CI runner cancelling the job) must not orphan GPU servers: they are
        killed at the signal. Ctrl-C keeps pytest's own handling (teardown stops the servers)
        unless it comes again. The handler itself is specgate.interrupts' (it raises
        KeyboardInterrupt, so pytest ends the session instead of booting more servers)."""
        self._own_signals = interrupts.install()

        def on_signal(signum: int) -> None:
            self.cancelled = True
            if signum != signal.SIGINT or interrupts.count() > 1:
                self._closed = True
                self.launcher.stop_all()

        self._forget_signals = interrupts.on_signal(on_signal)

    def never_boot(self, config: str, why: str) -> None:
        self.never[config] = why

    def _refuse_never(self, name: str) -> None:
        config = split_server_name(name)[0]
        if config in self.never:
            raise ServerBootError(f"not booting {name!r}: {self.never[config]}")

    def acquire(self, config: str) -> LiveServer:
        self._refuse_never(config)
        if self.cancelled:
            # The handler's KeyboardInterrupt can be lost: Python runs signal handlers wherever the
            # main thread is, and an exception raised inside a gc callback (Hypothesis installs one)
            # is printed and dropped. So the interrupt is raised again here, at the next boot.
            raise KeyboardInterrupt(f"specgate: not booting {config!r}: a signal stopped the run")
        if self._closed:
            raise ServerBootError(f"not booting {config!r}: the run is over or was cancelled")
        if config in self.failed:
            raise ServerBootError(f"{unusable(config)}: {self.failed[config]}")
        if config in self.live:
            self.raise_if_dead(config)
            return self.live[config]
        if not self.deployment.launch.coexist:
            for other in list(self.live):
                self.release(other)
        return self.boot([config])[config]

    def boot(self, configs: list[str]) -> dict[str, LiveServer]:
        """Start every config's server first, then wait: boots overlap where allowed.

        Overlapping boots on one GPU can race: SGLang sizes its KV cache from the free
        memory it measures around loading the weights, and a neighbour allocating its own
        cache in that window can leave it "not enough memory". So a config whose server
        died while others booted beside it gets one more boot, alone, before it counts as
        failed. One that timed out is not retried: waiting again would double the timeout.
        """
        for name in configs:
            self._refuse_never(name)
        started: list[ServerHandle] = []
        last_start: dict[frozenset[str] | None, float] = {}  # GPUs -> when a server last started there
        for name in configs:
            if name in self.live or name in self.failed:
                continue
            gpus = self._gpus_of(name)
            stagger = self.deployment.launch.boot_stagger_s
            # Only servers that share a GPU race for its memory: stagger those, start the others at once.
            shared = [t for g, t in last_start.items() if g is None or gpus is None or g & gpus]
            if shared and stagger:
                time.sleep(max(0.0, max(shared) + stagger - time.monotonic()))
            try:
                started.append(self.launcher.start(self.server_config(name)))
            except ServerBootError as exc:
                # A program that does not exist fails its own config, not every other one.
                self.failed[name] = str(exc)
                continue
            last_start[gpus] = time.monotonic()
        # Only where boots overlapped can a death be the memory race; a lost port can happen to
        # any boot. Either is booted again, alone (on fresh ports); anything else is final.
        retry = self._wait_all(started, retry_deaths=len(started) > 1)
        for attempt in range(1, PORT_ATTEMPTS):
            again = []
            for handle, why in retry:
                retried = self.launcher.start(self.server_config(handle.config))
                note = (
                    "booted again on other ports: its port was taken before the server bound it"
                    if why == "port"
                    else "retried alone after failing in an overlapped boot"
                )
                again += self._wait_all(
                    [retried], retry_deaths=False, note=note, port_retry=attempt + 1 < PORT_ATTEMPTS
                )
            retry = again
        if len(configs) == 1 and configs[0] in self.failed:
            raise ServerBootError(self.failed[configs[0]])
        return {n: self.live[n] for n in configs if n in self.live}

    def server_config(self, name: str) -> ServerConfig:
        """What to boot for a server name: its config, renamed for a replicate boot (its own log)."""
        config, boot = split_server_name(name)
        base = self.deployment.configs[config]
        return base if boot == 1 else replace(base, name=name)

    def _gpus_of(self, name: str) -> frozenset[str] | None:
        """The GPUs a config's CUDA_VISIBLE_DEVICES names (None: every GPU of the host)."""
        env = {**self.deployment.launch.env, **self.server_config(name).env}
        visible = env.get("CUDA_VISIBLE_DEVICES")
        return frozenset(v.strip() for v in visible.split(",") if v.strip()) if visible else None

    def _wait_all(
        self, started: list[ServerHandle], retry_deaths: bool, note: str = "", port_retry: bool = True
    ) -> list[tuple[ServerHandle, str]]:
        """Wait for each started server. A failed one is stopped and marked failed, except one
        whose process died while `retry_deaths`, or died on a taken port while `port_retry`:
        those are returned with why ("port" or "overlap"), to boot again alone."""
        retry = []
        for handle, outcome in self._waited(started):
            if isinstance(outcome, LiveServer):
                server = outcome
            else:
                exc = outcome
                self.boots.append(
                    BootRecord(handle.config, handle.boot_s, ok=False, note=note, cause=_first_line(str(exc)),
                               log_tail=self._log_tail(handle))
                )  # fmt: skip
                if exc.died and port_retry and PORT_TAKEN.search(str(exc)):
                    retry.append((handle, "port"))
                elif retry_deaths and exc.died:
                    retry.append((handle, "overlap"))
                else:
                    self.failed[handle.config] = str(exc)
                    if isinstance(exc, ServerUnavailable):
                        self.unavailable[handle.config] = str(exc)
                if self.progress is not None:
                    self.progress.finished(handle.config, handle.boot_s, ok=False, why=str(exc))
                self.launcher.stop(handle)
                continue
            problem, said = self._not_as_declared(server)
            notes = "; ".join(n for n in (note, said, *server.unanswered) if n)
            self.boots.append(BootRecord(handle.config, handle.boot_s, ok=problem is None, note=notes, cause=problem or ""))
            if self.progress is not None:
                self.progress.finished(handle.config, handle.boot_s, ok=problem is None, why=problem or "")
            if problem is not None:
                # Not the server its config declares: every test of the config fails with this, up front.
                self.failed[handle.config] = problem
                server.client.close()
                self.launcher.stop(handle)
                continue
            self.live[handle.config] = server
        return retry

    def _log_tail(self, handle: ServerHandle) -> list[str]:
        """The last lines of a server's log, masked (nothing for a server attached by url: its log
        is its owner's)."""
        if handle.log_path is None or not handle.log_path.is_file():
            return []
        key = key_to_mask(self.deployment.launch.api_key_env)
        return redact(tail(handle.log_path, BOOT_LOG_LINES), key).splitlines()

    def _ready(self, handle: ServerHandle) -> LiveServer | ServerBootError:
        """The server once ready, or why it never was."""
        try:
            self.launcher.wait_ready(handle, self.progress)
        except ServerBootError as exc:
            return exc
        return self._described(handle)

    def _described(self, handle: ServerHandle) -> LiveServer | ServerBootError:
        try:
            return self._describe(handle)
        except ServerBootError as exc:
            return exc

    def _waited(self, started: list[ServerHandle]) -> Iterator[tuple[ServerHandle, LiveServer | ServerBootError]]:
        """Each started server with how its wait ended, in the order they end. Booted servers are
        waited on one after another (they boot side by side all the same); servers attached by url
        all at once, one thread each: one after another, unreachable ones would each hold the run
        for boot_timeout_s in turn, and one failing at once (a name that does not resolve) would be
        said only after the others' waits. An interrupt, or anything else ending the wait early,
        ends every other wait too (launcher.stop_all): no thread is left polling at exit."""
        if not getattr(self.launcher, "concurrent_waits", False) or len(started) < 2:
            # Every server's readiness first, then what each says of itself: one whose
            # /get_server_info hangs must not add its wait to the boot times of the others.
            ready: list[tuple[ServerHandle, ServerBootError | None]] = []
            for handle in started:
                try:
                    self.launcher.wait_ready(handle, self.progress)
                    ready.append((handle, None))
                except ServerBootError as exc:
                    ready.append((handle, exc))
            for handle, failed in ready:
                yield handle, failed if failed is not None else self._described(handle)
            return
        ended: queue.Queue[tuple[ServerHandle, LiveServer | ServerBootError | BaseException]] = queue.Queue()

        def wait(handle: ServerHandle) -> None:
            try:
                ended.put((handle, self._ready(handle)))
            except BaseException as exc:  # a bug in a wait: raised where the run can see it
                ended.put((handle, exc))

        threads = [threading.Thread(target=wait, args=(h,), name=f"specgate-wait-{h.config}", daemon=True) for h in started]
        for thread in threads:
            thread.start()
        try:
            for _ in started:
                handle, outcome = _next_ended(ended)
                if not isinstance(outcome, (LiveServer, ServerBootError)):
                    raise outcome
                yield handle, outcome
        except BaseException:
            self.launcher.stop_all()  # the url launcher's stop_all ends the other waits
            raise
        finally:
            for thread in threads:
                thread.join(timeout=WAIT_THREAD_JOIN_S)

    def _not_as_declared(self, server: LiveServer) -> tuple[str | None, str]:
        """(why a server attached by url is not the one its config declares, or None; the
        declared settings it does not report, said once). Servers specgate started itself were
        started with the declared arguments."""
        if self.deployment.launch.launcher != "url":
            return None, ""
        check = check_served(self.deployment, self.server_config(server.name), server.server_info)
        return check.failure(server.config, redact(server.handle.base_url), self.deployment.path), check.note()

    def _api_key(self) -> str | None:
        try:
            return api_key(self.deployment.launch.api_key_env)
        except SpecgateError as exc:
            raise ServerBootError(str(exc)) from None

    def _describe(self, handle: ServerHandle) -> LiveServer:
        client = SglangClient(
            handle.base_url, timeout_s=self.deployment.workload.request_timeout_s, api_key=self._api_key()
        )
        server = LiveServer(handle, client, self)
        # Best effort: old SGLang releases lack one or the other endpoint. A refusal of the
        # credentials is no such lack: every request would be refused, so the boot fails here.
        for attr, fetch in (("server_info", client.server_info), ("model_info", client.model_info)):
            try:
                setattr(server, attr, fetch())
            except ClientError as exc:
                if exc.status in UNAUTHORIZED:
                    client.close()
                    said = f"GET {redact(exc.url or handle.base_url)}"
                    raise Unauthorized(unauthorized(self.deployment, handle.config, exc.status, said)) from None
                if attr == "server_info":  # its version and settings are unknown to this run: said at its boot
                    server.unanswered.append(f"its /get_server_info did not answer ({_first_line(redact(str(exc)))[:320]})")
        self.server_infos[handle.config] = server.server_info
        self.model_infos[handle.config] = server.model_info
        return server

    def served_models(self, config: str) -> dict[str, Any]:
        """The running server's /v1/models (SGLang names the context length only there), or {}
        where it is not running or does not answer. Asked when the context edge is sized, once a
        run, not at every boot: nothing else reads it."""
        server = self.live.get(config)
        if server is None:
            return {}
        try:
            return server.client.served_models()
        except ClientError:
            return {}

    def raise_if_dead(self, config: str, during: str = "") -> None:
        # Concurrent requests fail together when a server dies: the first describes the death
        # (exit code, log), the others raise that same cause instead of a second, later look.
        with self._death_lock:
            self._raise_if_dead(config, during)

    def _raise_if_dead(self, config: str, during: str) -> None:
        if config in self.failed and config not in self.live:
            raise ServerDiedError(f"config {config!r}: {self.failed[config]}")
        server = self.live.get(config)
        if server is None:
            return
        if during:
            # A request just failed: give a dying process a moment to be seen as dead.
            deadline = time.monotonic() + 2.0
            while self.launcher.alive(server.handle) and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.launcher.alive(server.handle):
            return
        description = self.launcher.exit_description(server.handle)
        served = server.handle.requests_served
        reason = (
            f"the server died after serving {served} request(s){' (' + during + ')' if during else ''}.\n{description}"
        )
        self.failed[config] = reason
        self.release(config)
        raise ServerDiedError(f"config {config!r}: {reason}")

    def fail_hung(self, config: str, why: str) -> None:
        """A request outlived its deadline (`why`: what it missed, RequestTimeout.missed): the
        server hangs, or the deadline is too short for the answer. Either way the server is stopped
        and every later test of the config fails at once with this reason: a server that hung stays
        hung (each later test would wait out the deadline anew), and one that was only slow can
        still be decoding the request its client gave up on (SGLang aborts it only once it sees the
        disconnect), so figures measured on it next would share it. The reason says so, with the
        field to raise and the bucket whose answers outlasted it."""
        server = self.live.get(config)
        served = server.handle.requests_served if server else 0
        at = f", at the {self.bucket} context bucket" if self.bucket else ""
        during = f" (a request of the {self.phase} phase{at})" if self.phase else ""
        # Short: the reason's first 400 characters are what its NOT RUN rows and the report's line keep.
        answers = f"the {self.bucket} bucket's" if self.bucket else "the short workload's"
        ended = f"; the timeout ended its part of the run (raise workload.request_timeout_s if {answers} answers need longer)"
        self.failed.setdefault(config, f"the server stopped answering after serving {served} request(s){during}{ended}: {why}")
        self.release(config)

    def release(self, config: str) -> None:
        server = self.live.pop(config, None)
        if server is not None:
            server.client.close()
            self.launcher.stop(server.handle)

    def close(self) -> None:
        self._forget_signals()
        if self._own_signals:
            interrupts.uninstall()
            self._own_signals = False
        if self._closed:
            return
        self._closed = True
        for config in list(self.live):
            self.release(config)
        self.launcher.stop_all()
