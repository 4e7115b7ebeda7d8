"""A real drafter regression for the A/B accept gate on SGLang (issue 50, run 4): the perturbed SmolLM2
drafter (lab/specgate_lab/perturb.py), its CPU sizing (lab/specgate_lab/drafter_match.py), the
deployment (fixtures/deployments/smollm2-h200-ab.toml) and tools/gpu_tau_trials.sh, as far as each runs
without a GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from specgate.deployment import load_deployment
from specgate.errors import SpecgateError
from specgate.flag_check import check_flags
from specgate.resources import builtin_deployments_dir
from specgate.verdicts.ab_gate import ab_vacuity
from specgate.verdicts.gate_base import simulated_tau
from specgate_lab.cli import main as lab_main
from specgate_lab.drafter_match import chain_accept, closed_form_accept_length
from specgate_lab.perturb import perturbed_dir_name, tensor_generator_seed
from specgate_lab.tau_trials import summary_line, variant_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = builtin_deployments_dir() / "smollm2-h200-ab.toml"


def test_chain_drafting_replays_teacher_forced_matches_into_verify_steps():
    # 9 tokens, every draft right: token 0 from prefill, then 4 tokens per step (3 drafts + the target's own).
    assert chain_accept([True] * 9) == 2
    # every draft wrong: one token per step after the first
    assert chain_accept([True] + [False] * 4) == 4
    # a miss ends the step: position 2 wrong -> step 1 takes tokens 1-2, step 2 takes 3-6 (3 drafts + 1), step 3 the rest
    assert chain_accept([True, True, False, True, True, True, True, True]) == 3
    assert chain_accept([True]) == 0  # a one-token answer is all prefill
    assert closed_form_accept_length(1.0) == 4.0 and closed_form_accept_length(0.0) == 1.0
    assert closed_form_accept_length(0.5) == pytest.approx(1.875)


def test_the_perturbed_copy_is_named_by_its_noise_and_seed_and_refuses_a_bad_one(capsys, tmp_path):
    assert perturbed_dir_name(0.02, 0) == "smollm2-135m-instruct-noise0.02-seed0"
    assert perturbed_dir_name(0.004, 7) != perturbed_dir_name(0.0040001, 7)
    # a tensor's noise is seeded by its own name, not by where it is visited
    assert tensor_generator_seed(1, "a.weight") != tensor_generator_seed(1, "b.weight")
    assert tensor_generator_seed(1, "a.weight") != tensor_generator_seed(2, "a.weight")
    assert tensor_generator_seed(12, "a.weight") < 2**32  # torch's CPU generator keeps 32 bits of a seed
    for argv, said in (
        (["--noise", "1.5"], "--noise 1.5: expected a relative noise size between 0 and 1"),
        (["--noise", "nan"], "--noise nan: expected a relative noise size between 0 and 1"),
        ([], "needs --noise SIGMA"),
        (["--noise", "0.02", "--seed", "-1"], "--seed -1: expected a whole number"),
    ):
        assert lab_main(["assets", "smollm2-perturbed", str(tmp_path), *argv]) == 2
        assert said in capsys.readouterr().err
    assert lab_main(["assets", "smollm2", str(tmp_path), "--noise", "0.02"]) == 2
    assert "--noise is for `assets smollm2-perturbed`" in capsys.readouterr().err


def test_relative_noise_is_sigma_times_each_tensors_own_rms_and_seeded():
    torch = pytest.importorskip("torch")
    from specgate_lab.perturb import add_relative_noise

    def tensors():
        g = torch.Generator().manual_seed(0)
        return [("big.weight", torch.randn(256, 256, generator=g) * 30.0), ("small.weight", torch.randn(256, 256, generator=g) * 0.01),
                ("ids", torch.arange(10))]  # fmt: skip

    before, after = tensors(), tensors()
    realised = add_relative_noise(after, 0.05, seed=3)
    assert set(realised) == {"big.weight", "small.weight"}  # integer tensors are left alone
    for (name, w), (_, v) in zip(before[:2], after[:2], strict=True):
        ratio = float((v - w).pow(2).mean().sqrt() / w.pow(2).mean().sqrt())
        assert ratio == pytest.approx(0.05, rel=0.03), name
    assert torch.equal(before[2][1], after[2][1])
    again = tensors()
    add_relative_noise(list(reversed(again)), 0.05, seed=3)  # visited in another order: the same noise
    assert all(torch.equal(a[1], b[1]) for a, b in zip(after, again, strict=True))
    other = tensors()
    add_relative_noise(other, 0.05, seed=4)
    assert not torch.equal(other[0][1], after[0][1])


def test_the_shipped_ab_deployment_gates_a_real_drafter_not_a_simulated_accept_length():
    dep = load_deployment(str(SHIPPED))
    (gate,) = dep.gates.of("ab")
    assert (gate.config, gate.base, gate.accept_tolerance) == ("standalone", "standalone-base", 0.05)
    assert ab_vacuity(dep, gate, "speed") is None and ab_vacuity(dep, gate, "accept") is None
    assert simulated_tau(dep, "standalone") is None and simulated_tau(dep, "standalone-base") is None
    assert dep.launch.coexist and "--sleep-on-idle" in dep.launch.args and not dep.gates.against_stored
    assert check_flags(dep).refusals == []


def test_a_variant_moves_only_the_candidates_drafter_and_every_variant_checks(tmp_path):
    text = SHIPPED.read_text()
    for kind, drafter in (("same", "/tmp/assets/smollm2-135m-instruct"), ("drop", "/tmp/assets/x-noise0.05-seed1")):
        out = variant_text(text, str(SHIPPED), kind, drafter)
        path = tmp_path / f"{kind}.toml"
        path.write_text(out)
        dep = load_deployment(str(path))
        assert dep.name == f"smollm2-h200-ab-{kind}"
        args = dep.configs["standalone"].args
        assert args[args.index("--speculative-draft-model-path") + 1] == drafter
        shipped = tomllib.loads(text)
        assert dep.configs["standalone-base"].args == tuple(shipped["configs"]["standalone-base"]["args"])
        assert check_flags(dep).refusals == []
    broken = text.replace("[[gates.ab]]", "[[gates.beats]]")
    with pytest.raises(SpecgateError, match="no \\[\\[gates.ab\\]\\] with config = 'standalone'"):
        variant_text(broken, "d.toml", "same", "/x")


def test_a_runs_summary_line_reads_both_ab_verdicts_from_report_json():
    iv = {"estimate": 0.9, "low": 0.88, "high": 0.92, "confidence": 0.975}
    report = {
        "overall": "FAIL",
        "gates": [
            {"gate": "ab:standalone-vs-standalone-base:accept", "status": "fail", "figures": {"accept_ratio": iv}},
            {"gate": "ab:standalone-vs-standalone-base:speed", "status": "pass", "figures": {"ratio": {**iv, "estimate": 0.93}}},
        ],
        "speed": [{"config": "standalone", "accept_length": {"estimate": 3.4}}, {"config": "baseline", "accept_length": None}],
    }
    line = summary_line(report)
    assert line == "overall FAIL; accept FAIL 0.900 [0.880, 0.920]; speed PASS 0.930 [0.880, 0.920]; tau standalone 3.400"
    assert "accept gate ABSENT" in summary_line({"overall": "ERROR", "gates": []})


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_trials_script_dry_run_prints_its_commands_and_checks_each_deployment_it_writes(tmp_path):
    env = {**os.environ, "DRY": "1", "OUT": str(tmp_path), "PYTHONPATH": f"{ROOT}:{ROOT / 'lab'}"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    done = subprocess.run(["bash", "tools/gpu_tau_trials.sh", "same", "drop"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (tmp_path / "summary.txt").read_text()
    for kind in ("same", "drop", "small"):
        assert f"specgate check deployments/{kind}.toml: exit 0" in summary
    assert "DRY: python3 -m specgate_lab assets smollm2-perturbed /tmp/assets --noise 0.02 --seed 0" in summary
    assert "--noise 0.004" not in summary  # no `small` run asked: its copy is not made
    assert "DRY: python3 -m specgate.cli run " + str(tmp_path / "deployments" / "drop.toml") in summary
    drop = load_deployment(str(tmp_path / "deployments" / "drop.toml"))
    args = drop.configs["standalone"].args
    assert args[args.index("--speculative-draft-model-path") + 1] == "/tmp/assets/smollm2-135m-instruct-noise0.02-seed0"
    bad = subprocess.run(["bash", "tools/gpu_tau_trials.sh", "tiny"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "bad kind 'tiny' (same, drop or small)" in bad.stderr
