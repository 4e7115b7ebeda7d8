"""A PNG bar chart of decode tok/s per config with intervals, coloured by verdict."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

from specgate.atomic import write_bytes_atomic
from specgate.report.model import Report, SpeedRow
from specgate.verdicts.gates import RunVerdict

TITLE_FONT = 10
# Characters of the title font one inch of the figure holds (DejaVu Sans at 10 pt averages ~6 pt
# a character, so ~12 an inch; 10 leaves room for wide letters and the axes' margins).
TITLE_CHARS_PER_INCH = 10


def render_chart(report: Report, path: Path) -> Path | None:
    fig = chart_figure(report)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    image = io.BytesIO()
    fig.savefig(image, format="png")
    write_bytes_atomic(path, image.getvalue())  # a rename: never into a link at report.png
    plt.close(fig)
    return path


def chart_title(report: Report, concurrency: int, width_inches: float) -> str:
    """The verdict first, on a line of its own, then the deployment's name wrapped to the figure's
    width: a long name (a Kimi deployment's) pushed the verdict past the edge, cut to "— FA"."""
    head = str(report.overall) + (" — SIMULATOR, not SGLang figures" if report.simulator else "")
    what = f"{report.deployment}: decode tok/s (concurrency {concurrency})"
    width = max(20, int(width_inches * TITLE_CHARS_PER_INCH))
    return "\n".join([head, *textwrap.wrap(what, width, break_on_hyphens=True)])


def chart_figure(report: Report) -> Any:
    """The chart as a matplotlib Figure (None where no speed was measured); the caller closes it."""
    short = [r for r in report.speed if not r.context]  # the context buckets have their own chart
    rows = [r for r in short if r.concurrency == min(x.concurrency for x in short)] if short else []
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on CI runners
    import matplotlib.pyplot as plt

    names = [r.config for r in rows]
    est = [r.decode_tps.estimate for r in rows]
    err = [
        [r.decode_tps.estimate - r.decode_tps.low for r in rows],
        [r.decode_tps.high - r.decode_tps.estimate for r in rows],
    ]
    colours = [_colour(r) for r in rows]
    width = max(5, 1.6 * len(rows))
    fig, ax = plt.subplots(figsize=(width, 4), dpi=110)
    bars = ax.bar(names, est, yerr=err, color=colours, capsize=6)
    reference = next((r for r in rows if r.ratio_to_reference is None and not r.speculative), None)
    if reference is not None:
        ax.axhline(reference.decode_tps.estimate, color="#34495e", linestyle="--", linewidth=1)
    for bar, r, up in zip(bars, rows, err[1]):
        label = f"{r.decode_tps.estimate:.0f}"
        if r.ratio_to_reference:
            label += f"\n{r.ratio_to_reference.estimate:.2f}×"
        if r.accept_length:
            label += f"\nτ {r.accept_length.estimate:.2f}"
        top = bar.get_height() + up  # above the error bar, not on it
        ax.annotate(
            label,
            (bar.get_x() + bar.get_width() / 2, top),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.set_title(chart_title(report, rows[0].concurrency, width), fontsize=TITLE_FONT)
    ax.set_ylabel("decode tok/s per request (median)")
    ax.set_ylim(0, max(e + u for e, u in zip(est, err[1])) * 1.4)
    ax.text(
        0.01,
        0.99,
        "red: a gate failed · orange: slower than the reference · dashed: reference",
        transform=ax.transAxes,
        fontsize=7,
        va="top",
        color="#555",
    )
    fig.tight_layout()
    return fig


def _colour(row: SpeedRow) -> str:
    if row.verdict == RunVerdict.FAIL:
        return "#c0392b"
    ratio = row.ratio_to_reference
    if ratio is not None and ratio.high < 1.0:
        return "#e67e22"  # slower than the plain reference, even if no gate asks otherwise
    return "#27ae60" if row.verdict == RunVerdict.PASS else "#7f8c8d"
