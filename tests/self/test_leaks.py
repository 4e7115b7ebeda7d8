"""What leaves the process: every encoding of every credential masked, keys inside wrapper command
strings refused and masked, SGLang's own secret fields masked whether or not a key was given,
and no server line taken by a CI runner for a workflow command."""

from __future__ import annotations

import html
import io
import json
import re
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import tomli_w
from helpers import merge, sim_deployment_dict

from specgate.atomic import write_json_atomic
from specgate.ci_log import workflow_value, write_workflow_commands
from specgate.deployment import ServerConfig, load_deployment, parse_deployment
from specgate.errors import DeploymentError, ServerBootError
from specgate.report.ci import append_step_summary
from specgate.secrets import MaskedStream, redact, remember, write_masked
from specgate.server.local import LocalLauncher

# Characters that every encoding changes: '/' (JSON's \/), '+' '=' '&' (URL), '<' '>' '"' "'" (HTML).
ODD_KEY = "sk/AbC+dEf=GhI&jK<lM>nO'pQ\"r12345"


def _encodings(key: str) -> dict[str, str]:
    as_json = json.dumps(key)[1:-1]
    url = quote(key, safe="")
    return {
        "raw": key,
        "url": url,
        "url, '/' kept": quote(key),
        "url, lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), url),
        "quote_plus": quote_plus(key),
        "json": as_json,
        "json, '/' as '\\/'": as_json.replace("/", "\\/"),
        "html": html.escape(key),
        "html, &#39;": html.escape(key).replace("&#x27;", "&#39;"),
        "url inside json": json.dumps(url)[1:-1],
        "json inside html": html.escape(as_json),
    }


def test_every_encoding_of_a_key_is_masked_in_every_output(tmp_path, monkeypatch):
    """The issue's case: a key echoed URL-encoded, JSON-escaped (`\\/`) or HTML-escaped kept 18
    of its 28 characters in stdout, report.md/json, the step summary and `::error` annotations."""
    remember(ODD_KEY)
    forms = _encodings(ODD_KEY)
    echoed = "server said: " + " | ".join(f"{name}: {form}" for name, form in forms.items())
    stdout = io.StringIO()
    MaskedStream(stdout).write(echoed)
    write_masked(tmp_path / "report.md", echoed)
    write_json_atomic(tmp_path / "report.json", {"cause": echoed})
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    assert append_step_summary(echoed) is None
    annotations = io.StringIO()
    monkeypatch.setattr(sys, "stdout", MaskedStream(annotations))
    write_workflow_commands([f"::error title=specgate FAIL::{workflow_value(echoed)}"])
    outputs = {
        "stdout": stdout.getvalue(),
        "report.md": (tmp_path / "report.md").read_text(),
        "report.json": json.loads((tmp_path / "report.json").read_text())["cause"],
        "step summary": (tmp_path / "summary.md").read_text(),
        "annotation": annotations.getvalue(),
    }
    for where, text in outputs.items():
        for name, form in forms.items():
            assert form not in text, f"{name} form of the key in {where}: {text}"
        assert "GhI" not in text and "12345" not in text, f"part of the key in {where}: {text}"


def _deployment_file(tmp_path: Path, command: list[str]) -> str:
    data = merge(sim_deployment_dict(), {"launch": {"command": command}})
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    return str(tmp_path / "dep.toml")


@pytest.mark.parametrize(
    "inner",
    [
        "python -m sglang.launch_server --api-key sk-literal-0123456789 --port 1",
        "python -m sglang.launch_server --admin-api-key=sk-literal-0123456789",
        "sh -c 'python -m sglang.launch_server --api-key sk-literal-0123456789'",
    ],
)
def test_a_key_inside_a_wrapper_command_string_is_refused_without_printing_it(tmp_path, inner):
    path = _deployment_file(tmp_path, ["bash", "-c", inner])
    with pytest.raises(DeploymentError) as err:
        load_deployment(path)
    assert re.search(r"launch\.command.*must not hold --(admin-)?api-key inside a command string", redact(str(err.value)))
    assert "sk-literal" not in str(err.value)


def test_a_wrapper_reading_its_key_from_its_environment_is_accepted_and_a_shown_key_masked(tmp_path):
    load_deployment(_deployment_file(tmp_path, ["bash", "-c", 'exec python -m sglang.launch_server --api-key "$MY_KEY"']))
    shown = 'bash -c "python -m sglang.launch_server --api-key sk-literal-0123456789 --port 1"'
    assert redact(shown) == 'bash -c "python -m sglang.launch_server --api-key *** --port 1"'
    assert redact("--api-key $MY_KEY --port 1") == "--api-key $MY_KEY --port 1"
    assert redact("--api-key 'sk' --admin-api-key abcdefghijklmnopq") == "--api-key *** --admin-api-key ***"


SERVER_ARGS = (
    "server_args=ServerArgs(model_path='m', api_key='sk-user-0123456789', admin_api_key='adm-9876543210', "
    "hf_token='hf_abcdefghij', ssl_keyfile_password=None, max_total_tokens=4096, tokenizer_path='/m/tok', "
    "ssl_keyfile='/k.pem', bucket_time_to_first_token=[0.1, 0.5])"
)


def test_sglangs_secret_fields_are_masked_with_no_key_known():
    masked = redact(SERVER_ARGS)
    for secret in ("sk-user-0123456789", "adm-9876543210", "hf_abcdefghij"):
        assert secret not in masked, masked
    kept_fields = ("ssl_keyfile_password=None", "max_total_tokens=4096", "tokenizer_path='/m/tok'", "ssl_keyfile='/k.pem'")
    for kept in (*kept_fields, "bucket_time_to_first_token=[0.1, 0.5]"):
        assert kept in masked, masked


def test_a_server_without_api_key_env_writes_no_admin_key_into_its_log(tmp_path):
    """The issue's case: with no launch.api_key_env the server's output went straight to its log,
    and SGLang's server_args line kept admin_api_key='…' in clear."""
    command = ["{python}", "-c", f"print({SERVER_ARGS!r}, flush=True); raise SystemExit(3)"]
    dep = parse_deployment(merge(sim_deployment_dict(), {"launch": {"command": command}}), tmp_path / "dep.toml")
    assert dep.launch.api_key_env is None
    launcher = LocalLauncher(dep, tmp_path / "logs")
    handle = launcher.start(ServerConfig("plain", (), {}, None, ""))
    with pytest.raises(ServerBootError):
        launcher.wait_ready(handle, None)
    launcher.stop(handle)
    log = (tmp_path / "logs" / "plain.log").read_text()
    assert "server_args=ServerArgs(" in log and "adm-9876543210" not in log and "sk-user-0123456789" not in log, log


FORGED = ["::stop-commands::specgate-off", "  ::error title=specgate PASS::forged", "\u00a0\v::warning::x", "##[error]old-style"]


def test_a_failed_servers_log_tail_cannot_issue_workflow_commands(tmp_path, monkeypatch):
    """The issue's case: a failed server's log tail went to stdout verbatim; under GitHub Actions a
    `::stop-commands::` line in it switched off specgate's own annotations and forged others."""
    lines = "; ".join(f"print({line!r})" for line in FORGED)
    command = ["{python}", "-c", f"{lines}; raise SystemExit(3)"]
    dep = parse_deployment(merge(sim_deployment_dict(), {"launch": {"command": command}}), tmp_path / "dep.toml")
    launcher = LocalLauncher(dep, tmp_path / "logs")
    handle = launcher.start(ServerConfig("forger", (), {}, None, ""))
    with pytest.raises(ServerBootError) as err:
        launcher.wait_ready(handle, None)
    launcher.stop(handle)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", MaskedStream(out))
    print(f"specgate: {err.value}")
    print(FORGED[0])  # a write that begins a line, as print's writes do
    write_workflow_commands(["::error title=specgate FAIL::the real one"])
    lines = out.getvalue().split("\n")  # as the runner splits them
    commands = [line for line in lines if line.lstrip().startswith("::") or "##[" in line]
    assert commands == ["::error title=specgate FAIL::the real one"], out.getvalue()
    assert "stop-commands::specgate-off" in out.getvalue()  # still shown, as text


def test_an_annotations_body_cannot_end_its_command_or_start_another():
    body = workflow_value("a server said:\n::stop-commands::x%0A::error::forged\r\n")
    assert "\n" not in body and "\r" not in body  # one line: the runner's message, whatever it holds
    assert "x%250A::error" in body  # an encoded line end in the text stays text
