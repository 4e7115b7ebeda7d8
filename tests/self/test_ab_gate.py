"""A/B in one run ([[gates.ab]], specgate/verdicts/ab_gate.py): a candidate speculative config against a
base booted beside it, judged on paired per-request ratios with no stored side; its speed gate and its
accept-length gate each fail for their own reason, and an unchanged candidate passes both."""

from __future__ import annotations

import pytest

from specgate.deployment import parse_deployment
from specgate.errors import DeploymentError
from tests.self.helpers import sim_deployment_dict

EAGLE = [
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specgate-sim/toy-drafter",
    "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
    "--speculative-attention-mode", "decode",
]  # fmt: skip


def _ab(candidate_args: list[str]) -> dict:
    return {
        "configs": {"candidate": {"args": [*EAGLE, *candidate_args]}, "base": {"args": EAGLE}},
        "gates": {"ab": [{"config": "candidate", "base": "base", "tolerance": 0.1, "accept_tolerance": 0.1}]},
    }


def _without_prefill(d):
    """The two sides and the plain reference alone: the shipped speculative configs are not gated here."""
    import tomli_w

    for name in ("eagle3-prefill", "eagle3-decode"):
        d.data["configs"].pop(name, None)
    for table in ("beats", "accept_length"):
        d.data["gates"].pop(table, None)
    d.data.pop("sweep", None)
    d.path.write_text(tomli_w.dumps(d.data))
    return d


def _gates(d) -> dict[str, dict]:
    return {g["gate"]: g for g in d.report()["gates"] if g["gate"].startswith("ab:")}


@pytest.mark.parametrize(
    ("candidate_args", "faults", "speed", "accept"),
    [
        ([], "", "pass", "pass"),  # A/A: the same build and flags on both sides
        ([], "candidate:slowdown=0.3", "fail", "pass"),  # a slower cycle, the same drafts accepted
        (["--sim-draft-agreement", "0.35"], "", None, "fail"),  # a worse drafter: fewer tokens a step
    ],
)
def test_ab_in_one_run(sim_deployment, pytester, candidate_args, faults, speed, accept):
    d = _without_prefill(sim_deployment(_ab(candidate_args)))
    result = d.run(pytester, "-k", "ab_in_one_run", faults=faults)
    gates = _gates(d)
    assert set(gates) == {"ab:candidate-vs-base:speed", "ab:candidate-vs-base:accept"}, result.outlines[-20:]
    assert gates["ab:candidate-vs-base:accept"]["status"] == accept, gates["ab:candidate-vs-base:accept"]["summary"]
    if speed is not None:
        assert gates["ab:candidate-vs-base:speed"]["status"] == speed, gates["ab:candidate-vs-base:speed"]["summary"]
    assert "half of the pair's false-alarm budget" in " ".join(gates["ab:candidate-vs-base:speed"]["notes"])
    assert result.ret == (0 if (speed, accept) == ("pass", "pass") else 1)


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"config": "eagle3-decode", "base": "eagle3-decode"}, "compared with itself"),
        ({"config": "eagle3-decode", "base": "baseline"}, "declares no --speculative-algorithm"),
        ({"config": "eagle3-decode", "base": "nope"}, "nope"),
    ],
)
def test_an_ab_entry_is_checked_before_anything_boots(tmp_path, gate, message):
    data = sim_deployment_dict()
    data.setdefault("gates", {})["ab"] = [gate]
    with pytest.raises(DeploymentError, match=message):
        parse_deployment(data, tmp_path / "d.toml")


def test_init_offers_ab_in_one_run_and_its_block_parses_uncommented(tmp_path):
    from specgate.deployment import load_deployment
    from specgate.starter import launch_deployment

    text, _ = launch_deployment(
        "mine", "python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 --speculative-num-steps 3", None
    )
    assert "# [[gates.ab]]" in text and "A/B in one run" in text
    lines, on = [], False
    for line in text.splitlines():
        on = on or line.startswith("# [configs.eagle3-decode-base]")
        if on and line.startswith("# "):
            line = line[2:].split("  #")[0]
        elif on and line == "#":
            line = ""
        lines.append(line)
        on = on and not line.startswith("accept_tolerance")
    (tmp_path / "ab.toml").write_text("\n".join(lines).replace("coexist = false", "coexist = true"))
    dep = load_deployment(str(tmp_path / "ab.toml"))
    (gate,) = dep.gates.of("ab")
    assert (gate.config, gate.base, gate.tolerance, gate.accept_tolerance) == ("eagle3-decode", "eagle3-decode-base", 0.05, 0.03)


def test_a_deployment_judged_by_ab_alone_asks_nothing_stored(tmp_path):
    """`[gates] against_stored = false`: no regression gate against a stored baseline is planned, so
    a run with no stored figures can PASS on its A/B gates; with a stored reference it is refused."""
    from specgate.gate_kinds import planned_gates

    data = sim_deployment_dict()
    data["configs"]["eagle3-base"] = dict(data["configs"]["eagle3-decode"])
    data["gates"]["ab"] = [{"config": "eagle3-decode", "base": "eagle3-base"}]
    data["gates"]["against_stored"] = False
    dep = parse_deployment(data, tmp_path / "d.toml")
    names = [g.name for g in planned_gates(dep, set())]
    assert not any(n.startswith("regression:") for n in names) and "ab:eagle3-decode-vs-eagle3-base:speed" in names
    data["launch"]["reference_from"] = "stored"
    with pytest.raises(DeploymentError, match="against_stored"):
        parse_deployment(data, tmp_path / "d.toml")


def test_against_stored_false_refuses_a_beats_gate_against_the_stored_baseline(tmp_path):
    """`against_stored = false` promises a run that needs no stored figures; a beats gate with
    against = "stored" was accepted, NOT COMPARED in every such run, while `check` said no gate
    compared across boots."""
    data = sim_deployment_dict()
    data["gates"]["against_stored"] = False
    data["gates"]["beats"] = [{"config": "eagle3-decode", "over": "baseline", "ratio": 1.1, "against": "stored"}]
    with pytest.raises(DeploymentError, match=r"against_stored.*is false, but \[\[gates.beats\]\] of 'eagle3-decode'"):
        parse_deployment(data, tmp_path / "d.toml")
    data["gates"]["beats"][0]["against"] = "run"
    parse_deployment(data, tmp_path / "d.toml")


def test_a_baseline_update_under_against_stored_false_does_not_promise_runs_compare_against_it(tmp_path):
    """`specgate baseline update` of a deployment with against_stored = false said "later runs on
    this machine compare against it": none does."""
    from specgate.plugin import _recorded

    document = {"configs": {"baseline": {"concurrency": {"1": {"n": 30}}}}}
    said = _recorded(tmp_path / "b.json", document, {}, compared=False)
    assert "compare against it" not in said.replace("compares against it", "")
    assert "No gate of this deployment compares against it ([gates] against_stored = false)" in said
    assert "later runs on this machine compare against it" in _recorded(tmp_path / "b.json", document, {})
