"""The speed gates' statistics across boots: a stored side of several boots, the runner's
pooled history of unchanged boots, the sensitivity each gate states, and `[gates] detect`.

In-process: a judge over a fake plan whose records are drawn here, and a stored baseline
written to a temp folder (no server, no simulator)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from specgate.deployment import BetweenBootSpread, Deployment, load_deployment
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.verdicts.baselines import write_baseline
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.gates import FAIL, PASS
from specgate.verdicts.history import (
    BootValue,
    Entry,
    append,
    history_path,
    load_history,
    pool,
    pooled_spread,
)
from specgate.verdicts.judge import Judge

FP = Fingerprint("NVIDIA H200", 1, "570.1", "13.0", "0.5.11", "m")
REF = "baseline"


def _sample(tps: float, index: int, boot: int = 1) -> SpeedSample:
    return SpeedSample(
        decode_tps=tps, ttft_s=0.02, e2e_s=1.0, completion_tokens=128, prompt_tokens=40, verify_ct=None,
        server_e2e_s=None, chunks=10, boot=boot, index=index,
    )  # fmt: skip


def _levels(rng: np.random.Generator, level: float, n: int, sd: float = 0.005) -> list[float]:
    return [700.0 * level * math.exp(rng.normal(0, sd)) for _ in range(n)]


class _Plan:
    """What the judge asks of a sampling plan, over records drawn beforehand."""

    def __init__(self, deployment: Deployment, records: dict[str, ConfigSpeed], digest: str, log_dir: Path) -> None:
        self.deployment, self.records = deployment, records
        self.configs = list(records)
        self.meter = SimpleNamespace(record=lambda c, n: records[c], workload_digest=digest, results={})
        self.pool = SimpleNamespace(server_infos={}, model_infos={}, log_dir=log_dir, boots=[])

    def ensure(self, configs, concurrency, per_boot) -> None:  # noqa: ANN001 - the plan's signature
        pass

    def raise_for(self, config: str) -> None:
        pass

    def per_boot(self, configs, concurrency) -> int:  # noqa: ANN001
        return min(min(self.records[c].count(b) for b in {s.boot for s in self.records[c].samples}) for c in configs)

    def more(self, *args) -> bool:  # noqa: ANN002 - measured beforehand: there is no more
        return False

    def drift(self, *args) -> None:  # noqa: ANN002
        return None


def _deployment(
    tolerance: float = 0.10, spread: float | None = 0.02, shared: float | None = None, **gates
) -> Deployment:
    dep = load_deployment("sim")
    between = BetweenBootSpread(spread, spread, "self-test", shared, shared) if spread is not None else None
    tol = dataclasses.replace(dep.gates.tolerance, decode_tps_fraction=tolerance, decode_tps_by_config={})
    return dataclasses.replace(dep, gates=dataclasses.replace(dep.gates, tolerance=tol, between_boot=between, **gates))


def _store(root: Path, dep: Deployment, per_boot: dict[int, list[float]], date: str = "2026-12-01T00:00:00+00:00") -> None:
    values = [v for _, vs in sorted(per_boot.items()) for v in vs]
    boots = [b for b, vs in sorted(per_boot.items()) for _ in vs]
    est = float(np.median(values))
    iv = {"estimate": est, "low": est, "high": est, "confidence": 0.95}
    document = {
        "provenance": {"date": date, "commit": "c0ffee", "host_id": "machine-id:1"},
        "workload_digest": "w1",
        "configs": {
            REF: {
                "args_digest": dep.configs[REF].args_digest(dep.launch),
                "concurrency": {
                    "1": {
                        "n": len(values),
                        "decode_tps": iv,
                        "samples": {
                            "decode_tps": values,
                            "completion_tokens": [128] * len(values),
                            "verify_ct": [None] * len(values),
                            "boot": boots,
                        },
                    }
                },
            }
        },
    }
    write_baseline(dep.name, FP, document, root)


def _judge(tmp_path: Path, dep: Deployment, now: dict[int, list[float]]) -> Judge:
    record = ConfigSpeed(REF, 1, samples=[_sample(v, i, b) for b, vs in now.items() for i, v in enumerate(vs)])
    judge = Judge(dep, _Plan(dep, {REF: record}, "w1", tmp_path), tmp_path / "baselines")  # type: ignore[arg-type]
    judge._fingerprint = FP
    return judge


def test_a_stored_baseline_of_several_boots_counts_every_boot(tmp_path: Path):
    """One boot now against a baseline recorded with three: the stored level is all three boots',
    not the first stored boot's alone (pairing boot 1 with boot 1 judged an unchanged build
    against one unlucky stored boot, and said the noise held 3 stored boots)."""
    rng = np.random.default_rng(3)
    dep = _deployment()
    _store(tmp_path / "baselines", dep, {1: _levels(rng, 0.85, 20), 2: _levels(rng, 1.0, 20), 3: _levels(rng, 1.15, 20)})
    verdict = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 20)}).regression(REF, 1, "decode_tps")
    assert verdict.status == PASS, verdict.summary
    assert abs(verdict.figures["ratio_to_stored"]["estimate"] - 1.0) < 0.03
    assert "1 boot now, 3 stored" in verdict.noise


def test_a_real_regression_against_a_stored_side_of_several_boots_still_fails(tmp_path: Path):
    rng = np.random.default_rng(4)
    dep = _deployment()
    _store(tmp_path / "baselines", dep, {k: _levels(rng, 1.0, 20) for k in (1, 2, 3)})
    verdict = _judge(tmp_path, dep, {1: _levels(rng, 0.75, 20)}).regression(REF, 1, "decode_tps")
    assert verdict.status == FAIL and "plain decode slower than stored" in verdict.summary


def test_without_a_calibration_the_stored_boots_give_the_spread(tmp_path: Path):
    """No calibration, no declared spread, a baseline of three boots: the interval holds the
    between-boot spread those boots show (not "NOT the between-boot noise")."""
    rng = np.random.default_rng(5)
    dep = _deployment(tolerance=0.3, spread=None)
    _store(tmp_path / "baselines", dep, {1: _levels(rng, 0.95, 20), 2: _levels(rng, 1.0, 20), 3: _levels(rng, 1.05, 20)})
    verdict = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 20)}).regression(REF, 1, "decode_tps")
    assert "from this comparison's own boots (1 now, 3 stored; 2 degrees of freedom)" in verdict.noise
    assert "NOT the between-boot" not in verdict.noise


def _entry(levels: list[float], frame: str, source: str = "run", config: str = REF, digest: str = "d") -> Entry:
    return Entry(
        source=source, config=config, kind="decode_tps", args_digest=digest, frame=frame, date="2026-12-04",
        host_id="machine-id:1", commit="c0ffee", sglang="0.5.11", fingerprint=FP.slug,
        values=[BootValue(boot=k + 1, level=v, within_log_sd=0.033, requests=30) for k, v in enumerate(levels)],
    )  # fmt: skip


def test_the_pooled_spread_shrinks_its_bound_as_unchanged_runs_add_up(tmp_path: Path):
    """3 calibration boots pin a spread badly; every unchanged run adds its degrees of freedom, so
    the 80% upper bound the gates use comes down towards the truth (4.9% here) instead of
    being re-estimated from 3 boots."""
    rng = np.random.default_rng(11)
    truth = 0.049
    path = history_path(tmp_path, "d", FP)
    append(path, "d", FP, [_entry(list(rng.normal(0, truth, 3)), "calibration 1", "calibration")])
    first = pooled_spread(load_history(path), REF, "decode_tps", "d")
    assert first is not None and first.df == 2 and first.calibrations == 1
    for _ in range(40):  # 40 runs against one stored baseline: one frame, its zero unknown
        written = append(path, "d", FP, [_entry([float(rng.normal(0.01, truth))], "baseline b1")])
        assert written[0].pooled, written[0].why_not_pooled
    later = pooled_spread(load_history(path), REF, "decode_tps", "d")
    assert later is not None and later.df == 2 + 39 and later.runs == 40
    # the bound's excess over the estimate shrinks: 3 boots put it at about 2.2x, 40 more near 1.2x
    assert later.log_sd_upper / later.log_sd < 0.6 * (first.log_sd_upper / max(first.log_sd, 1e-9))
    assert later.log_sd_upper < 1.35 * truth
    # other flags never pool with these
    assert pooled_spread(load_history(path), REF, "decode_tps", "other-digest") is None


def test_a_run_out_of_control_is_kept_not_pooled_and_said(tmp_path: Path):
    rng = np.random.default_rng(12)
    path = history_path(tmp_path, "d", FP)
    append(path, "d", FP, [_entry(list(rng.normal(0, 0.02, 6)), "calibration 1", "calibration")])
    before = pooled_spread(load_history(path), REF, "decode_tps", "d")
    (wild,) = append(path, "d", FP, [_entry([math.log(0.7)], "baseline b1")])
    assert not wild.pooled and "out of control" not in wild.why_not_pooled  # the reason itself, not the label
    assert "boot 1 of baseline's decode_tps sits -30.0% from its frame's centre (baseline b1)" in wild.why_not_pooled
    history = load_history(path)
    assert history is not None and len(history.entries) == 2 and history.entries[-1].pooled is False
    assert pooled_spread(history, REF, "decode_tps", "d") == before  # the wild boot widened nothing
    (tame,) = append(path, "d", FP, [_entry([0.01], "baseline b1")])
    assert tame.pooled


def test_the_history_file_is_named_with_its_field_when_broken(tmp_path: Path):
    import pytest

    from specgate.errors import BaselineError

    path = history_path(tmp_path, "d", FP)
    append(path, "d", FP, [_entry([0.0, 0.01], "calibration 1", "calibration")])
    data = json.loads(path.read_text())
    data["entries"][0]["values"][0]["requests"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"history/.*\.json: runner history malformed: field 'entries\[0\]\.values\[0\]\.requests': expected at least 1, got 0"):
        load_history(path)
    data["schema_version"] = 9
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match="field 'schema_version': expected 1, got 9"):
        load_history(path)


def test_pooling_equals_the_calibration_formula_on_one_frame():
    """One frame alone gives what calibrate.analyse gives its rounds: the same spread and bound."""
    from specgate.calibrate.analyse import _noise

    rng = np.random.default_rng(2)
    rounds = [{1: [700 * math.exp(o + rng.normal(0, 0.03)) for _ in range(30)]} for o in rng.normal(0, 0.05, 4)]
    ref = _noise(rounds)
    assert ref is not None
    logs = np.log([r[1] for r in rounds])
    within = ref.within_log_sd
    found = pool([[BootValue(boot=k + 1, level=float(np.median(row)), within_log_sd=within, requests=30) for k, row in enumerate(logs)]])
    assert found is not None
    assert abs(found.log_sd - ref.between_boot_log_sd) < 1e-9
    assert abs(found.log_sd_upper - ref.between_boot_log_sd_upper) < 1e-9


def test_a_passing_run_pools_its_boots_and_the_next_judge_uses_the_pool(tmp_path: Path):
    rng = np.random.default_rng(21)
    dep = _deployment(tolerance=0.2)
    _store(tmp_path / "baselines", dep, {1: _levels(rng, 1.0, 20)})
    simulated = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 20)})
    assert simulated.regression(REF, 1, "decode_tps").status == PASS
    assert simulated.pool_into_history() == []  # the SIMULATOR's boots are no runner's
    dep = dataclasses.replace(dep, simulator=False)
    for _ in range(3):
        judge = _judge(tmp_path, dep, {1: _levels(rng, 1.0 + rng.normal(0, 0.02), 20)})
        assert judge.regression(REF, 1, "decode_tps").status == PASS
        lines = judge.pool_into_history()
        assert lines and "1 boot(s) pooled into the runner history" in lines[0], lines
    judge = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 20)})
    spread = judge.spread(REF, "decode_tps")
    assert spread is not None and "pooled over 2 degrees of freedom (0 calibration(s), 3 unchanged run(s))" in spread.source
    # a run with a gate that did not pass pools nothing
    judge = _judge(tmp_path, dep, {1: _levels(rng, 0.5, 20)})
    assert judge.regression(REF, 1, "decode_tps").status == FAIL
    assert judge.pool_into_history() == []


def test_each_regression_gate_states_its_sensitivity_after_the_run(tmp_path: Path):
    rng = np.random.default_rng(31)
    dep = _deployment(tolerance=0.2, spread=0.049)
    _store(tmp_path / "baselines", dep, {1: _levels(rng, 1.0, 30, sd=0.033)})
    verdict = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 30, sd=0.033)}).regression(REF, 1, "decode_tps")
    found = verdict.figures["sensitivity"]
    # 4.9% between boots and 3.3% within, one boot a side, 30 requests: (1.96 + 0.84)·7.0% ≈ 18%
    assert 0.16 < found["detects_80pct"] < 0.20, found
    # At its own bar (20% tolerance) it FAILs only a larger regression: 1 − 0.8·(1 − 18%) ≈ 34%.
    assert found["fails_80pct_at_tolerance"] == pytest.approx(1 - 0.8 * (1 - found["detects_80pct"]))
    said = next(n for n in verdict.notes if n.startswith("sensitivity: detects a regression of"))
    assert "with 80% power at a 5% false-alarm rate; at its own bar (0.2 tolerance) it FAILs a regression of" in said
    assert "(1 boot(s) now, 1 stored, 30 requests per boot" in said
    assert "between-boot spread 4.9%" in said and "declared in the deployment" in said


def test_detect_asks_for_the_boots_and_minutes_that_reach_it(tmp_path: Path):
    from specgate.verdicts.sensitivity import Design

    # Where the spread is known to be each server's own (none shared by a run's servers), replicas help.
    design = Design(0.049, 0.033, 1, 1, 30, 0.05, False, shared_log_sd=0.0)
    assert design.detects() > 0.15  # one boot a side cannot see 10%
    boots = design.boots_for(0.10, 32)
    assert boots is not None and design.detects(boots, boots) <= 0.10 < design.detects(boots - 1, boots - 1)
    # Where the split is not known, all of it is taken as shared: replicas of one run cannot reach 10%.
    assert Design(0.049, 0.033, 1, 1, 30, 0.05, False).boots_for(0.10, 32) is None
    rng = np.random.default_rng(32)
    dep = _deployment(tolerance=0.2, spread=0.049, shared=0.0, detect=0.10)
    _store(tmp_path / "baselines", dep, {1: _levels(rng, 1.0, 30, sd=0.033)})
    judge = _judge(tmp_path, dep, {1: _levels(rng, 1.0, 30, sd=0.033)})
    judge.plan.pool.boots = [SimpleNamespace(config=REF, seconds=60.0, ok=True)]
    judge.meter.results = {(REF, 1): judge.meter.record(REF, 1)}
    verdict = judge.regression(REF, 1, "decode_tps")
    plan = verdict.figures["sensitivity"]["plan"]
    two_sided = Design(0.049, 0.033, 1, 1, 30, 0.05, True, shared_log_sd=0.0)
    assert plan["detect"] == 0.10 and plan["boots_per_side"] == two_sided.boots_for(0.10, 32)
    # each boot: 60 s to boot, 30 requests of 1 s
    assert abs(plan["gpu_minutes_per_side"] - plan["boots_per_side"] * 1.5) < 1e-9
    said = next(n for n in verdict.notes if n.startswith("sensitivity:"))
    assert f"detect = 10%: needs {plan['boots_per_side']} boots per side (launch.boots = {plan['boots_per_side']}" in said
    assert f"about {plan['gpu_minutes_per_side']:.0f} GPU minutes per config and side" in said


def test_check_states_the_sensitivity_before_the_run(tmp_path: Path):
    from specgate.verdicts.history import record_calibration
    from specgate.verdicts.planned import sensitivity_lines

    dep = _deployment(spread=None, detect=0.10)
    assert "sensitivity not stated: no runner history or calibration under" in sensitivity_lines(dep, tmp_path)[0]
    digest = dep.configs[REF].args_digest(dep.launch)
    medians = [700 * math.exp(x) for x in (0.0, 0.05, -0.04)]
    document = {
        "provenance": {"date": "2026-12-04T00:00:00+00:00", "commit": "c0ffee", "host_id": "machine-id:1"},
        "requests_per_boot": 30,
        "boot_seconds": [60.0, 62.0, 58.0],
        "configs": {REF: {"args_digest": digest, "decode_tps": {"boot_medians": medians, "within_log_sd": 0.033}}},
    }
    record_calibration(tmp_path, dep.name, FP, document)
    (line,) = sensitivity_lines(dep, tmp_path)
    assert line.startswith(f"  regression:{REF}:decode_tps on {FP.slug}: sensitivity: detects a regression of")
    assert "pooled over 2 degrees of freedom (1 calibration(s), 0 unchanged run(s))" in line
    # The record says nothing of how much of its spread a run's servers share: replicas are no answer.
    assert "detect = 10%: not reached within" in line and "[[gates.ab]]" in line


def test_detect_is_read_and_bounded_with_its_field_named():
    import pytest

    from specgate.deployment import parse_deployment
    from specgate.errors import DeploymentError
    from tests.self.helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data.setdefault("gates", {})["detect"] = 0.1
    assert parse_deployment(data, Path("x.toml")).gates.detect == 0.1
    data["gates"]["detect"] = 1.5
    with pytest.raises(DeploymentError, match=r"gates\.detect.*expected a number >= 0\.001 and <= 0\.9, got 1\.5"):
        parse_deployment(data, Path("x.toml"))


def test_a_tree_changed_only_in_the_runner_history_is_clean(tmp_path, monkeypatch):
    # Passing runs append to a committed history: that must not make the next baseline update's
    # tree "dirty" (refused), while any other change still does.
    import subprocess

    from specgate import project, provenance

    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    (tmp_path / "baselines" / "d" / "history").mkdir(parents=True)
    history = tmp_path / "baselines" / "d" / "history" / "h.json"
    history.write_text("{}")
    (tmp_path / "f.txt").write_text("a")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "i"], cwd=tmp_path, check=True)
    monkeypatch.delenv("SPECGATE_COMMIT", raising=False)
    monkeypatch.setattr(project, "current", lambda: type("P", (), {"root": tmp_path})())
    history.write_text('{"appended": 1}')
    assert not provenance.git_commit().endswith("+dirty")
    (tmp_path / "f.txt").write_text("b")
    assert provenance.git_commit().endswith("+dirty")
