"""The command line's parser: every command and option, and the split at `--` from pytest's own arguments."""

from __future__ import annotations

import argparse

from specgate import options


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
    )  # fmt: skip
    options.add_to_cli(p)


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
    check = sub.add_parser(
        "check",
        help="validate a deployment file and print what it would run",
        description=(
            "Validate a deployment and say what a run of it would do, before anything boots: every config's "
            "launch flags asked of the SGLang its launch Python imports (or of the declared or newest release's "
            "parser table), the gates and their sensitivity, the stored documents it would read, and what keeps "
            "its servers from starting on this host. Exit 0, or 2 where a run would refuse it."
        ),
    )
    check.add_argument("deployment", nargs="?", default=None)
    init = sub.add_parser(
        "init",
        help="write specgate.toml and a starting deployment into a repository (default: the SIMULATOR's)",
    )
    init.add_argument("folder", nargs="?", default=".", help="the repository's folder (default: here)")
    init.add_argument("--launch", default=None, help="an SGLang launch command: its flags become the plain reference")
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
    history = sub.add_parser(
        "history",
        help="the deployment's results history: steps and slow creeps per config and figure, a trend page and chart",
        description="Read every completed gate run's figures of the deployment (BASELINES/<deployment>/results/), "
        "find the steps (the first commit after each, its size and interval) and slow creeps, and write "
        "history.html (static, self-contained) and history.png. Exit 1 on a new step down or a creep down "
        "past the deployment's [history] threshold (docs/history.md), 2 on bad input.",
    )
    history.add_argument("deployment", nargs="?", default=None)
    history.add_argument("--baselines-dir", default=None, help="root of stored baselines (default: the project's)")
    history.add_argument("-o", "--output", default="specgate-history", help="where history.html and history.png go")
    compare = sub.add_parser(
        "compare",
        help="two report folders side by side: each figure, B / A with its interval, gates, what changed",
        description="Exit 1 where B is shown slower than A in some config's figure, 2 where a folder cannot be read.",
    )
    compare.add_argument("a", help="the report folder (or report.json) compared against")
    compare.add_argument("b", help="the report folder (or report.json) compared")
    return parser


def split_pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after a bare `--` goes to pytest untouched."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []
