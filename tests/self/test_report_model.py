"""report.json is a typed document (specgate.report.model): what a run writes reads back through
the model value for value, fits the committed JSON Schema, and holds the fields it held before the
model plus `schema_version`; reports of older versions (results/) read, or are named as older; a
bad field is named with its file, by the model and by the readers of report.json."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import jsonschema
import pytest

from specgate.cli import main
from specgate.errors import ReportError
from specgate.report.model import (
    SCHEMA_VERSION,
    ErrorReport,
    Report,
    migrate_v0,
    read_report,
    read_run_figures,
    report_schema,
)
from specgate.verdicts.gates import Status

REPO = Path(__file__).resolve().parents[2]

# report.json's fields before the model, in their order: the model adds schema_version and
# nothing else (consumers of report.json read these names).
FIELDS_BEFORE_THE_MODEL = [
    "deployment", "deployment_file", "description", "simulator", "overall", "overall_reasons", "tests", "plan",
    "calibration", "fingerprint", "reference_from_stored", "provenance", "tie_margin", "speed", "unmeasured",
    "gates", "equivalence", "equivalence_not_checked", "baseline_problems", "baseline_margins", "boots",
    "phase_seconds", "fidelity", "diagnosis", "server_settings", "interrupted", "drafters",
]  # fmt: skip
FIELDS_SINCE = ["ignore_eos", "sampling", "reaped", "failed_tests", "standing", "context_prompts", "unbucketed_gates"]  # 3, 8, 9, 11, 16, 18, 19


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory) -> Path:
    """report.json of a simulator run with every section filled: speed, equivalence, gates,
    fidelity, diagnosis, drafters (no stored baseline: the regression gates say NOT COMPARED)."""
    from helpers import SimDeployment

    folder = tmp_path_factory.mktemp("report-model")
    d = SimDeployment(folder, {})
    orphan = _left_by_a_killed_run(d.tag)  # so that the report's `reaped` is filled too
    try:
        result = d.run(None)
        orphan.wait(timeout=10)  # reaped at the run's start
    finally:
        if orphan.poll() is None:
            orphan.kill()
    (folder / "output.txt").write_text("\n".join(result.outlines + result.errlines))
    assert not d.leftovers()
    path = d.report_dir / "report.json"
    assert path.is_file(), "\n".join(result.outlines[-40:])
    return path


def _left_by_a_killed_run(tag: str):  # noqa: ANN202 - a Popen
    """A server of a run whose specgate is gone, as the run's registry records it (pid 1 was
    created long after the epoch: the record's owner is not alive)."""
    import os
    import subprocess

    from specgate.server.orphans import RUN_ID_ENV, record_dirs

    record = {"run_id": ORPHAN_RUN, "owner_pid": 1, "owner_created": 1.0, "copies": [], "command": "specgate run killed.toml"}
    record_dirs()[0].mkdir(parents=True, exist_ok=True)
    (record_dirs()[0] / f"{ORPHAN_RUN}.json").write_text(json.dumps(record))
    env = {**os.environ, RUN_ID_ENV: ORPHAN_RUN, "SPECGATE_CONFIG": "eagle3-decode", "SPECGATE_TEST_TAG": tag}
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


# A run id of its own per process: under xdist each worker plants its orphan, and a run reaps every
# process marked with a dead run's id, the other worker's too, were the ids the same.
ORPHAN_RUN = uuid.uuid4().hex


def test_a_run_writes_the_fields_it_wrote_before_plus_schema_version(sim_report):
    data = json.loads(sim_report.read_text())
    assert list(data) == ["schema_version", *FIELDS_BEFORE_THE_MODEL, *FIELDS_SINCE]
    assert data["schema_version"] == SCHEMA_VERSION
    for section in ("speed", "gates", "equivalence", "boots", "fidelity", "diagnosis"):
        assert data[section], f"the run left {section} empty: the test would check nothing of it"


def test_a_run_reads_back_value_for_value_and_fits_the_committed_schema(sim_report):
    text = sim_report.read_text()
    report = read_report(sim_report)
    assert isinstance(report, Report) and report.schema_version == SCHEMA_VERSION
    # Every value survives the model: what the renderers read is what the file holds.
    assert json.dumps(report.document(), indent=2) + "\n" == text
    jsonschema.Draft202012Validator(report_schema()).validate(json.loads(text))


def test_the_committed_report_schema_is_the_one_the_model_generates(tmp_path):
    committed = REPO / "docs" / "report.schema.json"
    assert json.loads(committed.read_text()) == report_schema(), "run: specgate schema report -o docs/report.schema.json"
    out = tmp_path / "report.schema.json"
    assert main(["schema", "report", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == report_schema()
    jsonschema.Draft202012Validator.check_schema(report_schema())


def test_every_committed_report_reads_through_the_model_the_first_ones_migrated():
    """Reports older than the model carry no schema_version and read as version 0 (the fields
    that came later have defaults). The first GPU runs' (2026-11-29) used the verdict words of
    before the gate statuses were split: migrate_v0 reads `skip` as `not compared` and a
    lower-case row verdict in upper case. Every one also gives the figures `specgate spread` compares."""
    paths = sorted(REPO.glob("results/**/report.json"))
    assert paths
    migrated = 0
    for path in paths:
        read_run_figures(path)  # an equivalence-only run has no speed rows: it reads, with none
        raw = json.loads(path.read_text())
        report = read_report(path)
        assert isinstance(report, Report)
        if "schema_version" not in raw:
            assert report.schema_version == 0
        old = [g for g in raw.get("gates", []) if g.get("status") == "skip"]
        if old:
            migrated += 1
            statuses = [g.status for g in report.gates]
            assert statuses.count(Status.NOT_COMPARED) >= len(old)
    assert migrated, "no committed report used the old words: the migration is untested"


def test_the_migration_reads_the_old_words_and_leaves_the_rest_alone():
    old = {"gates": [{"status": "skip"}, {"status": "fail"}, "odd"], "speed": [{"verdict": "pass"}, {"verdict": "—"}]}
    assert migrate_v0(old) == {
        "gates": [{"status": "not compared"}, {"status": "fail"}, "odd"],
        "speed": [{"verdict": "PASS"}, {"verdict": "—"}],
    }
    assert old["gates"][0] == {"status": "skip"}  # a copy: the file's own data is untouched


def _written(sim_report: Path, tmp_path: Path, change) -> Path:  # noqa: ANN001
    data = json.loads(sim_report.read_text())
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


def test_a_server_left_by_a_killed_run_is_named_in_the_output_and_the_report(sim_report):
    """Reaping happens inside pytest's capture: the notice must reach the terminal and the report."""
    said = f"of run {ORPHAN_RUN} `specgate run killed.toml`"
    output = (sim_report.parent.parent / "output.txt").read_text()
    assert "stopped a server left by a killed earlier run: pid" in output and said in output, output[-3000:]
    assert "config 'eagle3-decode': sleep 300" in output
    (reaped,) = read_report(sim_report).reaped
    assert said in reaped and "config 'eagle3-decode'" in reaped
    assert said in (sim_report.parent / "report.md").read_text()


def test_a_bad_field_is_named_with_its_file(sim_report, tmp_path):
    def drop_boots(d):  # noqa: ANN001
        del d["speed"][0]["boots"]

    with pytest.raises(ReportError, match=r"report\.json: .*field 'speed\[0\]': lacks 'boots'"):
        read_report(_written(sim_report, tmp_path, drop_boots))
    with pytest.raises(ReportError, match=r"field 'gates\[1\]\.status'.*got 'skip'"):
        read_report(_written(sim_report, tmp_path, lambda d: d["gates"][1].update(status="skip")))
    with pytest.raises(ReportError, match=r"field 'tests\.passed': expected a whole number, got '3'"):
        read_report(_written(sim_report, tmp_path, lambda d: d["tests"].update(passed="3")))
    newer = SCHEMA_VERSION + 1
    with pytest.raises(ReportError, match=rf"field 'schema_version': expected at most {SCHEMA_VERSION}, got {newer}"):
        read_report(_written(sim_report, tmp_path, lambda d: d.update(schema_version=newer)))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ReportError, match=r"broken\.json: not a specgate report\.json \(JSONDecodeError"):
        read_report(broken)


def test_the_error_report_reads_back(tmp_path):
    from specgate.plugin import _write_error_report

    _write_error_report(tmp_path, ValueError("boom"), [])
    report = read_report(tmp_path / "report.json")
    assert isinstance(report, ErrorReport) and report.error == "ValueError: boom"
    assert report.schema_version == SCHEMA_VERSION
    jsonschema.Draft202012Validator(report_schema()).validate(json.loads((tmp_path / "report.json").read_text()))


def test_readers_of_report_json_name_the_file_and_the_field(sim_report, tmp_path, capsys):
    """`specgate spread` and the CLI's closing verdict read report.json through the model."""
    import time

    from specgate.cli.closing import close_run
    from specgate.report.spread import load_runs

    def no_decode_tps(d):  # noqa: ANN001
        del d["speed"][0]["decode_tps"]

    bad = _written(sim_report, tmp_path, no_decode_tps)
    with pytest.raises(ReportError, match=r"report\.json: not a specgate report\.json: field 'speed\[0\]\.decode_tps'"):
        load_runs([sim_report, bad])
    # The run's own report, unreadable: said, and counted as no report (pytest's failure decides).
    assert close_run(tmp_path, 1, time.time() - 5, False) == 6
    assert "field 'speed[0].decode_tps'" in capsys.readouterr().err
    # A readable one decides the exit code and the line.
    (tmp_path / "report.json").write_text(sim_report.read_text())
    overall = json.loads(sim_report.read_text())["overall"]  # PARTIAL without baselines, unless a gate failed
    assert close_run(tmp_path, 1, time.time() - 5, False) == {"PASS": 0, "FAIL": 1, "PARTIAL": 4}[overall]
    assert f"specgate: {overall}" in capsys.readouterr().out


def test_a_wrong_verdict_is_named_in_the_projects_words(sim_report, tmp_path):
    path = _written(sim_report, tmp_path, lambda d: d["speed"][0].update(verdict="maybe"))
    with pytest.raises(ReportError, match=r"field 'speed\[0\]\.verdict': expected 'PASS', 'FAIL', 'INCONCLUSIVE', 'PARTIAL', 'INTERRUPTED' or 'ERROR', got 'maybe'$"):
        read_report(path)


@pytest.mark.parametrize("version", [True, 1.0, -1, "1", None])
def test_a_schema_version_that_is_no_version_is_named_so(sim_report, tmp_path, version):
    path = _written(sim_report, tmp_path, lambda d: d.update(schema_version=version))
    with pytest.raises(ReportError, match=r"field 'schema_version': .*not a version this or an older specgate wrote"):
        read_report(path)


def test_the_stored_forms_name_the_same_fields_as_the_runs_objects():
    """Fingerprint and Settings mirror dataclasses of the run (strict reads need a model of their
    own): a field added to one and not the other would be lost or refused."""
    from dataclasses import fields

    from specgate.diagnosis.settings import EffectiveSettings
    from specgate.report.model import Fingerprint, Settings
    from specgate.verdicts.fingerprint import Fingerprint as RunFingerprint

    assert [f.name for f in fields(RunFingerprint)] == list(Fingerprint.model_fields)
    assert [f.name for f in fields(EffectiveSettings)] == list(Settings.model_fields)


def test_a_misspelt_key_is_named_beside_the_missing_one(sim_report, tmp_path):
    path = _written(sim_report, tmp_path, lambda d: d.update(overal=d.pop("overall")))
    with pytest.raises(ReportError, match=r"field 'overall': is required but missing \(did you mean it for the key 'overal'"):
        read_report(path)


# Fields that arrived after schema_version 1: (the version that brought them, whether an
# equivalence row or the report holds them, the field, what a report before it reads).
LATER_FIELDS = [
    (2, "row", "refused", []),
    (3, "report", "ignore_eos", True),
    (4, "row", "divergences", []),
    (5, "row", "kept", []),
]


@pytest.mark.parametrize(("version", "where", "field", "default"), LATER_FIELDS)
def test_a_field_of_a_later_version_is_required_only_from_that_version_on(
    sim_report, tmp_path, version, where, field, default
):
    """A report of the version before lacks the field and reads its default; one of that version
    must hold it."""

    def dropped(as_version):
        def edit(d):
            d["schema_version"] = as_version
            for part in d["equivalence"] if where == "row" else [d]:
                part.pop(field, None)

        return edit

    (tmp_path / "older").mkdir()
    (tmp_path / "now").mkdir()
    older = read_report(_written(sim_report, tmp_path / "older", dropped(version - 1)))
    parts = older.equivalence if where == "row" else [older]
    assert parts and all(getattr(part, field) == default for part in parts)
    with pytest.raises(ReportError, match=rf"lacks '{field}', which every report of schema_version {version} holds"):
        read_report(_written(sim_report, tmp_path / "now", dropped(version)))


def test_declared_known_differences_collapse_and_never_undercount():
    """Each tolerated answer's line names its case; repeats are one line with a count, more than
    ten lines say how many are left to report.json, and a list at report.json's cap says 'at least'."""
    from pathlib import Path

    from specgate.report.markdown import render_markdown
    from specgate.report.model import TOLERATED_KEPT, read_report

    path = Path(__file__).parents[2] / "results/2026-12-02-h200-refine/3-gate-update/smollm2-eagle3-h200-update/report/report.json"
    report = read_report(path)
    row = report.equivalence[0]
    row.tolerated = ["`translation/translation-03`: runs past '.'"] * 3
    text = render_markdown(report)
    assert f"- {row.config}: `translation/translation-03`: runs past '.' (in 3 requests)" in text
    row.tolerated = [f"`case-{i}`: differs" for i in range(12)]
    text = render_markdown(report)
    assert "- … and 4 more in report.json" in text and "At least" not in text  # 12 here, 2 other configs' lines
    row.tolerated = ["`case`: differs"] * TOLERATED_KEPT
    assert f"At least {TOLERATED_KEPT + 6} answer(s) differ" in render_markdown(report)


def test_a_fidelity_row_before_version_6_reads_as_unchecked_and_one_of_6_must_say():
    from pydantic import ValidationError

    from specgate.report.model import FidelityRow

    row = {
        "config": "c", "suite_decode_tps": 700.0, "log_decode_tps": None, "log_lines": 0, "log_lines_low": 0,
        "log_gap": None, "log_note": "", "meta_decode_tps": 690.0, "meta_gap": 0.01, "client_overhead_ms": 4.0,
        "e2e_gap": -0.01,
    }  # fmt: skip
    old = FidelityRow.model_validate(row, context={"complete": True, "version": 5})
    assert old.state == "unchecked" and old.witness is None  # no bound was applied to it: never "agrees"
    with pytest.raises(ValidationError, match="lacks 'state', 'witness', 'check_note'"):
        FidelityRow.model_validate(row, context={"complete": True, "version": 6})


def test_server_text_is_escaped_visibly_in_report_md_and_kept_raw_in_report_json(sim_report, tmp_path):
    """A NUL, a right-to-left override, other control characters and ANSI escapes in what a server
    said reached report.md (and the terminal, which prints it) as they came (issue 33, item 12)."""
    from specgate.report.files import write_report

    hostile = "answer\x00 with \u202eevil\u202c, \x1b[2J cleared, \x85 and \x07"
    report = read_report(sim_report)
    report = report.model_copy(update={"baseline_problems": [hostile], "interrupted": None})
    report.server_settings["baseline"]["speculative_algorithm"] = hostile
    write_report(tmp_path, report, chart=False, messages=[])
    md = (tmp_path / "report.md").read_text()
    assert "answer\\x00 with \\u202eevil\\u202c, \\x1b[2J cleared, \\x85 and \\x07" in md
    assert not any(c in md for c in "\x00\u202e\u202c\x1b\x85\x07")
    assert json.loads((tmp_path / "report.json").read_text())["baseline_problems"] == [hostile]
