"""`specgate compare A B`: two report folders side by side (specgate.history.compare); exit 1
where B is shown slower than A in some config's figure, 2 on a folder that cannot be read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgate.exits import Exit


def compare_command(args: argparse.Namespace) -> int:
    from specgate.errors import SpecgateError
    from specgate.history.compare import compare, render

    try:
        comparison = compare(Path(args.a), Path(args.b))
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    print(render(comparison), end="")
    return Exit.FAIL if comparison.slower else 0
