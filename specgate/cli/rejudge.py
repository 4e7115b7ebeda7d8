"""`specgate rejudge`: the failing, excused and near-tie equivalence answers a report.json kept, judged again (this version's rules, a deployment's tie margin and tolerances), without booting anything."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgate.deployment import load_deployment
from specgate.errors import SpecgateError


def rejudge_command(args: argparse.Namespace, extra: list[str]) -> int:
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
