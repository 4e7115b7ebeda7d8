"""Simulator faults are checked when the run starts, not at a server's boot (issue 33, item 11):
an unknown fault name failed only when its server booted, after the others had booted; a fault
aimed at servers that are no simulator (url, a real SGLang) was silently ignored, so a run meant
to show a gate going red proved nothing. `specgate check` and `specgate run` refuse both, exit 2."""

from __future__ import annotations

import pytest
import tomli_w
from helpers import sim_deployment_dict

from specgate import cli

KNOWN_NAMES = "known: diverge-at, stop-leak"


def _written(tmp_path, data):
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return path


def _url_deployment():
    data = sim_deployment_dict()
    data["launch"] = {"launcher": "url"}
    for i, config in enumerate(data["configs"].values()):
        config["url"] = f"http://127.0.0.1:{31000 + i}"
    return data


def test_check_refuses_an_unknown_fault_in_the_environment_naming_the_known_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECGATE_SIM_FAULTS", "eagle3-decode:bogus")
    assert cli.main(["check", str(_written(tmp_path, sim_deployment_dict()))]) == 2
    err = capsys.readouterr().err
    assert "SPECGATE_SIM_FAULTS entry 'eagle3-decode:bogus': 'bogus': unknown fault" in err, err
    assert KNOWN_NAMES in err


def test_check_refuses_a_bad_fault_value(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECGATE_SIM_FAULTS", "*:slowdown=lots")
    assert cli.main(["check", str(_written(tmp_path, sim_deployment_dict()))]) == 2
    assert "SPECGATE_SIM_FAULTS entry '*:slowdown=lots': 'slowdown=lots': expected slowdown=<fraction>" in (
        capsys.readouterr().err
    )


def test_check_refuses_an_unknown_sim_fault_argument_of_a_config(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SPECGATE_SIM_FAULTS", raising=False)
    data = sim_deployment_dict()
    data["configs"]["eagle3-decode"]["args"] += ["--sim-fault", "diverge-at5"]
    assert cli.main(["check", str(_written(tmp_path, data))]) == 2
    err = capsys.readouterr().err
    assert "config 'eagle3-decode': --sim-fault 'diverge-at5': unknown fault" in err and KNOWN_NAMES in err, err


def test_faults_aimed_at_servers_that_are_no_simulator_are_refused_naming_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECGATE_SIM_FAULTS", "*:slowdown=0.3")
    assert cli.main(["check", str(_written(tmp_path, _url_deployment()))]) == 2
    err = capsys.readouterr().err
    assert "cannot reach config(s) baseline, eagle3-prefill, eagle3-decode: their servers are not specgate's" in err


def test_a_real_server_command_is_no_simulator_either(tmp_path):
    from specgate.deployment import load_deployment

    data = sim_deployment_dict()
    data["configs"]["eagle3-prefill"]["command"] = ["{python}", "-m", "sglang.launch_server"]
    dep = load_deployment(str(_written(tmp_path, data)))
    (problem,) = dep.sim_fault_problems({"SPECGATE_SIM_FAULTS": "eagle3-prefill:slowdown=0.3"})
    assert "cannot reach config(s) eagle3-prefill" in problem
    assert dep.sim_fault_problems({"SPECGATE_SIM_FAULTS": "baseline:slowdown=0.3"}) == []


def test_the_run_refuses_an_unknown_fault_before_any_server_boots(sim_deployment, pytester):
    d = sim_deployment()
    result = d.run(pytester, faults="eagle3-decode:bogus")
    assert result.ret == 4, result.stdout.str()[-2000:]  # pytest's usage error: `specgate run` exits 2 on it
    err = result.stderr.str()
    assert "SPECGATE_SIM_FAULTS entry 'eagle3-decode:bogus': 'bogus': unknown fault" in err, err
    assert not (d.report_dir / "logs").exists()  # no server was started


@pytest.mark.parametrize("spec", ["slowdown=-5", "slowdown=-1", "drift=-2", "boundary-jitter=-0.1", "slowdown=nan"])
def test_a_fault_value_that_proves_nothing_is_refused(spec):
    """A step cost of 1+F at F <= -1 is zero or negative: the fault would prove nothing (a run once
    passed under slowdown=-5), so it is refused like NaN."""
    from specgate.sim.faults import parse_faults

    with pytest.raises(ValueError, match="expected"):
        parse_faults([spec])
    assert parse_faults(["slowdown=-0.5"]).slowdown == -0.5  # a speed-up is a fault too (much faster than stored)


def test_a_misspelt_control_variable_is_warned_of_and_a_users_own_name_is_not():
    from specgate.envvars import misspelt

    warned = misspelt({"SPECGATE_SIM_FAULT": "eagle3-decode:diverge-at=5", "SPECGATE_API_KEY": "theirs"})
    assert warned == ["SPECGATE_SIM_FAULT is set but specgate reads no such variable: did you mean SPECGATE_SIM_FAULTS?"]
    assert misspelt({"SPECGATE_SIM_FAULTS": "x", "SPECGATE_COMMIT": "abc"}) == []
    for name in ("specgate_sim_faults", "SPEC_GATE_SIM_FAULTS", "SPECGATESIM_FAULTS"):
        assert misspelt({name: "x"}) and "did you mean SPECGATE_SIM_FAULTS?" in misspelt({name: "x"})[0], name
