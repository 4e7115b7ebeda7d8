"""`specgate init`: write a user's first deployment (`--launch` or `--url`) and say the next step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgate.errors import SpecgateError


def init_command(args: argparse.Namespace) -> int:
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
