"""report.json is a typed document (specgate.report.model): its committed JSON Schema is the one
the model generates, and reports of older versions (results/) read, or are named as older."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from specgate.cli import main
from specgate.errors import ReportError
from specgate.report.model import Report, read_report, read_run_figures, report_schema

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_report_schema_is_the_one_the_model_generates(tmp_path):
    committed = REPO / "docs" / "report.schema.json"
    assert json.loads(committed.read_text()) == report_schema(), "run: specgate schema report -o docs/report.schema.json"
    out = tmp_path / "report.schema.json"
    assert main(["schema", "report", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == report_schema()
    jsonschema.Draft202012Validator.check_schema(report_schema())


def test_every_committed_report_reads_or_is_named_as_older():
    """Reports older than the model carry no schema_version. Those after 2026-11-29 read through the
    model (the fields that came later have defaults); the first GPU runs' use another verdict
    vocabulary ('skip', a lower-case 'pass') and are refused as older. Every one still gives the
    figures `specgate spread` compares."""
    paths = sorted(REPO.glob("results/**/report.json"))
    assert paths
    read, older = [], []
    for path in paths:
        read_run_figures(path)  # an equivalence-only run has no speed rows: it reads, with none
        try:
            report = read_report(path)
        except ReportError as exc:
            assert "schema_version" not in json.loads(path.read_text()), exc
            assert "written before schema_version 1" in str(exc) and str(path) in str(exc)
            older.append(path)
        else:
            read.append(path)
            assert isinstance(report, Report)
            if "schema_version" not in json.loads(path.read_text()):
                assert report.schema_version == 0
    assert read, "no committed report reads through the model"
    assert all("2026-11-29" in str(p) for p in older), older
