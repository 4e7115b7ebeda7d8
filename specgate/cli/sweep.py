"""`specgate sweep`: boot and rank every combination of a deployment's [sweep] table, resumable."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from specgate import interrupts
from specgate.deployment import Deployment
from specgate.errors import SpecgateError
from specgate.exits import Exit
from specgate.report.folder import require_writable
from specgate.secrets import write_masked


def sweep_command(args: argparse.Namespace, dep: Deployment) -> int:
    """0: every point attempted; 3: stopped for time, resume with the same command; 2: bad input."""
    from specgate.sweep.run import run_sweep
    from specgate.sweep.table import render_sweep

    if args.max_seconds is not None and not (0 < args.max_seconds < float("inf")):  # NaN too
        print("specgate: error: --max-seconds: expected a positive number of seconds", file=sys.stderr)
        return 2
    if args.gpus is not None and dep.sweep is not None:
        gpus = tuple(g.strip() for g in args.gpus.split(","))
        # CUDA_VISIBLE_DEVICES takes indices or GPU UUIDs; an empty or other entry hides every GPU.
        uuid = ("GPU-", "MIG-")
        named = [g for g in gpus if g.isdigit() or (g.startswith(uuid) and len(g) > 4)]
        if not gpus or len(named) != len(gpus) or len(set(gpus)) != len(gpus):  # a GPU twice is no second GPU
            print(f"specgate: error: --gpus: expected distinct GPU indices or UUIDs, comma-separated (e.g. 0,1), got {args.gpus!r}", file=sys.stderr)
            return 2
        dep = dataclasses.replace(dep, sweep=dataclasses.replace(dep.sweep, gpus=gpus))
    try:
        report_dir = require_writable(Path(args.report_dir), "--report-dir", "sweep.md and the servers' logs")
        if args.state:
            require_writable(Path(args.state).resolve().parent, "--state", "the sweep's state file")
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    state = Path(args.state).resolve() if args.state else report_dir / "sweep.json"
    try:
        outcome = run_sweep(dep, state, report_dir / "logs", args.max_seconds)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _sweep_interrupted(dep, state, report_dir)
    if interrupts.received() is not None:  # came after the last point, while the state was saved
        return _sweep_interrupted(dep, state, report_dir)
    table = render_sweep(outcome.plan, outcome.state, outcome.complete, dep.simulator)
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        write_masked(report_dir / "sweep.md", table)
    except OSError as exc:
        print(f"specgate: error: --report-dir {args.report_dir}: cannot write sweep.md: {exc}", file=sys.stderr)
        return 2
    print(table, end="")
    if not outcome.complete:
        print(f"specgate: sweep stopped early; run the same command again to resume from {state}")
        return 3
    print(f"specgate: sweep complete — table in {report_dir / 'sweep.md'}, state in {state}")
    return 0


def _sweep_interrupted(dep: Deployment, state_path: Path, report_dir: Path) -> int:
    """A stopped sweep keeps every point measured so far (the state is saved after each), and
    says how to go on from them."""
    from specgate.sweep.plan import plan_sweep
    from specgate.sweep.state import SweepState
    from specgate.sweep.table import render_sweep

    interrupts.seal()
    signum = interrupts.received()
    how = interrupts.name(signum) if signum is not None else "Ctrl-C"
    try:
        plan = plan_sweep(dep)
        table = render_sweep(plan, SweepState.open(state_path, dep.name, plan.digest), False, dep.simulator)
        report_dir.mkdir(parents=True, exist_ok=True)
        write_masked(report_dir / "sweep.md", table)
        print(table, end="")
    except (SpecgateError, OSError) as exc:
        print(f"specgate: sweep.md NOT written: {exc}", file=sys.stderr)
    print(
        f"specgate: sweep INTERRUPTED ({how}): every server was stopped; the points measured so far are kept in "
        f"{state_path}; run the same command again to resume from it",
        file=sys.stderr,
    )
    return Exit.INTERRUPTED
