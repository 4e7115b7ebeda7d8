"""Documents nested thousands of levels deep (issue 33, item 8): tomllib and json.loads recurse
once per level, so such a file ended the run in a RecursionError traceback. Each reader names the
file and says it is nested too deeply; the CLI exits 2 on a deployment."""

from __future__ import annotations

import pytest

from specgate.deployment import load_deployment
from specgate.documents import NestedTooDeeply, parse_json
from specgate.errors import BaselineError, DeploymentError, ReportError
from specgate.report.model import read_report
from specgate.verdicts.baselines import load_baseline
from specgate.verdicts.calibration import load_calibration

DEPTH = 5000


def test_a_deeply_nested_deployment_is_named_not_a_recursion_traceback(tmp_path, capsys):
    from specgate import cli

    path = tmp_path / "dep.toml"
    path.write_text('name = "deep"\nx = ' + "[" * DEPTH + "]" * DEPTH + "\n")
    with pytest.raises(DeploymentError, match="nested too deeply") as err:
        load_deployment(str(path))
    assert str(path) in str(err.value)
    assert cli.main(["check", str(path)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_deeply_nested_inline_tables_in_specgate_toml_are_named(tmp_path):
    from specgate.project import find_project

    (tmp_path / "specgate.toml").write_text("x = " + "{a = " * DEPTH + "1" + "}" * DEPTH + "\n")
    with pytest.raises(DeploymentError, match="nested too deeply"):
        find_project(tmp_path)


def test_parse_json_names_deep_nesting_as_a_json_error():
    with pytest.raises(NestedTooDeeply, match="nested too deeply"):
        parse_json("[" * DEPTH + "]" * DEPTH)
    assert parse_json('{"a": [1]}') == {"a": [1]}


@pytest.mark.parametrize(
    ("reader", "error"),
    [(load_baseline, BaselineError), (load_calibration, BaselineError), (read_report, ReportError)],
    ids=["baseline", "calibration", "report.json"],
)
def test_stored_documents_nested_too_deeply_are_named_with_their_file(tmp_path, reader, error):
    path = tmp_path / "doc.json"
    path.write_text('{"a": ' + "[" * DEPTH + "]" * DEPTH + "}")
    with pytest.raises(error, match="nested too deeply") as err:
        reader(path)
    assert str(path) in str(err.value)


def test_a_deeply_nested_prompt_file_line_is_named_with_its_line(tmp_path):
    from specgate.prompts import load_prompt_file

    path = tmp_path / "p.jsonl"
    path.write_text("[" * DEPTH + "]" * DEPTH + "\n")
    with pytest.raises(ValueError, match=r"p\.jsonl:1: .*nested too deeply"):
        load_prompt_file(path, "mine")
