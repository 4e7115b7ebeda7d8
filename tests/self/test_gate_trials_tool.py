"""tools/gate_trials.py (lab): the rates issue 50's run 4 reports come from its `analyse`, so what
it counts is checked here on made-up trial lines (no server)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gate_trials.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gate_trials", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _line(trial: int, status: str, sim: bool = False) -> dict:
    kind = "unchanged" if trial % 2 == 1 else "slowed"
    speed = {"status": status, "estimate": 0.9, "low": 0.85, "high": 0.95, "required": 0.96}
    return {
        "trial": trial, "kind": kind, "slowdown": 0.0 if kind == "unchanged" else 0.1, "simulator": sim,
        "exit": 0, "seconds": 150.0 + trial, "host_id": "gpu:A",
        "gates": {"ab:c-vs-b:speed": speed, "ab:c-vs-b:accept": {"status": "vacuous"}},
    }  # fmt: skip


def test_trials_alternate_by_their_own_number():
    tool = _tool()
    assert [tool.kind_of(i) for i in (1, 2, 3, 4)] == ["unchanged", "slowed", "unchanged", "slowed"]


def test_analyse_counts_false_alarms_and_detections_with_their_intervals(tmp_path, capsys):
    tool = _tool()
    statuses = {1: "pass", 3: "inconclusive", 5: "fail", 2: "fail", 4: "fail", 6: "inconclusive"}
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(_line(t, s)) + "\n" for t, s in statuses.items()))
    assert tool.analyse([tmp_path]) == 0
    out = capsys.readouterr().out
    low, high = tool.clopper_pearson(1, 3)
    assert f"| unchanged | 3 | 1 | 33% [{low:.0%}, {high:.0%}] | 1 | 1 | 0 |" in out
    assert "| slowed by 10% | 3 | 2 | 67%" in out
    assert "trials on real servers: 6" in out and "gpu:A (6 runs)" in out
    assert tool.clopper_pearson(0, 10)[0] == 0.0 and tool.clopper_pearson(10, 10)[1] == 1.0
    assert tool.clopper_pearson(0, 10)[1] == pytest.approx(0.3085, abs=1e-3)


def test_analyse_refuses_simulator_and_real_trials_mixed_and_lines_it_cannot_read(tmp_path, capsys):
    tool = _tool()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "trials.jsonl").write_text(json.dumps(_line(1, "pass")) + "\n")
    (tmp_path / "b" / "trials.jsonl").write_text(json.dumps(_line(2, "fail", sim=True)) + "\n")
    assert tool.analyse([tmp_path / "a", tmp_path / "b"]) == 2
    assert "mix the simulator and real servers" in capsys.readouterr().err
    (tmp_path / "a" / "trials.jsonl").write_text("not json\n")
    assert tool.analyse([tmp_path / "a"]) == 2
    assert "trials.jsonl:1: not a JSON line" in capsys.readouterr().err


def test_analyse_leaves_runs_with_no_speed_verdict_out_of_the_rates(tmp_path, capsys):
    """A run that was refused or broke (no report.json) or lost a server (its gate NOT RUN)
    neither false-alarmed nor detected: counted in n, it pulled both rates toward 0%."""
    tool = _tool()
    broken = dict(_line(3, "pass"), exit=2, error="no report.json (exit 2): see trial-03-unchanged.out")
    del broken["gates"]
    lines = [_line(1, "fail"), broken, _line(5, "not run"), _line(7, "pass")]
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert tool.analyse([tmp_path]) == 0
    low, high = tool.clopper_pearson(1, 2)
    assert f"| unchanged | 2 | 1 | 50% [{low:.0%}, {high:.0%}] | 1 | 0 | 2 |" in capsys.readouterr().out


def test_run_refuses_a_deployment_specgate_refuses_or_without_an_ab_gate_before_any_trial(tmp_path, capsys):
    """A bad deployment made every trial exit 2 (or, with --sim, a KeyError traceback) and the
    loop went on recording trials of no verdict; now it is refused by name before any trial."""
    tool = _tool()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n')
    for extra in ([], ["--sim"]):
        with pytest.raises(SystemExit) as exc:
            tool.main(["run", *extra, "--deployment", str(bad), "--out", str(tmp_path / "out")])
        assert exc.value.code == 2
        assert f"--deployment {bad}: " in capsys.readouterr().err
    assert not (tmp_path / "out" / "trials.jsonl").exists()
    with pytest.raises(SystemExit):
        tool.main(["run", "--deployment", str(TOOL.parents[1] / "fixtures/deployments/sim.toml"), "--out", str(tmp_path / "o")])
    assert "0 [[gates.ab]]: expected one" in capsys.readouterr().err


def test_run_refuses_trial_numbers_its_out_folder_already_holds(tmp_path, capsys):
    """A second call into the same --out with the same --first overwrote the earlier trial's report
    folder and log and wrote its number twice into trials.jsonl; it is refused, naming a free --first."""
    tool = _tool()
    out = tmp_path / "out"
    out.mkdir()
    (out / "trials.jsonl").write_text(json.dumps(_line(1, "pass")) + "\n")
    (out / "trial-02-slowed").mkdir()
    (out / "trial-03-unchanged.out").write_text("")
    ab = str(TOOL.parents[1] / "fixtures/deployments/llama8b-dummy-h200-ab.toml")
    assert tool.taken_trials(out) == {1, 2, 3}
    with pytest.raises(SystemExit) as exc:
        tool.main(["run", "--deployment", ab, "--out", str(out), "--runs", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "trial(s) 01, 02 already in" in err and "pass --first 4" in err, err


def test_slowed_trials_slow_the_ab_gates_own_candidate_whatever_its_name(tmp_path, monkeypatch):
    """The slowdown went to a fixed "eagle3-decode": in an A/B deployment naming its candidate
    otherwise, every slowed trial ran unchanged and the detection rate measured nothing."""
    import tomli_w

    from tests.self.helpers import sim_deployment_dict

    tool = _tool()
    data = sim_deployment_dict()
    data["configs"]["cand"] = dict(data["configs"].pop("eagle3-prefill"))
    data["configs"]["cand-base"] = dict(data["configs"]["cand"])
    data["gates"]["ab"] = [{"config": "cand", "base": "cand-base"}]
    data["gates"]["against_stored"] = False
    path = tmp_path / "ab.toml"
    path.write_text(tomli_w.dumps(data))
    seen = []
    monkeypatch.setattr(tool, "run_trials", lambda args: seen.append(args.candidate) or 0)
    assert tool.main(["run", "--sim", "--deployment", str(path), "--out", str(tmp_path / "out")]) == 0
    assert seen == ["cand"]
    assert tool.trial_env("slowed", 0.1, True, "cand")["SPECGATE_SIM_FAULTS"].endswith("cand:slowdown=0.111111")
    assert tool.trial_env("slowed", 0.1, False, "cand")["SPECGATE_INJECT_ONLY"] == "cand"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--out", "FILE"], "not a folder"),  # a traceback (FileExistsError) before
        (["--deadline-s", "-5"], "expected a deadline above 0 s"),  # exit 0 with no trial before
        (["--run-s", "-1"], "a run time of 0 s or more"),
    ],
)
def test_run_refuses_bad_flags_by_name(tmp_path, capsys, flags, said):
    tool = _tool()
    (tmp_path / "FILE").write_text("")
    flags = [str(tmp_path / "FILE") if f == "FILE" else f for f in flags]
    out = [] if "--out" in flags else ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exc:
        tool.main(["run", *flags, *out])
    assert exc.value.code == 2 and said in capsys.readouterr().err


def test_analyse_counts_a_trial_repacked_in_a_later_calls_archive_once(tmp_path, capsys):
    """Each call of gpu_noise.sh packs its machine's whole trials folder: call 2's trials.jsonl
    holds call 1's lines again, and analysing both counted them twice (n doubled, intervals narrowed)."""
    tool = _tool()
    (tmp_path / "call-1").mkdir()
    (tmp_path / "call-2").mkdir()
    first = [_line(1, "pass"), _line(2, "fail")]
    (tmp_path / "call-1" / "trials.jsonl").write_text("".join(json.dumps(x) + "\n" for x in first))
    (tmp_path / "call-2" / "trials.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [*first, _line(3, "fail")]))
    assert tool.analyse([tmp_path / "call-1", tmp_path / "call-2"]) == 0
    captured = capsys.readouterr()
    assert "trials on real servers: 3" in captured.out
    low, high = tool.clopper_pearson(1, 2)
    assert f"| unchanged | 2 | 1 | 50% [{low:.0%}, {high:.0%}] |" in captured.out
    assert "trial 01 left out, the same line as in an earlier file" in captured.err
