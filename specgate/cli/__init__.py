"""`specgate`: the command line, one module per command (this package's modules); `main` dispatches.

    specgate run [DEPLOYMENT] [options] [-- extra pytest args]
    specgate baseline update [DEPLOYMENT] [options]
    specgate check [DEPLOYMENT]
    specgate sweep [DEPLOYMENT] [--report-dir DIR] [--state FILE] [--max-seconds S]
    specgate calibrate [DEPLOYMENT] [--boots N] [--requests N] [--max-seconds S]
    specgate init [DIR] [--launch COMMAND [--draft PATH] | --url URL --reference-url URL --model M]

DEPLOYMENT is a name (the project's deployments folder first, then the built-ins: sim, the
SIMULATOR, is the default) or a path to a .toml file; specgate.toml or [tool.specgate]
(specgate.project) sets the project's defaults. The gate is pytest over the gate tests
(tests/gate, shipped in the package); the CLI validates the deployment first, so a bad file is
reported before anything boots.
"""

from __future__ import annotations

import sys
from typing import Any

# Only this, before the handler is installed: importing the commands takes a quarter second, in
# which a Ctrl-C was a raw traceback beside the previous run's PASS report (specgate.interrupts).
from specgate import interrupts


def main(argv: list[str] | None = None) -> int:
    """`specgate ARGV` (the process's own command line where None). Its first act: a stop signal from
    here on ends the command cleanly (specgate.interrupts), never as a raw traceback or a silent
    143 that leaves the previous run's report standing. Called as this process's command, the
    handler stays to the exit: a signal after the closing line cannot kill the process beside a
    report that says otherwise; in-process callers get theirs back."""
    with interrupts.installed(to_exit=argv is None, held=True):
        interrupts.start_test_point()
        from specgate.cli.dispatch import command

        code = command(list(sys.argv[1:] if argv is None else argv))
    interrupts.test_point()
    if argv is None:
        from specgate.cli.pipes import flush_standard_streams

        flush_standard_streams()  # a closed pipe found at the exit's own flush would make it 120
        interrupts.ignore_to_exit()  # from the last look below to the exit: nothing can change the code
    if late := interrupts.late():
        print(
            f"specgate: {interrupts.name(late[0])} came after the run's outcome was final: recorded, and the exit "
            f"code stays the report's ({code})",
            file=sys.stderr,
        )
    return code


def __getattr__(name: str) -> Any:
    """`specgate.cli.build_parser` (the docs' reference and the lab's CLI read it), imported when asked."""
    if name == "build_parser":
        from specgate.cli.parser import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
