"""`specgate schema`: the JSON Schemas of the deployment file (from the parser's reads) and of the documents specgate writes."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def schema_command(args: argparse.Namespace) -> int:
    import json

    from specgate.atomic import write_json_atomic

    if args.document == "report":
        from specgate.report.model import report_schema

        schema = report_schema()
    else:
        from specgate.errors import SpecgateError
        from specgate.schema import deployment_schema

        try:
            schema = deployment_schema()
        except SpecgateError as exc:  # a gate kind that breaks on its own example
            print(f"specgate: error: {exc}", file=sys.stderr)
            return 2
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
