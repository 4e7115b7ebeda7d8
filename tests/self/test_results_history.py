"""The results history (specgate.history): records appended atomically under the shared lock,
refused where they belong to another deployment or fingerprint, bounded per series with a note;
change points found at the commit a step was injected at; `specgate history` failing on a new
step down past the threshold; the first screen saying where a run stands. Unit level but one
end-to-end run of the simulator (the plugin's hook)."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from specgate.deployment import HistorySpec
from specgate.errors import BaselineError
from specgate.history import records as rec
from specgate.history.changes import find_changes
from specgate.history.standing import standing
from specgate.history.trend import analyse, render_html, write_page

NOISE = random.Random(20261205)  # a fixed draw: the tests' series are the same every run
SLUG = "none-simulator-x0-sglang-0.1.0-specgate-sim-70b6b9bb"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "history_change_points.py"


def commit(k: int) -> str:
    """Run k's commit: distinct in its first 12 characters, as the page and the messages show it."""
    return f"c{k:03d}".ljust(40, "0")


def record(
    level: float, k: int = 0, config: str = "eagle3-decode", figure: str = "speedup", **over: object
) -> rec.ResultRecord:
    data = {
        "schema_version": 1, "deployment": "sim", "fingerprint": SLUG, "config": config, "concurrency": 1,
        "figure": figure, "commit": commit(k), "date": f"2026-12-{1 + k // 24:02d}T{k % 24:02d}:00:00+00:00",
        "host_id": "machine-id:test", "sglang": "0.1.0-specgate-sim", "deployment_digest": "d" * 12,
        "args_digest": "a" * 12, "verdict": "PASS", "run_verdict": "PASS", "level": level, "low": level * 0.98,
        "high": level * 1.02, "confidence": 0.95, "accept_length": 2.2, "cycle_ms": 2.8, "simulator": True,
    }  # fmt: skip
    return rec.ResultRecord.model_validate({**data, **over})


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("history_change_points", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_append_keeps_every_record_and_bounds_each_series_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "sim" / "results" / f"{SLUG}.jsonl"
    for k in range(12):
        said = rec.append_results(path, [record(1.5, k), record(800.0, k, figure="decode_tps")], keep=10)
    assert [r.level for r in rec.load_results(path, "sim")].count(1.5) == 10
    assert "dropped the oldest 1 of eagle3-decode c1 speedup" in said[-1] and "[history] keep" in said[-1]
    assert not list(path.parent.glob("*.tmp")) and not list(path.parent.glob(".*"))  # atomic: no temp left


def test_append_holds_the_shared_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import contextmanager

    held = []

    @contextmanager
    def spy(path: Path, **kw: object):
        held.append(path)
        yield

    monkeypatch.setattr(rec, "locked", spy)
    path = tmp_path / f"{SLUG}.jsonl"
    rec.append_results(path, [record(1.5)])
    assert held == [path]


def test_records_of_another_deployment_or_fingerprint_are_refused_named(tmp_path: Path) -> None:
    path = tmp_path / f"{SLUG}.jsonl"
    with pytest.raises(BaselineError, match="field 'fingerprint'.*other hardware"):
        rec.append_results(path, [record(1.5, fingerprint="h200-x1-sglang-0.5.14-0123abcd")])
    rec.append_results(path, [record(1.5)])
    path.write_text(path.read_text() + json.dumps(record(1.4).model_dump() | {"deployment": "other"}) + "\n")
    with pytest.raises(BaselineError, match=r"line 2: field 'deployment': a record of deployment 'other'"):
        rec.load_results(path, "sim")
    path.write_text('{"schema_version": 1, "level": "fast"}\n')
    with pytest.raises(BaselineError, match=r"line 1: results record malformed"):
        rec.load_results(path, "sim")


def test_a_step_is_found_at_its_commit_with_size_and_interval() -> None:
    levels = [1.60 * (1 + NOISE.gauss(0, 0.004)) * (0.97 if k >= 25 else 1.0) for k in range(40)]
    (step,) = find_changes(levels).steps
    assert step.index == 25 and step.low < step.ratio < step.high < 1.0
    assert abs(step.ratio - 0.97) < 0.005 and step.regression_past(0.03)


def test_a_slow_creep_with_no_step_is_named() -> None:
    levels = [1.60 * (1 - 0.001 * k) * (1 + NOISE.gauss(0, 0.003)) for k in range(40)]
    changes = find_changes(levels)
    assert not changes.steps and changes.creep is not None and changes.creep.over_window < 0.97
    trends = analyse({SLUG: [record(v, k) for k, v in enumerate(levels)]}, HistorySpec(threshold=0.03))
    assert any("slow creep down" in f for f in trends[0].failing)


def test_simulated_h200_histories_find_the_step_at_its_commit(bench) -> None:
    """The proof at a few seeds (benchmarks/history_change_points.py prints the full rates): a 3%
    step at the H200's measured noise, found at its commit ± 1 where the figure's noise lets any
    detector place it (plain decode tok/s, 0.6% between boots), with no healthy history flagged."""
    plain = bench.FIGURES[0]
    seeds = range(10)
    assert sum(bench.found_at(bench.simulated_history(s, plain, -0.03)) for s in seeds) >= 9
    assert sum(bench.flagged(bench.simulated_history(s, fig, 0.0)) for s in seeds for fig in bench.FIGURES) <= 1


def test_history_fails_on_a_new_step_down_only(tmp_path: Path) -> None:
    levels = [1.6 * (1 + NOISE.gauss(0, 0.003)) for k in range(30)]
    spec = HistorySpec(threshold=0.03, recent=5)
    dropped_late = [v * (0.9 if k >= 27 else 1.0) for k, v in enumerate(levels)]
    dropped_early = [v * (0.9 if k >= 10 else 1.0) for k, v in enumerate(levels)]
    late = analyse({SLUG: [record(v, k) for k, v in enumerate(dropped_late)]}, spec)[0]
    early = analyse({SLUG: [record(v, k) for k, v in enumerate(dropped_early)]}, spec)[0]
    assert late.failing and commit(27)[:12] in late.failing[0]
    assert early.changes.steps and not early.failing  # said, no longer new


def test_trend_page_is_self_contained(tmp_path: Path) -> None:
    levels = [1.6 * (0.95 if k >= 12 else 1.0) * (1 + NOISE.gauss(0, 0.003)) for k in range(24)]
    rows = [record(v, k, verdict="FAIL" if k == 20 else "PASS") for k, v in enumerate(levels)]
    page = render_html("sim", analyse({SLUG: rows}, HistorySpec()))
    assert page.count("<svg") == 1 and "stroke-dasharray" in page and "#cf222e" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    assert "<script src" not in page and "<link" not in page
    html, png = write_page(tmp_path, "sim", analyse({SLUG: rows}, HistorySpec()))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_standing_names_the_rank_among_this_runners_runs() -> None:
    earlier = [record(1.5 + 0.01 * k, k) for k in range(19)]
    (line,) = standing([record(1.31, 30)], earlier)
    assert line.startswith("eagle3-decode speedup 1.31x, the lowest of 20 runs on this runner")
    assert standing([record(1.31, 30)], earlier[:2]) == []  # too few to say
    elsewhere = [e.model_copy(update={"host_id": "machine-id:other"}) for e in earlier]
    assert standing([record(1.31, 30)], elsewhere) == []


def test_a_run_appends_its_records_and_says_where_it_stands(tmp_path: Path) -> None:
    """The plugin's hook, end to end on the simulator: the run's records appended beside the
    baselines, and report.json/report.md saying where it stands among three earlier runs."""
    from helpers import SimDeployment

    from specgate.provenance import host_id

    d = SimDeployment(tmp_path / "run", {})
    results = d.baselines_dir / d.data["name"] / "results"
    results.mkdir(parents=True)
    path = results / f"{SLUG}.jsonl"
    earlier = [record(9.0, k, deployment=d.data["name"], host_id=host_id()) for k in range(3)]
    path.write_text("".join(json.dumps(r.model_dump()) + "\n" for r in earlier))
    outcome = d.run(None, "--specgate-allow-uncompared")
    assert outcome.ret in (0, 4), "\n".join(outcome.outlines[-40:])
    kept = rec.load_results(path, d.data["name"])
    assert len(kept) > 3 and {r.config for r in kept[3:]} >= {"baseline", "eagle3-decode"}
    assert any(r.figure == "speedup" and r.accept_length for r in kept[3:])
    report = d.report()
    assert any("the lowest of 4 runs on this runner" in s for s in report["standing"])
    assert "**In its history:** eagle3-decode speedup" in (d.report_dir / "report.md").read_text()
    assert (d.report_dir / "history.png").read_bytes()[:4] == b"\x89PNG"


def _specgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specgate.cli", *args], capture_output=True, text=True, timeout=120)


def test_history_command_exits_by_new_steps_and_writes_the_page(tmp_path: Path) -> None:
    base = [1.6 * (1 + NOISE.gauss(0, 0.003)) for _ in range(30)]
    path = tmp_path / "baselines" / "sim" / "results" / f"{SLUG}.jsonl"
    rec.append_results(path, [record(v, k) for k, v in enumerate(base)])
    out = tmp_path / "page"
    healthy = _specgate("history", "sim", "--baselines-dir", str(tmp_path / "baselines"), "-o", str(out))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert (out / "history.html").is_file() and (out / "history.png").is_file()
    rec.append_results(path, [record(1.45, 30 + k) for k in range(4)])
    dropped = _specgate("history", "sim", "--baselines-dir", str(tmp_path / "baselines"), "-o", str(out))
    assert dropped.returncode == 1, dropped.stdout + dropped.stderr
    assert "FAIL — eagle3-decode c1 speedup: a new step down" in dropped.stdout and commit(30)[:12] in dropped.stdout
    path.write_text(path.read_text() + "{not json\n")
    broken = _specgate("history", "sim", "--baselines-dir", str(tmp_path / "baselines"), "-o", str(out))
    assert broken.returncode == 2 and f"{path}: line 35: not JSON" in broken.stderr


def test_each_runner_is_a_series_of_its_own() -> None:
    """Two runners of one fingerprint, 4% apart, the job moving from one to the other halfway:
    no step is a commit's doing, and none is said."""
    rows = [
        record(1.6 * (0.96 if k >= 15 else 1.0) * (1 + NOISE.gauss(0, 0.003)), k, host_id="b" if k >= 15 else "a")
        for k in range(30)
    ]
    trends = analyse({SLUG: rows}, HistorySpec())
    assert sorted(t.name for t in trends) == ["eagle3-decode c1 speedup on a", "eagle3-decode c1 speedup on b"]
    assert not any(t.changes.steps or t.failing for t in trends)


def _speed_report(rows: dict[str, tuple[float, float | None]]):
    """A report as build_report writes it, with a short-workload speed row per config of `rows`
    (decode tok/s, speedup over the reference or None)."""
    from types import SimpleNamespace

    from helpers import sim_deployment_dict

    from specgate.deployment import parse_deployment
    from specgate.report.build import TestTally, build_report
    from specgate.report.model import Fingerprint, SpeedRow

    dep = parse_deployment(sim_deployment_dict(), Path("sim.toml"))
    built = build_report(
        dep, SimpleNamespace(results={}, label=lambda s: ""), [], {}, [], None,
        {"host": "h", "date": "2026-12-05T07:00:00+00:00", "commit": "c", "host_id": "machine-id:test", "command": "specgate run"},
        TestTally(0), {}, {}, [], plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []},
    )  # fmt: skip

    def interval(x: float) -> dict:
        return {"estimate": x, "low": x * 0.95, "high": x * 1.05, "confidence": 0.95}

    speed = [
        SpeedRow.model_validate({
            "config": config, "concurrency": 1, "speculative": ratio is not None, "n": 9, "decode_tps": interval(tps),
            "ratio_to_reference": interval(ratio) if ratio else None, "accept_length": None, "ttft_ms": interval(4.0),
            "warmup_requests": 2, "warmup_settled": True, "verdict": "FAIL",
        })
        for config, (tps, ratio) in rows.items()
    ]  # fmt: skip
    fingerprint = Fingerprint(gpu="none", gpu_count=0, driver="simulator", cuda="x0", sglang="0.1.0-specgate-sim", model="m")
    return built.model_copy(update={"speed": speed, "fingerprint": fingerprint}), dep


def test_a_config_whose_server_was_lost_before_its_figures_were_whole_writes_no_record() -> None:
    """eagle3-decode's server died after 5 requests of its short workload: its decode tok/s and
    speedup were appended as a run's figures, and fed the trend. They are left out, said so; a
    speedup over a reference lost so is left out too; a server lost after its short workload was
    measured whole (in a later bucket) keeps its records."""
    report, dep = _speed_report({"baseline": (500.0, None), "eagle3-decode": (712.0, 1.42), "eagle3-prefill": (416.0, 0.83)})
    died = {"eagle3-decode": "the server died after serving 5 request(s)"}
    whole = {("baseline", 0), ("eagle3-prefill", 0)}
    records, left_out = rec.records_of(report, dep, died, whole)
    assert {(r.config, r.figure) for r in records} == {
        ("baseline", "decode_tps"), ("eagle3-prefill", "decode_tps"), ("eagle3-prefill", "speedup"),
    }
    assert left_out == [
        "eagle3-decode's decode_tps and speedup left out of the results history: the server of 'eagle3-decode' was "
        "lost before its short workload was measured whole, and a record of the requests it answered would read as a "
        "whole run's figure"
    ]
    # The reference lost so: every speedup over it is left out, each config's own tok/s kept.
    records, left_out = rec.records_of(report, dep, {"baseline": "hung"}, {("eagle3-decode", 0), ("eagle3-prefill", 0)})
    assert {(r.config, r.figure) for r in records} == {("eagle3-decode", "decode_tps"), ("eagle3-prefill", "decode_tps")}
    assert len(left_out) == 3 and all("the server of 'baseline' was lost" in line for line in left_out)
    # Lost in a later bucket, after its short workload was measured whole: its records stand.
    records, left_out = rec.records_of(report, dep, died, {*whole, ("eagle3-decode", 0)})
    assert len(records) == 5 and left_out == []


def test_figures_left_out_of_the_history_are_said_apart_from_its_ranks() -> None:
    from specgate.report.markdown import render_markdown

    report, _ = _speed_report({"baseline": (500.0, None)})
    line = "eagle3-decode's decode_tps left out of the results history: the server of 'eagle3-decode' was lost"
    text = render_markdown(report.model_copy(update={"standing": [line]}))
    assert f"**Not in its history:** {line}." in text
    assert "**In its history:**" not in text  # no rank, no trend page to point at
