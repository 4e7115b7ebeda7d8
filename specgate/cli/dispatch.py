"""The commands, dispatched once the stop signals' handler is installed (`specgate.cli.main`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from specgate import envvars, interrupts
from specgate.cli.calibrate import calibrate_command
from specgate.cli.check import check_command
from specgate.cli.compare import compare_command
from specgate.cli.guards import missing_credentials
from specgate.cli.history import history_command
from specgate.cli.init import init_command
from specgate.cli.parser import build_parser, split_pytest_args
from specgate.cli.pipes import safe_standard_streams
from specgate.cli.rejudge import rejudge_command
from specgate.cli.run import run_command
from specgate.cli.schema import schema_command
from specgate.cli.sweep import sweep_command
from specgate.deployment import load_deployment
from specgate.errors import SpecgateError
from specgate.exits import Exit
from specgate.secrets import mask_standard_streams


def command(argv: list[str]) -> int:
    """The command `argv` names, run under the stop signals' handler, which holds a signal until
    `run` has taken its report folder (every other command takes none: released at once)."""
    safe_standard_streams()  # `specgate run | head`: the exit code stays the verdict's (cli/pipes.py)
    mask_standard_streams()  # whatever the CLI and the pytest run in it print: secrets.py
    ours, extra = split_pytest_args(argv)
    args = build_parser().parse_args(ours)
    for warning in envvars.misspelt(os.environ):
        print(f"specgate: warning: {warning}", file=sys.stderr)
    try:
        if args.command in ("run", "baseline"):
            return run_command(args, extra)  # releases the held signals once its report folder is taken
        interrupts.release()
        if args.command in ("spread", "rejudge", "init", "schema", "check", "history", "compare"):
            return _quick(args, extra)
        return _stoppable(args, extra)
    except KeyboardInterrupt:
        # What ends here took no report folder (a run's own is marked by run_command): init asks a
        # url's /get_server_info before it writes a file; calibrate and sweep stop their servers.
        signum = interrupts.received()
        how = "Ctrl-C" if signum in (None, signal.SIGINT) else interrupts.name(signum)
        print(f"specgate: {args.command} interrupted ({how})", file=sys.stderr)
        return Exit.INTERRUPTED


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
    if args.command == "history":
        return history_command(args)
    if args.command == "compare":
        return compare_command(args)
    return check_command(args)


def _stoppable(args: argparse.Namespace, extra: list[str]) -> int:
    """calibrate and sweep: they boot servers."""
    from specgate.report.folder import check_logs_folder

    try:
        dep = load_deployment(args.deployment)
        check_logs_folder(Path(args.report_dir).resolve(), "--report-dir")  # its servers' logs go there
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if missing_credentials(dep):
        return 2
    from specgate.flag_check import check_flags

    # A launch SGLang would refuse costs a boot to find out: refused before anything boots (a
    # sweep's points vary the speculative settings of its base, whose launch is this one).
    refused = [f.text for f in check_flags(dep).refusals]
    if refused:
        print("specgate: error: " + "\nspecgate: error: ".join(refused), file=sys.stderr)
        return 2
    if args.command == "sweep":
        return sweep_command(args, dep)  # its servers are the grid's points, named by it: not dep's configs
    problems = dep.sim_fault_problems(dict(os.environ))
    if problems:
        print("specgate: error: " + "\nspecgate: error: ".join(problems), file=sys.stderr)
        return 2
    return calibrate_command(args, dep)
