"""How a run ends on the terminal: its closing line, its exit code (specgate.exits), CI annotations."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specgate import interrupts
from specgate.ci_log import workflow_property, workflow_value, write_workflow_commands
from specgate.errors import ReportError
from specgate.exits import PYTEST_INTERNAL_ERROR, PYTEST_USAGE_ERROR, Exit, exit_code, exit_code_without_report
from specgate.report.visible import visible

if TYPE_CHECKING:
    from specgate.report.model import AnyReport




def interrupted_before_gate(report_dir: Path | None) -> int:
    """A signal before pytest's session began (loading the deployment, pytest's imports): the
    report says INTERRUPTED, as the exit code does."""
    interrupts.seal()
    if report_dir is not None and (report_dir / "report.json").exists():
        return close_run(report_dir, int(Exit.INTERRUPTED), 0.0, False)  # pytest had written one: it is marked
    return short_interrupted(report_dir)


def short_interrupted(report_dir: Path | None) -> int:
    from specgate.report.files import interrupted_before_gate, write_short_report

    signum = interrupts.received()
    how = interrupts.name(signum) if signum is not None else "Ctrl-C"
    why = f"the run was interrupted ({how}) before the gate started: no server was booted, nothing was judged"
    if report_dir is not None:
        try:
            write_short_report(report_dir, interrupted_before_gate(why))
        except OSError as exc:
            print(f"specgate: INTERRUPTED report NOT written to {report_dir}: {exc}", file=sys.stderr)
    where = f" — report in {report_dir / 'report.md'}" if report_dir is not None else ""
    print(f"specgate: INTERRUPTED ({why}){where}", file=sys.stderr)
    return Exit.INTERRUPTED



# GitHub shows ten annotations of a kind per step: the failed tests past these are in the report.
ANNOTATED_TESTS = 10


def github_annotations(report: AnyReport) -> list[str]:
    """The verdict first (GitHub shows ten annotations of a kind per step), then `::error::` for
    every failed gate and failed test (an equivalence failure is a test, not a gate) and
    `::warning::` for every gate that could not compare: on the pull request, without the logs."""
    from specgate.report.model import ErrorReport  # here: the model loads numpy, `specgate --help` need not
    from specgate.verdicts.gates import RunVerdict, Status

    out = []
    overall = report.overall
    reasons = [] if isinstance(report, ErrorReport) else report.overall_reasons
    gates = [] if isinstance(report, ErrorReport) else report.gates
    if overall != RunVerdict.PASS:
        kind = "warning" if overall == RunVerdict.PARTIAL else "error"
        out.append(f"::{kind} title={workflow_property(f'specgate {overall}')}::{workflow_value('; '.join(reasons)[:2000] or overall)}")
    for failed in [] if isinstance(report, ErrorReport) else report.failed_tests[:ANNOTATED_TESTS]:
        title = workflow_property(f"specgate test failed: {failed.test}")
        out.append(f"::error title={title}::{workflow_value(failed.cause or failed.test)}")
    for gate in gates:
        status = gate.status
        if status in (Status.FAIL, Status.INCONCLUSIVE, Status.NOT_COMPARED, Status.VACUOUS, Status.NOT_RUN):
            kind = "error" if status in (Status.FAIL, Status.NOT_RUN) else "warning"
            title = workflow_property(f"specgate {status.upper()}: {gate.gate}")
            out.append(f"::{kind} title={title}::{workflow_value(gate.summary)}")
    return out


def close_run(report_dir: Path, pytest_code: int, started: float, partial_allowed: bool) -> int:
    """Say the report's verdict and exit by it: a run whose report says PARTIAL or INTERRUPTED
    must not end on a line saying PASS, nor exit 0 unless partial runs were allowed."""
    from specgate.report.files import BAD_INPUT
    from specgate.report.markdown import closing_words
    from specgate.report.model import ErrorReport, Report, read_report
    from specgate.verdicts.gates import RunVerdict

    report_file = report_dir / "report.json"
    overall: str | None = None
    reasons: list[str] = []
    report: AnyReport | None = None
    if report_file.is_file() and report_file.stat().st_mtime >= started - 1:
        try:
            report = read_report(report_file)
        except ReportError as exc:  # counted as no report, and said why
            print(f"specgate: {exc}", file=sys.stderr)
        else:
            overall = report.overall
            reasons = [report.error] if isinstance(report, ErrorReport) else report.overall_reasons
    # The outcome is final from here: a signal from now on is recorded and said (`late`), and
    # changes neither the report nor the exit code; one that came before is in the report.
    interrupts.settle()
    if report is not None and interrupts.received() is not None and overall != RunVerdict.INTERRUPTED:
        report = _mark_late(report_dir, report)
        overall, reasons = report.overall, [] if isinstance(report, ErrorReport) else report.overall_reasons
    if overall is None and interrupts.received() is not None:
        return short_interrupted(report_dir)
    # The one line a CI log's tail shows: a simulator's verdict must not read as SGLang's.
    simulated = " — SIMULATOR run, not SGLang" if report is not None and report.simulator else ""
    if overall == BAD_INPUT:
        print(visible(f"specgate: {BAD_INPUT} — {reasons[0] if reasons else ''} — report in {report_dir / 'report.md'}{simulated}"))
        return Exit.BAD_INPUT
    if overall is None:
        if pytest_code == PYTEST_USAGE_ERROR:  # a usage error: the input, named where specgate refused it
            print(visible(f"specgate: {BAD_INPUT} — {_refused_input()}; no report written"))
        elif pytest_code == PYTEST_INTERNAL_ERROR:  # pytest's internal error: the run itself broke
            print(f"specgate: ERROR — no report (pytest's internal error, exit code {pytest_code})")
        else:
            print(f"specgate: no report was written (pytest exit code {pytest_code}): no gate test ran")
        return exit_code_without_report(pytest_code)
    if pytest_code == PYTEST_INTERNAL_ERROR and overall in (RunVerdict.PASS, RunVerdict.PARTIAL, RunVerdict.INCONCLUSIVE):
        # The gate's report is whole, but pytest broke after it (a plugin's own session end): the run
        # did not end as asked, so no green exit; a FAIL stays a FAIL.
        print(visible(f"specgate: ERROR — pytest failed after the gate, whose report says {overall} — report in {report_dir / 'report.md'}{simulated}"))
        return Exit.ERROR
    words, next_step = closing_words(report) if isinstance(report, Report) else (reasons[0] if reasons else "", None)
    why = f" ({words})" if words else ""
    if next_step is not None:
        # Said above the closing line, which a CI log's tail shows last: no baseline is not what failed.
        print(visible(f"specgate: {next_step}"))
    print(visible(f"specgate: {overall}{why} — report in {report_dir / 'report.md'}{simulated}"))  # reasons quote servers
    if os.environ.get("GITHUB_ACTIONS") == "true" and report is not None:
        write_workflow_commands(github_annotations(report))
    return exit_code(overall, partial_allowed, pytest_ok=pytest_code == 0)


def _refused_input() -> str:
    """What the plugin refused in this process's last run, or where pytest itself says it."""
    from specgate.plugin import refused

    return refused[-1] if refused else "pytest refused its command line (its message is above)"


def _mark_late(report_dir: Path, report: AnyReport) -> AnyReport:
    """The report on disk marked INTERRUPTED: a signal came after pytest wrote it."""
    from specgate.report.files import late_interruption, mark_interrupted, write_marked

    signum = interrupts.received()
    marked = mark_interrupted(report, late_interruption(interrupts.name(signum) if signum is not None else "a signal"))
    messages: list[str] = []
    try:
        write_marked(report_dir, marked, messages)
    except OSError as exc:
        messages.append(f"report NOT marked INTERRUPTED: {exc}")
    for message in messages:
        print(f"specgate: {message}", file=sys.stderr)
    return marked
