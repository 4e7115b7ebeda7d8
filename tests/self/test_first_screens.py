"""First screens a user reads that must not mislead (issue 32's second review): calibrate's table
tells a false alarm (FAIL) from a gate that cannot tell, an unwritable report folder is named
before anything boots, and report.md says why before it says what to change."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from helpers import sim_deployment_dict

from specgate.calibrate.analyse import FigureNoise, _aa_pairs, _gate_model, render
from specgate.deployment import parse_deployment
from specgate.resources import SOURCE_ROOT as REPO_ROOT


def _dep():
    return parse_deployment(sim_deployment_dict(), Path("sim.toml"))


# --- calibrate: FAIL, INCONCLUSIVE and PASS apart ------------------------------------------------
def _noise(between: float) -> FigureNoise:
    return FigureNoise([1.0, 1.0], 0.01, between, between, 20)


def test_a_gate_too_noisy_to_pass_says_cannot_tell_not_detects_zero():
    model = _gate_model(_noise(0.2), 0.10, False, _dep())
    assert model.detects is None and "passes only" in model.cannot_tell and "wider than the tolerance" in model.cannot_tell
    # What it does with an unchanged build is mostly INCONCLUSIVE: that is no false alarm.
    assert model.inconclusive > model.false_alarm and model.false_alarm < 0.5


def test_a_quiet_gate_detects_more_than_its_tolerance():
    model = _gate_model(_noise(0.005), 0.10, False, _dep())
    assert model.detects is not None and model.detects > 0.10 and not model.cannot_tell  # a FAIL needs the whole interval past the bar
    assert model.false_alarm < 0.01


def test_aa_pairs_count_fail_inconclusive_and_pass_apart():
    dep = _dep()
    rng = [1.0 + 0.001 * i for i in range(20)]
    # Three rounds: two alike, one 30% slower with its requests spread (straddles a 25% bar).
    rounds = [{1: rng}, {1: rng}, {1: [v * 0.70 * (1 + 0.2 * math.sin(i)) for i, v in enumerate(rng)]}]
    counts = _aa_pairs(rounds, _noise(0.0), 0.25, False, dep)
    assert counts["pairs"] == 6 and counts["fail"] + counts["inconclusive"] + counts["pass"] == 6
    assert counts["pass"] >= 2  # the two alike rounds pass each other both ways


def test_calibrate_table_prints_cannot_tell_with_why():
    dep = _dep()
    entry = {"gate": {
        "tolerance": 0.1, "two_sided": False, "false_alarm": 0.1, "inconclusive": 0.8, "detects_80pct": None,
        "cannot_tell": "an unchanged build passes only 10%", "suggested_tolerance": 0.6,
        "aa_pairs": 6, "aa_failures": 1, "aa_inconclusive": 4, "aa_passes": 1,
    }, "decode_tps": {"boot_medians": [1.0, 1.0], "within_log_sd": 0.01, "between_boot_log_sd": 0.2,
                      "between_boot_log_sd_upper": 0.2}}  # fmt: skip
    text = render(dep, {"baseline": entry}, 2, [])
    assert "cannot tell: an unchanged build passes only 10%" in text and "| 0.0% |" not in text
    assert "| 1 / 4 / 1 of 6 |" in text  # FAIL / INCONCLUSIVE / PASS


# --- an unwritable report folder: named, exit 2, before any server boots --------------------------
def _folders(tmp_path: Path) -> list[Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = [blocker / "report"]  # a folder under a regular file: cannot exist
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        (locked / "probe").touch()
    except OSError:
        out.append(locked)  # chmod 555 holds for this user (root writes anyway: the case above stands in)
    else:
        (locked / "probe").unlink()
    return out


@pytest.mark.parametrize("command", ["calibrate", "sweep"])
def test_an_unwritable_report_folder_is_refused_before_anything_boots(tmp_path, monkeypatch, capsys, command):
    from specgate import cli

    monkeypatch.setenv("SPECGATE_ALLOW_DIRTY", "1")
    monkeypatch.chdir(REPO_ROOT)
    booted: list[str] = []
    monkeypatch.setattr("specgate.server.pool.ServerPool.boot", lambda self, names: booted.extend(names) or {})
    for folder in _folders(tmp_path):
        code = cli.main([command, "sim", "--report-dir", str(folder)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"--report-dir ({folder})" in err and "expected a folder this user can write" in err, err
    assert not booted
    os.chmod(tmp_path / "read-only", 0o755)


# --- report.md: the verdict, why, then what to change --------------------------------------------
def test_an_interrupted_report_says_why_before_what_to_change():
    from specgate.report.markdown import render_markdown
    from specgate.report.model import read_report

    # An H200 run interrupted after its diagnosis found levers (committed evidence).
    path = REPO_ROOT / "results/2026-12-02-h200-small-distil/4-weak/smollm2-eagle3-h200-check+weak/report/report.json"
    report = read_report(path)
    assert report.overall == "INTERRUPTED"
    text = render_markdown(report)
    assert "**What to change**" in text
    assert text.index("**Why INTERRUPTED:**") < text.index("**What to change**")
