"""Does the Kimi twin's report show its curve against the public figures? (a benchmark, not a test)

    python3 benchmarks/kimi_context_twin.py [--report-dir DIR] [--buckets 2K,10K,16K,30K,32K]
        [--repeats 3] [--tolerance 0.10] [--seed 0]

Runs `specgate run` on a temporary copy of the SIMULATOR twin
(fixtures/deployments/kimi-k2.5-rtxpro6000-tp8-sim.toml) with `workload.context_buckets` at the
lengths of the public figures it targets, `--context-length` raised to what `specgate check` asks
for, `repeats` and `context_repeats` few, and greedy equivalence off (its context-edge case is left
out past 32,768 prompt tokens, and a 32K bucket needs a longer context than that: the edge would be
said as not run, and it costs minutes that say nothing about speed). Then it reads the run's
report.json and prints, per config and bucket:
- the measured decode tok/s (the SIMULATOR's: median per request, bootstrap interval) and the
  prompt tokens the server counted;
- the curve function's figure at those prompt tokens (specgate.sim.curve.decode_tps: the engine's
  own arithmetic, no server);
- the public figure it targets, where there is one at that length, and the gap of the measured
  figure to it in %.
It exits 1 if any gap is over --tolerance (10%), 2 if the run wrote no report.

The public figures are another engine's (vLLM, 2026: Kimi-K2.5/K2.6 with EAGLE-3 on 8x RTX PRO
6000 over PCIe, as issue 48 quotes them; the fixture's comments name them); nothing here measures
them, and every measured figure is the simulator's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tomli_w

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specgate.deployment import bucket_label  # noqa: E402
from specgate.resources import builtin_deployments_dir  # noqa: E402
from specgate.sim.__main__ import configured  # noqa: E402
from specgate.sim.curve import decode_tps  # noqa: E402

TWIN_FILE = "kimi-k2.5-rtxpro6000-tp8-sim.toml"
K = 1024
# The public figures the twin targets (NOT measured here; the fixture's comments give the source),
# by config and prompt tokens. Plain decoding's "~92 tok/s at short context" has no length: left out.
PUBLIC = {
    "baseline": {16 * K: 81.5, 32 * K: 73.4},
    "eagle3-prefill": {2 * K: 75.0, 10 * K: 32.2, 30 * K: 25.3},
    "eagle3-decode": {2 * K: 116.6, 10 * K: 112.8, 30 * K: 107.5},
}
BUCKETS = "2K,10K,16K,30K,32K"


def tokens_of(label: str) -> int:
    """The tokens of a bucket label: "30K" is 30,720 (K = 1,024, as workload.context_buckets reads it)."""
    return int(label[:-1]) * K if label.upper().endswith("K") else int(label)


def twin_copy(
    folder: Path, buckets: list[int], repeats: int, context_length: int | None, lighter: dict | None = None
) -> Path:
    """The twin with the benchmark's buckets, few repeats, equivalence off; `context_length`
    appended to the launch where given; `lighter`: sections' fields set on top (the self-test's)."""
    data = tomllib.loads((builtin_deployments_dir() / TWIN_FILE).read_text())
    data["workload"].update(
        context_buckets=[bucket_label(b) for b in buckets],
        context_repeats=repeats,
        repeats=repeats,
        max_repeats=repeats,
    )
    data["equivalence"] = {
        "enabled": False,
        "skip_reason": "benchmarks/kimi_context_twin.py measures speed across context length; the context-edge "
        "case is left out past 32,768 prompt tokens, and a 32K bucket needs a longer context",
    }
    if context_length is not None:
        data["launch"]["args"] = [*data["launch"]["args"], "--context-length", str(context_length)]
    for section, fields in (lighter or {}).items():
        data[section].update(fields)
    path = folder / "kimi-context-twin.toml"
    path.write_text(tomli_w.dumps(data))
    return path


def context_length_check_asks(deployment: Path) -> int | None:
    """What `specgate check` says --context-length must be raised to (None: it refuses nothing)."""
    done = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "check", str(deployment)], capture_output=True, text=True
    )
    asked = [int(n) for n in re.findall(r"raise --context-length to at least (\d+)", done.stdout + done.stderr)]
    return max(asked) if asked else None


@dataclass(frozen=True)
class Run:
    deployment: dict  # the copy that ran
    context_length: int | None  # what `check` asked for
    command: list[str]
    returncode: int
    report: dict | None  # its report.json (None: it wrote none)
    output: str  # the run's stdout and stderr, ends


def run_twin(
    folder: Path, buckets: list[int], repeats: int, report_dir: Path, seed: int, lighter: dict | None = None
) -> Run:
    """`specgate run` on the twin's copy in `folder`, its report in `report_dir`."""
    asked = context_length_check_asks(twin_copy(folder, buckets, repeats, None, lighter))
    path = twin_copy(folder, buckets, repeats, asked, lighter)
    command = [
        sys.executable, "-m", "specgate.cli", "run", str(path), "--report-dir", str(report_dir),
        "--baselines-dir", str(folder / "baselines"), "--allow-uncompared", "--seed", str(seed),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    report_path = report_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    output = done.stdout[-3000:] + "\n" + done.stderr[-3000:]
    return Run(tomllib.loads(path.read_text()), asked, command, done.returncode, report, output)


@dataclass(frozen=True)
class Figure:
    config: str
    context: int
    prompt_tokens: int | None
    measured: dict  # the report's decode_tps: estimate, low, high (the SIMULATOR's)
    curve: float | None  # sim.curve.decode_tps at the measured prompt tokens
    public: float | None  # the public figure it targets (None: none at that length)

    @property
    def gap(self) -> float | None:
        return self.measured["estimate"] / self.public - 1 if self.public else None


def figures(run: Run) -> list[Figure]:
    """Each bucket row of the run's report, beside the curve and the public figure."""
    assert run.report is not None
    rows = [r for r in run.report["speed"] if r["context"]]
    out = []
    for row in sorted(rows, key=lambda r: (list(PUBLIC).index(r["config"]), r["context"])):
        config, context, tokens = row["config"], row["context"], row["prompt_tokens"]
        curve = curve_at(run.deployment, config, tokens) if tokens else None
        out.append(Figure(config, context, tokens, row["decode_tps"], curve, PUBLIC.get(config, {}).get(context)))
    return out


def curve_at(deployment: dict, config: str, kv_tokens: int) -> float:
    argv = [*deployment["launch"]["args"], *deployment["configs"][config]["args"]]
    cost, spec = configured(argv)
    return decode_tps(cost, spec, kv_tokens)


def bucket_list(text: str) -> list[int]:
    """--buckets: comma-separated bucket labels ("2K,30K" or token counts), at least one."""
    try:
        buckets = [tokens_of(b.strip()) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bucket labels like 2K,10K,30K (or token counts), got {text!r}") from None
    if not buckets or min(buckets) < 1:
        raise argparse.ArgumentTypeError(f"expected at least one bucket of >= 1 token, got {text!r}")
    return buckets


def at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text}")
        return value

    return parse


def fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 (0.10 is 10%), got {text}")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--report-dir", type=Path, default=None, help="where the run's report goes (default: a temp folder)"
    )
    ap.add_argument("--buckets", type=bucket_list, default=bucket_list(BUCKETS), help=f"default {BUCKETS}")
    # 3: the least workload.repeats specgate accepts.
    ap.add_argument("--repeats", type=at_least(3), default=3, help="requests per config, short workload and each bucket")
    ap.add_argument("--tolerance", type=fraction, default=0.10, help="the largest gap to a public figure (0.10: 10%%)")
    ap.add_argument("--seed", type=int, default=0, help="the interleaved rounds' order")
    args = ap.parse_args()
    buckets = args.buckets

    with tempfile.TemporaryDirectory(prefix="kimi-context-twin-") as tmp:
        report_dir = args.report_dir or Path(tmp) / "report"
        run = run_twin(Path(tmp), buckets, args.repeats, report_dir, args.seed)
    print(
        f"SIMULATOR twin {TWIN_FILE}, buckets {', '.join(bucket_label(b) for b in buckets)}, {args.repeats} requests "
        f"per config and bucket, --context-length {run.context_length} (as `specgate check` asks)"
    )
    if run.report is None:
        print(run.output)
        print(f"no report.json in {report_dir} (specgate run exited {run.returncode})")
        return 2
    report = run.report
    density = report.get("context_prompts") or {}
    print(f"specgate run: {report['overall']} (exit {run.returncode}; the twin's prefill mode loses by design)")
    print(
        f"prompts built at {density.get('chars_per_token')} characters per token "
        f"({density.get('config')}'s server counted {density.get('prompt_tokens')} tokens for "
        f"{density.get('chars')} characters"
        + (f"; FALLBACK: {density['fallback']})" if density.get("fallback") else ")")
    )
    print()
    print(
        "| config | bucket | prompt tokens | measured tok/s (SIMULATOR) | curve at those tokens | public | gap to public |"
    )
    print("|---|---|---|---|---|---|---|")
    over: list[str] = []
    for f in figures(run):
        m = f.measured
        measured = f"{m['estimate']:.1f} [{m['low']:.1f}, {m['high']:.1f}]"
        curve = f"{f.curve:.1f}" if f.curve is not None else "—"
        tokens = f"{f.prompt_tokens:,}" if f.prompt_tokens else "—"
        gap = "—"
        if f.gap is not None:
            gap = f"{f.gap:+.1%}" + (" OVER" if abs(f.gap) > args.tolerance else "")
            if abs(f.gap) > args.tolerance:
                over.append(f"{f.config} at {bucket_label(f.context)}: {f.gap:+.1%}")
        print(
            f"| {f.config} | {bucket_label(f.context)} | {tokens} | {measured} | {curve} | {f.public or '—'} | {gap} |"
        )
    print()
    if over:
        print(f"{len(over)} gap(s) over {args.tolerance:.0%}: " + "; ".join(over))
        return 1
    print(f"every measured figure within {args.tolerance:.0%} of the public figure it targets (SIMULATOR figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
