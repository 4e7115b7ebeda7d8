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

import argparse
import os
import sys
from pathlib import Path

from specgate import envvars, interrupts
from specgate.cli.calibrate import calibrate_command
from specgate.cli.check import check_command
from specgate.cli.guards import missing_credentials
from specgate.cli.init import init_command
from specgate.cli.parser import build_parser, split_pytest_args
from specgate.cli.rejudge import rejudge_command
from specgate.cli.run import run_command
from specgate.cli.schema import schema_command
from specgate.cli.sweep import sweep_command
from specgate.deployment import load_deployment
from specgate.errors import SpecgateError
from specgate.exits import Exit
from specgate.secrets import mask_standard_streams


def main(argv: list[str] | None = None) -> int:
    mask_standard_streams()  # whatever the CLI and the pytest run in it print: secrets.py
    ours, extra = split_pytest_args(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(ours)
    for warning in envvars.misspelt(os.environ):
        print(f"specgate: warning: {warning}", file=sys.stderr)
    if args.command in ("spread", "rejudge", "init", "schema", "check"):
        try:
            return _quick(args, extra)
        except KeyboardInterrupt:
            # These start no server (init asks a url's /get_server_info before it writes a file):
            # a Ctrl-C ends them in one line, never a traceback.
            print(f"specgate: {args.command} interrupted (Ctrl-C)", file=sys.stderr)
            return Exit.INTERRUPTED
    # First: a stop signal from here on ends the command cleanly (specgate.interrupts), never as
    # a raw traceback or a silent 143 that leaves the previous run's report standing.
    # Called as this process's command (argv from its command line: the console script, python -m),
    # the handler stays to the exit: a signal after the closing line cannot kill the process
    # beside a report that says otherwise (specgate.interrupts); in-process callers get theirs back.
    with interrupts.installed(to_exit=argv is None):
        code = _stoppable(args, extra)
    interrupts.test_point()
    if argv is None:
        interrupts.ignore_to_exit()  # from the last look below to the exit: nothing can change the code
    if late := interrupts.late():
        print(
            f"specgate: {interrupts.name(late[0])} came after the run's outcome was final: recorded, and the exit "
            f"code stays the report's ({code})",
            file=sys.stderr,
        )
    return code


def _quick(args: argparse.Namespace, extra: list[str]) -> int:
    """The commands that boot nothing."""
    if args.command == "spread":
        from specgate.report.spread import load_runs, render_spread

        try:
            print(render_spread(*load_runs([Path(r) for r in args.reports])), end="")
        except SpecgateError as exc:
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "rejudge":
        return rejudge_command(args, extra)
    if args.command == "init":
        return init_command(args)
    if args.command == "schema":
        return schema_command(args)
    return check_command(args)


def _stoppable(args: argparse.Namespace, extra: list[str]) -> int:
    """The commands that boot servers, run under the stop signals' handler."""
    if args.command in ("run", "baseline"):
        return run_command(args, extra)
    from specgate.report.folder import check_logs_folder

    try:
        dep = load_deployment(args.deployment)
        check_logs_folder(Path(args.report_dir).resolve(), "--report-dir")  # its servers' logs go there
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if missing_credentials(dep):
        return 2
    if args.command == "sweep":
        return sweep_command(args, dep)  # its servers are the grid's points, named by it: not dep's configs
    problems = dep.sim_fault_problems(dict(os.environ))
    from specgate.flag_check import check_flags

    problems += [f.text for f in check_flags(dep).refusals]
    if problems:
        print("specgate: error: " + "\nspecgate: error: ".join(problems), file=sys.stderr)
        return 2
    return calibrate_command(args, dep)
