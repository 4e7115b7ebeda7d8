"""The CLI's exit codes, in one table: a run's verdict (the report's `overall`, decided once by
specgate.verdicts.outcome) to its code, and a run that wrote no report by pytest's own code.
README and docs/ci.md ("Exit codes") list them; tests/self/test_docs.py holds both lists to this.

Here in the foundation, apart from the verdicts: `specgate --help` and the other commands that
exit by a code import it without the statistics (numpy) the verdicts need.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum


class Exit(IntEnum):
    """The CLI's exit codes (README and docs/ci.md, "Exit codes"): the run's verdict, not pytest's alone."""

    PASS = 0
    FAIL = 1  # a gate or a test failed; a baseline update stored nothing
    BAD_INPUT = 2  # a deployment, option, stored document or report folder was refused, naming it
    # A gate that cannot tell (no regression shown, no pass either) is not a FAIL: a runner's
    # script can tell "this got worse" (1) from "calibrate or measure more" (3).
    INCONCLUSIVE = 3
    PARTIAL = 4  # 0 where partial runs are allowed (--allow-uncompared, a baseline update)
    INTERRUPTED = 5
    ERROR = 6  # the run itself broke: no report could be built, pytest failed internally, a url server never answered


# The one table from a run's verdict (verdicts.gates.RunVerdict, by its word: an ErrorReport's
# "ERROR" too) to its exit code; a word it lacks is an ERROR.
EXIT_CODES: Mapping[str, Exit] = {
    "PASS": Exit.PASS,
    "FAIL": Exit.FAIL,
    "INCONCLUSIVE": Exit.INCONCLUSIVE,
    "PARTIAL": Exit.PARTIAL,
    "INTERRUPTED": Exit.INTERRUPTED,
    "ERROR": Exit.ERROR,
    "BAD INPUT": Exit.BAD_INPUT,  # a short report of refused input (report.files.BAD_INPUT)
}
# pytest's own exit codes where no report was written: its usage error is the input's, its
# internal error the run's; a run that collected no gate test ran nothing (PARTIAL).
PYTEST_USAGE_ERROR, PYTEST_INTERNAL_ERROR, PYTEST_NO_TESTS = 4, 3, 5


def exit_code(verdict: str, partial_allowed: bool, pytest_ok: bool = True) -> int:
    """The exit code of a run whose report says `verdict`: a PARTIAL run exits 0 only where
    partial runs were allowed and pytest itself succeeded."""
    if verdict == "PARTIAL" and partial_allowed and pytest_ok:
        return Exit.PASS
    return EXIT_CODES.get(verdict, Exit.ERROR)


def exit_code_without_report(pytest_code: int) -> int:
    """The exit code of a run that wrote no report: pytest's usage error is bad input, its
    internal error an ERROR; no gate test ran at all (`--co`, a `-k` that matches nothing) is
    PARTIAL, even where partial runs were allowed: --allow-uncompared waives gates that could not
    compare, not a run that measured nothing, which must never merge as a 0."""
    if pytest_code == PYTEST_USAGE_ERROR:
        return Exit.BAD_INPUT
    if pytest_code == PYTEST_INTERNAL_ERROR:
        return Exit.ERROR
    if pytest_code in (0, PYTEST_NO_TESTS):
        return Exit.PARTIAL
    return Exit.ERROR
