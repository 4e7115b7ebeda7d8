"""The trend of a results history: per series its steps and creep (changes.py) with the commit
after each, which of them fail `specgate history` ([history] threshold, recent), and the page
and chart that show it.

The page is one static HTML file: inline SVG, inline CSS, no script, no font or image fetched
(it opens from a CI artifact, offline, anywhere). Each chart draws the run's level with its
interval per commit, failed verdicts in red, a step as a dashed line at the first run after
it; hovering a point names its commit (SVG <title>), and a table under each chart lists them.
The PNG (matplotlib) is the same charts for report.md and the CI step summary.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specgate.atomic import write_bytes_atomic
from specgate.deployment import HistorySpec
from specgate.history.changes import Changes, find_changes
from specgate.history.records import ResultRecord, series_name

FAILED = ("FAIL", "ERROR", "INCONCLUSIVE")
SHOWN_IN_REPORT = 3  # series in a run's history.png (standing.SHOWN: the lines its first screen says)


@dataclass(frozen=True)
class SeriesTrend:
    fingerprint: str
    name: str
    records: list[ResultRecord]
    changes: Changes
    failing: list[str]  # what fails `specgate history`: new steps down past the threshold, a creep down

    def commit_at(self, index: int) -> str:
        return self.records[index].commit[:12]

    def said(self) -> list[str]:
        """Each step and creep in words."""
        out = []
        for step in self.changes.steps:
            r = self.records[step.index]
            out.append(
                f"{self.name}: step {step.ratio - 1:+.1%} (95% interval {step.low - 1:+.1%} to {step.high - 1:+.1%}) "
                f"from commit {r.commit[:12]} ({r.date[:10]}; {step.before} runs before, {step.after} after)"
            )
        if (c := self.changes.creep) is not None:
            out.append(
                f"{self.name}: slow creep {c.over_window - 1:+.1%} over its {c.runs} runs ({c.per_run - 1:+.2%} a run, "
                f"95% interval {c.low - 1:+.1%} to {c.high - 1:+.1%}, p = {c.p:.2g}) with no step any one merge made"
            )
        return out


def analyse(records_by_fingerprint: dict[str, list[ResultRecord]], spec: HistorySpec) -> list[SeriesTrend]:
    """Per fingerprint, config, concurrency, figure and host: a runner's own series. Two runners
    of one fingerprint differ by their own offsets; a job moving from one to the other would
    read as a step no commit made, so each host's runs are a series of their own."""
    out = []
    for fingerprint, records in records_by_fingerprint.items():
        series: dict[tuple, list[ResultRecord]] = {}
        for r in records:
            series.setdefault((r.series, r.host_id), []).append(r)
        hosts = len({r.host_id for r in records})
        for (key, host), rows in series.items():
            rows = sorted(rows, key=lambda r: r.date)
            name = series_name(key) + (f" on {host}" if hosts > 1 else "")
            changes = find_changes([r.level for r in rows])
            failing = []
            for step in changes.steps:
                if step.index >= len(rows) - spec.recent and step.regression_past(spec.threshold):
                    failing.append(
                        f"{name}: a new step down of {1 - step.ratio:.1%} (at worst {1 - step.low:.1%}) "
                        f"from commit {rows[step.index].commit[:12]}, past [history] threshold = {spec.threshold:g}"
                    )
            creep = changes.creep
            if creep is not None and creep.high < 1.0 and creep.low <= 1.0 - spec.threshold:
                failing.append(
                    f"{name}: a slow creep down of {1 - creep.over_window:.1%} over {creep.runs} runs, "
                    f"past [history] threshold = {spec.threshold:g}, that no single merge failed on"
                )
            out.append(SeriesTrend(fingerprint, name, rows, changes, failing))
    return out


# --- the page ---------------------------------------------------------------------------------
_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 720, 260, 64, 16, 16, 40

_CSS = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #1b1f24; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.chart { border: 1px solid #d0d7de; background: #fff; }
table { border-collapse: collapse; font-size: 12px; margin-top: 6px; }
td, th { border: 1px solid #d0d7de; padding: 2px 6px; text-align: right; }
.fail { color: #cf222e; font-weight: bold; } .note { color: #57606a; }
"""


def _svg(trend: SeriesTrend) -> str:
    rows = trend.records
    lows, highs = [r.low for r in rows], [r.high for r in rows]
    bottom, top = min(lows), max(highs)
    if top <= bottom:
        top, bottom = top * 1.01, bottom * 0.99
    span = top - bottom
    bottom, top = bottom - 0.05 * span, top + 0.05 * span
    width, height = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def x(i: int) -> float:
        return _PAD_L + (width * (i + 0.5) / len(rows))

    def y(v: float) -> float:
        return _PAD_T + height * (top - v) / (top - bottom)

    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" aria-label="{html.escape(trend.name)}">'
    ]
    for k in range(5):  # gridlines and their labels
        v = bottom + (top - bottom) * k / 4
        parts.append(f'<line x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{_PAD_L - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.4g}</text>')
    for step in trend.changes.steps:
        sx = (x(step.index - 1) + x(step.index)) / 2
        parts.append(
            f'<line x1="{sx:.1f}" x2="{sx:.1f}" y1="{_PAD_T}" y2="{_H - _PAD_B}" stroke="#bf8700" stroke-dasharray="5,4" stroke-width="2">'
            f"<title>step {step.ratio - 1:+.1%} from commit {html.escape(trend.commit_at(step.index))}</title></line>"
        )
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(i):.1f},{y(r.level):.1f}" for i, r in enumerate(rows))
    parts.append(f'<path d="{path}" fill="none" stroke="#0969da" stroke-width="1.5"/>')
    for i, r in enumerate(rows):
        colour = "#cf222e" if r.verdict in FAILED or r.run_verdict in FAILED else "#0969da"
        parts.append(
            f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(r.low):.1f}" y2="{y(r.high):.1f}" stroke="{colour}" stroke-opacity="0.5"/>'
        )
        tip = (
            f"{r.commit[:12]} {r.date[:19]}: {r.level:.4g} ({r.low:.4g}–{r.high:.4g}), {r.verdict}, run {r.run_verdict}"
        )
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(r.level):.1f}" r="4" fill="{colour}"><title>{html.escape(tip)}</title></circle>'
        )
    parts.append(
        f'<text x="{_PAD_L}" y="{_H - 12}" font-size="11">runs, oldest first ({len(rows)}); '
        f"red: a failed verdict; dashed: a step (hover for its commit)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _table(trend: SeriesTrend) -> str:
    head = "<tr><th>#</th><th>commit</th><th>date</th><th>level</th><th>interval</th><th>accept length</th><th>cycle ms</th><th>verdict</th></tr>"
    rows = []
    for i, r in enumerate(trend.records):
        verdict = html.escape(r.verdict if r.verdict != "—" else r.run_verdict)
        cls = ' class="fail"' if r.verdict in FAILED else ""
        rows.append(
            f"<tr><td>{i + 1}</td><td><code>{html.escape(r.commit[:12])}</code></td><td>{html.escape(r.date[:19])}</td>"
            f"<td>{r.level:.4g}</td><td>{r.low:.4g}–{r.high:.4g}</td>"
            f"<td>{'' if r.accept_length is None else f'{r.accept_length:.3g}'}</td>"
            f"<td>{'' if r.cycle_ms is None else f'{r.cycle_ms:.3g}'}</td><td{cls}>{verdict}</td></tr>"
        )
    return f"<details><summary>the runs ({len(rows)})</summary><table>{head}{''.join(rows)}</table></details>"


def render_html(deployment: str, trends: Sequence[SeriesTrend]) -> str:
    body = [f"<h1>specgate results history — {html.escape(deployment)}</h1>"]
    if any(r.simulator for t in trends for r in t.records):
        body.append(
            "<p class=\"fail\">SIMULATOR runs: these figures are specgate's simulated engine's, not SGLang's.</p>"
        )
    failing = [f for t in trends for f in t.failing]
    body.append(
        f'<p class="{"fail" if failing else "note"}">'
        + (html.escape("; ".join(failing)) if failing else "no new step down past the threshold")
        + "</p>"
    )
    for t in trends:
        body.append(
            f'<h2 class="series">{html.escape(t.name)} <span class="note">({html.escape(t.fingerprint)})</span></h2>'
        )
        body.append(_svg(t))
        said = t.said()
        body.append(
            "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in said) + "</ul>"
            if said
            else '<p class="note">no step, no creep</p>'
        )
        body.append(_table(t))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>specgate history — {html.escape(deployment)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def render_png(trends: Sequence[SeriesTrend], path: Path, shown: int = 12) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    chosen = list(trends)[:shown]
    cols = 2 if len(chosen) > 1 else 1
    lines = math.ceil(len(chosen) / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(7 * cols, 2.8 * lines), squeeze=False)
    for ax, t in zip(axes.flat, chosen):
        idx = list(range(len(t.records)))
        levels = [r.level for r in t.records]
        err = [[r.level - r.low for r in t.records], [r.high - r.level for r in t.records]]
        ax.errorbar(idx, levels, yerr=err, fmt="-o", ms=3, lw=1, color="#0969da", ecolor="#9ec5f5")
        failed = [i for i, r in enumerate(t.records) if r.verdict in FAILED]
        ax.plot(failed, [levels[i] for i in failed], "o", color="#cf222e", ms=5)
        for step in t.changes.steps:
            ax.axvline(step.index - 0.5, color="#bf8700", ls="--")
            ax.annotate(
                f"{step.ratio - 1:+.1%} {t.commit_at(step.index)[:7]}", (step.index - 0.5, max(levels)), fontsize=7
            )
        ax.set_title(t.name + (" — FAILS" if t.failing else ""), fontsize=9, color="#cf222e" if t.failing else "black")
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("runs, oldest first (red: a failed verdict; dashed: a step)", fontsize=7)
    for ax in list(axes.flat)[len(chosen) :]:
        ax.axis("off")
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())


def trend_chart(path: Path, now: Sequence[ResultRecord], earlier: Sequence[ResultRecord], spec: HistorySpec) -> None:
    """history.png of a run's report folder: the series of this run's standing (its speedups, else
    its decode tok/s), this runner's runs with this one last."""
    chosen = [r for r in now if r.figure == "speedup"] or [r for r in now if r.figure == "decode_tps"]
    shown = {r.series for r in chosen[:SHOWN_IN_REPORT]}
    host = now[0].host_id if now else ""
    rows = [r for r in [*earlier, *now] if r.series in shown and r.host_id == host]
    render_png(analyse({"run": rows}, spec), path, shown=SHOWN_IN_REPORT)


def write_page(out: Path, deployment: str, trends: Sequence[SeriesTrend]) -> tuple[Path, Path]:
    """history.html and history.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    page, chart = out / "history.html", out / "history.png"
    write_bytes_atomic(page, render_html(deployment, trends).encode("utf-8"))
    if trends:
        render_png(trends, chart)
    return page, chart
