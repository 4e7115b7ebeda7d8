"""`specgate compare A B`: two report folders side by side (B against A).

Per config and concurrency: decode tok/s and the speedup over its reference on both sides, and
B / A with an interval from the best evidence both sides hold, said in each row:
- **requests**: both folders' benchmark.json hold the per-request decode tok/s; the requests are
  paired by prompt (both runs send the same pinned prompts) and the median of the per-prompt
  ratios is bootstrapped (measure.stats.paired_ratio);
- **report**: otherwise, the report's own intervals, read as normal in log figure, combined as
  independent (the log ratio's SE is the root sum of both sides' squares).
Either interval holds the noise of the two runs' requests, not the spread between boots of one
build (docs/statistics.md): on real hardware a difference smaller than the runner's between-boot
spread is not shown by two runs; the runner's results history (`specgate history`) is.

Then each gate's status on both sides, and what changed between the runs: the configs (the
settings each server reported, its drafter), and the environment (SGLang release, GPU, driver,
host, commit, specgate).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specgate.deployment import bucket_label
from specgate.documents import read_json
from specgate.errors import ReportError
from specgate.measure.stats import paired_ratio
from specgate.report.model import GateEntry, Interval, Report, read_report

Z95 = 1.959963984540054


@dataclass(frozen=True)
class RatioRow:
    config: str
    concurrency: int
    figure: str  # "decode tok/s" or "speedup"
    a: float
    b: float
    ratio: float
    low: float
    high: float
    evidence: str  # "requests (N paired by prompt)" or "report intervals"

    @property
    def verdict(self) -> str:
        if self.high < 1.0:
            return "SLOWER"
        if self.low > 1.0:
            return "FASTER"
        return "no difference shown"


@dataclass(frozen=True)
class Comparison:
    a: Path
    b: Path
    rows: list[RatioRow]
    gates: list[tuple[str, str, str]]  # gate, its status and figure in A, in B
    configs_changed: list[str]
    environment_changed: list[str]
    # Speed rows one report holds and the other lacks ("eagle3-decode at 32K (c1): in A only"): a
    # context bucket listed on one side alone, or a config not measured on one side.
    unpaired: list[str] = field(default_factory=list)

    @property
    def slower(self) -> list[RatioRow]:
        return [r for r in self.rows if r.verdict == "SLOWER"]


def _report_of(folder: Path) -> Report:
    path = folder / "report.json" if folder.is_dir() else folder
    report = read_report(path)
    if not isinstance(report, Report):
        raise ReportError(path, f"a short {report.overall} report: it holds no figures to compare ({report.error})")
    return report


def _samples(folder: Path) -> dict[tuple[str, int, int], dict[str, float]]:
    """Per config and concurrency, each prompt's decode tok/s (the first request of each prompt),
    from the folder's benchmark.json; {} where there is none or it cannot be read."""
    path = (folder if folder.is_dir() else folder.parent) / "benchmark.json"
    try:
        data = read_json(path, "pytest-benchmark's JSON")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    out: dict[tuple[str, int, int], dict[str, float]] = {}
    for bench in data.get("benchmarks", []) if isinstance(data, dict) else []:
        info = bench.get("extra_info") if isinstance(bench, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("decode_tps"), list):
            continue
        prompts = info.get("prompt") or []
        per: dict[str, float] = {}
        for prompt, value in zip(prompts, info["decode_tps"]):
            if isinstance(value, (int, float)) and value > 0 and isinstance(prompt, str):
                per.setdefault(prompt, float(value))
        try:
            out[(str(info["config"]), int(info["concurrency"]), int(info.get("context") or 0))] = per
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _from_intervals(a: Interval, b: Interval) -> tuple[float, float, float]:
    def se(i: Interval) -> float:
        if i.low <= 0 or i.high <= 0:
            return 0.0
        return (math.log(i.high) - math.log(i.low)) / (2 * Z95) * (Z95 / _z(i.confidence))

    log_ratio = math.log(b.estimate / a.estimate)
    half = Z95 * math.hypot(se(a), se(b))
    return math.exp(log_ratio), math.exp(log_ratio - half), math.exp(log_ratio + half)


def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2)) if 0 < confidence < 1 else Z95


def _row_name(config: str, context: int) -> str:
    return f"{config} at {bucket_label(context)}" if context else config


def _unpaired(a: Report, b: Report) -> list[str]:
    """The speed rows of one side that the other lacks, each said with the side that holds it."""
    keys_a = {(r.config, r.concurrency, r.context) for r in a.speed}
    keys_b = {(r.config, r.concurrency, r.context) for r in b.speed}
    return [
        f"{_row_name(config, context)} (c{concurrency}): in {side} only"
        for side, keys, other in (("A", keys_a, keys_b), ("B", keys_b, keys_a))
        for config, concurrency, context in sorted(keys - other, key=lambda k: (k[2], k[0], k[1]))
    ]


def _rows(a: Report, b: Report, samples_a: dict, samples_b: dict) -> list[RatioRow]:
    rows = []
    # A context bucket's row pairs with the same bucket's alone (0: the short workload).
    b_speed = {(r.config, r.concurrency, r.context): r for r in b.speed}
    for ra in a.speed:
        key = (ra.config, ra.concurrency, ra.context)
        rb = b_speed.get(key)
        if rb is None:
            continue
        config = _row_name(ra.config, key[2])
        common = sorted(set(samples_a.get(key, {})) & set(samples_b.get(key, {})))
        if len(common) >= 3:
            ratio = paired_ratio([samples_b[key][p] for p in common], [samples_a[key][p] for p in common], 0.95)
            figures, source = (ratio.estimate, ratio.low, ratio.high), f"requests ({len(common)} paired by prompt)"
        else:
            figures, source = _from_intervals(ra.decode_tps, rb.decode_tps), "report intervals"
        rows.append(
            RatioRow(
                config, ra.concurrency, "decode tok/s", ra.decode_tps.estimate, rb.decode_tps.estimate,
                *figures, source,
            )
        )  # fmt: skip
        if ra.ratio_to_reference is not None and rb.ratio_to_reference is not None:
            rows.append(
                RatioRow(
                    config,
                    ra.concurrency,
                    "speedup",
                    ra.ratio_to_reference.estimate,
                    rb.ratio_to_reference.estimate,
                    *_from_intervals(ra.ratio_to_reference, rb.ratio_to_reference),
                    "report intervals",
                )
            )
    return rows


# A gate's figure, the first of these its figures hold (beats and ab: the ratio; regression: against
# the stored figure; accept: the accept length).
HEADLINES = ("ratio", "ratio_to_stored", "accept_length")


def _said(gate: GateEntry) -> str:
    """A gate's status and its figure, e.g. "pass 1.64 [1.47, 1.73]"."""
    for key in HEADLINES:
        figure = gate.figures.get(key)
        if isinstance(figure, dict) and all(
            isinstance(figure.get(k), (int, float)) for k in ("estimate", "low", "high")
        ):
            return f"{gate.status} {key} {figure['estimate']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"
    return str(gate.status)


def _differences(what: str, a: dict[str, Any], b: dict[str, Any], keys: list[str] | None = None) -> list[str]:
    names = keys if keys is not None else sorted(set(a) | set(b))
    return [f"{what}{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in names if a.get(k) != b.get(k)]


def compare(folder_a: Path, folder_b: Path) -> Comparison:
    a, b = _report_of(folder_a), _report_of(folder_b)
    if a.deployment != b.deployment:
        raise ReportError(folder_b, f"a report of deployment {b.deployment!r}, compared with one of {a.deployment!r}")
    rows = _rows(a, b, _samples(folder_a), _samples(folder_b))
    gates_b = {g.gate: g for g in b.gates}
    gates = []
    for g in a.gates:
        other = gates_b.get(g.gate)
        gates.append((g.gate, _said(g), _said(other) if other is not None else "absent"))
    gates += [(g.gate, "absent", _said(g)) for g in b.gates if g.gate not in {x.gate for x in a.gates}]
    configs: list[str] = []
    for config in sorted(set(a.server_settings) | set(b.server_settings)):
        configs += _differences(
            f"{config} setting ", a.server_settings.get(config) or {}, b.server_settings.get(config) or {}
        )
    drafters_a, drafters_b = a.drafters or {}, b.drafters or {}
    for config in sorted(set(drafters_a) | set(drafters_b)):
        if json.dumps(drafters_a.get(config), sort_keys=True) != json.dumps(drafters_b.get(config), sort_keys=True):
            configs.append(f"{config} drafter: {drafters_a.get(config)!r} -> {drafters_b.get(config)!r}")
    environment = _differences(
        "", (a.fingerprint.model_dump() if a.fingerprint else {}), (b.fingerprint.model_dump() if b.fingerprint else {})
    )
    environment += _differences(
        "", a.provenance, b.provenance, ["commit", "host", "host_id", "specgate", "python", "sim_faults"]
    )
    return Comparison(folder_a, folder_b, rows, gates, configs, environment, _unpaired(a, b))


def render(c: Comparison) -> str:
    out = [f"specgate compare: B = {c.b} against A = {c.a}", ""]
    out.append(
        f"{'config':<24}{'c':>3}  {'figure':<13}{'A':>10}{'B':>10}{'B / A':>8}  {'95% interval':<17}{'verdict':<21}evidence"
    )
    for r in c.rows:
        interval = f"{r.low:.3f}–{r.high:.3f}"
        out.append(
            f"{r.config:<24}{r.concurrency:>3}  {r.figure:<13}{r.a:>10.4g}{r.b:>10.4g}{r.ratio:>8.3f}  {interval:<17}{r.verdict:<21}{r.evidence}"
        )
    if c.unpaired:
        out.append("measured on one side only, NOT compared: " + "; ".join(c.unpaired))
    out += [
        "",
        "the intervals hold the two runs' request noise, not the spread between boots of one build (docs/history.md)",
        "",
    ]
    out.append("gates (A -> B):")
    out += [
        f"  {gate}: {sa} -> {sb}" + ("" if sa.split()[0] == sb.split()[0] else "  (verdict changed)")
        for gate, sa, sb in c.gates
    ]
    out.append("configs changed: " + ("none" if not c.configs_changed else ""))
    out += [f"  {line}" for line in c.configs_changed]
    out.append("environment changed: " + ("none" if not c.environment_changed else ""))
    out += [f"  {line}" for line in c.environment_changed]
    slower = sorted({f"{r.config} (c{r.concurrency}) {r.figure} {r.ratio - 1:+.1%}" for r in c.slower})
    out.append("")
    verdict = "B is SLOWER in " + ", ".join(slower) if slower else "no config shown slower in B"
    if c.unpaired:
        verdict += f" ({len(c.unpaired)} row(s) measured on one side only: not compared)"
    out.append("verdict: " + verdict)
    return "\n".join(out) + "\n"
