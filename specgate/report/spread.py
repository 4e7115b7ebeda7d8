"""Run-to-run spread: what several reports of one deployment say about its noise.

A gate's interval holds the noise within one run. Each boot (and each host of the same
GPU model) can sit at its own level, and that variation is invisible from inside a run.
Given the report.json of several runs, this tells per config how far the runs' medians
lie apart, for the absolute decode speed and for the speedup over the reference, and
the smallest tolerance with which any one of them, stored as the baseline, would have
passed every other (the gate compares a run with one stored run, so the worst pair
counts). That is a lower bound: more runs can only widen it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from specgate.errors import SpecgateError
from specgate.report.model import read_run_figures


@dataclass(frozen=True)
class RunFigures:
    label: str
    decode_tps_median: float  # the report row's decode_tps.estimate
    ratio: float | None
    accept_length: float | None


@dataclass(frozen=True)
class ConfigSpread:
    config: str
    runs: list[RunFigures]

    @staticmethod
    def _deviation(values: list[float]) -> float:
        m = median(values)
        return max(abs(v / m - 1) for v in values) if m else float("inf")

    @property
    def decode_deviation(self) -> float:
        """Largest |run / median of runs - 1| of the absolute decode speed."""
        return self._deviation([r.decode_tps_median for r in self.runs])

    @property
    def ratios(self) -> list[float]:
        """Speedup over the reference, in the runs that have one (none for the reference)."""
        return [r.ratio for r in self.runs if r.ratio is not None]

    @property
    def ratio_deviation(self) -> float | None:
        return self._deviation(self.ratios) if len(self.ratios) > 1 else None

    @property
    def decode_worst_pair(self) -> float:
        """fastest / slowest - 1: what a two-sided tolerance on absolute speed must allow."""
        values = [r.decode_tps_median for r in self.runs]
        return max(values) / min(values) - 1

    @property
    def ratio_worst_drop(self) -> float | None:
        """1 - lowest / highest speedup: what a one-sided tolerance on the speedup must allow."""
        ratios = self.ratios
        return 1 - min(ratios) / max(ratios) if len(ratios) > 1 else None

    @property
    def is_reference(self) -> bool:
        return not self.ratios


def load_runs(paths: list[Path]) -> tuple[str, list[ConfigSpread], list[str]]:
    """(deployment, per-config spreads, warnings) from report.json files of one deployment."""
    distinct = list(dict.fromkeys(p.resolve() for p in paths))  # one file named twice is one run
    if len(distinct) < 2:
        raise SpecgateError("specgate spread: give at least two different report.json files")
    per_config: dict[str, list[RunFigures]] = {}
    deployments, fingerprints, warnings = set(), set(), []
    for path in distinct:
        # Only the figures every version of report.json holds: reports older than the report model
        # (results/ keeps some) compare with new ones.
        report = read_run_figures(path)
        deployments.add(report.deployment)
        fingerprints.add(json.dumps(report.fingerprint, sort_keys=True))
        # The run's folder: above `report/` where the report sits in one (specgate run --report-dir X/report).
        folder = path.parent.parent if path.parent.name in ("report", "specgate-report") else path.parent
        label = f"{folder.name or path.name} ({report.provenance.date[:16]})"
        for row in report.speed:
            if row.concurrency != 1 or row.context:  # a context bucket's row is other traffic
                continue
            per_config.setdefault(row.config, []).append(
                RunFigures(
                    label,
                    row.decode_tps.estimate,
                    row.ratio_to_reference.estimate if row.ratio_to_reference else None,
                    row.accept_length.estimate if row.accept_length else None,
                )
            )
    if len(deployments) > 1:
        raise SpecgateError(f"specgate spread: the reports are of different deployments: {sorted(deployments)}")
    if len(fingerprints) > 1:
        warnings.append("the reports' fingerprints differ (GPU, driver, SGLang or model): spread mixes them")
    spreads = [ConfigSpread(c, runs) for c, runs in per_config.items() if len(runs) > 1]
    if not spreads:
        raise SpecgateError(
            "specgate spread: no config has speed figures (concurrency 1) in two of these reports: "
            "equivalence-only runs, or runs of different configs, have no spread to show"
        )
    return deployments.pop(), spreads, warnings


def _ceil_to(x: float, step: float = 0.05) -> float:
    return math.ceil(x / step - 1e-9) * step


def render_spread(deployment: str, spreads: list[ConfigSpread], warnings: list[str]) -> str:
    out = [f"# Run-to-run spread — {deployment}\n"]
    labels = sorted({r.label for s in spreads for r in s.runs})
    out.append(
        "Runs: " + "; ".join(labels) + ". Per config, values in that order (a run without the config is left out).\n"
    )
    out.append(
        "| config | decode tok/s per run | from the runs' median | fastest / slowest | × reference per run "
        "| from the median | lowest / highest | accept length per run |"
    )
    out.append("|---|---|---|---|---|---|---|---|")
    for s in spreads:
        runs = sorted(s.runs, key=lambda r: r.label)
        tps = ", ".join(f"{r.decode_tps_median:.1f}" for r in runs)
        ratios = ", ".join(f"{r.ratio:.3f}" for r in runs if r.ratio is not None) or "—"
        taus = ", ".join(f"{r.accept_length:.2f}" for r in runs if r.accept_length is not None) or "—"
        rdev = f"{s.ratio_deviation:.1%}" if s.ratio_deviation is not None else "—"
        drop = f"{1 - s.ratio_worst_drop:.3f}" if s.ratio_worst_drop is not None else "—"
        out.append(
            f"| {s.config} | {tps} | {s.decode_deviation:.1%} | {1 + s.decode_worst_pair:.3f} | {ratios} | {rdev} "
            f"| {drop} | {taus} |"
        )
    reference = [s for s in spreads if s.is_reference]
    speculative = [s for s in spreads if s.ratio_worst_drop is not None]
    out.append("")
    if reference:
        need = max(s.decode_worst_pair for s in reference)
        out.append(
            "- Reference, judged two-sided on decode tok/s against one stored run: any run stored as the baseline "
            f"passes every other only with a tolerance of at least {need:.1%} (≈ {_ceil_to(need):.2f})."
        )
    if speculative:
        need = max(s.ratio_worst_drop or 0.0 for s in speculative)  # none is None (filtered above)
        out.append(
            f"- Speculative configs, judged on their speedup (one-sided): at least {need:.1%} (≈ {_ceil_to(need):.2f})."
        )
    out.append(f"- From {len(labels)} runs: a lower bound on the spread; each further run can only widen it.")
    out.extend(f"- **Warning:** {w}" for w in warnings)
    return "\n".join(out) + "\n"
