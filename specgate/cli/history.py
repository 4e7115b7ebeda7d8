"""`specgate history [DEPLOYMENT]`: the deployment's results history (specgate.history) read,
its steps and creeps said, the trend page and chart written; exit 1 on a new step down (or a
creep down) past the deployment's `[history] threshold`, for a post-merge or nightly job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgate import project
from specgate.exits import Exit


def history_command(args: argparse.Namespace) -> int:
    from specgate.deployment import load_deployment
    from specgate.errors import SpecgateError
    from specgate.history.records import load_all, results_folder
    from specgate.history.trend import analyse, write_page

    try:
        dep = load_deployment(args.deployment)
        root = Path(args.baselines_dir).resolve() if args.baselines_dir else project.current().baselines_dir
        records = load_all(root, dep.name)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    folder = results_folder(root, dep.name)
    if not any(records.values()):
        print(f"specgate history: no results history of {dep.name} in {folder}: every completed gate run appends to it")
        return 0
    trends = analyse(records, dep.history)
    try:
        page, chart = write_page(Path(args.output), dep.name, trends)
    except OSError as exc:
        print(f"specgate: error: --output {args.output}: cannot write the trend page: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    runs = max(len(t.records) for t in trends)
    print(f"specgate history: {dep.name}, {len(trends)} series, up to {runs} runs, from {folder}")
    for t in trends:
        for line in t.said():
            print(f"  {line}")
    failing = [f for t in trends for f in t.failing]
    for line in failing:
        print(f"specgate history: FAIL — {line}")
    print(f"trend page: {page} (chart {chart})")
    return Exit.FAIL if failing else 0
