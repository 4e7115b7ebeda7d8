"""`specgate init --url` against hostile input: an emoji in a server's path is written as TOML
can hold it, a host no request can reach and an answer nested too deeply are named, and a
server trickling its /get_server_info costs init its deadline, not two minutes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import serving

from specgate import starter
from specgate.client import SglangClient
from specgate.errors import ClientError
from specgate.server.local import free_port
from specgate.starter import InitError, write_project


def _answer(body: bytes) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Answer


class _TrickleGet(BaseHTTPRequestHandler):
    """Answers 200 to a GET and then a byte at a time, never finishing."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        stop = self.server.stop  # type: ignore[attr-defined]
        try:
            while not stop.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            return

    def log_message(self, *args):
        pass


def test_an_emoji_in_a_servers_path_is_written_as_toml_holds_it(tmp_path):
    """json.dumps spelt it as a surrogate pair, which TOML refuses: a raw TOMLDecodeError."""
    nothing = f"http://127.0.0.1:{free_port()}"
    write_project(tmp_path, url=f"{nothing}/v1/\U0001f600", reference_url=f"http://127.0.0.1:{free_port()}", model="/m\x7f")
    written = tomllib.loads((tmp_path / "deployments" / "mine.toml").read_text(encoding="utf-8"))
    assert written["configs"]["speculative"]["url"] == f"{nothing}/v1/\U0001f600" and written["model"] == "/m\x7f"


def test_a_host_no_request_can_reach_is_named_by_its_option(tmp_path):
    with pytest.raises(InitError, match=r"--reference-url: not an address a request can be sent to"):
        write_project(tmp_path, url=f"http://127.0.0.1:{free_port()}", reference_url="http://\U0001f600.example:8", model="/m")
    with pytest.raises(ClientError, match="not an address a request can be sent to"):
        SglangClient("http://\U0001f600.example:8")


def test_an_answer_nested_too_deeply_is_named_not_a_traceback(tmp_path):
    with serving(_answer(b"[" * 100_000)) as deep, serving(_answer(b'{"version": "0.5.14"}')) as plain:
        with pytest.raises(ClientError, match="nested too deeply"):
            SglangClient(deep, timeout_s=5).server_info()
        out = write_project(tmp_path, url=deep, reference_url=plain, model="/m")
    assert any("nested too deeply" in note for note in out.notes), out.notes


def test_a_trickling_server_costs_init_its_deadline_per_server(tmp_path, monkeypatch):
    """Each of two paths had 30 s of its own, whatever init's deadline: two servers, two minutes."""
    monkeypatch.setattr(starter, "INFO_TIMEOUT_S", 1.0)
    with serving(_TrickleGet) as slow, serving(_TrickleGet) as slower:
        started = time.monotonic()
        out = write_project(tmp_path, url=slow, reference_url=slower, model="/m")
        took = time.monotonic() - started
    assert took < 4.0, took  # 1 s per server, and the rest
    assert any("did not answer" in note for note in out.notes), out.notes


def test_init_with_an_emoji_host_says_one_line(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "init", "--url", f"http://127.0.0.1:{free_port()}",
         "--reference-url", "http://\U0001f600.example", "--model", "/m"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env=os.environ.copy(),
    )  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("specgate: error: init: --reference-url: not an address"), run.stderr
