"""SGLang's own parser, per release, before anything boots (specgate/sglang_cli.py, flag_check.py):
the tables built from the released wheels say what each release takes, in argparse's own words;
every flag the product writes (shipped deployments, levers, init) is taken by every supported
release; `specgate check` and a run refuse a launch SGLang would refuse, naming the config, the
flag, the release and its replacement; an installed SGLang's own parser is asked first."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specgate import sglang_cli
from specgate.deployment import load_deployment
from specgate.diagnosis.settings import read_settings
from specgate.flag_check import check_flags, final_argv
from specgate.resources import builtin_deployments_dir
from specgate.server_flags import (
    GRAPH_BOUND_FLAGS,
    accepts,
    graph_bound_args,
    graph_bound_from_args,
    supported_spelling,
)
from specgate.server_info import graph_bound
from specgate.sim.__main__ import sglang_argv

SUPPORTED = [t.name for t in sglang_cli.supported()]
REFUSED_FROM_0_5_20 = ("--cuda-graph-max-bs", "--disable-piecewise-cuda-graph")


def test_the_tables_cover_every_release_from_0_5_11_to_0_5_23_and_say_what_the_wheels_say():
    names = [t.name for t in sglang_cli.tables()]
    assert names[0] == "0.5.11" and names[-1] == "0.5.23" and {"0.5.14", "0.5.18", "0.5.20"} <= set(names)
    assert SUPPORTED[0] == "0.5.14" and SUPPORTED[-1] == "0.5.23"
    for table in sglang_cli.tables():
        assert len(table.options) > 300 and table.allow_abbrev, table.name  # SGLang leaves abbreviations on
        old = table.option("--cuda-graph-max-bs")
        if table.release < (0, 5, 14):
            assert old is not None and not old.deprecated and table.option("--cuda-graph-max-bs-decode") is None
        elif table.release <= (0, 5, 19):
            assert old is not None and old.deprecated == "--cuda-graph-max-bs-decode", table.name
        else:
            assert old is None and table.option("--cuda-graph-max-bs-prefill") is not None, table.name
    mode = sglang_cli.newest().option("--speculative-attention-mode")
    assert mode is not None and mode.choices == ("decode", "prefill")


@pytest.mark.parametrize("release", ["0.5.20", "0.5.23"])
def test_a_release_refuses_the_old_graph_flags_in_argparse_s_own_words(release):
    table = sglang_cli.table_for(sglang_cli.parse_release(release))
    assert table is not None
    base = ["--model-path", "M"]
    assert table.refusal([*base, "--cuda-graph-max-bs", "4"]) == (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )
    assert table.refusal([*base, "--disable-piecewise-cuda-graph"]) == "unrecognized arguments: --disable-piecewise-cuda-graph"
    assert table.refusal([*base, "--speculative-num-steps", "x"]) == "argument --speculative-num-steps: invalid int value: 'x'"
    assert table.refusal([*base, "--cuda-graph-max-bs-decode", "4", "--cuda-graph-backend-prefill", "disabled"]) is None
    assert table.refusal([*base, "--speculative-attention-mod", "decode"]) is None  # an unambiguous prefix: taken
    assert sglang_cli.replacement("--cuda-graph-max-bs") == "--cuda-graph-max-bs-decode"


def _checked_release(dep, config) -> list[str]:
    """The releases a shipped config must parse under: its declared one, else every supported one."""
    declared = config.declared_release(dep.launch)
    return [declared] if declared else SUPPORTED


def test_every_config_of_every_shipped_deployment_parses_under_every_supported_release():
    checked = 0
    for path in sorted(builtin_deployments_dir().glob("*.toml")):
        dep = load_deployment(str(path))
        for name, config in dep.configs.items():
            argv = final_argv(dep, config, [])
            argv = sglang_argv(argv)
            for release in _checked_release(dep, config):
                table = sglang_cli.table_for(sglang_cli.parse_release(release))
                assert table is not None
                whole = dep.launch.launcher != "url"
                assert table.refusal(argv, whole) is None, (path.name, name, release, table.refusal(argv, whole))
                checked += 1
    assert checked > 100
    # And `specgate check`'s own reading of them refuses none.
    for path in sorted(builtin_deployments_dir().glob("*.toml")):
        assert check_flags(load_deployment(str(path))).refusals == [], path.name


def test_check_refuses_an_old_flag_naming_config_flag_release_and_replacement_in_seconds(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text(
        'name = "old"\nmodel = "M"\nreference = "baseline"\n[launch]\n'
        'command = ["{python}", "-m", "sglang.launch_server"]\nargs = ["--model-path", "M", "--cuda-graph-max-bs", "4"]\n'
        '[configs.baseline]\n[configs.eagle3]\nargs = ["--speculative-algorithm", "EAGLE3"]\n'
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "specgate.cli", "check", str(path)], capture_output=True, text=True)
    assert time.monotonic() - started < 30
    assert done.returncode == 2, done.stdout + done.stderr
    assert "configs baseline, eagle3" in done.stderr and "ambiguous option: --cuda-graph-max-bs" in done.stderr
    assert "SGLang 0.5.23" in done.stderr and "write --cuda-graph-max-bs-decode instead" in done.stderr
    # Declared as a release that takes it: a deprecation warning, not a refusal.
    path.write_text(path.read_text().replace("[launch]\n", '[launch]\nsglang_release = "0.5.14"\n'))
    done = subprocess.run([sys.executable, "-m", "specgate.cli", "check", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--cuda-graph-max-bs is deprecated in SGLang 0.5.14: write --cuda-graph-max-bs-decode" in done.stdout
    # A misspelt flag is named with the flag it is near; a valid one is never "corrected".
    dep = load_deployment(str(path))
    config = dep.configs["eagle3"]
    typo = dataclasses.replace(config, args=(*config.args, "--speculative-num-stepz", "3", "--cuda-graph-bs-decode", "1"))
    said = check_flags(dataclasses.replace(dep, configs={"eagle3": typo})).refusals
    assert len(said) == 1 and "unrecognized arguments: --speculative-num-stepz 3" in said[0].text
    assert "did you mean --speculative-num-steps?" in said[0].text and "--cuda-graph-bs-decode" not in said[0].text


FAKE_SGLANG = {
    "sglang/__init__.py": '__version__ = "0.5.99"\n',
    "sglang/launch_server.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/server_args.py": (
        "class ServerArgs:\n"
        "    @staticmethod\n"
        "    def add_cli_args(parser):\n"
        "        parser.add_argument('--model-path', required=True)\n"
        "        for f in ('--host', '--port', '--nccl-port', '--speculative-algorithm'):\n"
        "            parser.add_argument(f)\n"
        "        parser.add_argument('--max-running-requests-ever', type=int)\n"
    ),
}


def test_the_launch_commands_own_sglang_decides_where_it_imports(tmp_path):
    """Its parser, not a table: a flag no table knows is taken, one the table takes is refused."""
    for name, text in FAKE_SGLANG.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = tmp_path / "own.toml"
    path.write_text(
        'name = "own"\nmodel = "M"\nreference = "baseline"\n[launch]\n'
        'command = ["{python}", "-m", "sglang.launch_server"]\n'
        f'env = {{PYTHONPATH = "{tmp_path}"}}\n'
        'args = ["--model-path", "M", "--max-running-requests-ever", "2"]\n'
        '[configs.baseline]\n[configs.eagle3]\nargs = ["--speculative-algorithm", "EAGLE3", "--enable-metrics"]\n'
    )
    report = check_flags(load_deployment(str(path)))
    assert any("SGLang 0.5.99's own parser" in line for line in report.judged_by), report.judged_by
    assert [f.configs for f in report.refusals] == [("eagle3",)]
    assert "unrecognized arguments: --enable-metrics" in report.refusals[0].text


def test_a_simulator_claiming_0_5_23_refuses_what_0_5_23_refuses_and_boots_on_the_shipped_flags():
    from specgate.sim.__main__ import _claimed_table, _refusal, main

    assert main(["--sim-release", "0.5.23", "--model-path", "m", "--cuda-graph-max-bs", "4"]) == 2
    argv = ["--sim-release", "0.5.19", "--model-path", "m", "--cuda-graph-max-bs", "4", "--sim-step-ms", "3"]
    assert _refusal(_claimed_table("0.5.19"), argv) is None  # an alias there, and --sim-* are the simulator's
    assert _refusal(_claimed_table(None), ["--anything"]) is None  # claiming no release, it takes every spelling


def test_a_simulated_run_claiming_0_5_23_passes_with_the_shipped_simulator_deployment(sim_deployment, pytester):
    d = sim_deployment({"launch": {"args": [*load_deployment("sim").launch.args, "--sim-release", "0.5.23"]}})
    result = d.run(pytester)
    assert result.ret == 0, "\n".join(result.outlines[-30:])
    assert d.report()["fingerprint"]["sglang"].startswith("0.5.23")


@pytest.mark.parametrize("release", SUPPORTED)
def test_old_and_new_graph_bound_spellings_read_back_the_same_bound(release):
    r = sglang_cli.parse_release(release)
    for spelling in (*GRAPH_BOUND_FLAGS, "--cuda-graph-config"):
        if not accepts(r, spelling):
            continue
        args = [spelling, '{"decode":{"max_bs":4}}' if spelling == "--cuda-graph-config" else "4"]
        assert graph_bound_from_args(args) == 4, spelling
        resolved = {"decode": {"backend": "full", "max_bs": 4, "bs": [1, 2, 3, 4]}, "prefill": {}}
        info = {"version": release, "cuda_graph_max_bs_decode": None if "config" in spelling else 4, "cuda_graph_config": resolved}
        assert graph_bound(info) == 4 and read_settings(info).cuda_graph_max_bs == 4, spelling


def test_every_flag_the_product_writes_is_taken_by_every_supported_release():
    # The graph bound a lever writes, for a server of each release and one that does not say.
    for release in [*SUPPORTED, None]:
        r = sglang_cli.parse_release(release) if release else None
        argv = ["--model-path", "M", *graph_bound_args(r, 8)]
        for table in sglang_cli.supported():
            if release is None or table.name == release:
                assert table.refusal(argv) is None, (release, table.name)
    # init rewrites what some supported release refuses, and says so.
    rewritten, note = supported_spelling(["--cuda-graph-max-bs", "8"])
    assert rewritten == ["--cuda-graph-max-bs-decode", "8"] and note and "refused by SGLang 0.5.20" in note
    rewritten, note = supported_spelling(["--disable-piecewise-cuda-graph"])
    assert rewritten == ["--cuda-graph-backend-prefill", "disabled"] and note
    assert supported_spelling(["--cuda-graph-bs-decode", "1", "2"]) == (["--cuda-graph-bs-decode", "1", "2"], None)
    assert supported_spelling(["--tp", "2"])[0] == ["--tp-size", "2"]  # an abbreviation, written in full
    from specgate.diagnosis.levers import FLAGS

    for key, flag in FLAGS.items():
        assert all(t.option(flag) is not None for t in sglang_cli.supported()), (key, flag)


def test_init_writes_a_deployment_every_supported_release_takes(tmp_path):
    from specgate.starter import launch_deployment

    text, notes = launch_deployment(
        "mine",
        "python -m sglang.launch_server --model-path M --cuda-graph-max-bs 8 --disable-piecewise-cuda-graph "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path D --speculative-num-steps 3",
        None,
    )
    (tmp_path / "mine.toml").write_text(text)
    dep = load_deployment(str(tmp_path / "mine.toml"))
    for config in dep.configs.values():
        for table in sglang_cli.supported():
            assert table.refusal(final_argv(dep, config, [])) is None, table.name
    assert any("--cuda-graph-max-bs-decode 8" in n for n in notes)


def test_a_url_server_whose_mode_sglang_switched_is_the_declared_server():
    from specgate.server.served import check_served

    dep = load_deployment("sim")
    config = dep.configs["eagle3-prefill"]
    info = {
        "version": "0.5.19", "speculative_algorithm": "EAGLE3", "speculative_attention_mode": "decode",
        "model_path": dep.model,
    }  # fmt: skip
    check = check_served(dep, config, info)
    assert check.failure("eagle3-prefill", "u", dep.path) is None
    assert "SGLang switches it to decode by itself" in check.note()
    older = check_served(dep, config, {**info, "version": "0.5.14"})  # before 0.5.17 it never did
    assert older.failure("eagle3-prefill", "u", dep.path) is not None


def test_sglang_cli_reads_nothing_of_specgate():
    source = Path(sglang_cli.__file__).read_text()
    assert "from specgate" not in source and "import specgate" not in source


def _deployment_file(tmp_path: Path, launch: str, configs: str = '[configs.baseline]\n') -> Path:
    path = tmp_path / "d.toml"
    path.write_text(f'name = "d"\nmodel = "M"\nreference = "baseline"\n[launch]\n{launch}\n{configs}')
    return path


def _fake_sglang(folder: Path, version: str = '"0.5.14"', body: str = "") -> None:
    files = {
        **FAKE_SGLANG,
        "sglang/__init__.py": f"__version__ = {version}\n",
        "sglang/srt/server_args.py": FAKE_SGLANG["sglang/srt/server_args.py"]
        + "        parser.add_argument('--cuda-graph-max-bs-decode', type=int)\n"
        + "        parser.add_argument('--cuda-graph-max-bs', type=int)\n"
        + body,
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_a_wrapper_a_config_file_and_an_unaskable_sglang_are_warnings_with_their_reason(tmp_path):
    wrapper = _deployment_file(
        tmp_path,
        'command = ["bash", "-c", "{python} -m sglang.launch_server --model-path /m \\"$@\\"", "x"]\n'
        'args = ["--cuda-graph-max-bs", "4"]',
    )
    report = check_flags(load_deployment(str(wrapper)))
    assert not report.refusals and any("wrapper" in line for line in report.judged_by)
    config = _deployment_file(tmp_path, 'args = ["--config", "/tmp/c.yaml"]')
    report = check_flags(load_deployment(str(config)))
    assert not report.refusals and any("--config names a file SGLang merges" in line for line in report.judged_by)
    _fake_sglang(tmp_path, body="        raise RuntimeError('broken install')\n")
    broken = _deployment_file(
        tmp_path, f'env = {{PYTHONPATH = "{tmp_path}"}}\nargs = ["--model-path", "M", "--cuda-graph-max-bs", "4"]'
    )
    report = check_flags(load_deployment(str(broken)))
    assert not report.refusals, report.findings  # 0.5.23's table refuses it, but the installed SGLang could not be asked
    assert any("could not be asked" in line and "answered no verdict" in line for line in report.judged_by), report.judged_by


def test_the_installed_sglang_is_asked_even_where_a_release_is_declared(tmp_path):
    _fake_sglang(tmp_path, version="514")  # a version that is not text: read as text
    path = _deployment_file(
        tmp_path,
        f'sglang_release = "0.5.23"\nenv = {{PYTHONPATH = "{tmp_path}"}}\n'
        'args = ["--model-path", "M", "--cuda-graph-max-bs", "4"]',
    )
    report = check_flags(load_deployment(str(path)))
    assert not report.refusals  # its own parser takes it
    assert any("declares SGLang 0.5.23 (sglang_release), but" in f.text for f in report.findings)


def test_sglang_serve_is_asked_through_its_scripts_python(tmp_path, monkeypatch):
    _fake_sglang(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "sglang"
    script.write_text(f"#!{sys.executable}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    path = _deployment_file(
        tmp_path,
        f'command = ["sglang", "serve"]\nenv = {{PYTHONPATH = "{tmp_path}"}}\n'
        'args = ["--model-path", "M", "--cuda-graph-max-bs", "4"]',
    )
    report = check_flags(load_deployment(str(path)))
    assert any("own parser" in line for line in report.judged_by), report.judged_by
    assert not report.refusals


def test_every_refused_flag_is_named_once_abbreviations_are_named_and_advice_pastes(tmp_path):
    path = _deployment_file(
        tmp_path,
        'sglang_release = "0.5.23"\nargs = ["--model-path", "M", "--cuda-graph-max-bs-decode", "8", '
        '"--cuda-graph-max-bs", "4", "--disable-piecewise-cuda-graph", "--tp", "2", "--disable-cuda-graph"]',
    )
    report = check_flags(load_deployment(str(path)))
    refused = [f.text for f in report.refusals]
    assert len(refused) == 2, refused  # both, in one round
    assert "write --cuda-graph-max-bs-decode instead" in refused[0]
    assert "write --cuda-graph-backend-prefill disabled instead" in refused[1]
    warned = " ".join(f.text for f in report.findings if not f.refuses)
    assert "--tp is an abbreviation SGLang reads as --tp-size" in warned
    assert "--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled" in warned  # no braces
    assert sglang_cli.first_refused_flag(
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ["--cuda-graph-max-bs-decode", "8", "--cuda-graph-max-bs", "4"],
    ) == "--cuda-graph-max-bs"


@pytest.mark.parametrize("text", ["v0.5.14-junk", "0.5.14 or 0.5.23", "0.5.23rc1", "banana"])
def test_a_declared_release_is_a_release_and_nothing_else(tmp_path, text):
    from specgate.errors import DeploymentError

    path = _deployment_file(tmp_path, f'sglang_release = "{text}"')
    with pytest.raises(DeploymentError, match="sglang_release"):
        load_deployment(str(path))


def test_a_release_newer_than_any_table_is_checked_as_a_warning(tmp_path):
    path = _deployment_file(tmp_path, 'sglang_release = "0.5.99"\nargs = ["--model-path", "M", "--cuda-graph-max-bs", "4"]')
    report = check_flags(load_deployment(str(path)))
    assert not report.refusals and any("no table for 0.5.99" in line for line in report.judged_by)
