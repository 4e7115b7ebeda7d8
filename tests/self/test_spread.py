"""specgate spread: run-to-run spread from several report.json files."""

import json
from pathlib import Path

import pytest

from specgate.cli import main
from specgate.errors import SpecgateError
from specgate.report.spread import load_runs, render_spread


def _report(tmp_path: Path, name: str, base: float, spec: float, deployment: str = "d") -> Path:
    def iv(x):
        return {"estimate": x, "low": x, "high": x, "confidence": 0.95}

    report = {
        "deployment": deployment,
        "fingerprint": {"gpu": "H200"},
        "provenance": {"date": "2026-11-29T12:00:00+00:00"},
        "speed": [
            {
                "config": "baseline",
                "concurrency": 1,
                "decode_tps": iv(base),
                "ratio_to_reference": None,
                "accept_length": None,
            },
            {
                "config": "eagle3",
                "concurrency": 1,
                "decode_tps": iv(spec),
                "ratio_to_reference": iv(spec / base),
                "accept_length": iv(2.0),
            },
        ],
    }
    path = tmp_path / name / "report.json"
    path.parent.mkdir()
    path.write_text(json.dumps(report))
    return path


def test_spread_is_the_largest_deviation_from_the_runs_median(tmp_path):
    paths = [_report(tmp_path, "a", 100, 150), _report(tmp_path, "b", 110, 165), _report(tmp_path, "c", 90, 150)]
    deployment, spreads, warnings = load_runs(paths)
    by = {s.config: s for s in spreads}
    assert deployment == "d" and not warnings
    assert abs(by["baseline"].decode_deviation - 0.10) < 1e-9  # 110 and 90 against 100
    # speedups 1.5, 1.5, 1.667: the machine's level cancels, the third run's speedup stands out
    assert abs(by["eagle3"].ratio_deviation - (150 / 90 / 1.5 - 1)) < 1e-9
    # the gate compares with one stored run: the worst pair counts, 110 / 90 and 1.5 / 1.667
    assert abs(by["baseline"].decode_worst_pair - (110 / 90 - 1)) < 1e-9
    assert abs(by["eagle3"].ratio_worst_drop - (1 - 1.5 / (150 / 90))) < 1e-9
    text = render_spread(deployment, spreads, warnings)
    assert "at least 22.2%" in text and "at least 10.0%" in text and "lower bound" in text


def test_spread_refuses_one_report_and_mixed_deployments(tmp_path):
    one = _report(tmp_path, "a", 100, 150)
    with pytest.raises(SpecgateError, match="at least two"):
        load_runs([one])
    other = _report(tmp_path, "b", 100, 150, deployment="e")
    assert main(["spread", str(one), str(other)]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(SpecgateError, match="broken.json: not a specgate report.json"):
        load_runs([one, broken])


def test_one_file_twice_or_no_speed_figures_is_no_spread(tmp_path):
    a = _report(tmp_path, "a", 100, 150)
    with pytest.raises(SpecgateError, match="two different report.json files"):
        load_runs([a, a.parent / ".." / "a" / "report.json"])
    quiet = []
    for name in ("x", "y"):  # equivalence-only runs: no speed rows
        path = _report(tmp_path, name, 100, 150)
        doc = json.loads(path.read_text())
        doc["speed"] = []
        path.write_text(json.dumps(doc))
        quiet.append(path)
    with pytest.raises(SpecgateError, match="no config has speed figures"):
        load_runs(quiet)


def test_a_run_is_named_by_the_folder_above_its_report_folder(tmp_path):
    paths = []
    for name in ("run-1", "run-2"):
        (tmp_path / name).mkdir()
        paths.append(_report(tmp_path / name, "report", 100, 150))
    _, spreads, _ = load_runs(paths)
    assert sorted(r.label.split(" (")[0] for r in spreads[0].runs) == ["run-1", "run-2"]
