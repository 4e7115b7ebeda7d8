"""Writing the report's files (report.json, report.md, report.png), and marking a written report
INTERRUPTED when a signal came after it was written: the files on disk always say what the run's
exit code says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from specgate.atomic import write_json_atomic
from specgate.report.model import SCHEMA_VERSION, AnyReport, ErrorReport, Report
from specgate.report.visible import visible
from specgate.secrets import write_masked
from specgate.verdicts.gates import LEADS, NEXT_STEP, RunVerdict

BAD_INPUT: Final = "BAD INPUT"  # a short report's verdict where the run refused its input (exit 2)


def write_report(out: Path, report: Report, chart: bool, messages: list[str]) -> None:
    """report.json (whole or not at all: CI reads it), report.md, and the chart where asked."""
    from specgate.report.chart import render_chart
    from specgate.report.context_chart import CONTEXT_CHART, render_context_chart
    from specgate.report.markdown import render_markdown

    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report)
    write_json_atomic(out / "report.json", report.document())
    write_masked(out / "report.md", markdown)
    try:
        if chart:
            render_chart(report, out / "report.png")
            render_context_chart(report, out / CONTEXT_CHART)
    except Exception as exc:  # a chart must never hide a verdict
        messages.append(f"chart not drawn: {type(exc).__name__}: {exc}")


def short_markdown(report: ErrorReport, detail: str = "") -> str:
    if report.overall == "ERROR":
        head = "The run's report could not be built, so no gate is known to pass."
    elif report.overall == BAD_INPUT:
        head = "The run refused its input before any server booted: no gate ran. Fix what the cause names and run again."
    else:  # before its gate session began, or while an ERROR report was written
        head = "The run was interrupted: no gate is known to pass."
    logs = "" if report.overall == BAD_INPUT else "Server logs: `logs/`.\n"  # none booted
    title = f"specgate: {report.overall}" + (" (SIMULATOR run)" if report.simulator else "")
    return visible(f"# {title}\n\n{head}\n\nCause: `{report.error}`\n\n{detail}{logs}")


def write_short_report(out: Path, report: ErrorReport, detail: str = "") -> None:
    """The short form (model.ErrorReport): report.md first, report.json last (CI reads the json).
    A chart of an earlier write of this run would show a verdict it no longer has: it goes."""
    out.mkdir(parents=True, exist_ok=True)
    write_masked(out / "report.md", short_markdown(report, detail))
    write_json_atomic(out / "report.json", report.document())
    (out / "report.png").unlink(missing_ok=True)
    (out / "context.png").unlink(missing_ok=True)


def refused_input(why: str, simulator: bool | None = None) -> ErrorReport:
    """The short report of a run whose input (a deployment, a stored document, an option) was
    refused: the same verdict as its exit code (2) and its closing line. `simulator`: the
    deployment's flag, None where it was never read."""
    return ErrorReport(schema_version=SCHEMA_VERSION, overall=BAD_INPUT, error=why, simulator=simulator)


def interrupted_before_gate(why: str, simulator: bool | None = None) -> ErrorReport:
    return ErrorReport(schema_version=SCHEMA_VERSION, overall="INTERRUPTED", error=why, simulator=simulator)


def mark_interrupted(report: AnyReport, why: str) -> AnyReport:
    """`report` as a run interrupted after it was written: INTERRUPTED, `why` first among the
    reasons (after what a baseline update stored, or did not: that still stands)."""
    if isinstance(report, ErrorReport):
        return report.model_copy(update={"overall": "INTERRUPTED", "error": f"{why}; before that: {report.error}"})
    reasons = list(report.overall_reasons)
    # A next step (no stored baseline) is no answer to the interruption: that goes first.
    at = 1 if reasons and reasons[0].startswith(LEADS) and not reasons[0].startswith(NEXT_STEP) else 0
    reasons.insert(at, why)
    return report.model_copy(update={"overall": RunVerdict.INTERRUPTED, "overall_reasons": reasons, "interrupted": why})


def write_marked(out: Path, report: AnyReport, messages: list[str]) -> None:
    if isinstance(report, ErrorReport):
        write_short_report(out, report)
    else:
        write_report(out, report, chart=True, messages=messages)


def late_interruption(signal_name: str) -> str:
    return (
        f"the run was interrupted ({signal_name}) after every test had run, while its report was written or "
        "the run was ending: no verdict, though every gate below was judged"
    )
