"""`specgate compare A B` on two simulated runs, one unchanged and one with eagle3-decode slowed
(SPECGATE_SIM_FAULTS="eagle3-decode:slowdown=0.3"): it names the slowed config, shown slower from
the paired requests, says the fault as what changed, and exits 1; the other way round, nothing is
slower. Two end-to-end runs: nothing else has two real report folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SimDeployment

from specgate.errors import ReportError
from specgate.history.compare import compare, render


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("compare")
    plain = SimDeployment(folder / "unchanged", {})
    slowed = SimDeployment(folder / "slowed", {})
    plain.run(None, "--specgate-seed=1")
    slowed.run(None, "--specgate-seed=1", faults="eagle3-decode:slowdown=0.3")
    return plain.report_dir, slowed.report_dir


def test_compare_names_the_slowed_config(runs: tuple[Path, Path]) -> None:
    unchanged, slowed = runs
    c = compare(unchanged, slowed)
    # Two runs of a loaded CI machine may differ a little elsewhere too: the slowed config is named,
    # and it is the slowest by far.
    assert "eagle3-decode" in {r.config for r in c.slower}
    tps = next(r for r in c.slower if r.figure == "decode tok/s" and r.config == "eagle3-decode")
    assert all(r.ratio > tps.ratio for r in c.slower if r.config != "eagle3-decode")
    assert tps.evidence in ("report intervals",) or tps.evidence.startswith("requests (")
    assert tps.high < 0.9
    assert any("sim_faults" in line and "slowdown=0.3" in line for line in c.environment_changed)
    text = render(c)
    assert "verdict: B is SLOWER in " in text and "eagle3-decode (c1) decode tok/s" in text
    assert not compare(unchanged, unchanged).slower


def test_compare_cli_exits_by_the_verdict(runs: tuple[Path, Path], tmp_path: Path) -> None:
    unchanged, slowed = runs
    cli = [sys.executable, "-m", "specgate.cli"]
    done = subprocess.run([*cli, "compare", str(unchanged), str(slowed)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "SLOWER" in done.stdout, done.stderr
    missing = subprocess.run(
        [*cli, "compare", str(unchanged), str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and "report.json" in missing.stderr
    with pytest.raises(ReportError):
        compare(unchanged, tmp_path)


def test_a_row_measured_on_one_side_only_is_said_not_compared(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """A context bucket B measured and A did not (or a bucket B lost) is no row of the table: the
    comparison says so instead of "no config shown slower" alone."""
    import json

    unchanged, _ = runs
    report = json.loads((unchanged / "report.json").read_text())
    bucket = dict(next(r for r in report["speed"] if r["config"] == "eagle3-decode"), context=32768)
    report["speed"].append(bucket)
    (tmp_path / "report.json").write_text(json.dumps(report))
    c = compare(unchanged, tmp_path)
    assert c.unpaired == ["eagle3-decode at 32K (c1): in B only"]
    text = render(c)
    assert "measured on one side only, NOT compared: eagle3-decode at 32K (c1): in B only" in text
    assert "(1 row(s) measured on one side only: not compared)" in text
    assert compare(tmp_path, unchanged).unpaired == ["eagle3-decode at 32K (c1): in A only"]
