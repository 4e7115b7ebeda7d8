"""Hostile servers (issue 11: items 2, 6, 9): a server that trickles keep-alives, one that
is frozen (SIGSTOP), more concurrent requests than an HTTP pool would allow, and answers
that are not what SGLang sends. Each ends in a named error within the request deadline."""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from helpers import merge, processes_with, serving, sim_deployment_dict

from specgate.client import GenerateRequest, SglangClient
from specgate.deployment import parse_deployment
from specgate.errors import ClientError, RequestTimeout, ServerBootError
from specgate.server.pool import ServerPool

STREAM = GenerateRequest(max_new_tokens=3, text="hi", stream=True)
PLAIN = GenerateRequest(max_new_tokens=3, text="hi")


class _Trickle(BaseHTTPRequestHandler):
    """Answers 200 and then one byte of keep-alive at a time, never finishing."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        stop = self.server.stop  # type: ignore[attr-defined]
        try:
            while not stop.wait(0.05):
                self.wfile.write(b": keep-alive\n\n" if "stream" in self.path else b" ")
                self.wfile.flush()
        except OSError:
            return

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def trickling_server():
    with serving(_Trickle) as url:
        yield url


@pytest.mark.parametrize("request_", [STREAM, PLAIN], ids=["stream", "plain"])
def test_trickling_server_is_cut_off_at_the_request_deadline(trickling_server, request_):
    # Bytes arrive every 50 ms, so httpx's per-read timeout alone would wait forever.
    client = SglangClient(trickling_server + ("/stream" if request_.stream else ""), timeout_s=1.0)
    try:
        with pytest.raises(RequestTimeout, match=r"request_timeout_s = 1 s"):
            client.generate(request_)
    finally:
        client.close()


def sim(tmp_path, **workload):
    data = merge(sim_deployment_dict(), {"workload": workload, "launch": {"shutdown_timeout_s": 5}})
    return parse_deployment(data, tmp_path / "dep.toml")


def test_frozen_server_fails_its_config_at_the_first_hang(tmp_path):
    tag = f"tag-{os.getpid()}-frozen"
    data = merge(sim_deployment_dict(), {"configs": {"baseline": {"args": [f"--x={tag}"]}}})
    data = merge(data, {"workload": {"request_timeout_s": 1.5}, "launch": {"shutdown_timeout_s": 5}})
    pool = ServerPool(parse_deployment(data, tmp_path / "dep.toml"), tmp_path)
    try:
        server = pool.acquire("baseline")
        server.generate(STREAM)  # it serves
        os.kill(server.handle.pid, signal.SIGSTOP)
        with pytest.raises(RequestTimeout, match="request_timeout_s = 1.5 s"):
            server.generate(STREAM)
        assert "stopped answering after serving 1 request" in pool.failed["baseline"]
        # Every later use fails at once with that reason, without a second wait.
        with pytest.raises(ServerBootError, match="stopped answering"):
            pool.acquire("baseline")
    finally:
        pool.close()
    assert not processes_with(tag)  # stopped although frozen


class _Barrier(BaseHTTPRequestHandler):
    """Holds each request until `parties` are in flight at once, then answers all."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self.server.barrier.wait()  # type: ignore[attr-defined]
            status, body = 200, {"text": "x", "output_ids": [1], "meta_info": {"completion_tokens": 1}}
        except threading.BrokenBarrierError:
            status, body = 503, {"error": "fewer requests arrived at once than were sent"}
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


class _WideServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # listen() backlog: set before the constructor calls it


def test_concurrency_above_64_reaches_the_server_at_once():
    parties = 80
    server = _WideServer(("127.0.0.1", 0), _Barrier)
    server.barrier = threading.Barrier(parties, timeout=30)  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = SglangClient(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=90)
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=parties) as ex:
            results = list(ex.map(lambda _: client.generate(PLAIN), range(parties)))
        assert len(results) == parties  # a pool capped at 64 would leave the barrier short: HTTP 503
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def replay(body: bytes, content_type: str = "text/event-stream") -> SglangClient:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": content_type})
    )
    return SglangClient("http://sglang.test", transport=transport)


def sse(*chunks) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


GARBAGE = [
    (
        "completion-tokens-word",
        sse({"text": "a", "meta_info": {"completion_tokens": "many"}}),
        "meta_info.completion_tokens",
    ),
    (
        "completion-tokens-negative",
        sse({"text": "a", "meta_info": {"completion_tokens": -3}}),
        "meta_info.completion_tokens: expected a whole number >= 0",
    ),
    ("chunk-is-a-list", sse([1, 2, 3]), "expected each chunk to be a JSON object"),
    ("meta-info-is-a-string", sse({"text": "a", "meta_info": "done"}), "meta_info: expected an object"),
    (
        "top-logprobs-garbage",
        sse(
            {"text": "a", "output_ids": [1], "meta_info": {"completion_tokens": 1, "output_top_logprobs": [["x", "y"]]}}
        ),
        "meta_info.output_top_logprobs",
    ),
    (
        "top-logprobs-not-a-list",
        sse({"text": "a", "output_ids": [1], "meta_info": {"completion_tokens": 1, "output_top_logprobs": 7}}),
        "meta_info.output_top_logprobs",
    ),
    (
        "spec-counter-word",
        sse({"text": "a", "output_ids": [1], "meta_info": {"completion_tokens": 1, "spec_verify_ct": "x"}}),
        "spec_* counters",
    ),
]


@pytest.mark.parametrize(("body", "expected"), [g[1:] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
def test_answers_sglang_never_sends_are_named(body, expected):
    with pytest.raises(ClientError, match=expected.replace("*", r"\*")):
        replay(body).generate(STREAM)


def test_server_info_that_is_a_list_is_named():
    with pytest.raises(ClientError, match="expected a JSON object, got list"):
        replay(b"[1, 2]", "application/json").server_info()


def test_a_port_taken_before_the_server_binds_it_is_retried_on_another(tmp_path, monkeypatch):
    import socket

    import specgate.server.local as local

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    ports = iter([taken.getsockname()[1]])
    real = local.free_port
    monkeypatch.setattr(local, "free_port", lambda: next(ports, None) or real())
    data = merge(sim_deployment_dict(), {"launch": {"coexist": False}})
    pool = ServerPool(parse_deployment(data, tmp_path / "dep.toml"), tmp_path)
    try:
        server = pool.acquire("baseline")  # a lone boot: before, its first death was final
        assert server.generate(STREAM).completion_tokens == 3
        notes = [(b.ok, b.note) for b in pool.boots]
        assert notes[0][0] is False and notes[-1][0] is True
        assert "port was taken" in notes[-1][1]
        assert "address already in use" in (tmp_path / "baseline.log").read_text().lower()
    finally:
        pool.close()
        taken.close()


def test_a_server_whose_server_info_hangs_is_named_and_charges_no_other_servers_boot(sim_deployment, pytester):
    """One server's /get_server_info trickles past its deadline: its boot row says so, and the
    servers booted beside it keep their own boot times (they were charged the wait)."""
    d = sim_deployment({"workload": {"request_timeout_s": 2.0}})
    d.run(pytester, "-k", "speed", faults="baseline:trickle-get=/get_server_info")
    boots = {b["config"]: b for b in d.report()["boots"]}
    assert "its /get_server_info did not answer" in boots["baseline"]["note"], boots["baseline"]
    assert boots["eagle3-prefill"]["seconds"] < 2.0 and boots["eagle3-decode"]["seconds"] < 2.0, boots
