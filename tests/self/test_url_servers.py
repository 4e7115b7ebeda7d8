"""Servers attached by url (issue 32's second review): one boot each, checked against what they
declare, written by init with what they serve, an unreachable one is the run broken (exit 6) with
its gates NOT RUN, and their hardware is theirs, not this client's."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import tomli_w
from helpers import FAST, merge, serving, sim_deployment_dict

from specgate.deployment import ServerConfig, parse_deployment
from specgate.errors import DeploymentError, SpecgateError
from specgate.resources import SOURCE_ROOT as REPO_ROOT

EAGLE = sim_deployment_dict()["configs"]["eagle3-decode"]["args"]


def _url_data(**launch) -> dict:
    data = merge(sim_deployment_dict(), {"launch": {"launcher": "url", **launch}})
    for key in ("command", "shutdown_timeout_s", "gpu_release_timeout_s", "coexist"):
        data["launch"].pop(key, None)
    for i, cfg in enumerate(data["configs"].values()):
        cfg["url"] = f"http://127.0.0.1:{31000 + i}"
    return data


# --- 1. one running server is one boot ----------------------------------------------------------
def test_url_servers_refuse_more_than_one_boot_naming_the_field_and_why(tmp_path):
    with pytest.raises(DeploymentError) as err:
        parse_deployment(_url_data(boots=3), tmp_path / "url.toml")
    said = str(err.value)
    assert str(tmp_path / "url.toml") in said and "launch.boots" in said and "is one boot" in said
    assert "Restart the servers by hand between runs" in said


def test_no_advice_to_a_url_deployment_suggests_launch_boots(tmp_path):
    from specgate.verdicts.regression_gate import _inconclusive_at
    from specgate.verdicts.sensitivity import Design, plan_sentence
    from specgate.verdicts.vacuity import speed_tolerance

    data = _url_data()
    data["gates"]["tolerance"] = {"decode_tps": 0.6}
    dep = parse_deployment(data, tmp_path / "url.toml")
    design = Design(between_log_sd=0.05, within_log_sd=0.02, boots_now=1, boots_stored=1, requests=30,
                    false_alarm=0.05, two_sided=False, shared_log_sd=0.0)  # fmt: skip
    said = [
        _inconclusive_at(45, 45, 45, dep.launch.more_boots),
        plan_sentence(design, 0.08, 32, 60.0, 1.0, url=True),
        speed_tolerance(dep, "baseline").why,  # type: ignore[union-attr]
    ]
    for text in said:
        assert "launch.boots" not in text, text
        assert "restart them" in text, text


# --- 2. a url config's declared args against what its server serves ---------------------------
def _served(args: list[str], **extra) -> dict:
    from specgate.server.served import check_served

    dep = parse_deployment(_url_data(), Path("url.toml"))
    return check_served(dep, ServerConfig("eagle3-decode", tuple(args), {}, "http://x", ""), extra)


def test_a_plain_server_under_a_speculative_name_is_named_field_by_field():
    info = {"speculative_algorithm": None, "speculative_num_steps": None, "model_path": "specgate-sim/toy-1k"}
    check = _served(EAGLE, **info)
    failure = check.failure("eagle3-decode", "http://x", "url.toml")
    assert failure is not None and "config 'eagle3-decode'" in failure
    assert "speculative_algorithm: declared 'EAGLE3', served none (plain decoding)" in failure
    assert "num_steps: declared '2', served None" in failure


def test_old_and_nested_names_are_read_and_what_is_not_reported_is_not_checked_once():
    nested = {"server_args": {"speculative_algorithm": "EAGLE3", "speculative_topk": 1, "speculative_num_steps": 2,
                              "speculative_num_draft_tokens": 3, "speculative_attention_mode": "decode"}}  # fmt: skip
    check = _served(EAGLE, **nested)
    assert check.mismatches == [] and check.not_checked == ["model_path"]
    assert check.note().count("model_path") == 1
    assert _served(EAGLE, **{**nested["server_args"], "speculative_eagle_topk": 4}).mismatches == ["topk: declared '1', served 4"]


# --- 3. init --url writes what the server serves ------------------------------------------------
class _Info(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path in ("/server_info", "/get_server_info"):
            body = json.dumps({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                               "speculative_num_draft_tokens": 4, "speculative_attention_mode": "decode",
                               "speculative_draft_model_path": "/m/drafter"}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args):
        pass


def test_init_url_writes_the_served_speculative_args_and_its_gates_exist(tmp_path):
    from specgate.starter import write_project

    with serving(_Info) as url:
        write_project(tmp_path, url=url, reference_url="http://127.0.0.1:1", model="/m/llama")
    path = tmp_path / "deployments" / "mine.toml"
    dep = parse_deployment(tomllib.loads(path.read_text()), path)
    args = dep.configs["speculative"].args
    assert args[:2] == ("--speculative-algorithm", "EAGLE3") and "--speculative-num-steps" in args
    assert dep.configs["speculative"].speculative  # so its accept-length regression gate exists


def test_init_url_unreachable_writes_a_commented_placeholder_and_check_says_the_gate_is_absent(tmp_path):
    from specgate.cli.check import describe
    from specgate.server.local import free_port
    from specgate.starter import write_project

    out = write_project(tmp_path, url=f"http://127.0.0.1:{free_port()}", reference_url="http://127.0.0.1:1", model="/m")
    path = tmp_path / "deployments" / "mine.toml"
    text = path.read_text()
    assert "# PLACEHOLDER: its /get_server_info did not answer" in text and "\nargs = []" in text
    assert any("placeholder" in n for n in out.notes)
    said = describe(parse_deployment(tomllib.loads(text), path))
    assert "configs.speculative.args declare no --speculative-algorithm" in said and "NO accept-length gate" in said


# --- 8. the servers' hardware is theirs --------------------------------------------------------
def test_a_url_fingerprint_never_claims_this_clients_gpu(monkeypatch):
    import specgate.verdicts.fingerprint as fp
    from specgate.hardware import GpuInfo
    from specgate.provenance import provenance

    monkeypatch.setattr(fp, "gpu_info", lambda: GpuInfo("NVIDIA H200", 8, "570.1", "12.8", 143000))
    data = _url_data()
    data["simulator"] = False
    dep = parse_deployment(data, Path("url.toml"))
    found = fp.collect_fingerprint(dep, {"version": "0.5.14", "tp_size": 2}, {"model_path": "/m"})
    assert "H200" not in found.gpu and "570" not in found.driver and "server attached by url" in found.gpu
    assert found.gpu_count == 2  # what the server tells (tensor parallel size) is recorded
    local = fp.collect_fingerprint(parse_deployment({**sim_deployment_dict(), "simulator": False}, Path("l.toml")),
                                   {"version": "0.5.14"}, {})  # fmt: skip
    assert local.gpu == "NVIDIA H200" and local.digest != found.digest  # stored baselines match apart
    assert "servers" in provenance(launcher="url") and "servers" not in provenance()


# --- 2 and 6 end to end: a swapped url fails its config up front, an unreachable one is exit 6 ---
def test_an_unreachable_url_server_is_the_run_broken_with_its_gates_not_run(tmp_path):
    from specgate.server.local import LocalLauncher, free_port

    base = sim_deployment_dict()
    local = LocalLauncher(parse_deployment(base, tmp_path / "sim.toml"), tmp_path)
    plain = local.start(ServerConfig("plain", tuple(base["launch"]["args"]), {}, None, ""))
    try:
        local.wait_ready(plain, None)
        data = merge(merge(_url_data(boot_timeout_s=1), FAST), {"configs": {
            "baseline": {"url": plain.base_url},
            "eagle3-decode": {"url": plain.base_url},  # the plain server under the speculative name
            "eagle3-prefill": {"url": f"http://127.0.0.1:{free_port()}"},  # nothing there
        }})  # fmt: skip
        (tmp_path / "url.toml").write_text(tomli_w.dumps(data))
        run = subprocess.run(
            [sys.executable, "-m", "specgate.cli", "run", str(tmp_path / "url.toml"), "--report-dir", str(tmp_path / "r"),
             "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "speed or gates"],
            capture_output=True, text=True, cwd=REPO_ROOT, timeout=240,
        )  # fmt: skip
    finally:
        local.stop_all()
    shown = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode == 6, shown
    assert "specgate: ERROR (SERVER UNAVAILABLE: config 'eagle3-prefill'" in run.stdout, shown  # the report was read back
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["overall"] == "ERROR" and report["overall_reasons"][0].startswith("SERVER UNAVAILABLE: config 'eagle3-prefill'")
    gates = {g["gate"]: g for g in report["gates"]}
    for gate in ("regression:eagle3-prefill:c1:decode_tps", "regression:eagle3-prefill:c1:accept_length"):
        assert gates[gate]["status"] == "not run" and "did not answer 200" in gates[gate]["summary"]
    for gate in ("beats:eagle3-decode-beats-baseline", "accept:eagle3-decode-accepts-1.8"):
        assert gates[gate]["status"] == "not run"
        assert "speculative_algorithm: declared 'EAGLE3', served none (plain decoding)" in gates[gate]["summary"]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| regression:eagle3-prefill:c1:decode_tps | NOT RUN |" in md
    assert "| eagle3-prefill | 1 | NOT MEASURED | — | — | — | 0 | — | NOT RUN: SERVER UNAVAILABLE" in md
    assert "client host" in md and "Servers' machine (attached by url" in md


# --- issue 33, item 14: credentials that cannot go together, and servers that refuse them -------
def test_a_url_password_with_an_api_key_is_refused_up_front_by_run_and_check(tmp_path):
    """Both are an Authorization header: httpx sends the url's as Basic in place of the Bearer
    key, and the server answers 401 to every request. Said before anything boots, exit 2."""
    data = _url_data(api_key_env="SPECGATE_TEST_URL_KEY")
    data["configs"]["baseline"]["url"] = "http://gate:${SPECGATE_TEST_URL_PW}@127.0.0.1:31000"
    dep = tmp_path / "url.toml"
    dep.write_text(tomli_w.dumps(data))
    env = {**__import__("os").environ, "SPECGATE_TEST_URL_KEY": "sk-url-key-0123456789", "SPECGATE_TEST_URL_PW": "pw-5678"}

    def specgate(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "specgate.cli", *words], capture_output=True, text=True,
                              cwd=REPO_ROOT, env=env, timeout=240)  # fmt: skip

    run = specgate("run", str(dep), "--report-dir", str(tmp_path / "r"), "--baselines-dir", str(tmp_path / "b"))
    said = run.stdout + run.stderr
    assert run.returncode == 2, said[-3000:]
    assert f"{dep}: field 'configs.baseline.url'" in said and "launch.api_key_env" in said, said[-3000:]
    assert "remove user:password@ from configs.baseline.url" in said and "or remove launch.api_key_env" in said
    assert "pw-5678" not in said and not (tmp_path / "r" / "logs").exists()
    check = specgate("check", str(dep))
    assert check.returncode == 2 and "configs.baseline.url" in check.stdout + check.stderr, check.stdout + check.stderr
    assert "launch.api_key_env" in check.stdout + check.stderr
    # Either alone stays accepted.
    del data["launch"]["api_key_env"]
    parse_deployment(data, dep)


class _Refusing(BaseHTTPRequestHandler):
    """A proxy that asks for a password it is not given: 401 to everything, /health_generate too."""

    def do_GET(self):  # noqa: N802
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_server_refusing_the_credentials_at_boot_is_said_at_once_naming_the_fields(tmp_path):
    import time

    from specgate.errors import Unauthorized
    from specgate.server.url import UrlLauncher

    with serving(_Refusing) as url:
        data = _url_data(boot_timeout_s=600)  # waiting would never end it: it is said at once
        data["configs"]["baseline"]["url"] = url.replace("http://", "http://gate:wrong-pw-1234@")
        dep = parse_deployment(data, tmp_path / "url.toml")
        launcher = UrlLauncher(dep)
        handle = launcher.start(dep.configs["baseline"])
        started = time.monotonic()
        with pytest.raises(Unauthorized) as err:
            launcher.wait_ready(handle, None)
    said = str(err.value)
    assert time.monotonic() - started < 120
    assert said.startswith("config 'baseline': unauthorized (HTTP 401): GET http://gate:***@127.0.0.1:"), said
    assert "configs.baseline.url's user:password" in said and str(tmp_path / "url.toml") in said
    assert "wrong-pw-1234" not in said


def test_a_wrong_api_key_at_the_first_request_is_said_as_unauthorized(tmp_path, monkeypatch):
    """The health probe is open (as SGLang's is), so the refusal comes at the first request."""
    from specgate.server.local import LocalLauncher
    from specgate.server.pool import ServerPool

    monkeypatch.setenv("SPECGATE_TEST_SERVER_KEY", "sk-the-servers-key-0123456789")
    monkeypatch.setenv("SPECGATE_TEST_CLIENT_KEY", "sk-another-key-9876543210")
    base = merge(sim_deployment_dict(), {"launch": {"api_key_env": "SPECGATE_TEST_SERVER_KEY"}})
    local = LocalLauncher(parse_deployment(base, tmp_path / "sim.toml"), tmp_path)
    plain = local.start(ServerConfig("plain", tuple(base["launch"]["args"]), {}, None, ""))
    try:
        local.wait_ready(plain, None)
        data = _url_data(api_key_env="SPECGATE_TEST_CLIENT_KEY")
        data["configs"]["baseline"]["url"] = plain.base_url
        pool = ServerPool(parse_deployment(data, tmp_path / "url.toml"), tmp_path)
        try:
            with pytest.raises(SpecgateError) as err:
                pool.acquire("baseline")
        finally:
            pool.close()
    finally:
        local.stop_all()
    said = str(err.value)
    assert "config 'baseline': unauthorized (HTTP 401): GET http://127.0.0.1:" in said, said
    assert "launch.api_key_env ($SPECGATE_TEST_CLIENT_KEY" in said and "sk-another-key" not in said
