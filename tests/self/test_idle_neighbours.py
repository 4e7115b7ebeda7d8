"""Idle neighbours quiet (issue 46, item 4): servers side by side on one host boot with SGLang's
--sleep-on-idle; the launch digest leaves it out, so the shipped baselines still match; `specgate
check` names a side-by-side launch without it; `init` writes it; the simulator takes it."""

from __future__ import annotations

import json
import tomllib

import pytest
from helpers import sim_deployment_dict

from specgate import sglang_cli
from specgate.cli.check import describe
from specgate.deployment import load_deployment, parse_deployment
from specgate.resources import builtin_baselines_dir, builtin_deployments_dir
from specgate.server.idle import SLEEP_ON_IDLE, share_a_host, spinning_configs


def _shipped_side_by_side_gpu_deployments():
    out = []
    for path in sorted(builtin_deployments_dir().glob("*h200*.toml")):
        dep = load_deployment(str(path))
        if not dep.simulator and dep.launch.launcher == "local" and dep.launch.coexist:
            out.append(dep)
    return out


def test_every_release_specgate_knows_has_the_flag():
    for table in sglang_cli.tables():
        assert table.option(SLEEP_ON_IDLE) is not None, table.name
        assert table.refusal(["--model-path", "M", SLEEP_ON_IDLE]) is None, table.name


def test_the_shipped_gpu_deployments_that_boot_side_by_side_give_it_and_check_names_none():
    deployments = _shipped_side_by_side_gpu_deployments()
    assert len(deployments) >= 9
    for dep in deployments:
        assert SLEEP_ON_IDLE in dep.launch.args, dep.name
        assert share_a_host(dep) and spinning_configs(dep) == [], dep.name
        assert SLEEP_ON_IDLE not in describe(dep), dep.name


def test_the_shipped_baselines_still_match_their_deployments_launch_digests():
    checked = 0
    for folder in sorted(p for p in builtin_baselines_dir().iterdir() if p.is_dir()):
        path = builtin_deployments_dir() / f"{folder.name}.toml"
        if not path.exists():
            continue
        dep = load_deployment(str(path))
        for document in folder.glob("*.json"):
            for config, entry in json.loads(document.read_text())["configs"].items():
                assert entry["args_digest"] == dep.configs[config].args_digest(dep.launch), (document, config)
                checked += SLEEP_ON_IDLE in dep.launch.args
    assert checked >= 10  # the H200 baselines, recorded without the flag, among them


def test_the_digest_leaves_out_only_how_a_server_idles(tmp_path):
    data = sim_deployment_dict()
    plain = parse_deployment(data, tmp_path / "d.toml")
    data["launch"]["args"] = [*data["launch"]["args"], SLEEP_ON_IDLE]
    quiet = parse_deployment(data, tmp_path / "d.toml")
    data["configs"]["eagle3-decode"]["args"] = [*data["configs"]["eagle3-decode"]["args"], "--enable-torch-compile"]
    other = parse_deployment(data, tmp_path / "d.toml")
    for name in plain.configs:
        assert plain.configs[name].args_digest(plain.launch) == quiet.configs[name].args_digest(quiet.launch)
    decode = "eagle3-decode"
    assert other.configs[decode].args_digest(other.launch) != quiet.configs[decode].args_digest(quiet.launch)
    assert sglang_cli.digest_words(["--sleep-on-idle", "--cuda-graph-max-bs-decode", "4"]) == [
        "--cuda-graph-max-bs",
        "4",
    ]


def _real(tmp_path, launcher="local", coexist=True, release=None, launch_args=(), sweep=False, **configs_args):
    """The simulator's deployment made to launch SGLang (no simulator), as a GPU deployment would."""
    data = sim_deployment_dict()
    if not sweep:
        del data["sweep"]
    data["simulator"] = False
    data["launch"].update(command=["{python}", "-m", "sglang.launch_server"], coexist=coexist, launcher=launcher)
    data["launch"]["args"] = [a for a in data["launch"]["args"] if a != "--enable-metrics"] + list(launch_args)
    if release:
        data["launch"]["sglang_release"] = release
    if launcher == "ssh":
        data["launch"]["ssh"] = {"hosts": ["gpu-host"]}
    for name, extra in configs_args.items():
        data["configs"][name.replace("_", "-")]["args"] += list(extra)
    return parse_deployment(data, tmp_path / "real.toml")


@pytest.mark.parametrize("launcher", ["local", "ssh"])
def test_check_warns_where_servers_share_a_host_and_a_release_with_the_flag_lacks_it(tmp_path, launcher):
    text = describe(_real(tmp_path, launcher=launcher, release="0.5.14"))
    warning = next(line for line in text.splitlines() if SLEEP_ON_IDLE in line)
    assert warning.startswith("  WARNING: ") and "side by side on one host" in warning
    assert "configs baseline, eagle3-prefill, eagle3-decode (SGLang 0.5.14)" in warning
    assert "idle neighbours poll on the host cores" in warning and "launch.args" in warning
    # Given to one config only: the others are still named.
    one = spinning_configs(_real(tmp_path, eagle3_decode=[SLEEP_ON_IDLE]))
    assert [s.config for s in one] == ["baseline", "eagle3-prefill"]
    assert one[0].release == sglang_cli.newest().name and not one[0].declared


def test_check_says_nothing_where_no_idle_neighbour_shares_the_host(tmp_path):
    assert SLEEP_ON_IDLE not in describe(_real(tmp_path, launch_args=[SLEEP_ON_IDLE]))
    assert SLEEP_ON_IDLE not in describe(_real(tmp_path, coexist=False))  # one server at a time
    assert spinning_configs(_real(tmp_path, coexist=False, sweep=True))  # a sweep's parallel slots share it
    assert spinning_configs(_real(tmp_path, release="0.4.9")) == []  # a release without a table is not judged
    assert spinning_configs(parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml")) == []  # never spins


def test_init_launch_writes_the_flag_once_with_a_note():
    from specgate.starter import launch_deployment

    text, notes = launch_deployment("x", "python -m sglang.launch_server --model-path M", "D")
    assert tomllib.loads(text)["launch"]["args"] == ["--model-path", "M", SLEEP_ON_IDLE]
    assert any(n.startswith(f"added {SLEEP_ON_IDLE} to launch.args") and "coexist = true" in n for n in notes)
    text, notes = launch_deployment("x", f"python -m sglang.launch_server {SLEEP_ON_IDLE} --model-path M", "D")
    assert tomllib.loads(text)["launch"]["args"] == [SLEEP_ON_IDLE, "--model-path", "M"]
    assert not any(SLEEP_ON_IDLE in n for n in notes)


def test_the_simulator_takes_the_flag_as_sglang_does():
    from specgate.sim.__main__ import _claimed_table, _refusal, build_parser

    _, unknown = build_parser().parse_known_args(["--model-path", "m", SLEEP_ON_IDLE])
    assert unknown == [SLEEP_ON_IDLE]  # ignored, as any SGLang flag the simulator has no use for
    assert _refusal(_claimed_table("0.5.14"), ["--model-path", "m", SLEEP_ON_IDLE]) is None


def test_a_calibration_names_whether_idle_neighbours_slept(tmp_path):
    """A spread measured beside spinning neighbours says nothing of quiet ones: calibration.md's
    runner setup tells them apart, which the launch digest no longer does."""
    from specgate.calibrate.analyse import runner_setup

    assert "idle neighbours spinning (no --sleep-on-idle)" in runner_setup(_real(tmp_path))
    assert "idle neighbours asleep (--sleep-on-idle)" in runner_setup(_real(tmp_path, launch_args=[SLEEP_ON_IDLE]))
    mixed = runner_setup(_real(tmp_path, eagle3_decode=[SLEEP_ON_IDLE]))
    assert "idle neighbours of baseline, eagle3-prefill spinning" in mixed
    assert "idle neighbours" not in runner_setup(_real(tmp_path, coexist=False))
