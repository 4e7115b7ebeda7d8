"""`specgate`: run the gate, update baselines, or check a deployment file.

    specgate run [DEPLOYMENT] [options] [-- extra pytest args]
    specgate baseline update [DEPLOYMENT] [options]
    specgate check [DEPLOYMENT]
    specgate sweep [DEPLOYMENT] [--report-dir DIR] [--state FILE] [--max-seconds S]
    specgate calibrate [DEPLOYMENT] [--boots N] [--requests N] [--max-seconds S]
    specgate init [DIR] [--launch COMMAND [--draft PATH] | --url URL --reference-url URL --model M]

DEPLOYMENT is a name (the project's deployments folder first, then the built-ins: sim, the
SIMULATOR, is the default) or a path to a .toml file; specgate.toml or [tool.specgate]
(specgate.project) sets the project's defaults. The gate is pytest over the gate tests
(tests/gate, shipped in the package); this wrapper validates the deployment first, so a bad
file is reported before anything boots.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from specgate import interrupts, project
from specgate.deployment import MAX_EXAMPLES, Deployment, SshSpec, load_deployment
from specgate.errors import ReportError, SpecgateError
from specgate.exits import PYTEST_INTERNAL_ERROR, PYTEST_USAGE_ERROR, Exit, exit_code, exit_code_without_report
from specgate.report.folder import require_writable
from specgate.report.visible import visible
from specgate.secrets import mask_standard_streams, write_masked

if TYPE_CHECKING:
    from specgate.report.model import AnyReport


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "deployment", nargs="?", default=None,
        help="a deployment name or .toml path (default: the project's, else sim)",
    )
    p.add_argument(
        "--report-dir", default=None,
        help="where the report, logs and benchmark JSON go (default: the project's report_dir, specgate-report)",
    )
    p.add_argument(
        "--baselines-dir", default=None,
        help="root of stored baselines (default: the project's; baselines/ in specgate's checkout)",
    )
    p.add_argument(
        "--allow-fingerprint-mismatch", action="store_true", help="compare with a baseline from other hardware/software"
    )
    p.add_argument("--examples", type=int, default=None, help="equivalence examples per speculative config")
    p.add_argument(
        "--allow-uncompared",
        action="store_true",
        help="gates that could not compare (or could not fail) and partial runs warn instead of failing",
    )


def build_parser() -> argparse.ArgumentParser:
    from specgate import __version__

    parser = argparse.ArgumentParser(
        prog="specgate",
        description="Merge gate for speculative decoding in SGLang.",
        epilog="Anything after a bare -- goes to pytest (e.g. specgate run -- -k speed). Exit codes: 0 PASS, "
        "1 FAIL, 2 bad input, 3 INCONCLUSIVE (no verdict yet: a gate cannot tell, or a sweep stopped for time; "
        "measure more or calibrate), 4 PARTIAL (not every gate ran or compared; 0 with "
        "--allow-uncompared), 5 INTERRUPTED, 6 infrastructure error.",
    )
    parser.add_argument("--version", action="version", version=f"specgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _common(sub.add_parser("run", help="run the gate and print the report"))
    baseline = sub.add_parser("baseline", help="manage stored baselines")
    bsub = baseline.add_subparsers(dest="baseline_command", required=True)
    _common(bsub.add_parser("update", help="run the gate and store its figures as the baseline for this machine"))
    check = sub.add_parser("check", help="validate a deployment file and print what it would run")
    check.add_argument("deployment", nargs="?", default=None)
    init = sub.add_parser(
        "init",
        help="write specgate.toml and a starting deployment into a repository (default: the SIMULATOR's)",
    )
    init.add_argument("folder", nargs="?", default=".", help="the repository's folder (default: here)")
    init.add_argument("--launch", default=None, help="an SGLang launch command: its flags become the plain baseline")
    init.add_argument("--draft", default=None, help="with --launch: the EAGLE-3 draft model, where the command has none")
    init.add_argument("--url", default=None, help="a running speculative server (with --reference-url and --model)")
    init.add_argument("--reference-url", default=None, help="the running plain server it is compared with")
    init.add_argument("--model", default=None, help="with --url: the model both servers serve")
    init.add_argument("--name", default=None, help="the deployment's name (default: sim, or mine)")
    init.add_argument("--force", action="store_true", help="overwrite specgate.toml and the deployment file")
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
    calibrate = sub.add_parser(
        "calibrate", help="A/A runs on this host: between-boot noise, false alarms, detectable regressions"
    )
    calibrate.add_argument("deployment", nargs="?", default=None)
    calibrate.add_argument("--boots", type=int, default=3, help="A/A rounds, each booting every config afresh (>= 2)")
    calibrate.add_argument(
        "--requests", type=int, default=None, help="pinned requests per config and round (default: workload.repeats)"
    )
    calibrate.add_argument("--report-dir", default="specgate-calibrate", help="where calibration.md and logs go")
    calibrate.add_argument("--baselines-dir", default=None, help="root of stored baselines (default: the repo's)")
    calibrate.add_argument("--max-seconds", type=float, default=None, help="start no round that would end past this")
    calibrate.add_argument("--seed", type=int, default=None, help="fix the interleaving order (self-tests)")
    calibrate.add_argument(
        "--numerics",
        type=int,
        default=12,
        help="prompts per round asked of each speculative config and its reference with top logprobs, to measure "
        "what a tie margin must cover (0: none)",
    )
    schema = sub.add_parser(
        "schema",
        help="print (or write) a JSON Schema: the deployment file's (generated from the parser's reads) or "
        "report.json's (from the report model)",
    )
    schema.add_argument(
        "document", nargs="?", choices=("deployment", "report"), default="deployment", help="which (default: deployment)"
    )
    schema.add_argument("-o", "--output", default=None, help="write it to this file ('-': standard output, the default)")
    spread = sub.add_parser("spread", help="run-to-run spread of several report.json files of one deployment")
    spread.add_argument("reports", nargs="+", help="report.json files (at least two)")
    rejudge = sub.add_parser(
        "rejudge",
        help="judge the failing, excused and near-tie equivalence answers a report.json kept again, with "
        "this version's check and no server",
        description="Exit 0: none fails now and every failing answer of the run was kept; 1: one fails now; "
        "2: failing answers of the run were not kept (they cannot be cleared from here), or bad input.",
    )
    rejudge.add_argument("report", help="a report.json (schema_version 5 or later keeps the answers)")
    rejudge.add_argument(
        "deployment",
        nargs="?",
        default=None,
        help="judge under this deployment file's tie margin and tolerances (default: the report's own file)",
    )
    return parser


def _rejudge(args: argparse.Namespace, extra: list[str]) -> int:
    """Every answer the report kept, judged again: 0 when none fails now and every failure of the
    run was kept, 1 when one fails now, 2 when failures of the run were not kept (they cannot be
    cleared from here) or the input is bad."""
    from specgate.equivalence.evidence import covered, rejudge
    from specgate.equivalence.evidence import describe as described
    from specgate.report.model import ErrorReport, read_report

    try:
        if extra:
            raise SpecgateError(f"rejudge takes no pytest arguments, got {' '.join(extra)}")
        report = read_report(Path(args.report))
        if isinstance(report, ErrorReport):
            raise SpecgateError(f"{args.report}: an {report.overall} report ({report.error}) holds no judged answers")
        if report.schema_version < 5:
            raise SpecgateError(
                f"{args.report}: schema_version {report.schema_version} keeps no answers (5 and later do): "
                "nothing to judge again"
            )
        try:
            dep = load_deployment(args.deployment or report.deployment_file)
        except SpecgateError as exc:
            if args.deployment:
                raise
            raise SpecgateError(
                f"{exc} (the deployment_file {args.report} names; give the deployment file as the second argument)"
            ) from None
        if dep.name != report.deployment:
            raise SpecgateError(
                f"{dep.path}: deployment {dep.name!r}, but {args.report} is a run of {report.deployment!r}"
            )
        missing = [e.config for e in report.equivalence if e.kept and e.config not in dep.configs]
        if missing:
            raise SpecgateError(f"{dep.path}: has no config {', '.join(missing)} of {args.report}")
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"judged again under {dep.path}: tie margin {dep.equivalence.tie_margin:g} nats "
        f"(the run's {report.tie_margin:g})"
    )
    failing = judged = unkept = 0
    try:
        for row in report.equivalence:
            kept_failing = covered(row.kept, "failing")
            unkept += max(0, row.decisive_failures - kept_failing)
            print(
                f"{row.config}: kept {kept_failing} of {row.decisive_failures} failing, "
                f"{covered(row.kept, 'tolerated')} of {len(row.tolerated)} excused and "
                f"{covered(row.kept, 'near-tie-flip')} of {row.near_tie_flips} near-tie answers"
            )
            cfg = dep.configs.get(row.config)
            for pair in row.kept:
                assert cfg is not None  # checked above
                result = rejudge(pair, dep.equivalence.tie_margin, cfg.tolerate, cfg.max_tokens_per_step)
                judged += 1
                failing += not result.now.ok
                copies = f" (x{pair.copies})" if pair.copies > 1 else ""
                now = described(result.now.kind, result.now.shape)
                first = result.now.message.splitlines()[0] if result.now.message else ""
                print(f"  `{result.label}`{copies}: then {result.then}; now {now}" + (f": {first}" if first else ""))
    except KeyboardInterrupt:
        print("specgate: rejudge interrupted", file=sys.stderr)
        return 130
    print(f"{judged} kept answer(s) judged again: {failing} fail now")
    if failing:
        return 1
    if unkept:
        print(f"{unkept} failing answer(s) of the run were not kept: rejudge cannot clear them")
        return 2
    return 0


def launch_warnings(dep: Deployment) -> list[str]:
    """What would keep the launcher from starting a server on this host: a program that is not
    found, a launch command whose Python (`{python}`, `python3`, `/venv/bin/python`, `env ...
    python`, `bash -c "... python -m sglang..."`) cannot import the module it runs (e.g. a CPU
    machine checking a GPU deployment), an address that does not answer, a key that is not set.
    Warnings, not errors: the file may be meant for another host (specgate.preflight)."""
    from specgate.preflight import boot_problems, credential_problems

    return credential_problems(dep) + [p.text for p in boot_problems(dep)]


def describe_ssh(ssh: SshSpec) -> list[str]:
    if ssh.nodes > 1:
        hosts = f"{ssh.nodes} nodes (SGLang multi-node), rank 0 on {ssh.hosts[0]}, then {', '.join(ssh.hosts[1:])}"
    else:
        hosts = f"on {ssh.hosts[0]}"
    login = ", ".join(
        part
        for part in (
            f"as {ssh.user}" if ssh.user else "",
            f"port {ssh.port}" if ssh.port else "",
            f"key {ssh.identity_file}" if ssh.identity_file else "",
        )
        if part
    )
    reach = (
        "reached through ssh -L (the server listens on the remote loopback)"
        if ssh.reach == "forward"
        else "reached directly at host:port (the server listens on every interface)"
    )
    out = [f"  ssh: {hosts}{' (' + login + ')' if login else ''}; {reach}"]
    out.append(f"    remote python {ssh.python!r}, directory {ssh.directory or '(the login directory)'}")
    if ssh.nodes > 1:
        out.append(
            f"    each node gets --nnodes {ssh.nodes} --node-rank I --dist-init-addr "
            f"{ssh.dist_init_host or ssh.hosts[0]}:PORT (PORT picked per boot)"
        )
    if ssh.forward_env:
        out.append(f"    passed from this environment: {', '.join(ssh.forward_env)}")
    return out


def describe_stored_reference(dep: Deployment) -> list[str]:
    if not dep.launch.reference_stored:
        return []
    out = [
        f"  reference {dep.reference!r} NOT BOOTED by a gate run (launch.reference_from = \"stored\"): its figures and "
        "golden answers come from this machine's stored baseline (same fingerprint, read from a booted speculative "
        "config; same launch digest); `specgate baseline update` boots it and stores them",
        "    not seen: how the reference drifted since the baseline was recorded; a baseline from another machine or "
        "SGLang, or of other reference flags, fails the run closed",
    ]
    if dep.gates.between_boot is None:
        out.append(
            "    timing gates against it need this machine's `specgate calibrate` record or [gates.between_boot]: "
            "without one they are NOT COMPARED"
        )
    return out


def describe_affinity(dep: Deployment) -> list[str]:
    """Where `launch.cpu_affinity = "split"` pins each server on this host, or why it cannot."""
    from specgate.server import affinity

    if dep.launch.cpu_affinity != "split":
        return []
    cpus, servers = affinity.available_cpus(), affinity.side_by_side(dep)
    if not servers:
        return [f"  CPU affinity split: servers take turns, each pinned to all {len(cpus)} CPUs this host allows"]
    slices = affinity.split(servers, cpus)
    if not slices:
        return [
            f"  WARNING: launch.cpu_affinity = \"split\": {len(servers)} servers side by side but {len(cpus)} CPU(s) "
            "here: none is pinned"
        ]
    return ["  CPU affinity split: " + ", ".join(f"{n} on {affinity.cpu_list(c)}" for n, c in slices.items())]


def describe(dep: Deployment) -> str:
    lines = [f"deployment {dep.name!r} ({dep.path})" + ("  [SIMULATOR]" if dep.simulator else "")]
    if dep.description:
        lines.append(f"  {dep.description}")
    lines.append(
        f"  launcher {dep.launch.launcher}, servers {'side by side' if dep.launch.coexist else 'one at a time'}"
    )
    if dep.launch.ssh is not None:
        lines.extend(describe_ssh(dep.launch.ssh))
    lines.extend(describe_affinity(dep))
    lines.extend(describe_stored_reference(dep))
    for name, cfg in dep.configs.items():
        if name in dep.references:
            mark = " (reference)"
        else:
            mark = f" (compared with {dep.reference_of(name)})" if dep.reference_of(name) != dep.reference else ""
        lines.append(f"  config {name}{mark}: {' '.join(cfg.args) or '(no extra args)'}")
        if cfg.command is not None:
            lines.append(f"    launched with its own command: {' '.join(cfg.command)}")
        if cfg.tolerate:
            lines.append(f"    declared known differences (counted, not failed): {', '.join(cfg.tolerate)}")
    for gate in dep.gates.beats:
        as_stored = gate.against == "stored" or (dep.launch.reference_stored and gate.over == dep.reference)
        stored = " as stored in the baseline" if as_stored else ""
        lines.append(f"  gate: {gate.config} must reach {gate.ratio:g}x {gate.over}{stored} (concurrency {gate.concurrency})")
    for floor in dep.gates.accept_length:
        lines.append(
            f"  gate: {floor.config} must accept >= {floor.at_least:g} tokens per verify step (concurrency {floor.concurrency})"
        )
    tol = dep.gates.tolerance
    lines.append(
        f"  no-regression tolerance: {tol.decode_tps_fraction:.0%}"
        + "".join(f", {c} {t:.0%}" for c, t in tol.decode_tps_by_config.items())
        + f"; accept length {tol.accept_length:.0%}"
    )
    lines.append(
        f"  {dep.launch.boots} boot(s) per config; gates that cannot compare or cannot fail: "
        + ("fail their tests: the run ends PARTIAL, exit 4" if dep.gates.uncompared == "fail" else "warn only ([gates] uncompared = \"warn\")")
    )
    if dep.gates.between_boot is not None:
        b = dep.gates.between_boot
        lines.append(f"  declared between-boot spread: decode {b.decode_tps_log_sd:.1%}, speedup {b.speedup_log_sd:.1%} ({b.source})")
    from specgate.verdicts.judge import SIMULATED_TAU_ENV, simulated_tau
    from specgate.verdicts.vacuity import vacuities

    for found in vacuities(dep):
        # The file, the field, the value and why: a gate that cannot fail is said before anything boots.
        lines.append(f"  WARNING: {dep.path}: {found.field} = {found.value:g} makes its gate VACUOUS: {found.why}")

    for name in dep.speculative_configs:
        if simulated_tau(dep, name) is not None:
            lines.append(
                f"  WARNING: {name}'s accept-length gate is VACUOUS: {SIMULATED_TAU_ENV} fixes its accept length"
            )
    if dep.launch.launcher == "url":
        for name in dep.speculative_configs:
            if not dep.configs[name].speculative:
                # Its args are only a declaration of what runs there: none means plain decoding.
                lines.append(
                    f"  WARNING: {dep.path}: configs.{name}.args declare no --speculative-algorithm, so {name} has "
                    "NO accept-length gate (nothing declares that it speculates) and its server's speculative settings "
                    "are not checked: write the flags its server runs with (`specgate init --url` reads them from "
                    "its /get_server_info)"
                )
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
    from specgate.resources import gate_tests_dir

    report_dir = Path(args.report_dir).resolve()
    report_dir.mkdir(parents=True, exist_ok=True)  # pytest-benchmark opens its JSON file while parsing args
    out = [
        str(gate_tests_dir()),
        f"--specgate-deployment={dep.path}",
        f"--rootdir={project.current().root}",
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
    if args.allow_uncompared:
        out.append("--specgate-allow-uncompared")
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


def _schema(args: argparse.Namespace) -> int:
    import json

    from specgate.atomic import write_json_atomic

    if args.document == "report":
        from specgate.report.model import report_schema

        schema = report_schema()
    else:
        from specgate.schema import deployment_schema

        schema = deployment_schema()
    if args.output in (None, "-"):
        try:
            if sys.stdout is None:
                raise OSError("standard output is closed")
            sys.stdout.write(json.dumps(schema, indent=2) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # A reader that stopped early (`| head`) wanted no more: not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except OSError as exc:
            print(f"specgate: error: cannot write the schema to standard output: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        write_json_atomic(Path(args.output), schema)  # whole or not at all: CI may read it meanwhile
    except OSError as exc:
        print(f"specgate: error: --output {args.output}: cannot write the schema: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    mask_standard_streams()  # whatever the CLI and the pytest run in it print: secrets.py
    ours, extra = split_pytest_args(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(ours)
    if args.command == "spread":
        from specgate.report.spread import load_runs, render_spread

        try:
            print(render_spread(*load_runs([Path(r) for r in args.reports])), end="")
        except SpecgateError as exc:
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "rejudge":
        return _rejudge(args, extra)
    if args.command == "init":
        return _init(args)
    if args.command == "schema":
        return _schema(args)
    if args.command == "check":
        return _check(args)
    # First: a stop signal from here on ends the command cleanly (specgate.interrupts), never as
    # a raw traceback or a silent 143 that leaves the previous run's report standing.
    # Called as this process's command (argv from its command line: the console script, python -m),
    # the handler stays to the exit: a signal after the closing line cannot kill the process
    # beside a report that says otherwise (specgate.interrupts); in-process callers get theirs back.
    with interrupts.installed(to_exit=argv is None):
        code = _stoppable(args, extra)
    interrupts.test_point()
    if late := interrupts.late():
        print(
            f"specgate: {interrupts.name(late[0])} came after the run's outcome was final: recorded, and the exit "
            f"code stays the report's ({code})",
            file=sys.stderr,
        )
    return code


def _stoppable(args: argparse.Namespace, extra: list[str]) -> int:
    """The commands that boot servers, run under the stop signals' handler."""
    if args.command in ("run", "baseline"):
        return _run(args, extra)
    from specgate.report.folder import check_logs_folder

    try:
        dep = load_deployment(args.deployment)
        check_logs_folder(Path(args.report_dir).resolve(), "--report-dir")  # its servers' logs go there
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if _missing_credentials(dep):
        return 2
    if args.command == "sweep":
        return _sweep(args, dep)  # its servers are the grid's points, named by it: not dep's configs
    problems = dep.sim_fault_problems(dict(os.environ))
    if problems:
        print(f"specgate: error: {dep.path}: " + "\nspecgate: error: ".join(problems), file=sys.stderr)
        return 2
    return _calibrate(args, dep)


def _check(args: argparse.Namespace) -> int:
    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    problems = dep.sim_fault_problems(dict(os.environ))  # what the run would refuse at its start
    if problems:
        print(f"specgate: error: {dep.path}: " + "\nspecgate: error: ".join(problems), file=sys.stderr)
        return 2
    print(describe(dep))
    for warning in launch_warnings(dep):
        print(f"  WARNING: {warning}")
    from specgate.verdicts.planned import sensitivity_lines
    from specgate.verdicts.stored_files import check_stored_documents

    try:  # what a run would refuse at its start (specgate.plugin), refused here too
        stored = check_stored_documents(project.current().baselines_dir, dep.name)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(sensitivity_lines(dep, project.current().baselines_dir)))
    print(f"  stored documents under {project.current().baselines_dir / dep.name}: {stored} read, all usable")
    return 0


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    """`specgate run` and `specgate baseline update`: the report folder is taken first (refused
    where another run holds it or it holds files specgate did not write; the previous run's
    report removed), before anything else can fail or be interrupted."""
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
        for note in folder.notes:
            print(f"specgate: {note}", file=sys.stderr)
        return _gate(args, extra, folder.path)
    except KeyboardInterrupt:
        return _interrupted_before_gate(folder.path if folder else None)
    finally:
        if folder is not None:
            folder.release()


def _interrupted_before_gate(report_dir: Path | None) -> int:
    """A signal before pytest's session began (loading the deployment, pytest's imports): the
    report says INTERRUPTED, as the exit code does."""
    interrupts.seal()
    if report_dir is not None and (report_dir / "report.json").exists():
        return _closing(report_dir, int(EXIT_INTERRUPTED), 0.0, False)  # pytest had written one: it is marked
    return _short_interrupted(report_dir)


def _short_interrupted(report_dir: Path | None) -> int:
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
    return EXIT_INTERRUPTED


def _gate(args: argparse.Namespace, extra: list[str], report_dir: Path) -> int:
    update = args.command == "baseline"
    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    if _missing_credentials(dep):
        return 2
    if update and (refused := _dirty_tree_refusal("specgate baseline update", dep)) is not None:
        print(f"specgate: error: {refused}", file=sys.stderr)
        return 2
    if args.examples is not None and not 1 <= args.examples <= MAX_EXAMPLES:  # the deployment's own bound
        print(
            f"specgate: error: --examples: expected an integer from 1 to {MAX_EXAMPLES}, got {args.examples}",
            file=sys.stderr,
        )
        return 2
    if update and (refused := _unwritable_baselines(args, dep)) is not None:
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
    code = int(pytest.main(pytest_args))  # a usage error comes back as pytest's exit 4 (bad input)
    interrupts.seal()  # the run is over: a signal now is recorded, and the report marked by it
    _drop_empty_benchmark_file(report_dir)
    return _closing(report_dir, code, started, args.allow_uncompared or update)


def _missing_credentials(dep: Deployment) -> bool:
    """Said (as errors) before anything boots: a server without its key, or a url without its
    password, would only fail every test after the boots."""
    from specgate.preflight import credential_problems

    problems = credential_problems(dep)
    for problem in problems:
        print(f"specgate: error: {problem}", file=sys.stderr)
    return bool(problems)


def _unwritable_baselines(args: argparse.Namespace, dep: Deployment) -> str | None:
    """Checked before anything boots: an update whose figures cannot be stored is not worth its run."""
    from specgate.atomic import ensure_writable

    root = Path(args.baselines_dir).resolve() if args.baselines_dir else project.current().baselines_dir
    source = "--baselines-dir" if args.baselines_dir else "the project's baselines folder"
    try:
        ensure_writable(root / dep.name)
    except OSError as exc:
        return f"{source} ({root}): the baseline update could not store its figures there: {exc}"
    return None


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


# The CLI's exit codes (README, "Exit codes"): the report's verdict, not pytest's alone, by the one
# table in specgate.exits.
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_PARTIAL, EXIT_INTERRUPTED, EXIT_ERROR = (
    Exit.PASS,
    Exit.FAIL,
    Exit.BAD_INPUT,
    Exit.PARTIAL,
    Exit.INTERRUPTED,
    Exit.ERROR,
)
EXIT_INCONCLUSIVE = Exit.INCONCLUSIVE


def _workflow_text(text: str) -> str:
    """A value for a GitHub workflow command: %, CR and LF escaped as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _workflow_title(text: str) -> str:
    """A property value of a workflow command: also ':' and ',' escaped."""
    return _workflow_text(text).replace(":", "%3A").replace(",", "%2C")


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
        out.append(f"::{kind} title={_workflow_title(f'specgate {overall}')}::{_workflow_text('; '.join(reasons)[:2000] or overall)}")
    for failed in [] if isinstance(report, ErrorReport) else report.failed_tests[:ANNOTATED_TESTS]:
        title = _workflow_title(f"specgate test failed: {failed.test}")
        out.append(f"::error title={title}::{_workflow_text(failed.cause or failed.test)}")
    for gate in gates:
        status = gate.status
        if status in (Status.FAIL, Status.INCONCLUSIVE, Status.NOT_COMPARED, Status.VACUOUS, Status.NOT_RUN):
            kind = "error" if status in (Status.FAIL, Status.NOT_RUN) else "warning"
            title = _workflow_title(f"specgate {status.upper()}: {gate.gate}")
            out.append(f"::{kind} title={title}::{_workflow_text(gate.summary)}")
    return out


def _closing(report_dir: Path, pytest_code: int, started: float, partial_allowed: bool) -> int:
    """Say the report's verdict and exit by it: a run whose report says PARTIAL or INTERRUPTED
    must not end on a line saying PASS, nor exit 0 unless partial runs were allowed."""
    from specgate.report.model import ErrorReport, read_report
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
            reasons = [] if isinstance(report, ErrorReport) else report.overall_reasons
    if report is not None and interrupts.received() is not None and overall != RunVerdict.INTERRUPTED:
        report = _mark_late(report_dir, report)
        overall, reasons = report.overall, [] if isinstance(report, ErrorReport) else report.overall_reasons
    if overall is None and interrupts.received() is not None:
        return _short_interrupted(report_dir)
    if overall is None:
        if pytest_code in (PYTEST_INTERNAL_ERROR, PYTEST_USAGE_ERROR):  # the input or the setup
            print(f"specgate: ERROR — no report (pytest exit code {pytest_code})")
        else:
            print(f"specgate: no report was written (pytest exit code {pytest_code}): no gate test ran")
        return exit_code_without_report(pytest_code, partial_allowed)
    why = f" ({reasons[0]}{'; …' if len(reasons) > 1 else ''})" if reasons else ""
    print(visible(f"specgate: {overall}{why} — report in {report_dir / 'report.md'}"))  # reasons quote servers
    if report is not None and interrupts.received() is not None and overall != RunVerdict.INTERRUPTED:
        report = _mark_late(report_dir, report)  # came while the line above was said
        overall = report.overall
        print(f"specgate: {overall} (a signal after the line above) — report in {report_dir / 'report.md'}")
    interrupts.settle()  # the report is final from here: a later signal is recorded and said, nothing else
    if os.environ.get("GITHUB_ACTIONS") == "true" and report is not None:
        for line in github_annotations(report):
            print(line)
    return exit_code(overall, partial_allowed, pytest_ok=pytest_code == 0)


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


def _report_dir_source(args: argparse.Namespace) -> str:
    settings = project.current().settings_file
    return "--report-dir" if args.report_dir_given or not settings else f"report_dir in {settings}"


def _init(args: argparse.Namespace) -> int:
    from specgate.starter import write_project

    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"specgate: error: init: {folder} is not a folder", file=sys.stderr)
        return 2
    try:
        written = write_project(
            folder, launch=args.launch, url=args.url, reference_url=args.reference_url, draft=args.draft,
            model=args.model, name=args.name, force=args.force,
        )
    except SpecgateError as exc:
        print(f"specgate: error: init: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"specgate: error: init: cannot write into {folder}: {exc}", file=sys.stderr)
        return 2
    for path in written.files:
        print(f"wrote {path}")
    for note in written.notes:
        print(f"  note: {note}")
    print("next:")
    for i, step in enumerate(written.next_steps, start=1):
        print(f"  {i}. {step}")
    return 0


def _dirty_tree_refusal(what: str, dep: Deployment) -> str | None:
    """Stored figures name the commit that made them; a dirty tree has no such commit, nor has a
    clean one whose deployment file (or a file it names) is untracked or modified. Under
    SPECGATE_ALLOW_DIRTY the record says "+dirty" and the paths, and the terminal says so."""
    import os

    from specgate.provenance import dirty_inputs, git_commit

    commit = git_commit(dep.input_files)
    dirty = dirty_inputs(dep.input_files)
    paths = f"; not in it as they are: {', '.join(dirty)}" if dirty else ""
    if not (commit.endswith("+dirty") or commit == "unknown"):
        return None
    if os.environ.get("SPECGATE_ALLOW_DIRTY"):
        if dirty:
            print(f"specgate: warning: {what} records commit {commit}{paths} (SPECGATE_ALLOW_DIRTY)", file=sys.stderr)
        return None
    return (
        f"{what} refused: the tree is {'not a git checkout' if commit == 'unknown' else 'dirty'} ({commit}{paths}), so "
        "no commit would name what produced the figures; commit first (git add the deployment and the files it "
        "names), or set SPECGATE_COMMIT on a copy without .git, or SPECGATE_ALLOW_DIRTY=1 for a throwaway record"
    )


def _calibrate(args: argparse.Namespace, dep: Deployment) -> int:
    """0: recorded; 1: rounds failed or too few to split the noise; 2: bad input."""
    from specgate.calibrate.analyse import analyse, render
    from specgate.calibrate.numerics import render_numerics
    from specgate.calibrate.run import run_rounds
    from specgate.provenance import provenance
    from specgate.verdicts.calibration import write_calibration

    if args.boots < 2:
        print("specgate: error: --boots: expected at least 2 (one boot has no between-boot spread)", file=sys.stderr)
        return 2
    if (refused := _dirty_tree_refusal("specgate calibrate", dep)) is not None:
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
    print(describe(dep), flush=True)
    try:
        rounds = run_rounds(
            dep, args.boots, requests, report_dir / "logs", args.max_seconds, seed=args.seed, numerics_prompts=args.numerics
        )
    except KeyboardInterrupt:
        print("specgate: calibration NOT recorded: interrupted (every server was stopped)", file=sys.stderr)
        return EXIT_INTERRUPTED
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
    root = Path(args.baselines_dir).resolve() if args.baselines_dir else project.current().baselines_dir
    try:
        path = write_calibration(root, dep.name, fingerprint, document)
    except SpecgateError as exc:  # rounds whose spread came out 0 are no calibration
        print(f"specgate: {exc}", file=sys.stderr)
        return 1
    print(f"specgate: calibration recorded in {path}; later gate runs on this machine widen one-boot intervals by it")
    from specgate.verdicts.history import record_calibration

    print(f"specgate: its rounds pooled into the runner history {record_calibration(root, dep.name, fingerprint, document)}")
    return 0


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
    table = render_sweep(outcome.plan, outcome.state, outcome.complete)
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
        table = render_sweep(plan, SweepState.open(state_path, dep.name, plan.digest), False)
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "sweep.md").write_text(table)
        print(table, end="")
    except (SpecgateError, OSError) as exc:
        print(f"specgate: sweep.md NOT written: {exc}", file=sys.stderr)
    print(
        f"specgate: sweep INTERRUPTED ({how}): every server was stopped; the points measured so far are kept in "
        f"{state_path}; run the same command again to resume from it",
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
