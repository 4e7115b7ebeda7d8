"""End to end on the simulator: between-boot noise measured and used, replicate boots,
gates that could not have failed reported VACUOUS and failing the run."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys

from specgate.resources import SOURCE_ROOT as REPO_ROOT


def _calibrate(d, *extra, faults=""):
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag, "SPECGATE_SIM_FAULTS": faults, "SPECGATE_ALLOW_DIRTY": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specgate.cli",
            "calibrate",
            str(d.path),
            "--report-dir",
            str(d.report_dir.parent / "calibrate"),
            "--baselines-dir",
            str(d.baselines_dir),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
        env=env,
    )


def test_calibrate_measures_between_boot_noise_and_later_runs_use_it(sim_deployment, pytester):
    d = sim_deployment()
    cal = _calibrate(d, "--boots", "3", "--seed", "1", faults="*:boot-offset=0.08")
    assert cal.returncode == 0, cal.stdout[-3000:] + cal.stderr[-3000:]
    assert "calibration recorded in" in cal.stdout
    (record,) = (d.baselines_dir / "sim" / "calibration").glob("*.json")
    doc = json.loads(record.read_text())
    assert doc["boots"] == 3 and doc["provenance"]["commit"]
    baseline = doc["configs"]["baseline"]
    assert len(baseline["decode_tps"]["boot_medians"]) == 3
    # The simulator drew one speed factor per boot (exp(N(0, 0.08)), logged by each server): the
    # between-boot spread measured is the spread of those draws, whatever the load does to the
    # spread within a boot (a fixed ratio of the two failed on a loaded machine: 3 draws can be close).
    factors = [
        float(re.search(r"runs every step ([0-9.]+)x as long", log.read_text()).group(1))
        for log in sorted((d.report_dir.parent / "calibrate" / "logs").glob("round*/baseline.log"))
    ]
    assert len(factors) == 3
    drawn = statistics.stdev(math.log(f) for f in factors)
    measured = baseline["decode_tps"]["between_boot_log_sd"]
    assert abs(measured - drawn) <= 0.25 * drawn + 2 * baseline["decode_tps"]["within_log_sd"], (measured, drawn)
    assert doc["configs"]["eagle3-decode"]["gate"]["aa_pairs"] == 6
    assert "suggested tolerance" in (d.report_dir.parent / "calibrate" / "calibration.md").read_text()
    # What a tie margin must cover, measured side by side: the simulator's verify pass swaps a top
    # two closer than FLIP_EPS (0.02), and says so in its logprobs, so no gap moves by 0.04 or more.
    numerics = doc["tie_margin"]["eagle3-decode"]
    assert numerics["pairs"] > 100 and numerics["positions"] > 50, numerics
    assert numerics["largest"] < 0.04 and numerics["suggested_tie_margin"] > numerics["largest"], numerics
    assert sum(numerics["histogram"].values()) == numerics["pairs"]
    assert "Tie margin: how far each speculative server moved the gap" in (
        d.report_dir.parent / "calibrate" / "calibration.md"
    ).read_text()
    # a gate run on this machine now widens its one-boot intervals by that spread, and says so
    result = d.run(pytester, "-k", "beats")
    report = d.report()
    assert report["calibration"] == record.name
    beats = next(g for g in report["gates"] if g["gate"].startswith("beats"))
    assert "upper bound from calibration" in beats["noise"], beats["noise"]
    assert result.ret in (0, 1)  # the verdict itself depends on the draw; what it covers does not


def test_calibrate_refuses_one_boot_and_names_the_flag(sim_deployment):
    d = sim_deployment()
    cal = _calibrate(d, "--boots", "1")
    assert cal.returncode == 2 and "--boots: expected at least 2" in cal.stderr
    cal = _calibrate(d, "--boots", "100000")  # ran until killed: every number is bounded
    assert cal.returncode == 2 and "--boots: expected at most 100" in cal.stderr


def test_replicate_boots_measure_every_config_twice_and_nest_the_interval(sim_deployment, pytester):
    # Two boots say little about the spread between boots (a t-interval on 2 medians is very wide);
    # a spread known from elsewhere bounds the interval instead, as a calibration record would.
    spread = {"decode_tps": 0.02, "speedup": 0.02, "source": "self-test: the simulator has no boot offsets"}
    d = sim_deployment({"launch": {"boots": 2}, "gates": {"between_boot": spread}})
    result = d.run(pytester, "-k", "speed or beats")
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = d.report()
    booted = sorted(b["config"] for b in report["boots"])
    assert booted == sorted(
        ["baseline", "baseline@2", "eagle3-prefill", "eagle3-prefill@2", "eagle3-decode", "eagle3-decode@2"]
    )
    assert {r["boots"] for r in report["speed"]} == {2}
    beats = next(g for g in report["gates"] if g["gate"].startswith("beats"))
    assert "2 boots (two-level bootstrap" in beats["noise"]
    assert report["plan"]["interleaved"] and report["plan"]["boots"] == 2
    assert (d.report_dir / "logs" / "eagle3-decode@2.log").exists()


def test_an_accept_length_gate_that_cannot_fail_is_vacuous_not_passed(sim_deployment, pytester):
    """A drafter that accepts nothing (τ = 1.0) stored as the baseline: 5% below it is under
    the least accept length there is, so the gate could pass anything. It says so, and the
    run fails closed."""
    d = sim_deployment()
    recorded = d.run(pytester, "--specgate-update-baselines", faults="eagle3-prefill:accept-collapse")
    assert "baseline written" in recorded.stdout.str()
    later = d.run(pytester, "-k", "regression and eagle3-prefill", "-rs", faults="eagle3-prefill:accept-collapse")
    assert later.ret == 1
    later.stdout.fnmatch_lines(["*VACUOUS*stored accept length 1.0* less 5% is 0.9*at or below 1*cannot fail*"])
    gates = {g["gate"]: g["status"] for g in d.report()["gates"]}
    assert gates["regression:eagle3-prefill:c1:accept_length"] == "vacuous"
    assert d.report()["overall"] == "PARTIAL"


def test_results_commands_refuse_a_dirty_tree(sim_deployment):
    d = sim_deployment()
    env = {**os.environ, "SPECGATE_COMMIT": "abc123+dirty"}
    env.pop("SPECGATE_ALLOW_DIRTY", None)
    for command in (["calibrate", str(d.path), "--boots", "2"], ["baseline", "update", str(d.path)]):
        run = subprocess.run(
            [sys.executable, "-m", "specgate.cli", *command], capture_output=True, text=True, cwd=REPO_ROOT, env=env
        )
        # In this checkout the deployment (outside it) is named too: the variable vouches for a copy without .git only.
        assert run.returncode == 2 and "refused: the tree is dirty (abc123+dirty;" in run.stderr, run.stderr


def test_failures_name_the_known_defect_and_unused_tolerances_are_a_finding(sim_deployment, pytester):
    """stop-leak on eagle3-prefill has the shape of SGLang PR #23802; eagle3-decode declares a
    stop-overshoot tolerance that nothing needs in this run: both are said in the report."""
    d = sim_deployment({"configs": {"eagle3-decode": {"tolerate": ["stop-overshoot"]}}})
    d.run(pytester, "-k", "equivalence", faults="eagle3-prefill:stop-leak")
    report = d.report()
    rows = {e["config"]: e for e in report["equivalence"]}
    assert any("PR #23802" in k for k in rows["eagle3-prefill"]["known_defects"])
    assert rows["eagle3-decode"]["unused_tolerances"] == ["stop-overshoot"]
    text = (d.report_dir / "report.md").read_text()
    assert "the declared tolerance `stop-overshoot` matched nothing" in text and "PR #23802" in text


def test_a_run_without_speed_tests_leaves_no_empty_benchmark_file(sim_deployment, tmp_path):
    """pytest-benchmark opens --benchmark-json before any test and writes it only where a
    benchmark ran: a selection without speed tests left an empty file that a CI step parsing it
    fails on (seen on the H200, results/2026-12-01-h200-first-token-edge)."""
    d = sim_deployment()
    out = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(d.path), "--report-dir", str(out), "--", "-k", "equivalence"],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]  # PARTIAL: only equivalence ran
    assert (out / "report.json").is_file() and not (out / "benchmark.json").exists()


def test_a_stream_delivered_in_bursts_fails_the_speed_gate_on_the_servers_own_figure(sim_deployment, pytester):
    """A buffering proxy's two bursts make eagle3-decode look twice as fast at the client; the
    server's meta_info.decode_throughput (sim.toml has --enable-metrics) stays the true figure. The
    beats gate, which would pass, FAILS for that reason, and the Fidelity section says the same."""
    d = sim_deployment()
    result = d.run(pytester, "-k", "beats", faults="eagle3-decode:burst-stream")
    assert result.ret == 1, result.stdout.str()[-3000:]
    report = d.report()
    (beats,) = [g for g in report["gates"] if g["gate"].startswith("beats:")]
    assert beats["status"] == "fail", beats
    assert "FAILS on fidelity: the server's own figure contradicts the suite's" in beats["summary"]
    assert "buffering proxy" in beats["summary"] and "meta_info.decode_throughput" in beats["summary"]
    assert beats["figures"]["fidelity"]["eagle3-decode"]["state"] == "contradicted"
    assert beats["figures"]["fidelity"]["baseline"]["state"] == "agrees"  # the healthy config beside it
    rows = {f["config"]: f for f in report["fidelity"]}
    assert rows["eagle3-decode"]["state"] == "contradicted" and rows["eagle3-decode"]["meta_gap"] > 0.5
    assert rows["baseline"]["state"] == "agrees"
    md = (d.report_dir / "report.md").read_text()
    assert "FAILED on it: beats:eagle3-decode-beats-baseline" in md
    assert report["overall"] == "FAIL"


def test_a_baseline_from_an_untracked_or_modified_deployment_is_never_recorded_as_the_clean_commit(tmp_path, monkeypatch):
    """HEAD alone does not hold an untracked deployment file (nor a modified one): the stored
    baseline would claim a commit that cannot reproduce it (issue 33, item 3). Refused like a dirty
    tree; with SPECGATE_ALLOW_DIRTY the record says "+dirty" and the paths."""
    import tomli_w
    from helpers import sim_deployment_dict

    from specgate import project
    from specgate.provenance import provenance

    def git(*words: str) -> None:
        subprocess.run(["git", *words], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "specgate.toml").write_text('deployment = "dep.toml"\n')
    git("add", "specgate.toml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "project")
    dep = tmp_path / "dep.toml"
    dep.write_text(tomli_w.dumps(sim_deployment_dict()))
    env = {k: v for k, v in os.environ.items() if k not in ("SPECGATE_ALLOW_DIRTY", "SPECGATE_COMMIT")}
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "baseline", "update", str(dep)],
        capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO_ROOT)}, timeout=240,
    )  # fmt: skip
    assert run.returncode == 2 and "refused: the tree is dirty" in run.stderr, run.stderr
    assert "dep.toml (untracked)" in run.stderr and "git add the deployment" in run.stderr, run.stderr
    assert not (tmp_path / "baselines").exists()

    monkeypatch.delenv("SPECGATE_COMMIT", raising=False)
    monkeypatch.chdir(tmp_path)
    project.use(None)
    try:
        said = provenance(inputs=[dep])
        assert said["commit"].endswith("+dirty") and said["dirty_inputs"] == ["dep.toml (untracked)"]
        git("add", "dep.toml")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "deployment")
        clean = provenance(inputs=[dep])
        assert not clean["commit"].endswith("+dirty") and "dirty_inputs" not in clean
        dep.write_text(dep.read_text() + "\n# changed\n")
        assert provenance(inputs=[dep])["dirty_inputs"] == ["dep.toml (modified)"]
        outside = tmp_path.parent / f"{tmp_path.name}-outside.toml"
        assert provenance(inputs=[outside])["dirty_inputs"][0].endswith(f"(outside the repository {tmp_path.resolve()})")
    finally:
        project.use(None)


def test_a_dirty_tree_refusal_names_what_changed(tmp_path):
    """A tracked file changed outside the deployment's inputs (a replay file a failed run appended
    cases to) is named: the user sees the dirt may be specgate's own, not only 'commit first'."""
    import tomli_w
    from helpers import sim_deployment_dict

    def git(*words: str) -> None:
        subprocess.run(["git", *words], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "specgate.toml").write_text('deployment = "dep.toml"\n')
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(sim_deployment_dict()))
    replay = tmp_path / "baselines" / "sim" / "equivalence" / "replay.json"
    replay.parent.mkdir(parents=True)
    replay.write_text("[]\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "project")
    replay.write_text('[{"case": "a failing one"}]\n')
    env = {k: v for k, v in os.environ.items() if k not in ("SPECGATE_ALLOW_DIRTY", "SPECGATE_COMMIT")}
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "baseline", "update", "dep.toml"],
        capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO_ROOT)}, timeout=240,
    )  # fmt: skip
    assert run.returncode == 2 and "refused: the tree is dirty" in run.stderr, run.stderr
    assert "changed: baselines/sim/equivalence/replay.json" in run.stderr, run.stderr


def test_calibrate_refuses_a_broken_runner_history_before_any_boot(sim_deployment):
    d = sim_deployment()
    history = d.baselines_dir / "sim" / "history"
    history.mkdir(parents=True)
    (history / "machine.json").write_text("[1,2")
    env = {**os.environ, "SPECGATE_ALLOW_DIRTY": "1", "SPECGATE_TEST_TAG": d.tag}
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "calibrate", str(d.path), "--boots", "2",
         "--baselines-dir", str(d.baselines_dir), "--report-dir", str(d.report_dir)],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2 and "runner history cannot be read" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and not (d.baselines_dir / "sim" / "calibration").exists()
    assert not (d.report_dir / "logs").exists() or not any((d.report_dir / "logs").iterdir())  # nothing booted
