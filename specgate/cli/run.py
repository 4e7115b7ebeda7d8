"""`specgate run` and `specgate baseline update`: the gate as a pytest run over the shipped gate tests."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from specgate import interrupts, options, project
from specgate.cli.check import describe
from specgate.cli.closing import PYTEST_INTERNAL_ERROR, close_run, interrupted_before_gate
from specgate.cli.guards import dirty_tree_refusal, missing_credentials, unwritable_baselines
from specgate.deployment import MAX_EXAMPLES, Deployment, load_deployment
from specgate.errors import SpecgateError


def pytest_args_for(args: argparse.Namespace, dep: Deployment, update: bool, extra: list[str]) -> list[str]:
    from specgate.resources import gate_tests_dir

    report_dir = Path(args.report_dir).resolve()
    report_dir.mkdir(parents=True, exist_ok=True)  # pytest-benchmark opens its JSON file while parsing args
    out = [
        str(gate_tests_dir()),
        f"--specgate-deployment={dep.path}",
        f"--rootdir={project.current().root}",
        f"--benchmark-json={report_dir / 'benchmark.json'}",
        "-rfEs",
        "--tb=short",
        "-q",
    ]
    resolved = {"report-dir": str(report_dir)}
    if args.baselines_dir:
        resolved["baselines-dir"] = str(Path(args.baselines_dir).resolve())
    out += options.pytest_args(args, resolved)
    if update:
        out.append(options.UPDATE_BASELINES.pytest_flag)
    return out + _imported_plugins_not_rewritten() + extra


def _imported_plugins_not_rewritten() -> list[str]:
    """pytest marks every pytest plugin's package for assertion rewriting as it starts, and warns
    of each one already imported. This process read and checked the deployment before starting
    pytest in it, importing specgate, Hypothesis and (through httpx) anyio: by construction they
    cannot be rewritten, and none of them is test code whose asserts pytest must explain. Those
    modules' warnings, named one by one, are not printed; any other (a user's conftest importing
    a module before registering it for rewriting) still is."""
    import importlib.metadata

    tops: set[str] = set()
    for dist in importlib.metadata.distributions():
        if any(ep.group == "pytest11" for ep in dist.entry_points):
            for file in dist.files or []:
                parts = file.parts
                if len(parts) == 1 and parts[0].endswith(".py"):
                    tops.add(parts[0].removesuffix(".py"))
                elif len(parts) == 2 and parts[1] == "__init__.py":
                    tops.add(parts[0])
    out = []
    for name in sorted(name for name in tops if name in sys.modules):
        # pytest reads a -W message literally (escaped), matched from its start
        out += ["-W", f"ignore:Module already imported so cannot be rewritten; {name}:pytest.PytestAssertRewriteWarning"]
    return out


def run_command(args: argparse.Namespace, extra: list[str]) -> int:
    """`specgate run` and `specgate baseline update`: the report folder is taken first (refused
    where another run holds it or it holds files specgate did not write; the previous run's
    report removed), before anything else can fail or be interrupted. A signal that came before
    (held since the command's first line: specgate.interrupts) is raised once the folder is taken,
    so the report there says INTERRUPTED, never the previous run's verdict."""
    from specgate.report.folder import ReportFolder, claim

    folder: ReportFolder | None = None
    try:
        try:
            args.report_dir_given = args.report_dir is not None
            args.report_dir = args.report_dir or str(project.current().report_dir)
            folder = claim(Path(args.report_dir), _report_dir_source(args))
        except SpecgateError as exc:
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
        finally:
            interrupts.release()  # a refused folder is not this run's to mark: its signal ends it without one
        for note in folder.notes:
            print(f"specgate: {note}", file=sys.stderr)
        return _gate(args, extra, folder.path)
    except KeyboardInterrupt:
        return interrupted_before_gate(folder.path if folder else None)
    finally:
        if folder is not None:
            folder.release()


def _gate(args: argparse.Namespace, extra: list[str], report_dir: Path) -> int:
    update = args.command == "baseline"
    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if missing_credentials(dep):
        return 2
    if update and (refused := dirty_tree_refusal("specgate baseline update", dep)) is not None:
        print(f"specgate: error: {refused}", file=sys.stderr)
        return 2
    if args.examples is not None and not 1 <= args.examples <= MAX_EXAMPLES:  # the deployment's own bound
        print(
            f"specgate: error: --examples: expected an integer from 1 to {MAX_EXAMPLES}, got {args.examples}",
            file=sys.stderr,
        )
        return 2
    if update and (refused := unwritable_baselines(args, dep)) is not None:
        print(f"specgate: error: {refused}", file=sys.stderr)
        return 2
    print(describe(dep), flush=True)
    import pytest

    try:
        pytest_args = pytest_args_for(args, dep, update, extra)
    except OSError as exc:
        print(
            f"specgate: error: {_report_dir_source(args)} ({args.report_dir}): cannot be used as the report folder: {exc}",
            file=sys.stderr,
        )
        return 2
    started = time.time()
    try:
        code = int(pytest.main(pytest_args))  # a usage error comes back as pytest's exit 4 (bad input)
    except Exception as exc:  # a plugin's session end (junitxml to a path it cannot write) broke pytest
        print(f"specgate: pytest failed after the gate: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = PYTEST_INTERNAL_ERROR
    interrupts.seal()  # the run is over: a signal now is recorded, and the report marked by it
    _drop_empty_benchmark_file(report_dir)
    return close_run(report_dir, code, started, args.allow_uncompared or update)


def _drop_empty_benchmark_file(report_dir: Path) -> None:
    """pytest-benchmark opens --benchmark-json while parsing arguments and writes it only where a
    benchmark ran: a run without speed tests (a selection, every boot failed) left an empty
    benchmark.json, which a CI step parsing it fails on. None is better than a broken one; the
    report says which phases ran."""
    bench = report_dir / "benchmark.json"
    try:
        if bench.stat().st_size == 0:
            bench.unlink()
    except OSError:
        pass


def _report_dir_source(args: argparse.Namespace) -> str:
    settings = project.current().settings_file
    return "--report-dir" if args.report_dir_given or not settings else f"report_dir in {settings}"
