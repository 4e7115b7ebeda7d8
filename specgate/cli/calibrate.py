"""`specgate calibrate`: A/A rounds that measure this runner's between-boot spread, stored as a calibration record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgate import project
from specgate.cli.check import describe
from specgate.cli.guards import dirty_tree_refusal
from specgate.deployment import Deployment, bucket_label
from specgate.errors import SpecgateError
from specgate.exits import Exit
from specgate.report.folder import require_writable
from specgate.secrets import write_masked

# More boots than this is a typo (100000), not a plan: the spread's upper bound barely moves past ~30.
MAX_BOOTS = 100


def buckets_not_calibrated(dep: Deployment) -> list[str]:
    """What a calibration says of the context buckets: its rounds time the short workload alone,
    and the buckets' timing gates borrow its between-boot spread (verdicts.evidence reads one
    calibration per config, whatever the bucket)."""
    if not dep.workload.context_buckets:
        return []
    labels = ", ".join(bucket_label(t) for t in dep.workload.context_buckets)
    return [
        f"context buckets {labels} NOT measured here: the rounds time the short workload, and the buckets' "
        "timing gates use its between-boot spread (as a relative spread, the same at every length)"
    ]


def calibrate_command(args: argparse.Namespace, dep: Deployment) -> int:
    """0: recorded; 1: rounds failed or too few to split the noise; 2: bad input."""
    from specgate.calibrate.analyse import analyse, render, too_noisy
    from specgate.calibrate.numerics import render_numerics
    from specgate.calibrate.run import run_rounds
    from specgate.provenance import provenance
    from specgate.verdicts.calibration import write_calibration
    from specgate.verdicts.stored_files import check_stored_documents

    if args.boots < 2:
        print("specgate: error: --boots: expected at least 2 (one boot has no between-boot spread)", file=sys.stderr)
        return 2
    if args.boots > MAX_BOOTS:  # a unit mistake, not a calibration: each boot of a GPU model takes minutes
        print(f"specgate: error: --boots: expected at most {MAX_BOOTS}, got {args.boots}", file=sys.stderr)
        return 2
    if (refused := dirty_tree_refusal("specgate calibrate", dep)) is not None:
        print(f"specgate: error: {refused}", file=sys.stderr)
        return 2
    requests = args.requests if args.requests is not None else dep.workload.repeats
    if requests < 3:
        print("specgate: error: --requests: expected at least 3", file=sys.stderr)
        return 2
    if args.max_seconds is not None and not args.max_seconds > 0:
        print("specgate: error: --max-seconds: expected a positive number of seconds", file=sys.stderr)
        return 2
    if args.numerics < 0:
        print("specgate: error: --numerics: expected a number of prompts >= 0", file=sys.stderr)
        return 2
    try:
        report_dir = require_writable(Path(args.report_dir), "--report-dir", "calibration.md and the servers' logs")
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    root = Path(args.baselines_dir).resolve() if args.baselines_dir else project.current().baselines_dir
    try:
        # What the record joins (the runner history, other records) must be readable before any
        # boot: a broken history once failed with a traceback after the record was written.
        check_stored_documents(root, dep.name)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    print(describe(dep), flush=True)
    try:
        rounds = run_rounds(
            dep, args.boots, requests, report_dir / "logs", args.max_seconds, seed=args.seed, numerics_prompts=args.numerics
        )
    except KeyboardInterrupt:
        print("specgate: calibration NOT recorded: interrupted (every server was stopped)", file=sys.stderr)
        return Exit.INTERRUPTED
    for failure in rounds.failures:
        print(f"specgate: calibrate: {failure}", file=sys.stderr)
    complete = [r for r in rounds.rounds if all(r[c].samples for c in dep.configs)]
    configs = analyse(dep, complete)
    for name, entry in configs.items():  # a record measured with other flags must not widen this config's gates
        entry["args_digest"] = dep.configs[name].args_digest(dep.launch)
    recorded = len(complete) >= 2 and not rounds.failures and rounds.fingerprint is not None
    notes = [
        f"boots took {min(rounds.boot_seconds):.1f}–{max(rounds.boot_seconds):.1f} s; rounds "
        f"{min(rounds.round_seconds):.0f}–{max(rounds.round_seconds):.0f} s"
        if rounds.boot_seconds and rounds.round_seconds
        else "no boot completed",
        *([rounds.stopped_early] if rounds.stopped_early else []),
        *[f"tie margin not measured: {p}" for p in rounds.numerics_problems[:5]],
        *buckets_not_calibrated(dep),
    ]
    if args.numerics and dep.equivalence.enabled and dep.speculative_configs:
        if not dep.launch.coexist:
            notes.append("tie margin not measured: servers one at a time (`launch.coexist = false`) never answer side by side")
        elif args.numerics > len(dep.workload.speed_sequence()):
            notes.append(f"tie margin: {len(dep.workload.speed_sequence())} prompts per round, all the workload has")
    numerics = {c: got.summary(dep.equivalence.tie_margin) for c, got in rounds.numerics.items()}
    table = render(dep, configs, len(complete), notes) + "\n".join(render_numerics(numerics)) + ("\n" if numerics else "")
    if not recorded:
        table = (
            f"**NOT RECORDED**: {len(complete)} complete round(s) of {args.boots}; failures: "
            + ("; ".join(f.splitlines()[0] for f in rounds.failures) or "none")
            + ". The figures below are from what completed and are no calibration.\n\n"
            + table
        )
    report_dir.mkdir(parents=True, exist_ok=True)
    write_masked(report_dir / "calibration.md", table)
    print(table, end="")
    fingerprint = rounds.fingerprint
    if not recorded or fingerprint is None:
        print(
            f"specgate: calibration NOT recorded: {len(complete)} complete round(s) of {args.boots}"
            + (f", {len(rounds.failures)} failure(s)" if rounds.failures else ""),
            file=sys.stderr,
        )
        return 1
    document = {
        "provenance": provenance(launcher=dep.launch.launcher, inputs=dep.input_files),
        "boots": len(complete),
        "requests_per_boot": requests,
        "tolerance": {c: dep.gates.tolerance.decode_tps_for(c) for c in dep.configs},
        "boot_seconds": [round(s, 1) for s in rounds.boot_seconds],
        "configs": configs,
        # what a tie margin must cover (numerics.py): reported, never applied
        "tie_margin": numerics,
        # the raw per-request figures of every round, so each number above can be re-derived
        "samples": [
            {c: [round(s.decode_tps, 3) for s in r[c].samples] for c in dep.configs} for r in complete
        ],
    }
    try:
        path = write_calibration(root, dep.name, fingerprint, document)
    except SpecgateError as exc:  # rounds whose spread came out 0 are no calibration
        print(f"specgate: {exc}", file=sys.stderr)
        return 1
    print(f"specgate: calibration recorded in {path}; later gate runs on this machine widen one-boot intervals by it")
    for warning in too_noisy(configs):
        print(f"specgate: warning: a very noisy runner: {warning}", file=sys.stderr)
    from specgate.verdicts.history import record_calibration

    print(f"specgate: its rounds pooled into the runner history {record_calibration(root, dep.name, fingerprint, document)}")
    return 0
