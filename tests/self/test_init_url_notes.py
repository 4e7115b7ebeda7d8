"""`specgate init --url` says what the servers answered: a 401/403 is a server that wants a key
(launch.api_key_env), not one that did not answer; an unreachable plain server gets a note too;
and the closing words never say a url deployment's run boots servers."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from helpers import serving

from specgate.server.local import free_port
from specgate.starter import write_project


class _Denied(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _answering(info: dict) -> type[BaseHTTPRequestHandler]:
    """A stub server whose every GET answers `info` as JSON (its /get_server_info)."""

    class Answering(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = json.dumps(info).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Answering


_Plain = _answering({"version": "0.5.14"})


def test_a_server_that_wants_a_key_is_said_to_have_answered_401_naming_api_key_env(tmp_path):
    with serving(_Denied) as url, serving(_Plain) as reference:
        out = write_project(tmp_path, url=url, reference_url=reference, model="/m")
    text = (tmp_path / "deployments" / "mine.toml").read_text()
    assert "answered HTTP 401" in text and "launch.api_key_env" in text and "did not answer" not in text
    said = " ".join(out.notes)
    assert "answered HTTP 401" in said and "launch.api_key_env" in said and "did not answer" not in said
    assert not any("reference server" in n for n in out.notes)  # it answered


def test_an_unreachable_reference_url_gets_a_note(tmp_path):
    nothing = f"http://127.0.0.1:{free_port()}"
    with serving(_Plain) as url:
        out = write_project(tmp_path, url=url, reference_url=nothing, model="/m")
    notes = [n for n in out.notes if "reference server" in n]
    assert notes and nothing in notes[0] and "did not answer" in notes[0], out.notes


def test_the_closing_words_of_a_url_deployment_say_it_measures_running_servers(tmp_path):
    with serving(_Plain) as url, serving(_Plain) as reference:
        out = write_project(tmp_path, url=url, reference_url=reference, model="/m")
    steps = " ".join(out.next_steps)
    assert "boots the servers" not in steps and "measures the running servers" in steps, steps


def test_init_says_servers_of_another_model_and_swapped_urls(tmp_path):
    plain = _answering({"version": "0.5.14", "model_path": "toy"})
    eagle = _answering({"version": "0.5.14", "model_path": "toy", "speculative_algorithm": "EAGLE3"})
    with serving(plain) as url, serving(eagle) as reference:  # swapped
        out = write_project(tmp_path, url=url, reference_url=reference, model="meta-llama/Llama-3.1-8B")
    said = " ".join(out.notes)
    assert "the --url server serves 'toy', not --model 'meta-llama/Llama-3.1-8B'" in said, said
    assert "the --reference-url server runs speculative decoding and the --url one does not: swapped?" in said
    with serving(eagle) as url, serving(plain) as reference:
        out = write_project(tmp_path / "right", url=url, reference_url=reference, model="toy")
    assert not any("swapped" in n or "another pair" in n for n in out.notes), out.notes


def test_one_server_under_two_spellings_is_refused_as_the_same_server(tmp_path):
    import pytest

    from specgate.starter import InitError

    with serving(_Plain) as url:
        port = url.rsplit(":", 1)[1]
        with pytest.raises(InitError, match="name the same server"):
            write_project(tmp_path, url=f"http://localhost:{port}/", reference_url=f"http://127.0.0.1:{port}", model="/m")
