"""The parts of tools/gpu_tau_trials.sh that are Python: a copy of smollm2-h200-ab per candidate drafter,
and a run's summary line read from its report.json.

    python -m specgate_lab.tau_trials variant SRC OUT KIND DRAFTER   write SRC with the candidate's drafter
                                                                     path replaced, named <name>-KIND
    python -m specgate_lab.tau_trials summary REPORT_JSON            one line: the A/B gates' verdicts and ratios
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from specgate.errors import SpecgateError

DRAFT_FLAG = "--speculative-draft-model-path"
CANDIDATE = "standalone"
BASE = "standalone-base"


def _drafter(doc: dict, config: str, where: str) -> str:
    try:
        args = doc["configs"][config]["args"]
        return args[args.index(DRAFT_FLAG) + 1]
    except (KeyError, ValueError, IndexError):
        raise SpecgateError(f"{where}: configs.{config}.args has no {DRAFT_FLAG} PATH") from None


def _gate(doc: dict, where: str) -> tuple[str, str]:
    for gate in doc.get("gates", {}).get("ab", []):
        if gate.get("config") == CANDIDATE and gate.get("base") == BASE:
            return gate["config"], gate["base"]
    raise SpecgateError(f"{where}: no [[gates.ab]] with config = {CANDIDATE!r} and base = {BASE!r}")


def variant_text(text: str, where: str, kind: str, drafter: str) -> str:
    """`text` (smollm2-h200-ab.toml) with the candidate drafting from `drafter` and the name `<name>-<kind>`.
    Replaced as text, so every comment stays; the result is read back to prove only that path moved."""
    doc = tomllib.loads(text)
    _gate(doc, where)
    old = _drafter(doc, CANDIDATE, where)
    base = _drafter(doc, BASE, where)
    quoted = json.dumps(old)
    if text.count(quoted) != 1:
        raise SpecgateError(f"{where}: the candidate's drafter {quoted} appears {text.count(quoted)} times; expected once")
    name_line = f"name = {json.dumps(doc['name'])}"
    if text.count(name_line + "\n") != 1:
        raise SpecgateError(f"{where}: expected one line `{name_line}`")
    out = text.replace(quoted, json.dumps(drafter)).replace(name_line + "\n", f"name = {json.dumps(doc['name'] + '-' + kind)}\n")
    # The candidate's description names its drafter, not the shipped one's (an A/A copy has no noise).
    said = doc["configs"][CANDIDATE].get("description")
    if said is not None and out.count(f"description = {json.dumps(said)}") == 1:
        out = out.replace(f"description = {json.dumps(said)}", f"description = {json.dumps(f'STANDALONE, drafter = {drafter} ({kind})')}")
    written = tomllib.loads(out)
    if _drafter(written, CANDIDATE, where) != drafter or _drafter(written, BASE, where) != base:
        raise SpecgateError(f"{where}: replacing the candidate's drafter moved something else")
    return out


def summary_line(report: dict) -> str:
    """The A/B accept gate's and speed gate's verdicts and ratios, and both sides' accept lengths."""
    gates = {g["gate"]: g for g in report.get("gates", [])}
    parts = [f"overall {report.get('overall')}"]
    for figure, key in (("accept", "accept_ratio"), ("speed", "ratio")):
        gate = gates.get(f"ab:{CANDIDATE}-vs-{BASE}:{figure}")
        if gate is None:
            parts.append(f"{figure} gate ABSENT")
            continue
        iv = (gate.get("figures") or {}).get(key)
        said = f"{iv['estimate']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]" if iv else "no ratio"
        parts.append(f"{figure} {str(gate['status']).upper()} {said}")
    for row in report.get("speed", []):
        if row.get("config") in (CANDIDATE, BASE) and row.get("accept_length"):
            parts.append(f"tau {row['config']} {row['accept_length']['estimate']:.3f}")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) == 5 and args[0] == "variant":
            src, out, kind, drafter = args[1:]
            Path(out).write_text(variant_text(Path(src).read_text(), src, kind, drafter))
            return 0
        if len(args) == 2 and args[0] == "summary":
            try:
                report = json.loads(Path(args[1]).read_text())
            except (OSError, ValueError) as exc:
                print(f"no report ({args[1]}: {exc})")
                return 1
            print(summary_line(report))
            return 0
    except SpecgateError as exc:
        print(f"tau_trials: error: {exc}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
