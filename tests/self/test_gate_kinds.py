"""A gate kind is added in one place (docs/gate-kinds.md): the page's example kind, loaded as
written, is parsed from its own table, planned, described by `specgate check`, and fails a run
for its own reason, with nothing else of specgate changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import merge, sim_deployment_dict

from specgate import gate_kinds
from specgate.cli.check import describe
from specgate.deployment import parse_deployment
from specgate.errors import DeploymentErrors, GateKindError
from specgate.resources import SOURCE_ROOT

PAGE = SOURCE_ROOT / "docs" / "gate-kinds.md"
EXAMPLE = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)[0]

# Loads the page's module as specgate.verdicts.ttft_gate and names it in KIND_MODULES, which is all
# the page asks of a person adding the kind.
_LOADER = f'''
import sys, types
from specgate import gate_kinds
module = types.ModuleType("specgate.verdicts.ttft_gate")
sys.modules[module.__name__] = module
exec(compile({EXAMPLE!r}, "docs/gate-kinds.md", "exec"), module.__dict__)
gate_kinds.KIND_MODULES = (*gate_kinds.KIND_MODULES, "ttft_gate")
gate_kinds.kinds.cache_clear()
'''


@pytest.fixture
def ttft_kind(monkeypatch):
    namespace: dict = {}
    exec(compile(_LOADER, "loader", "exec"), namespace)
    yield
    monkeypatch.delitem(__import__("sys").modules, "specgate.verdicts.ttft_gate")
    gate_kinds.KIND_MODULES = tuple(m for m in gate_kinds.KIND_MODULES if m != "ttft_gate")
    gate_kinds.kinds.cache_clear()


def _dep(entries):
    return parse_deployment(merge(sim_deployment_dict(), {"gates": {"ttft": entries}}), Path("deploy/ttft.toml"))


def test_the_example_kind_is_parsed_planned_and_described(ttft_kind):
    dep = _dep([{"config": "eagle3-decode", "seconds": 0.5}])
    planned = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "ttft"]
    assert [(g.name, g.needs, g.test_id) for g in planned] == [("ttft:eagle3-decode-c1", ("eagle3-decode",), "eagle3-decode-c1")]
    assert "  gate: eagle3-decode must answer its first token within 0.5 s" in describe(dep)
    with pytest.raises(DeploymentErrors) as err:
        _dep([{"config": "eagle4", "seconds": 0.5}, {"config": "eagle3-decode", "seconds": 1, "secs": 1}])
    assert [e.field for e in err.value.errors] == ["gates.ttft[0].config", "gates.ttft[1].secs"]


def test_without_the_kind_its_table_is_refused():
    with pytest.raises(Exception, match=r"gates\.ttft"):
        _dep([{"config": "eagle3-decode", "seconds": 0.5}])


def test_the_example_kind_fails_a_run_for_its_own_reason(sim_deployment, pytester):
    pytester.makepyfile(ttft_kind_loader=_LOADER)
    d = sim_deployment({"gates": {"ttft": [{"config": "eagle3-decode", "seconds": 0.0001}]}})
    result = d.run(pytester, "-p", "ttft_kind_loader", "-k", "ttft or beats")
    result.stdout.fnmatch_lines(["*FAILED*test_ttft_ceiling[[]eagle3-decode-c1[]]*"])
    report = d.report()
    [gate] = [g for g in report["gates"] if g["gate"] == "ttft:eagle3-decode-c1"]
    assert gate["status"] == "fail" and "required <= 0.0001 s" in gate["summary"]
    assert report["overall"] != "PASS"


# --- a broken kind is named, never a traceback, never a gate silently left out ---------------
_TOY = """
{head}
from specgate.gate_kinds import GateKind, PlannedGate
from specgate.verdicts.gates import PASS, Verdict


class Toy(GateKind):
    name = {name!r}
    test = {test!r}
    table = {table!r}
    example = {example!r}

    def parse(self, g, configs, workload):
        return g.text("config")

    def planned(self, dep, unbooted):
        return [PlannedGate(self.name, f"{{self.name}}:{{c}}", c, (c,), c, c) for c in dep.gates.of(self.table or "")]

    def decide(self, judge, gate):
        return Verdict(gate.name, gate.config, PASS, "a toy verdict, returned unrecorded")
{methods}

KIND = {kind}
"""


@pytest.fixture
def listed(monkeypatch):
    """Names more modules in KIND_MODULES for one test; the kinds are loaded anew before and after."""

    def add(module):
        monkeypatch.setattr(gate_kinds, "KIND_MODULES", (*gate_kinds.KIND_MODULES, module))
        gate_kinds.kinds.cache_clear()

    yield add
    monkeypatch.undo()
    gate_kinds.kinds.cache_clear()


@pytest.fixture
def register(monkeypatch, listed):
    import sys
    import types

    def add(module, **fields):
        values = {
            "name": "toy", "test": "test_toy", "table": "toy", "example": {"config": "{speculative}"}, "kind": "Toy()",
            "head": "", "methods": "",
        }  # fmt: skip
        values.update(fields)
        loaded = types.ModuleType(f"specgate.verdicts.{module}")
        monkeypatch.setitem(sys.modules, loaded.__name__, loaded)
        exec(compile(_TOY.format(**values), module, "exec"), loaded.__dict__)
        listed(module)

    return add


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"kind": "Toy"}, "KIND is the class Toy; expected an instance: KIND = Toy()"),
        ({"kind": "None"}, "defines no KIND"),
        ({"test": "check_toy"}, "its test 'check_toy' must be a name starting 'test_'"),
        ({"test": "test_accept_length_floor"}, "are both gate kinds with test 'test_accept_length_floor'"),
        ({"name": "beats"}, "are both gate kinds with name 'beats'"),
        ({"table": "beats"}, "are both gate kinds with table 'beats'"),
        ({"table": "tolerance"}, "its table 'tolerance' is a [gates] setting"),
        ({"example": None}, "declares table 'toy' but no example"),
        ({"name": "Toy Kind"}, "its name 'Toy Kind' must be lower case"),
    ],
)
def test_a_broken_kind_is_refused_naming_its_module(register, fields, said):
    register("toy_gate", **fields)
    with pytest.raises(GateKindError) as err:
        gate_kinds.kinds()
    assert "specgate/verdicts/toy_gate.py (named in specgate/gate_kinds.py KIND_MODULES)" in str(err.value)
    assert said in str(err.value)


def test_a_kind_module_that_cannot_import_is_named(listed):
    listed("ghost_gate")
    with pytest.raises(GateKindError, match=r"specgate/verdicts/ghost_gate\.py .* cannot be imported: ModuleNotFoundError"):
        _dep([])


def test_a_kind_that_raises_is_named_not_a_traceback(register, monkeypatch):
    register("toy_gate")
    toy = gate_kinds.kind_named("toy")
    monkeypatch.setattr(type(toy), "parse", lambda self, g, configs, workload: 1 / 0)
    with pytest.raises(GateKindError, match=r"gate kind 'toy' \(specgate/verdicts/toy_gate\.py\) raised in parse \(of gates\.toy\[0\]"):
        parse_deployment(merge(sim_deployment_dict(), {"gates": {"toy": [{"config": "eagle3-decode"}]}}), Path("d.toml"))


def test_a_verdict_the_kind_did_not_record_is_kept(register):
    from specgate.verdicts.judge import Judge

    register("toy_gate")
    dep = parse_deployment(merge(sim_deployment_dict(), {"gates": {"toy": [{"config": "eagle3-decode"}]}}), Path("d.toml"))
    [gate] = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "toy"]
    judge = Judge(dep, None, Path("/nonexistent"))  # type: ignore[arg-type]
    verdict = judge.decide(gate)
    assert judge.verdicts == [verdict] and verdict.gate == "toy:eagle3-decode"
    assert verdict.figures["concurrency"] == 1  # the planned gate's: its speed row's (report.build)


def test_a_planned_gate_carries_the_concurrency_it_judges_at_and_only_concurrency_1_is_bucketed():
    """A gate's concurrency was read from its spec's attribute, which an A/B gate's spec (entry and
    figure) and a regression gate's (a tuple) lack: an A/B gate at concurrency 4 read as 1, got
    context buckets' versions, and its verdict could not say its speed row."""
    ab = {"config": "eagle3-prefill", "base": "eagle3-decode", "concurrency": 4}
    beats = {"config": "eagle3-decode", "over": "baseline", "ratio": 1.0, "concurrency": 4}
    data = merge(sim_deployment_dict(), {"workload": {"concurrency": [1, 4], "context_buckets": ["1K"]}})
    data["gates"] = merge(data["gates"], {"ab": [ab], "beats": [*data["gates"]["beats"], beats]})
    dep = parse_deployment(data, Path("d.toml"))
    at = {g.name: g.concurrency for g in gate_kinds.planned_gates(dep, set())}
    assert at["ab:eagle3-prefill-vs-eagle3-decode-c4:speed"] == 4 and at["beats:eagle3-decode-beats-baseline-c4"] == 4, at
    assert at["regression:eagle3-decode:c4:decode_tps"] == 4 and at["regression:eagle3-decode:c1:decode_tps"] == 1, at
    assert not [name for name in at if "-c4" in name and "@" in name], at
    assert "ab:eagle3-prefill-vs-eagle3-decode-c4:speed" in gate_kinds.unbucketed_gates(dep)


def test_two_gates_of_one_name_are_refused_and_a_concurrency_names_its_gate():
    beats = {"config": "eagle3-decode", "over": "baseline", "ratio": 1.1}
    data = merge(sim_deployment_dict(), {"workload": {"concurrency": [1, 4]}, "gates": {"beats": [beats, beats]}})
    with pytest.raises(Exception, match=r"gates\.beats\[1\]': names the same gate as gates\.beats\[0\], 'beats:eagle3-decode-beats-baseline'"):
        parse_deployment(data, Path("d.toml"))
    # The same comparison under another bar is one gate too: refused, with what to do.
    stricter = {**beats, "ratio": 1.3}
    with pytest.raises(Exception, match=r"under another bar is one gate, so keep the stricter"):
        parse_deployment({**data, "gates": {"beats": [beats, stricter]}}, Path("d.toml"))
    data["gates"]["beats"] = [beats, {**beats, "concurrency": 4}]
    dep = parse_deployment(data, Path("d.toml"))
    assert [g.name for g in gate_kinds.kind_named("beats").planned(dep, set())] == [
        "beats:eagle3-decode-beats-baseline",
        "beats:eagle3-decode-beats-baseline-c4",
    ]


def test_a_misspelt_required_field_is_named_beside_the_missing_one():
    with pytest.raises(DeploymentErrors, match=r"at_least'.*is required but missing \(the table has 'at_leats': misspelt\?\)"):
        parse_deployment(
            merge(sim_deployment_dict(), {"gates": {"accept_length": [{"config": "eagle3-decode", "at_leats": 2}]}}),
            Path("d.toml"),
        )


def _method(source):
    return "\n".join("    " + line for line in source.strip().splitlines())


_TOY_DEP = {"gates": {"toy": [{"config": "eagle3-decode"}]}}


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"methods": _method("def describe(self, dep):\n    return 'a string'")}, "describe must return a list of lines"),
        ({"methods": _method("def describe(self, dep):\n    raise RuntimeError('boom')")}, "raised in describe: RuntimeError: boom"),
        ({"methods": _method("def vacuities(self, dep):\n    return None")}, "vacuities must return a list of Vacuity"),
        (
            {"methods": _method("def planned(self, dep, unbooted):\n    return [PlannedGate('toy', 'toy:a', 'baseline', (), 'x]y z', None)]")},
            "has test id 'x]y z'",
        ),
        (
            {
                "table": None,
                "example": None,
                "methods": _method("def planned(self, dep, unbooted):\n    return [PlannedGate('toy', 'toy:a', 'baseline', (), 'a', None)] * 2"),
            },
            "planned two gates both 'toy:a'",
        ),
    ],
)
def test_a_kind_that_breaks_its_contract_is_named_when_the_deployment_loads(register, fields, said):
    register("toy_gate", **fields)
    with pytest.raises(GateKindError, match=re.escape(said)):
        parse_deployment(merge(sim_deployment_dict(), _TOY_DEP if fields.get("table", "toy") else {}), Path("d.toml"))


@pytest.mark.parametrize(
    ("decide", "said"),
    [
        ("return Verdict('beats:eagle3-decode-beats-baseline', gate.config, PASS, 'forged')", "returned a verdict of 'beats:"),
        ("return Verdict(gate.name, 'baseline', PASS, 'another config')", "(config 'baseline')"),
        ("return Verdict(gate.name, gate.config, 'pass-ish', 'odd')", "returned status 'pass-ish', not a Status"),
        (
            "judge.record(Verdict(gate.name, gate.config, FAIL, 'one'))\n    return Verdict(gate.name, gate.config, PASS, 'two')",
            "recorded 1 verdict(s) other than the one it returned",
        ),
    ],
)
def test_a_verdict_that_is_not_its_gates_own_is_refused(register, decide, said):
    from specgate.verdicts.judge import Judge

    register("toy_gate", head="from specgate.verdicts.gates import FAIL", methods=_method(f"def decide(self, judge, gate):\n    {decide}"))
    dep = parse_deployment(merge(sim_deployment_dict(), _TOY_DEP), Path("d.toml"))
    [gate] = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "toy"]
    judge = Judge(dep, None, Path("/nonexistent"))  # type: ignore[arg-type]
    with pytest.raises(GateKindError, match=re.escape(said)):
        judge.decide(gate)
    assert judge.verdicts == []


def test_a_kind_module_that_exits_as_it_imports_is_named(tmp_path, monkeypatch, listed):
    """`sys.exit(0)` while the kinds load would end `specgate run` at exit 0, a PASS with no report."""
    import specgate.verdicts

    (tmp_path / "exiting_gate.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.setattr(specgate.verdicts, "__path__", [*specgate.verdicts.__path__, str(tmp_path)])
    listed("exiting_gate")
    with pytest.raises(GateKindError, match=r"exiting_gate\.py \(named in .*\) cannot be imported: SystemExit"):
        _dep([])


def test_a_gate_test_belongs_to_its_gates_config():
    """What a stopped run says was running ("the test of X was running when the signal came") is the gate's
    config, not the reference's."""
    from types import SimpleNamespace

    from specgate.plugin import _item_phase_and_config

    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    [gate] = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "accept"]
    item = SimpleNamespace(
        get_closest_marker=lambda name: SimpleNamespace(args=("gates",)),
        callspec=SimpleNamespace(params={"planned_gate": gate}),
    )
    assert _item_phase_and_config(item, dep) == ("gates", "eagle3-decode")  # type: ignore[arg-type]


def test_a_test_a_signal_stopped_in_a_context_bucket_is_named_with_its_bucket():
    """SIGTERM during the 2K bucket's speed test said "baseline's was running", as if the short
    workload's test had been: each bucket's test is its own, so the bucket is named."""
    from specgate.plugin import stopped_test
    from specgate.report.build import _shortfall
    from specgate.verdicts.outcome import RunFacts, Shortfall

    assert stopped_test("baseline", "test_decode_speed[baseline-c1-at-2K]") == "baseline at 2K"
    assert stopped_test("baseline", "test_decode_speed[baseline-c1]") == "baseline"
    facts = RunFacts(interrupted="the run was interrupted (SIGTERM)", cut_short={"speed": "baseline at 2K"})
    said = _shortfall(Shortfall("speed", 2, 9), facts)
    assert said.startswith("speed: 2 of 9 test(s) ran; the test of baseline at 2K was running when the signal came")


def test_a_not_run_row_keeps_the_test_that_judged_it_before():
    """A gate judged NOT COMPARED on figures its server's loss cut short becomes NOT RUN; its
    test's failure is that row's, not a second failure of its own."""
    from specgate.verdicts.gates import NOT_COMPARED, NOT_RUN, Verdict
    from specgate.verdicts.not_run import with_not_run

    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    test = "test_no_regression_against_stored_baseline[eagle3-decode-c1-accept_length]"
    had = Verdict("regression:eagle3-decode:c1:accept_length", "eagle3-decode", NOT_COMPARED, "no baseline", test=test)
    assert [(v.gate, v.status, v.test) for v in with_not_run(dep, [had], {"eagle3-decode": "exited"}, set()) if v.gate == had.gate] == [
        (had.gate, NOT_RUN, test)
    ]


_COUNTING = _method("""
def planned(self, dep, unbooted):
    CALLS.append(1)
    return [PlannedGate('toy', 'toy:a', 'baseline', (), 'a', None)] if len(CALLS) == 1 else []
""")


def test_a_kind_whose_planned_gates_move_between_calls_is_refused_naming_it(register):
    """It planned 'toy:a' for pytest's parametrization and nothing for the judge: the gate was lost."""
    register("toy_gate", head="CALLS = []", table=None, example=None, methods=_COUNTING)
    with pytest.raises(GateKindError, match=re.escape("gate kind 'toy' (specgate/verdicts/toy_gate.py): planned answered differently when asked again for the same deployment (['toy:a'] then [])")):
        parse_deployment(sim_deployment_dict(), Path("d.toml"))


def test_a_kinds_planned_gates_are_asked_once_per_deployment(register):
    import sys

    register("toy_gate", head="CALLS = []", table=None, example=None, methods=_method("""
def planned(self, dep, unbooted):
    CALLS.append(1)
    return [PlannedGate('toy', 'toy:a', 'baseline', (), 'a', None)]
"""))
    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    calls = sys.modules["specgate.verdicts.toy_gate"].CALLS
    asked = len(calls)  # once kept, once asked afresh to compare
    for _ in range(3):
        assert [g.name for g in gate_kinds.planned_gates(dep, set()) if g.kind == "toy"] == ["toy:a"]
    assert len(calls) == asked == 2


@pytest.mark.parametrize(
    "hang",
    [
        "time.sleep(3600)",
        "while True:\n        try:\n            time.sleep(0.01)\n        except Exception:\n            pass",  # swallows what is raised
    ],
    ids=["sleeps", "swallows"],
)
def test_a_decide_that_hangs_is_cut_off_naming_its_kind(register, monkeypatch, hang):
    import signal
    import time

    from specgate.verdicts import own_time
    from specgate.verdicts.judge import Judge

    monkeypatch.setattr(own_time, "OWN_TIME_S", 0.3)
    register("toy_gate", head="import time", methods=_method(f"def decide(self, judge, gate):\n    {hang}"))
    dep = parse_deployment(merge(sim_deployment_dict(), _TOY_DEP), Path("d.toml"))
    [gate] = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "toy"]
    judge = Judge(dep, None, Path("/nonexistent"))  # type: ignore[arg-type]
    before = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(GateKindError, match=re.escape("gate kind 'toy' (specgate/verdicts/toy_gate.py): decide (of toy:eagle3-decode) ran past 0.3 s of its own")):
        judge.decide(gate)
    assert time.monotonic() - started < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == before
    assert judge.verdicts == []


def test_the_time_a_decide_spends_measuring_is_not_its_own(register, monkeypatch):
    from specgate.verdicts import own_time
    from specgate.verdicts.judge import Judge

    monkeypatch.setattr(own_time, "OWN_TIME_S", 0.3)
    register("toy_gate", head="import time\nfrom specgate.verdicts.own_time import measuring", methods=_method(
        "def decide(self, judge, gate):\n    with measuring():\n        time.sleep(0.6)\n"
        "    return Verdict(gate.name, gate.config, PASS, 'measured for longer than its own time')"
    ))  # fmt: skip
    dep = parse_deployment(merge(sim_deployment_dict(), _TOY_DEP), Path("d.toml"))
    [gate] = [g for g in gate_kinds.planned_gates(dep, set()) if g.kind == "toy"]
    assert Judge(dep, None, Path("/nonexistent")).decide(gate).status == "pass"  # type: ignore[arg-type]
