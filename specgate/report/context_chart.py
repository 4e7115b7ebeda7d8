"""A PNG of speed against context length (`workload.context_buckets`), beside report.png: per
config, decode tok/s and the speedup over its reference at each bucket, and the time per
verify cycle where the server's counters give it. Drawn only where the run measured buckets.
Points and ticks sit at the prompt tokens the server counted, each tick naming its bucket too: a
bucket whose prompts came out off target is seen where it was measured, not where it was aimed."""

from __future__ import annotations

import io
import statistics
from pathlib import Path
from typing import Any

from specgate.atomic import write_bytes_atomic
from specgate.deployment import bucket_label
from specgate.report.chart import TITLE_FONT
from specgate.report.model import Report, SpeedRow

CONTEXT_CHART = "context.png"


def render_context_chart(report: Report, path: Path) -> Path | None:
    """context.png where the report has context buckets (a stale one of an earlier run goes)."""
    fig = context_figure(report)
    if fig is None:
        path.unlink(missing_ok=True)
        return None
    import matplotlib.pyplot as plt

    image = io.BytesIO()
    fig.savefig(image, format="png")
    write_bytes_atomic(path, image.getvalue())
    plt.close(fig)
    return path


def _x(row: SpeedRow) -> float | None:
    """Where a row sits on the context axis: the prompt tokens the server counted, else the
    bucket's target; the short workload's row only where its prompt tokens are known."""
    if row.prompt_tokens:
        return float(row.prompt_tokens)
    return float(row.context) if row.context else None


def _ticks(rows: list[SpeedRow]) -> list[tuple[float, str]]:
    """One tick per bucket (and the short workload) where its points sit: at the median prompt
    tokens its rows' servers counted, labelled with that count and the bucket ("1,017" over "1K"),
    so a point off its bucket's target reads as such; at the target, said so, where none counted."""
    by_context: dict[int, list[SpeedRow]] = {}
    for r in rows:
        by_context.setdefault(r.context, []).append(r)
    out = []
    for context, its in sorted(by_context.items()):
        name = bucket_label(context) if context else "short"
        counted = [r.prompt_tokens for r in its if r.prompt_tokens]
        if counted:
            at = float(statistics.median(counted))
            out.append((at, f"{at:,.0f}\n{name}"))
        else:
            out.append((float(context), f"{name}\n(not counted)"))
    return out


def context_figure(report: Report) -> Any:
    rows = [r for r in report.speed if r.concurrency == 1 and _x(r) is not None]
    if not any(r.context for r in rows):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_config: dict[str, list[SpeedRow]] = {}
    for r in sorted(rows, key=lambda r: _x(r) or 0):
        by_config.setdefault(r.config, []).append(r)
    cycles = any(r.cycle_ms for r in rows)
    panels = 3 if cycles else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4), dpi=110)
    tps, speedup = axes[0], axes[1]
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (config, its) in enumerate(by_config.items()):
        colour = palette[i % len(palette)]  # one colour per config in every panel
        xs = [_x(r) for r in its]
        tps.errorbar(
            xs,
            [r.decode_tps.estimate for r in its],
            yerr=[[r.decode_tps.estimate - r.decode_tps.low for r in its], [r.decode_tps.high - r.decode_tps.estimate for r in its]],
            marker="o",
            capsize=3,
            label=config,
            color=colour,
        )
        ratios = [(x, r.ratio_to_reference) for x, r in zip(xs, its) if r.ratio_to_reference]
        if ratios:
            speedup.plot([x for x, _ in ratios], [iv.estimate for _, iv in ratios], marker="o", label=config, color=colour)
        timed = [(x, r.cycle_ms) for x, r in zip(xs, its) if r.cycle_ms]
        if cycles and timed:
            axes[2].plot([x for x, _ in timed], [iv.estimate for _, iv in timed], marker="o", label=config, color=colour)
    speedup.axhline(1.0, color="#34495e", linestyle="--", linewidth=1)
    ticks = _ticks(rows)
    from matplotlib.ticker import NullFormatter

    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("prompt tokens the server counted (and the bucket)")
        ax.set_xticks([at for at, _ in ticks], [said for _, said in ticks], minor=False)
        ax.xaxis.set_minor_formatter(NullFormatter())  # the log axis's own labels would sit among the buckets'
        ax.legend(fontsize=7)
    tps.set_ylabel("decode tok/s per request (median)")
    speedup.set_ylabel("× reference (paired median)")
    if cycles:
        axes[2].set_ylabel("ms per verify cycle (median)")
    head = str(report.overall) + (" — SIMULATOR, not SGLang figures" if report.simulator else "")
    fig.suptitle(f"{head}\n{report.deployment}: speed against context length (concurrency 1)", fontsize=TITLE_FONT)
    fig.tight_layout()
    return fig
