"""Whole-request deadlines: a server that answers its headers (or only part of them) and then
trickles bytes never trips httpx's timeouts, which bound each read alone. Every request specgate
sends ends by its deadline, and the error names the url, the endpoint and the deadline."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from helpers import merge, processes_with, serving, sim_deployment_dict

import specgate.client as client_module
from specgate.client import GenerateRequest, SglangClient
from specgate.deployment import ServerConfig, parse_deployment
from specgate.errors import ClientError, RequestTimeout, ServerBootError
from specgate.server.local import LocalLauncher

# Far above every deadline below: a call still running then did not stop at its deadline.
HANG_S = 30.0


class _TrickleBody(BaseHTTPRequestHandler):
    """GET: 200 and a header promising a body, then one byte of it every 50 ms, never finishing."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(10**9))
        self.end_headers()
        stop = self.server.stop  # type: ignore[attr-defined]
        try:
            while not stop.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            return

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def trickling_body():
    with serving(_TrickleBody) as url:
        yield url


@pytest.fixture
def trickling_headers():
    """Accepts, then sends its status line and headers one byte every 50 ms, never ending them."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not stop.wait(0.05):
                    conn.sendall(b"X")
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def ends_within(seconds: float, call: Callable[[], Any]) -> Any:
    """What `call` returned or raised, failing the test (not hanging it) where it runs past `seconds`."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test as it is
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds:g} s: the deadline did not end it"
    outcome["seconds"] = time.monotonic() - started
    return outcome


def test_health_probe_of_a_trickled_body_ends_at_its_deadline(trickling_body):
    client = SglangClient(trickling_body)
    outcome = ends_within(HANG_S, lambda: client.is_ready(within_s=1.0))
    assert outcome.get("value") is False, outcome
    assert client.last_probe.startswith(f"GET {trickling_body}/health_generate: no complete answer within 1 s")
    assert "deadline passed" in client.last_probe


def test_server_info_of_a_trickled_body_ends_at_its_deadline(trickling_body, monkeypatch):
    monkeypatch.setattr(client_module, "INFO_REQUEST_S", 1.0)
    client = SglangClient(trickling_body)
    outcome = ends_within(HANG_S, client.server_info)
    error = outcome.get("error")
    assert isinstance(error, ClientError), outcome
    assert f"GET {trickling_body}/server_info: no complete answer within 1 s" in str(error)
    assert f"GET {trickling_body}/get_server_info: no complete answer within 1 s" in str(error)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
def test_generate_whose_headers_trickle_ends_at_the_request_deadline(trickling_headers, stream):
    client = SglangClient(trickling_headers, timeout_s=1.0)
    request = GenerateRequest(max_new_tokens=3, text="hi", stream=stream)
    outcome = ends_within(HANG_S, lambda: client.generate(request))
    error = outcome.get("error")
    assert isinstance(error, RequestTimeout), outcome
    assert f"POST {trickling_headers}/generate: no complete answer within workload.request_timeout_s = 1 s" in str(
        error
    )


def test_boot_timeout_fires_although_health_generate_trickles_its_body(tmp_path):
    """The simulator answers /health_generate's headers and trickles its body: the boot must still
    end at launch.boot_timeout_s, naming the probe's url, endpoint and deadline."""
    tag = f"tag-{os.getpid()}-trickle-health"
    data = merge(sim_deployment_dict(), {"launch": {"boot_timeout_s": 2}})
    launcher = LocalLauncher(parse_deployment(data, tmp_path / "dep.toml"), tmp_path)
    args = ("--sim-fault", "trickle-get=/health_generate", f"--x={tag}")
    handle = launcher.start(ServerConfig("baseline", args, {}, None, ""))
    try:
        outcome = ends_within(HANG_S + 2, lambda: launcher.wait_ready(handle, None))
    finally:
        launcher.stop_all()
    error = outcome.get("error")
    assert isinstance(error, ServerBootError), outcome
    message = str(error)
    assert "boot_timeout_s = 2 s" in message, message
    assert f"the last probe: GET {handle.base_url}/health_generate: no complete answer within" in message, message
    assert not processes_with(tag)
