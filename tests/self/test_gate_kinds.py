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
from specgate.errors import DeploymentErrors
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


def test_a_listed_module_without_a_kind_is_named(monkeypatch):
    monkeypatch.setattr(gate_kinds, "KIND_MODULES", (*gate_kinds.KIND_MODULES, "gates"))
    gate_kinds.kinds.cache_clear()
    try:
        with pytest.raises(TypeError, match=r"specgate\.verdicts\.gates is listed in KIND_MODULES but defines no KIND"):
            gate_kinds.kinds()
    finally:
        monkeypatch.undo()
        gate_kinds.kinds.cache_clear()


def test_the_example_kind_fails_a_run_for_its_own_reason(sim_deployment, pytester):
    pytester.makepyfile(ttft_kind_loader=_LOADER)
    d = sim_deployment({"gates": {"ttft": [{"config": "eagle3-decode", "seconds": 0.0001}]}})
    result = d.run(pytester, "-p", "ttft_kind_loader", "-k", "ttft or beats")
    result.stdout.fnmatch_lines(["*FAILED*test_ttft_ceiling[[]eagle3-decode-c1[]]*"])
    report = d.report()
    [gate] = [g for g in report["gates"] if g["gate"] == "ttft:eagle3-decode-c1"]
    assert gate["status"] == "fail" and "required <= 0.0001 s" in gate["summary"]
    assert report["overall"] != "PASS"
