"""specgate in a user's repository: the installed plugin, specgate.toml, `specgate init`.

The first test is the newcomer's path end to end, on the wheel this checkout builds, in a
folder that has nothing of this repository's layout: pip install, `specgate init`, `pytest`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from specgate.deployment import load_deployment
from specgate.errors import DeploymentError, SpecgateError
from specgate.resources import SOURCE_ROOT

SIM_TOML = 'deployment = "deployments/sim.toml"\n'


def _run(args: list[str], cwd: Path, env: dict | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _build_wheel(wheels: Path, cwd: Path) -> subprocess.CompletedProcess:
    return _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(SOURCE_ROOT)],
        cwd,
    )


def test_the_wheel_in_a_fresh_folder_runs_the_gate_with_plain_pytest(tmp_path):
    """pip install the wheel, `specgate init`, `pytest`: the gate runs on the simulator and
    compares against the stored baseline init copied; nothing comes from this checkout."""
    wheels = tmp_path / "wheels"
    # A failing case a demo run once left in the checkout (untracked), and an earlier build's copy
    # of it in build/lib (setuptools packs what is there): never packed for users.
    assert SOURCE_ROOT is not None
    stray = SOURCE_ROOT / "baselines" / "sim" / "equivalence" / "sampling-replay.json"
    stale = SOURCE_ROOT / "build" / "lib" / "specgate" / "_fixtures" / "baselines" / "sim" / "equivalence" / "stale.json"
    left_before = stray.exists()
    if not left_before:
        stray.write_text('{"deployment": "sim", "cases": []}')
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    try:
        built = _build_wheel(wheels, tmp_path)
    finally:
        if not left_before:
            stray.unlink()
        stale.unlink(missing_ok=True)
    assert built.returncode == 0, built.stderr[-2000:]
    # specgate init in a repository whose virtualenv is inside it (README: python3 -m venv .venv):
    # pytest never enters a virtualenv by itself, yet a plain `pytest` there runs the gate.
    repo = tmp_path / "their-repo"
    site = repo / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    (wheel,) = wheels.glob("specgate-*.whl")
    # The lab (lab/specgate_lab: drafters, model assets) is not the product: none of it ships.
    import zipfile

    shipped = zipfile.ZipFile(wheel).namelist()
    assert [n for n in shipped if n.startswith(("specgate/drafter/", "specgate_lab/", "specgate/assets.py"))] == []
    # Only what this checkout tracks ships of its data: nothing a run left there.
    tracked = set(_run(["git", "ls-files", "baselines", "fixtures", "tests/gate"], SOURCE_ROOT).stdout.split())
    data = {"specgate/_fixtures/baselines/": "baselines/", "specgate/_fixtures/": "fixtures/", "specgate/_gate/": "tests/gate/"}
    packed = [next(n.replace(k, v, 1) for k, v in data.items() if n.startswith(k)) for n in shipped if n.startswith(tuple(data))]
    assert packed and [n for n in packed if n not in tracked] == [], packed
    installed = _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    python, specgate = Path(sys.executable), site / "bin" / "specgate"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECGATE_", "PYTEST_"))}
    env["PYTHONPATH"] = str(site)
    env["PATH"] = f"{site / 'bin'}{os.pathsep}{env['PATH']}"
    where = _run([str(python), "-c", "import specgate, specgate.resources as r; print(specgate.__file__, r.SOURCE_ROOT)"],
                 repo, env)
    assert str(site) in where.stdout and where.stdout.split()[-1] == "None", where.stdout + where.stderr

    init = _run([str(specgate), "init"], repo, env)
    assert init.returncode == 0, init.stderr
    assert (repo / "specgate.toml").is_file() and (repo / "deployments" / "sim.toml").is_file()
    assert list((repo / "baselines" / "sim").glob("*.json")), "the simulator's stored baseline was not copied"
    check = _run([str(specgate), "check"], repo, env)
    assert check.returncode == 0 and "SIMULATOR" in check.stdout, check.stdout + check.stderr

    gate = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], repo, env, timeout=300)
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]
    report = json.loads((repo / "specgate-report" / "report.json").read_text())
    assert report["overall"] == "PASS" and report["simulator"]
    compared = [g for g in report["gates"] if g["gate"].startswith("regression:")]
    assert compared and all(g["status"].lower() == "pass" and "stored" in str(g["figures"]) for g in compared), compared

    # `specgate run` there reads the project's baselines (none now: it cannot compare, and says so).
    for stored in (repo / "baselines" / "sim").glob("*.json"):
        stored.unlink()
    run = _run([str(specgate), "run"], repo, env, timeout=300)
    assert run.returncode == 4, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PARTIAL" in run.stdout and str(repo / "specgate-report") in run.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's folder as `specgate init` leaves it (from this checkout's sources)."""
    from specgate.starter import write_project

    write_project(tmp_path)
    (tmp_path / "test_theirs.py").write_text("def test_their_own():\n    assert True\n")
    return tmp_path


def _collect(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    return _run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args], folder, env)


def test_a_settings_file_adds_the_gate_to_a_plain_pytest_and_only_then(project):
    collected = _collect(project)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "test_their_own" in collected.stdout and "test_speculative_output_is_greedy_baseline" in collected.stdout
    named = _collect(project, "test_theirs.py")  # paths on the command line: run as named
    assert "test_their_own" in named.stdout and "greedy_baseline" not in named.stdout
    settings = project / "specgate.toml"
    settings.write_text(settings.read_text().replace("gate = true", "gate = false"))
    off = _collect(project)
    assert "test_their_own" in off.stdout and "greedy_baseline" not in off.stdout


def test_tool_specgate_in_pyproject_is_read_like_specgate_toml(project):
    (project / "specgate.toml").unlink()
    (project / "pyproject.toml").write_text('[project]\nname = "theirs"\n\n[tool.specgate]\n' + SIM_TOML)
    collected = _collect(project)
    assert collected.returncode == 0 and "greedy_baseline" in collected.stdout, collected.stdout + collected.stderr


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('deployment = "deployments/sim.toml"\nbaseline = "b"\n', "baseline"),  # a typo of `baselines`
        ('gate = "yes"\n', "gate"),
        ('deployment = ""\n', "deployment"),
        ("deployment = [\n", "not valid TOML"),
        ('deployments = "specgate.toml"\n', "field 'deployments': expected a folder"),  # a file, not a folder
    ],
)
def test_a_broken_settings_file_is_an_error_naming_file_and_field(project, text, named):
    (project / "specgate.toml").write_text(text)
    collected = _collect(project)
    assert collected.returncode != 0
    assert "specgate.toml" in collected.stderr and named in collected.stderr, collected.stderr
    check = _run([sys.executable, "-m", "specgate.cli", "check"], project)
    assert check.returncode == 2 and "specgate.toml" in check.stderr and named in check.stderr, check.stderr


def test_names_resolve_in_the_projects_deployments_first_then_the_builtins(project, monkeypatch):
    from specgate import project as projects

    mine = project / "deployments" / "sim.toml"
    mine.write_text(mine.read_text().replace('name = "sim"', 'name = "sim-theirs"', 1))
    monkeypatch.chdir(project)
    projects.use(None)
    try:
        assert load_deployment("sim").name == "sim-theirs"  # theirs shadows the built-in
        assert load_deployment("kimi-k2.5-rtxpro6000-tp8-sim").path.parent.name == "deployments"  # a built-in
        assert load_deployment(None).path == mine.resolve()  # the settings' default
        with pytest.raises(DeploymentError, match="no deployment named 'nope'; known: .*kimi"):
            load_deployment("nope")
        found = projects.current()
        assert found.baselines_dir == project / "baselines" and found.report_dir == project / "specgate-report"
    finally:
        projects.use(None)


def test_init_writes_a_deployment_for_a_launch_command_that_loads(tmp_path):
    from specgate.starter import write_project

    written = write_project(
        tmp_path,
        launch="python -m sglang.launch_server --model-path /m/llama --tp 2 --port 30000 --api-key sk-abcdef123456 "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path /m/eagle3 --speculative-num-steps 3 "
        "--speculative-attention-mode prefill",
    )
    path = tmp_path / "deployments" / "mine.toml"
    assert path in written.files
    data = tomllib.loads(path.read_text())
    assert data["launch"]["command"] == ["python", "-m", "sglang.launch_server"]
    assert data["launch"]["args"] == ["--model-path", "/m/llama", "--tp-size", "2", "--sleep-on-idle"]  # --tp in full
    assert "sk-abcdef123456" not in path.read_text()
    decode = data["configs"]["eagle3-decode"]["args"]
    assert decode[-2:] == ["--speculative-attention-mode", "decode"] and "--speculative-num-steps" in decode
    assert decode.count("--speculative-attention-mode") == 1
    assert any("--port" in n for n in written.notes) and any("api_key_env" in n for n in written.notes)
    from specgate.deployment import parse_deployment

    assert parse_deployment(data, path).speculative_configs == ["eagle3-prefill", "eagle3-decode"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"launch": "python -m sglang.launch_server --model-path /m"}, "--draft"),
        ({"launch": "python -m sglang.launch_server --tp 2", "draft": "/d"}, "--model-path"),
        ({"launch": "--model-path /m", "draft": "/d"}, "program first"),
        ({"launch": "python 'unclosed", "draft": "/d"}, "cannot split"),
        ({"url": "http://a:1"}, "--reference-url"),
        ({"url": "http://a:1", "reference_url": "http://b:2"}, "--model"),
        ({"url": "a:1", "reference_url": "http://b:2", "model": "m"}, "http://"),
        ({"launch": "python -m x --model-path m", "url": "http://a"}, "give one"),
        ({"name": "../escape"}, "--name"),
    ],
)
def test_init_refuses_what_it_cannot_write_naming_the_option(tmp_path, kwargs, named):
    from specgate.starter import write_project

    with pytest.raises(SpecgateError, match=named.replace("(", r"\(")):
        write_project(tmp_path, **kwargs)
    assert not (tmp_path / "specgate.toml").exists()


def test_init_for_running_servers_and_never_overwrites_without_force(tmp_path):
    from specgate.starter import write_project

    write_project(tmp_path, url="http://gpu:30001", reference_url="http://gpu:30000", model="/m/llama")
    data = tomllib.loads((tmp_path / "deployments" / "mine.toml").read_text())
    assert data["launch"]["launcher"] == "url" and data["configs"]["baseline"]["url"] == "http://gpu:30000"
    with pytest.raises(SpecgateError, match="already exist.*--force"):
        write_project(tmp_path, url="http://gpu:30001", reference_url="http://gpu:30000", model="/m/llama")
    write_project(tmp_path, url="http://gpu:30002", reference_url="http://gpu:30000", model="/m/llama", force=True)
    assert "30002" in (tmp_path / "deployments" / "mine.toml").read_text()
    (tmp_path / "pyproject.toml").write_text("[tool.specgate]\n" + SIM_TOML)
    with pytest.raises(SpecgateError, match=r"already has \[tool.specgate\]"):
        write_project(tmp_path, force=True)


def test_the_cli_init_says_what_it_wrote_and_fails_with_exit_2(tmp_path):
    ok = _run([sys.executable, "-m", "specgate.cli", "init", str(tmp_path)], tmp_path)
    assert ok.returncode == 0 and "specgate.toml" in ok.stdout and "SIMULATOR" in ok.stdout
    again = _run([sys.executable, "-m", "specgate.cli", "init", str(tmp_path)], tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    missing = _run([sys.executable, "-m", "specgate.cli", "init", str(tmp_path / "nope")], tmp_path)
    assert missing.returncode == 2 and "not a folder" in missing.stderr


# --- what a hostile first try found ------------------------------------------------------------
def test_the_settings_search_stops_at_a_repository_boundary(project):
    """A specgate.toml above a nested repository is not that repository's."""
    nested = project / "other"
    nested.mkdir()
    (nested / ".git").mkdir()
    (nested / "test_other.py").write_text("def test_other():\n    assert True\n")
    collected = _collect(nested)
    assert "test_other" in collected.stdout and "greedy_baseline" not in collected.stdout, collected.stdout


def test_init_launch_takes_shell_continuations_and_env_words_and_refuses_multi_node(tmp_path):
    from specgate.starter import launch_deployment

    text, notes = launch_deployment(
        "x", "CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server \\\n  --model-path M \\\n  --tp 2", "D"
    )
    data = tomllib.loads(text)
    assert data["launch"]["command"] == ["python", "-m", "sglang.launch_server"]
    assert data["launch"]["args"] == ["--model-path", "M", "--tp-size", "2", "--sleep-on-idle"]
    assert data["launch"]["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"} and any("launch.env" in n for n in notes)
    with pytest.raises(SpecgateError, match='--nnodes.*launcher = "ssh"'):
        launch_deployment("x", "python -m sglang.launch_server --model-path M --nnodes 2 --node-rank 0", "D")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"draft": "/d"}, "--draft applies to --launch only"),
        ({"url": "http://", "reference_url": "http://b:2", "model": "m"}, "with a host"),
        ({"url": "http://a:1/", "reference_url": "http://a:1", "model": "m"}, "same server"),
    ],
)
def test_init_refuses_more_of_what_cannot_work(tmp_path, kwargs, named):
    from specgate.starter import write_project

    with pytest.raises(SpecgateError, match=named):
        write_project(tmp_path, **kwargs)


def test_a_folder_named_like_a_deployment_does_not_hide_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sim").mkdir()
    assert load_deployment("sim").name == "sim"


def test_a_repository_without_commits_cannot_store_a_baseline(project):
    assert _run(["git", "init", "-q"], project).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    refused = _run([sys.executable, "-m", "specgate.cli", "baseline", "update"], project, env)
    assert refused.returncode == 2 and "no commits yet" in refused.stderr and "make a first commit" in refused.stderr, refused.stderr


def test_specgate_run_removes_the_previous_report_before_pytest_starts(project):
    (project / "specgate-report").mkdir()
    stale = project / "specgate-report" / "report.json"
    stale.write_text('{"overall": "PASS"}')
    # as a previous run left it: the folder marked as specgate's, its manifest naming the report
    marker = project / "specgate-report" / ".specgate-report.json"
    marker.write_text('{"format": "specgate-report-folder/1", "written": ["report.json"]}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    broken = _run([sys.executable, "-m", "specgate.cli", "run", "--", "--no-such-pytest-option"], project, env)
    assert broken.returncode != 0 and not stale.exists(), broken.stdout + broken.stderr
    (project / "afile").write_text("")
    refused = _run([sys.executable, "-m", "specgate.cli", "run", "--baselines-dir", "afile"], project, env)
    assert refused.returncode == 2 and "is a file" in refused.stderr, refused.stderr


def test_a_url_whose_host_does_not_resolve_fails_at_once_naming_the_field(tmp_path):
    from specgate.errors import ServerBootError
    from specgate.server.launcher import ServerHandle
    from specgate.server.url import UrlLauncher
    from specgate.starter import write_project

    write_project(tmp_path, url="http://no-such-host.invalid:30001", reference_url="http://b.invalid:1", model="m")
    dep = load_deployment(str(tmp_path / "deployments" / "mine.toml"))
    launcher = UrlLauncher(dep)
    with pytest.raises(ServerBootError, match="does not resolve.*configs.speculative.url"):
        launcher.wait_ready(ServerHandle("speculative", "http://no-such-host.invalid:30001", None), None)


def test_a_builtin_simulator_deployment_in_a_users_project_points_at_the_baseline_it_ships(project):
    """The user's project stores no baseline for the built-in simulator twin it runs: the next step
    names the one specgate ships, not a record 'on the GPU runner'."""
    import shutil

    shutil.rmtree(project / "baselines")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    run = _run([sys.executable, "-m", "specgate.cli", "run", "sim", "--", "-k", "speed or decode_tps"], project, env)
    step = next((line for line in run.stdout.splitlines() if line.startswith("specgate: NEXT STEP")), run.stdout[-2000:])
    assert "this SIMULATOR deployment ships one: add `--baselines-dir " in step and "GPU runner" not in step, step


def test_init_picks_the_llama3_template_for_a_llama_3_model(tmp_path):
    from specgate.starter import prompt_format_for

    assert prompt_format_for("meta-llama/Llama-3.1-8B-Instruct") == "llama3"
    assert prompt_format_for("meta-llama/Meta-Llama-3-8B") == "llama3"
    assert prompt_format_for("Qwen/Qwen2.5-7B-Instruct") == "chatml"
    from specgate.starter import write_project

    write_project(tmp_path, launch="python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct", draft="d")
    assert 'prompt_format = "llama3"' in (tmp_path / "deployments" / "mine.toml").read_text()


# specgate.plugin's gate folder, moved to where an in-repository virtualenv holds it: this checkout's
# tests/gate linked under `.venv/lib/python3.11/site-packages/specgate/_gate` beside a pyvenv.cfg.
_GATE_IN_VENV = """
import sys
from pathlib import Path
import pytest
import specgate.plugin
specgate.plugin.gate_tests_dir = lambda: Path.cwd() / ".venv/lib/python3.11/site-packages/specgate/_gate"
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.fixture
def venv_inside(project: Path) -> Path:
    """`python3 -m venv .venv` in the user's repository, specgate installed there (as README's steps do)."""
    site = project / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "specgate").mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    assert SOURCE_ROOT is not None
    (site / "specgate" / "_gate").symlink_to(SOURCE_ROOT / "tests" / "gate", target_is_directory=True)
    (site / "other").mkdir()  # another installed package's tests: never the user's run
    (site / "other" / "test_installed.py").write_text("def test_installed():\n    assert True\n")
    return project


def _pytest_gate_in_venv(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    return _run([sys.executable, "-c", _GATE_IN_VENV, "-q", "-p", "no:cacheprovider", *args], folder, env)


def test_a_virtualenv_inside_the_repository_still_gives_plain_pytest_the_gate(venv_inside):
    collected = _pytest_gate_in_venv(venv_inside, "--collect-only")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "test_their_own" in collected.stdout, collected.stdout
    assert ".venv/lib/python3.11/site-packages/specgate/_gate/test_equivalence.py::" in collected.stdout, collected.stdout
    # The way down to the gate is let in, nothing beside it: the virtualenv's other packages stay out.
    assert "test_installed" not in collected.stdout, collected.stdout


def test_a_gate_that_collects_no_test_is_refused_and_its_report_says_why(venv_inside):
    report = venv_inside / "specgate-report"
    result = _pytest_gate_in_venv(venv_inside, "-o", "python_files=check_*.py")
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error, not 5 (or 0)
    assert "collected no gate test" in result.stderr and "python_files" in result.stderr, result.stderr
    written = json.loads((report / "report.json").read_text())
    assert written["overall"] == "BAD INPUT" and "collected no gate test" in written["error"], written


def test_the_shipped_baselines_are_the_folders_the_wheel_packs():
    from specgate.resources import SHIPPED_BASELINES

    assert SOURCE_ROOT is not None
    declared = tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {f"{folder}/{pattern}" for folder, patterns in SHIPPED_BASELINES.items() for pattern in patterns}
    assert set(declared["specgate._fixtures.baselines"]) == shipped


def test_init_copies_only_the_shipped_simulator_baseline(tmp_path):
    """From a checkout, `specgate init` copied every JSON under baselines/sim: a replay file or a
    calibration a run left there went into the user's repository."""
    from specgate.resources import builtin_baselines_dir
    from specgate.starter import write_project

    stray = builtin_baselines_dir() / "sim" / "equivalence" / "sampling-replay.json"
    left_before = stray.exists()
    if not left_before:
        stray.write_text('{"deployment": "sim", "cases": []}')
    try:
        written = write_project(tmp_path / "theirs")
    finally:
        if not left_before:
            stray.unlink()
    copied = sorted(str(p.relative_to(tmp_path / "theirs" / "baselines" / "sim")) for p in written.files if "baselines" in p.parts)
    assert copied == ["equivalence/replay.json", "none-simulator-x0-sglang-0.1.0-specgate-sim-70b6b9bb.json"], copied


def test_a_failing_case_is_never_written_into_the_shipped_baselines(tmp_path):
    """A fault run from this checkout (README's demo) used to leave its cases in baselines/sim,
    which the next wheel packed and every `specgate init` copied; a project's own are kept."""
    from specgate.resources import builtin_baselines_dir, package_data
    from specgate.sampling.check import SamplingPrompt
    from specgate.sampling.replay import SamplingReplay
    from specgate.sampling_spec import SamplingSetting

    shipped = builtin_baselines_dir() / "sim" / "equivalence" / "sampling-replay.json"
    assert package_data(shipped) and package_data(builtin_baselines_dir() / "sim")
    assert not package_data(tmp_path / "baselines" / "sim" / "equivalence" / "sampling-replay.json")
    assert not package_data(builtin_baselines_dir() / "smollm2-eagle3-h200")  # the lab's, not the wheel's
    setting = SamplingSetting(name="t1", temperature=1.0)
    prompt = SamplingPrompt("chat/0", "hello")
    assert not shipped.exists()
    try:
        replay = SamplingReplay(shipped, "sim")
        replay.remember("eagle3-decode", setting, prompt, 1, "why")
        assert not shipped.exists() and replay.not_kept == 1 and replay.added == 0
    finally:
        shipped.unlink(missing_ok=True)
    theirs = tmp_path / "baselines" / "sim" / "equivalence" / "sampling-replay.json"
    kept = SamplingReplay(theirs, "sim")
    kept.remember("eagle3-decode", setting, prompt, 1, "why")
    assert theirs.is_file() and kept.added == 1


def test_a_collection_error_before_the_gate_leaves_an_error_report_not_an_interrupted_one(project):
    """pytest stops at a collection error with its own Interrupted, no signal: the report folder,
    emptied of the last report, holds one that says so (it said 'interrupted (a signal or Ctrl-C)')."""
    (project / "test_broken.py").write_text("def test_(:\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    result = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project, env)
    assert result.returncode == 2, result.stdout + result.stderr
    written = json.loads((project / "specgate-report" / "report.json").read_text())
    assert written["overall"] == "ERROR" and "collection error" in written["error"], written


def test_last_failed_leaves_a_gate_that_did_not_fail_out_without_a_refusal(project):
    (project / "test_theirs.py").write_text("def test_their_own():\n    assert False\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECGATE_")}
    first = _run([sys.executable, "-m", "pytest", "-q", "-k", "test_their_own"], project, env)
    assert first.returncode == 1, first.stdout + first.stderr
    again = _run([sys.executable, "-m", "pytest", "-q", "--lf"], project, env)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout + again.stderr
    assert "collected no gate test" not in again.stdout + again.stderr


def test_a_home_relative_folder_in_the_settings_is_the_users_home(tmp_path, monkeypatch):
    """Round 3: `report_dir = "~/x"` made a literal folder named `~` in the repository."""
    from pathlib import Path

    from specgate import project

    (tmp_path / "specgate.toml").write_text('report_dir = "~/specgate-report-x"\n')
    monkeypatch.chdir(tmp_path)
    project.use(None)
    try:
        assert project.current().report_dir == (Path.home() / "specgate-report-x").resolve()
    finally:
        project.use(None)
