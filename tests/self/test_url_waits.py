"""Servers attached by url are waited on all at once, not one after another for boot_timeout_s
each; one that takes no connection is said at once, naming its url, and still waited for (it may
be starting); a name that does not resolve fails at once; an interrupted wait leaves nothing
waiting (issue 32: 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import tomli_w
from helpers import FAST, default_sigint, merge, sim_deployment_dict

from specgate.deployment import ServerConfig, parse_deployment
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.server.local import LocalLauncher, free_port
from specgate.server.pool import ServerPool

BOOT_TIMEOUT_S = 12  # long enough for a simulator that binds its port 2 s late, on a loaded machine
UNRESOLVABLE = "http://no-such-host.invalid:30000"


def _url_data(urls: dict[str, str], boot_timeout_s: float) -> dict:
    data = merge(merge(sim_deployment_dict(), FAST), {"launch": {"launcher": "url", "boot_timeout_s": boot_timeout_s}})
    for key in ("command", "args", "shutdown_timeout_s", "gpu_release_timeout_s", "coexist"):
        data["launch"].pop(key, None)
    for name, url in urls.items():
        data["configs"][name]["url"] = url
    return data


class _Recorded:
    """A boot display that keeps what it was told, with when."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str, str]] = []  # (when, kind, config, text)

    def update(self, config: str, elapsed: float, last_log_line: str) -> None:
        pass

    def notice(self, text: str) -> None:
        self.events.append((time.monotonic(), "notice", "", text))

    def finished(self, config: str, seconds: float, ok: bool, why: str = "") -> None:
        self.events.append((time.monotonic(), "ready" if ok else "failed", config, why))

    def when(self, kind: str, config: str) -> float:
        return next(t for t, k, c, _ in self.events if k == kind and c == config)


def test_url_servers_are_waited_on_at_once_and_the_unreachable_said_promptly(tmp_path):
    local = LocalLauncher(parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml"), tmp_path)
    # A server still starting: the simulator binds its port only after pretending to load weights.
    starting = local.start(ServerConfig("starting", ("--sim-boot-s", "2"), {}, None, ""))
    refused = f"http://127.0.0.1:{free_port()}"
    data = _url_data({"baseline": starting.base_url, "eagle3-prefill": refused, "eagle3-decode": UNRESOLVABLE}, BOOT_TIMEOUT_S)
    dep = parse_deployment(data, tmp_path / "url.toml")
    shown = _Recorded()
    pool = ServerPool(dep, tmp_path / "logs", shown)
    waits: dict[str, tuple[float, float]] = {}
    real_wait = pool.launcher.wait_ready

    def timed_wait(handle, progress):
        began = time.monotonic()
        try:
            real_wait(handle, progress)
        finally:
            waits[handle.config] = (began, time.monotonic())

    pool.launcher.wait_ready = timed_wait  # type: ignore[method-assign]
    try:
        pool.boot(["baseline", "eagle3-prefill", "eagle3-decode"])
    finally:
        pool.close()
        local.stop_all()
    # At once: every wait began before the first server that answered was ready.
    assert max(began for began, _ in waits.values()) < waits["baseline"][1], waits
    assert [c for t, k, c, _ in shown.events if k == "ready"] == ["baseline"], shown.events
    # Refused at first, said at once naming its url, and still waited for: it was starting.
    notices = [text for _, kind, _, text in shown.events if kind == "notice"]
    for config, url in (("baseline", starting.base_url), ("eagle3-prefill", refused)):
        said = [n for n in notices if n.startswith(f"specgate: {config}: nothing takes the connection at {url} ")]
        assert said and f"waiting up to launch.boot_timeout_s = {BOOT_TIMEOUT_S} s" in said[0], notices
        assert f"configs.{config}.url in {tmp_path / 'url.toml'}" in said[0]
    refused_at_first = next(t for t, _, _, text in shown.events if text.startswith("specgate: baseline: nothing takes"))
    assert refused_at_first < shown.when("ready", "baseline")
    # The unresolvable name fails at once: before the refused one's wait ran out, not after it.
    assert shown.when("failed", "eagle3-decode") < shown.when("failed", "eagle3-prefill")
    assert "the host of http://no-such-host.invalid:30000 does not resolve" in pool.unavailable["eagle3-decode"]
    assert f"{refused}/health_generate did not answer 200 within launch.boot_timeout_s" in pool.unavailable["eagle3-prefill"]
    assert "Connection refused" in pool.unavailable["eagle3-prefill"]
    failed_line = next(text for _, kind, config, text in shown.events if kind == "failed" and config == "eagle3-decode")
    assert "no-such-host.invalid" in failed_line  # the terminal's FAILED line gives the cause, not only "see the error"
    assert not [t.name for t in threading.enumerate() if t.name.startswith("specgate-wait-")]


def test_an_interrupt_while_waiting_for_url_servers_leaves_nothing_waiting(tmp_path):
    urls = {name: f"http://127.0.0.1:{free_port()}" for name in ("baseline", "eagle3-prefill", "eagle3-decode")}
    (tmp_path / "url.toml").write_text(tomli_w.dumps(_url_data(urls, 600)))
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specgate.cli", "run", str(tmp_path / "url.toml"), "--report-dir", str(tmp_path / "r"),
             "--baselines-dir", str(tmp_path / "b")],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, stdout=subprocess.PIPE, stderr=err,
            preexec_fn=default_sigint,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120  # far under the 600 s boot timeout: said before it
            while stderr.read_text().count("nothing takes the connection") < 3 and time.monotonic() < deadline:
                assert proc.poll() is None, stderr.read_text()[-3000:]
                time.sleep(0.2)
            said = stderr.read_text()
            assert said.count("nothing takes the connection") == 3, said[-3000:]
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)  # not the 600 s each wait would have run
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 5, out.decode()[-3000:] + stderr.read_text()[-3000:]  # INTERRUPTED
    for url in urls.values():
        assert url in stderr.read_text()
    assert Path(tmp_path / "r" / "report.json").is_file()


def test_check_says_a_url_that_takes_the_connection_but_never_answers(monkeypatch):
    import socket
    from http.server import BaseHTTPRequestHandler

    from helpers import serving

    from specgate import preflight

    monkeypatch.setattr(preflight, "SILENT_AFTER_S", 0.3)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        said = preflight._silent(f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    assert said is not None and "sent no byte of an answer to GET /health" in said

    class Healthy(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(Healthy) as url:
        assert preflight._silent(url) is None
