"""API keys: the servers get theirs from an environment variable the deployment names, the client
sends it, and it appears nowhere specgate writes or prints (the simulator enforces it as SGLang does)."""

from __future__ import annotations

import os

import pytest

from specgate.client import GenerateRequest, curl_command
from specgate.errors import DeploymentError
from specgate.secrets import redact
from tests.self.test_side_by_side import _dep

KEY = "sk-specgate-test-7f3a9c21e5"


def test_a_keyed_server_is_gated_and_the_key_is_written_nowhere(sim_deployment, pytester):
    d = sim_deployment({"launch": {"api_key_env": "SPECGATE_TEST_API_KEY"}})
    result = d.run(pytester, "-k", "equivalence or speed or beats", env={"SPECGATE_TEST_API_KEY": KEY})
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert KEY not in result.stdout.str() + result.stderr.str()
    leaked = [p for p in d.report_dir.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []
    logs = "".join(p.read_text() for p in (d.report_dir / "logs").glob("*.log"))
    assert "--api-key ***" in logs  # the server was given a key, and the kept log masks it


def test_without_the_variable_the_run_says_which_one_to_set(sim_deployment, pytester):
    d = sim_deployment({"launch": {"api_key_env": "SPECGATE_TEST_API_KEY"}})
    os.environ.pop("SPECGATE_TEST_API_KEY", None)
    result = d.run(pytester, "-k", "speed and baseline")
    assert result.ret != 0
    assert "launch.api_key_env names SPECGATE_TEST_API_KEY, which is not set" in result.stdout.str()


def test_a_key_in_the_deployment_file_is_refused():
    with pytest.raises(DeploymentError, match="must not hold --api-key"):
        _dep({"launch": {"args": ["--api-key", "abc"]}})
    with pytest.raises(DeploymentError, match="not an environment variable name"):
        _dep({"launch": {"api_key_env": "MY-KEY"}})


def test_reproducers_name_the_variable_and_hide_url_passwords():
    line = curl_command("http://user:hunter2@gpu-box:30000", GenerateRequest(max_new_tokens=4, text="p"), "SGLANG_KEY")
    assert "hunter2" not in line and "user:***@gpu-box" in line and '"Authorization: Bearer $SGLANG_KEY"' in line
    assert redact(f"server_args api_key='{KEY}'", KEY) == "server_args api_key=***"


def test_failed_gates_become_github_annotations_on_a_pull_request(tmp_path):
    import subprocess
    import sys

    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    env = {**os.environ, "GITHUB_ACTIONS": "true", "SPECGATE_SIM_FAULTS": "eagle3-decode:accept-collapse"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", "sim", "--report-dir", str(tmp_path / "r"),
         "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "accept_length_floor"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=240,
    )  # fmt: skip
    assert run.returncode == 1
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert any(line.startswith("::error title=specgate FAIL%3A accept%3Aeagle3-decode-accepts-1.8::") for line in errors)
    assert errors[0].startswith("::error title=specgate FAIL::")
    assert all("\n" not in line for line in errors)
    assert any(line.startswith("::error title=specgate FAIL::") for line in errors)


def test_escaped_and_quoted_forms_of_the_key_are_masked_and_short_keys_refused(monkeypatch):
    from specgate.errors import SpecgateError
    from specgate.secrets import api_key

    odd = 'sk\\REV"IEW-123456789'
    line = "server_args=ServerArgs(api_key=" + repr(odd) + ", port=1) " + __import__("json").dumps({"api_key": odd})
    masked = redact(line, odd)
    assert "REV" not in masked and "IEW-123456789" not in masked, masked
    monkeypatch.setenv("SHORT_KEY", "a")
    with pytest.raises(SpecgateError, match="too short to mask safely"):
        api_key("SHORT_KEY")
    assert redact("http://u:p@ss@host:1/x") == "http://u:***@host:1/x"


# --- one masking mechanism: every credential the run knows of, wherever text leaves ----------
URL_PASSWORD = "Zq7pw"  # short: masked by its place in a URL and by the Basic header it makes


def _files_holding(folder, *secrets: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in secrets)]


def test_url_passwords_are_masked_in_every_output_when_servers_are_down_die_or_echo_headers(tmp_path):
    """A url server that is down, one that dies at its first request, and one whose 500 body
    echoes the Authorization header (Basic, from the url's password): `specgate run` on GitHub
    Actions prints, reports, summarises and annotates, and the password is in none of it."""
    import base64
    import subprocess
    import sys

    import tomli_w
    from helpers import FAST, merge, sim_deployment_dict

    from specgate.deployment import ServerConfig, parse_deployment
    from specgate.resources import SOURCE_ROOT as REPO_ROOT
    from specgate.server.local import LocalLauncher, free_port

    basic = base64.b64encode(f"user:{URL_PASSWORD}".encode()).decode()
    local = LocalLauncher(parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml"), tmp_path)
    echo = local.start(ServerConfig("echo", ("--sim-fault", "echo-headers"), {}, None, ""))
    # It serves what eagle3-decode declares (a url server is checked against its config's args).
    spec = tuple(sim_deployment_dict()["configs"]["eagle3-decode"]["args"])
    dies = local.start(ServerConfig("dies", (*spec, "--sim-fault", "crash-after=0"), {}, None, ""))
    try:
        local.wait_ready(echo, None)
        local.wait_ready(dies, None)
        data = merge(merge(sim_deployment_dict(), FAST), {"launch": {"launcher": "url", "boot_timeout_s": 1}})
        for key in ("command", "args", "shutdown_timeout_s", "gpu_release_timeout_s", "coexist"):
            data["launch"].pop(key, None)
        ports = {"baseline": echo.base_url.rsplit(":", 1)[1], "eagle3-prefill": str(free_port()),
                 "eagle3-decode": dies.base_url.rsplit(":", 1)[1]}  # fmt: skip
        for name, port in ports.items():
            data["configs"][name]["url"] = f"http://user:{URL_PASSWORD}@127.0.0.1:{port}"
        (tmp_path / "url.toml").write_text(tomli_w.dumps(data))
        summary = tmp_path / "summary.md"
        env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "SPECGATE_SIM_FAULTS": ""}
        run = subprocess.run(
            [sys.executable, "-m", "specgate.cli", "run", str(tmp_path / "url.toml"), "--report-dir", str(tmp_path / "r"),
             "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "speed and c1", "-x",
             f"--junitxml={tmp_path / 'junit.xml'}"],
            capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=240,
        )  # fmt: skip
    finally:
        local.stop_all()
    shown = run.stdout + run.stderr
    assert run.returncode == 6, shown[-3000:]  # eagle3-prefill's url answers nothing: the run itself broke
    assert "user:***@127.0.0.1" in run.stdout and any(line.startswith("::error ") for line in run.stdout.splitlines())
    for reached in ('"Authorization": "Basic ***"', "/health_generate did not answer 200", "/generate failed"):
        assert reached in run.stdout, f"{reached!r} not in the output: that server's path was not taken"
    assert URL_PASSWORD not in shown and basic not in shown, shown[-3000:]
    assert _files_holding(tmp_path / "r", URL_PASSWORD, basic) == []
    assert summary.read_text() and URL_PASSWORD not in summary.read_text()
    junit = (tmp_path / "junit.xml").read_text()  # pytest's own report of the failures, echoed headers and all
    assert "answered HTTP 500" in junit and URL_PASSWORD not in junit and basic not in junit, junit[-3000:]


def test_a_server_echoing_the_key_in_a_500_body_leaks_it_nowhere(sim_deployment, pytester):
    d = sim_deployment({"launch": {"api_key_env": "SPECGATE_TEST_API_KEY"}})
    junit = d.report_dir.parent / "junit.xml"
    result = d.run(
        pytester, "-k", "speed and baseline", f"--junitxml={junit}", faults="*:echo-headers",
        env={"SPECGATE_TEST_API_KEY": KEY},
    )  # fmt: skip
    shown = result.stdout.str() + result.stderr.str()
    assert result.ret == 1 and '"Authorization": "Bearer ***"' in shown, shown[-3000:]
    assert KEY not in shown
    assert _files_holding(d.report_dir, KEY) == []
    assert "Bearer ***" in junit.read_text() and KEY not in junit.read_text()  # pytest's junit XML too


@pytest.mark.parametrize(
    "args", [["--api-ke", KEY], [f"--api-key={KEY}"], [f"--api={KEY}"], ["--admin-api", KEY], ["--ssl-keyfile-pass", KEY]]
)
def test_any_prefix_argparse_takes_for_a_secret_flag_is_refused_and_check_prints_no_key(args, tmp_path, capsys):
    import tomli_w
    from helpers import sim_deployment_dict

    from specgate.cli import main

    data = sim_deployment_dict()
    data["configs"]["baseline"]["args"] = args
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    assert main(["check", str(tmp_path / "dep.toml")]) == 2
    out, err = capsys.readouterr()
    assert "must not hold --" in err and "launch.api_key_env" in err, err
    assert KEY not in out + err


def test_secret_flags_are_known_by_their_prefixes_but_sglangs_own_flags_are_not():
    from specgate.secrets import secret_flag

    assert secret_flag("--api-ke") == "--api-key" and secret_flag(f"--api-key={KEY}") == "--api-key"
    assert secret_flag("--admin-api-k") == "--admin-api-key"
    assert secret_flag("--ssl-keyfile-p") == "--ssl-keyfile-password"
    assert secret_flag("--ssl-keyfile") is None  # SGLang's own flag: an exact name is never an abbreviation
    assert secret_flag("--api-key-file") is None and secret_flag("--port") is None and secret_flag("--") is None


def test_init_writes_no_url_password_and_the_run_reads_it_from_the_named_variable(tmp_path, monkeypatch):
    from specgate.deployment import load_deployment
    from specgate.errors import ServerBootError
    from specgate.server.url import UrlLauncher
    from specgate.starter import write_project

    password = "hunter2-but-longer"
    written = write_project(
        tmp_path, url=f"http://user:{password}@gpu-box:30001/", reference_url="http://gpu-box:30000", model="m"
    )
    text = (tmp_path / "deployments" / "mine.toml").read_text()
    assert password not in text and 'url = "http://user:${SPECGATE_URL_PASSWORD}@gpu-box:30001/"' in text
    assert any("export it as SPECGATE_URL_PASSWORD" in note for note in written.notes)
    dep = load_deployment(str(tmp_path / "deployments" / "mine.toml"))
    launcher = UrlLauncher(dep)
    monkeypatch.delenv("SPECGATE_URL_PASSWORD", raising=False)
    with pytest.raises(ServerBootError, match=r"configs\.speculative\.url in .*mine\.toml reads its password from "
                       r"\$\{SPECGATE_URL_PASSWORD\}, which is not set"):  # fmt: skip
        launcher.start(dep.configs["speculative"])
    monkeypatch.setenv("SPECGATE_URL_PASSWORD", "p@ss:w/rd-0123456")
    handle = launcher.start(dep.configs["speculative"])
    assert handle.base_url == "http://user:p%40ss%3Aw%2Frd-0123456@gpu-box:30001"
    assert redact(f"POST {handle.base_url}/generate p@ss:w/rd-0123456") == "POST http://user:***@gpu-box:30001/generate ***"


def test_every_writer_masks_what_the_deployment_made_known(tmp_path):
    """Remembered at load: the key from api_key_env, a url's password (and the Basic value it
    makes); then stored JSON, text files and the masked streams all drop them."""
    import base64
    import io
    import json

    from specgate.atomic import write_json_atomic
    from specgate.secrets import MaskedStream, write_masked

    password = "url-pw-9b8c7d6e5f"
    key = "sk-known-at-load-31f0e2d4c5"
    os.environ["SPECGATE_TEST_LOADED_KEY"] = key
    try:
        # Two deployments: a url's password and an API key cannot go together (one Authorization header).
        _dep({"launch": {"launcher": "url", "api_key_env": "SPECGATE_TEST_LOADED_KEY"},
              "configs": {n: {"url": "http://h:1"} for n in ("baseline", "eagle3-prefill", "eagle3-decode")}})  # fmt: skip
        _dep({"launch": {"launcher": "url"},
              "configs": {n: {"url": f"http://u:{password}@h:1"} for n in ("baseline", "eagle3-prefill", "eagle3-decode")}})  # fmt: skip
    finally:
        del os.environ["SPECGATE_TEST_LOADED_KEY"]
    basic = base64.b64encode(f"u:{password}".encode()).decode()
    leaky = f"echo {key} {password} Authorization: Basic {basic} answer: 'Authorization: Bearer ' + token"
    write_json_atomic(tmp_path / "doc.json", {"cause": leaky, leaky: [leaky]})
    write_masked(tmp_path / "doc.md", leaky)
    stream = io.StringIO()
    MaskedStream(stream).write(leaky)
    for text in (json.loads((tmp_path / "doc.json").read_text())["cause"], (tmp_path / "doc.md").read_text(), stream.getvalue()):
        assert key not in text and password not in text and basic not in text, text
    # A stored document keeps what merely looks like a header (a model's answer may quote one).
    assert "'Authorization: Bearer ' + token" in (tmp_path / "doc.json").read_text()


def test_the_masker_leaves_the_words_after_a_flag_name_in_prose(tmp_path):
    """The deployment error for a literal key read "must not hold --api-key: *** key in a deployment
    file" (issue 33, item 13): the key-field shape took the word "a" after "--api-key:" for a value."""
    from specgate.deployment import load_deployment
    from specgate.secrets import remember

    remember(KEY)  # a run that knows a key masks key fields by their shape
    message = "field 'configs.baseline.args': must not hold --api-key: a key in a deployment file is committed"
    assert redact(message) == message
    assert redact("api_key: None, port=1") == "api_key: None, port=1"
    # Values in a key field's position stay masked: quoted of any length, unquoted where they look like one.
    assert redact("ServerArgs(api_key='ab', admin_api_key=\"x\")") == "ServerArgs(api_key=***, admin_api_key=***)"
    assert redact("api_key: s3cr3t-t0ken, port=1") == "api_key: ***, port=1"
    assert redact("ssl_keyfile_password=hunter2") == "ssl_keyfile_password=***"
    import tomli_w
    from helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data["configs"]["baseline"]["args"] = ["--api-key", KEY]
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    with pytest.raises(DeploymentError) as err:
        load_deployment(str(tmp_path / "dep.toml"))
    assert "must not hold --api-key: a key in a deployment file" in redact(str(err.value))


def test_credentials_written_in_launch_env_or_a_configs_env_are_masked_everywhere():
    """`env = {HF_TOKEN = "..."}` under [launch] or a config: a variable whose name says it is a
    credential is remembered at load, like a forwarded one; other variables are left alone."""
    token, wandb = "hf_literal_token_4k5j6h7g8f", "wandb-literal-key-9d8s7a6f"
    _dep({"launch": {"env": {"HF_TOKEN": token, "OMP_NUM_THREADS": "4"}},
          "configs": {"baseline": {"env": {"WANDB_API_KEY": wandb}}}})  # fmt: skip
    assert redact(f"env: HF_TOKEN={token} WANDB_API_KEY={wandb} OMP_NUM_THREADS=4") == (
        "env: HF_TOKEN=*** WANDB_API_KEY=*** OMP_NUM_THREADS=4"
    )


@pytest.mark.parametrize("credential", ["api_key_env unset", "api key too short", "url password unset"])
def test_a_credential_from_an_unset_variable_is_refused_before_anything_boots(tmp_path, credential):
    """Bad input, said up front: exit 2 naming the file, the field and the variable, no server
    booted (and `specgate check` says the same, as a warning: the file may be meant for another host)."""
    import subprocess
    import sys

    import tomli_w
    from helpers import merge, sim_deployment_dict

    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("SPECGATE_TEST_UNSET_KEY", "SPECGATE_TEST_UNSET_PW")}
    if credential == "url password unset":
        data = merge(sim_deployment_dict(), {"launch": {"launcher": "url", "boot_timeout_s": 1}})
        for key in ("command", "args", "shutdown_timeout_s", "gpu_release_timeout_s", "coexist"):
            data["launch"].pop(key, None)
        for name in data["configs"]:
            data["configs"][name]["url"] = "http://user:${SPECGATE_TEST_UNSET_PW}@127.0.0.1:9"
        field, variable = "configs.baseline.url", "SPECGATE_TEST_UNSET_PW"
    else:
        data = merge(sim_deployment_dict(), {"launch": {"api_key_env": "SPECGATE_TEST_UNSET_KEY"}})
        field, variable = "launch.api_key_env", "SPECGATE_TEST_UNSET_KEY"
        if credential == "api key too short":
            env[variable] = "short"
    dep = tmp_path / "dep.toml"
    dep.write_text(tomli_w.dumps(data))

    def specgate(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "specgate.cli", *words], capture_output=True, text=True, cwd=REPO_ROOT,
            env={**env, "SPECGATE_SIM_FAULTS": ""}, timeout=240,
        )  # fmt: skip

    run = specgate("run", str(dep), "--report-dir", str(tmp_path / "r"), "--baselines-dir", str(tmp_path / "b"))
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"{dep}: {field}" in run.stderr and variable in run.stderr, run.stderr
    assert "booting" not in run.stdout + run.stderr and not (tmp_path / "r" / "logs").exists()
    check = specgate("check", str(dep))
    assert f"WARNING: {dep}: {field}" in check.stdout and variable in check.stdout, check.stdout


def test_a_credential_cut_off_by_a_messages_length_limit_is_masked_at_every_cut():
    """Reasons and causes are cut at a few hundred characters, which may fall inside an echoed key
    or Basic value: the cut-off part no longer equals the remembered credential, and was kept in
    report.json. Every cut from 6 characters on is masked; the text around it stays."""
    import base64

    from specgate import secrets

    key = "sk-LIVE-abcdefghij0123456789ZYXWVUT"
    secrets.remember(key)
    secrets.remember_url("http://admin:Xq9hunter2Zk7pw@127.0.0.1:47003")
    basic = base64.b64encode(b"admin:Xq9hunter2Zk7pw").decode()
    for value in (key, basic):
        for cut in range(6, len(value) + 1):
            document = {"cause": f"HTTP 500: Authorization: Bearer {value[:cut]}", "reasons": [f"{value[:cut]}…"]}
            masked = secrets.redact_document(document)
            assert value[:cut] not in str(masked), (cut, masked)
            assert masked["cause"] == "HTTP 500: Authorization: Bearer ***"


def test_a_key_wrapped_across_lines_or_inside_base64_is_masked():
    """Round 3's leak: the tail of a key wrapped after 12 characters, and the key inside base64
    (`Bearer KEY`, `user:KEY`, at any offset), reached every output."""
    import base64

    from specgate.secrets import redact

    key = "sk-live-ABCDEF1234567890abcdefXYZ"
    text = (
        f"key: {key[:12]}\n{key[12:]} | "
        + " ".join(base64.b64encode(f"{p}{key}".encode()).decode() for p in ("Bearer ", "user:", "u:", ""))
    )
    masked = redact(text, key)
    assert key[12:] not in masked and key[-8:] not in masked, masked
    for prefix in ("Bearer ", "user:", "u:", ""):
        encoded = base64.b64encode(f"{prefix}{key}".encode()).decode()
        assert encoded[len(encoded) // 2 - 4 : len(encoded) // 2 + 4] not in masked, (prefix, masked)
    assert redact("a model named sk-live-ABC is fine", key).endswith("is fine")


def test_a_possessive_after_a_token_colon_is_prose_not_a_credential():
    from specgate.secrets import redact

    line = "long prompts built at 5.00 chars/token: baseline's server counted the calibration prompt"
    assert redact(line) == line
    assert redact("HF_TOKEN: hf_abcdefghijklmnop1234") == "HF_TOKEN: ***"
