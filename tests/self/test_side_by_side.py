"""End to end on the simulator: two installs gated side by side (an SGLang upgrade), each
speculative config checked against its own plain reference, and accept-length floors that
fail on a worse drafter."""

from __future__ import annotations

import pytest

from specgate.deployment import parse_deployment
from specgate.errors import DeploymentError
from tests.self.helpers import light_kimi_twin, sim_deployment_dict

SIM = ["{python}", "-m", "specgate.sim"]
EAGLE = [
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specgate-sim/toy-drafter",
    "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
    "--speculative-attention-mode", "decode",
]  # fmt: skip
# "The new release": another install (its own command), claiming another version, serving OTHER
# weights, so that its EAGLE-3 answers match its own plain answers and not the old release's.
# (The weights are a flag after launch.args, so that they win over the deployment's --model-path.)
# A release before 0.5.20, which refuses the 0.5.11 flag names the simulator deployment launches with.
NEW = [*SIM, "--sim-release", "0.5.18"]
OTHER_WEIGHTS = ["--model-path", "specgate-sim/toy-other"]
UPGRADE = {
    "configs": {
        "plain-new": {"command": NEW, "args": OTHER_WEIGHTS},
        "eagle3-new": {
            "command": NEW,
            "reference": "plain-new",
            "args": [*EAGLE, *OTHER_WEIGHTS],
            "tolerate": ["stop-overshoot"],
        },
    },
    "gates": {"beats": [{"config": "eagle3-new", "over": "eagle3-decode", "ratio": 0.5}]},
}


def test_an_upgrade_is_gated_side_by_side_each_release_against_its_own_reference(sim_deployment, pytester):
    d = sim_deployment(UPGRADE)
    result = d.run(pytester, "-k", "equivalence or beats", faults="eagle3-decode:stop-leak")
    report = d.report()
    rows = {e["config"]: e for e in report["equivalence"]}
    # The old release's EAGLE-3 runs past stop strings: named as the upstream defect, and failed.
    assert rows["eagle3-decode"]["failures"] and any("PR #23802" in k for k in rows["eagle3-decode"]["known_defects"])
    # The new one answers as its own plain server does (other weights: against the old reference
    # every answer would differ), and the tolerance carried over for the old release is a finding.
    assert not rows["eagle3-new"]["failures"] and rows["eagle3-new"]["requests"] > 0
    assert rows["eagle3-new"]["unused_tolerances"] == ["stop-overshoot"]
    assert report["server_settings"]["eagle3-new"]["version"] == "0.5.18-specgate-sim"
    gates = {g["gate"]: g for g in report["gates"]}
    assert gates["beats:eagle3-new-beats-eagle3-decode"]["status"] == "pass"
    assert result.ret == 1  # the old release's failures fail the run


def test_a_speculative_config_compared_with_the_wrong_release_fails(sim_deployment, pytester):
    """The proof that the per-config reference is used: the same new-release config compared
    with the old release's plain answers (no `reference`) fails on the first token it differs."""
    wrong = {"configs": {**UPGRADE["configs"], "eagle3-new": {"command": NEW, "args": [*EAGLE, *OTHER_WEIGHTS]}}}
    d = sim_deployment(wrong)
    d.run(pytester, "-k", "equivalence and eagle3-new")
    rows = {e["config"]: e for e in d.report()["equivalence"]}
    assert rows["eagle3-new"]["failures"]


def test_the_accept_length_floor_passes_a_drafter_and_fails_a_collapsed_one(sim_deployment, pytester):
    floor = {"gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 1.8}]}}
    d = sim_deployment(floor)
    good = d.run(pytester, "-k", "accept_length_floor")
    assert good.ret == 0, good.stdout.str()[-3000:]
    d = sim_deployment(floor)
    bad = d.run(pytester, "-k", "accept_length_floor", faults="eagle3-decode:accept-collapse")
    assert bad.ret == 1
    bad.stdout.fnmatch_lines(["*eagle3-decode accepts 1.0* tokens per verify step*required >= 1.8*FAILS*"])
    gate = next(g for g in d.report()["gates"] if g["gate"].startswith("accept:"))
    assert gate["status"] == "fail" and "never timing noise" in " ".join(gate["notes"])


def _dep(overrides: dict):
    from tests.self.helpers import merge

    return parse_deployment(merge(sim_deployment_dict(), overrides), __import__("pathlib").Path("x.toml"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"configs": {"eagle3-decode": {"reference": "nope"}}}, "configs.eagle3-decode.reference*names config 'nope'"),
        ({"configs": {"eagle3-decode": {"reference": "eagle3-prefill"}}}, "*eagle3-prefill*speculative*"),
        ({"configs": {"eagle3-decode": {"reference": "eagle3-decode"}}}, "*the config itself*"),
        (
            {"configs": {"p2": {"args": [], "reference": "baseline"}, "eagle3-decode": {"reference": "p2"}}},
            "*references do not chain*",
        ),
        ({"configs": {"eagle3-decode": {"command": []}}}, "*configs.eagle3-decode.command*non-empty*"),
        ({"configs": {"eagle3-decode": {"command": ["{pyton}"]}}}, "*unknown placeholder {pyton}*"),
        (
            {"launch": {"coexist": False}, "configs": {"p2": {"args": []}, "eagle3-decode": {"reference": "p2"}}},
            "*needs launch.coexist = true*",
        ),
        ({"gates": {"accept_length": [{"config": "baseline", "at_least": 2}]}}, "*does not speculate*"),
        ({"gates": {"accept_length": [{"config": "eagle3-decode"}]}}, "*at_least*"),
        ({"gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 3.5}]}}, "*above 3*cannot pass*"),
        ({"gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 2, "atleast": 3}]}}, "*atleast*"),
    ],
)
def test_bad_references_commands_and_floors_are_refused_with_their_field(overrides, message):
    with pytest.raises(DeploymentError) as err:
        _dep(overrides)
    assert __import__("fnmatch").fnmatch(str(err.value), "*" + message + "*"), str(err.value)


def test_each_config_is_launched_and_digested_with_its_own_command():
    dep = _dep(UPGRADE)
    assert dep.reference_of("eagle3-new") == "plain-new" and dep.reference_of("eagle3-decode") == "baseline"
    assert dep.references == ["baseline", "plain-new"]
    assert "plain-new" not in dep.speculative_configs and "eagle3-new" in dep.speculative_configs
    old, new = dep.configs["eagle3-decode"], dep.configs["eagle3-new"]
    assert new.launch_command(dep.launch) == tuple(NEW) and old.launch_command(dep.launch) == dep.launch.command
    # The same flags under another install are another build: its baselines never mix with the old one's.
    assert old.args_digest(dep.launch) != new.args_digest(dep.launch)


def test_a_config_whose_program_does_not_exist_fails_alone(sim_deployment, pytester):
    d = sim_deployment({"configs": {"eagle3-prefill": {"command": ["/nonexistent/python", "-m", "sglang.launch_server"]}}})
    d.run(pytester, "-k", "speed")
    report = d.report()
    measured = {row["config"] for row in report["speed"]}
    assert {"baseline", "eagle3-decode"} <= measured and "eagle3-prefill" not in measured
    assert any("eagle3-prefill" in row["config"] for row in report["unmeasured"])


def test_a_config_on_another_release_than_its_stored_baseline_is_not_compared(sim_deployment, pytester, tmp_path):
    """The fingerprint holds the reference server's release; a config with its own command can
    move to another release under the same flags: its stored figures are then not compared."""
    wrapper = tmp_path / "sim-release"
    release = tmp_path / "release.txt"
    release.write_text("0.5.18")
    wrapper.write_text(f'#!/bin/sh\nexec {__import__("sys").executable} -m specgate.sim --sim-release "$(cat {release})" "$@"\n')
    wrapper.chmod(0o755)
    d = sim_deployment({"configs": {"eagle3-prefill": {"command": [str(wrapper)]}}})
    recorded = d.run(pytester, "--specgate-update-baselines", "-k", "speed or equivalence")
    assert "baseline written" in recorded.stdout.str()
    release.write_text("0.5.19")
    d.run(pytester, "-k", "regression and eagle3-prefill and decode_tps")
    gate = next(g for g in d.report()["gates"] if g["gate"] == "regression:eagle3-prefill:c1:decode_tps")
    assert gate["status"] == "not compared" and "0.5.18-specgate-sim then, 0.5.19-specgate-sim now" in gate["summary"]


def test_an_empty_deployment_name_is_refused_not_the_simulator():
    import subprocess
    import sys

    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "check", ""], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    assert run.returncode == 2 and "deployment name is empty" in run.stderr


def test_a_sweep_of_a_config_with_its_own_install_is_refused():
    with pytest.raises(DeploymentError, match="own command or reference"):
        _dep({**UPGRADE, "sweep": {"base": "eagle3-new"}})


def test_check_warns_when_this_host_cannot_start_a_configs_server():
    from specgate.cli.check import launch_warnings
    from specgate.deployment import load_deployment

    assert launch_warnings(load_deployment("sim")) == []
    upgrade = launch_warnings(load_deployment("smollm2-upgrade-h200"))
    assert any("configs plain-0511, eagle3-0511: program '/tmp/sglang-0.5.11/python' not found" in w for w in upgrade)
    dep = _dep({"configs": {"eagle3-prefill": {"command": ["{python}", "-m", "no_such_module_here.launch"]}}})
    assert any("config eagle3-prefill" in w and "cannot import 'no_such_module_here'" in w for w in launch_warnings(dep))


def test_the_users_kimi_deployment_checks_and_its_twin_gives_their_verdict(tmp_path):
    """Prefill-mode EAGLE-3 near 0.8x fails, decode mode passes, the attention mode is the first
    lever; then decode mode beats the plain decoding stored in the baseline, without booting it."""
    import json
    import os
    import subprocess
    import sys

    from specgate.deployment import load_deployment
    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    real = load_deployment("kimi-k2.5-rtxpro6000-tp8")
    assert [g.against for g in real.gates.beats] == ["run", "stored"] and not real.launch.coexist
    deployment = light_kimi_twin(tmp_path)
    env = {**os.environ, "SPECGATE_ALLOW_DIRTY": "1"}
    common = ["--baselines-dir", str(tmp_path / "b"), "--allow-uncompared"]
    first = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "baseline", "update", str(deployment),
         "--report-dir", str(tmp_path / "r1"), *common],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300,
    )  # fmt: skip
    report = json.loads((tmp_path / "r1" / "report.json").read_text())
    gates = {g["gate"]: g for g in report["gates"]}
    prefill = gates["beats:eagle3-prefill-beats-baseline"]
    assert prefill["status"] == "fail" and 0.7 < prefill["figures"]["ratio"]["estimate"] < 0.9, first.stdout[-2000:]
    assert gates["beats:eagle3-decode-beats-baseline"]["status"] == "pass"
    diagnosis = {d["config"]: d for d in report["diagnosis"]}
    assert "--speculative-attention-mode decode" in json.dumps(diagnosis["eagle3-prefill"]["levers"][0])
    later = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(deployment),
         "--report-dir", str(tmp_path / "r2"), *common, "--", "-k", "beats and stored"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300,
    )  # fmt: skip
    stored = next(g for g in json.loads((tmp_path / "r2" / "report.json").read_text())["gates"])
    assert stored["gate"] == "beats:eagle3-decode-beats-stored-baseline" and stored["status"] == "pass", later.stdout
    assert "figures are the stored baseline's" in " ".join(stored["notes"])


def test_a_beats_gate_against_the_stored_baseline_is_named_and_parsed():
    dep = _dep({"gates": {"beats": [{"config": "eagle3-decode", "over": "baseline", "ratio": 1.0, "against": "stored"}]}})
    assert dep.gates.beats[0].name == "eagle3-decode-beats-stored-baseline"
    with pytest.raises(DeploymentError, match="against"):
        _dep({"gates": {"beats": [{"config": "eagle3-decode", "over": "baseline", "against": "yesterday"}]}})
