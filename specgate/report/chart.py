"""A PNG bar chart of decode tok/s per config with intervals, coloured by verdict."""

from __future__ import annotations

from pathlib import Path


def render_chart(report: dict, path: Path) -> Path | None:
    rows = (
        [r for r in report["speed"] if r["concurrency"] == min(x["concurrency"] for x in report["speed"])]
        if report["speed"]
        else []
    )
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on CI runners
    import matplotlib.pyplot as plt

    names = [r["config"] for r in rows]
    est = [r["decode_tps"]["estimate"] for r in rows]
    err = [
        [r["decode_tps"]["estimate"] - r["decode_tps"]["low"] for r in rows],
        [r["decode_tps"]["high"] - r["decode_tps"]["estimate"] for r in rows],
    ]
    colours = [
        "#c0392b" if r["verdict"] == "FAIL" else ("#27ae60" if r["verdict"] == "pass" else "#7f8c8d") for r in rows
    ]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4), dpi=110)
    bars = ax.bar(names, est, yerr=err, color=colours, capsize=6)
    for bar, r in zip(bars, rows):
        label = f"{r['decode_tps']['estimate']:.0f}"
        if r["ratio_to_reference"]:
            label += f"\n{r['ratio_to_reference']['estimate']:.2f}×"
        if r["accept_length"]:
            label += f"\nτ {r['accept_length']['estimate']:.2f}"
        ax.annotate(
            label,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    title = f"{report['deployment']}: decode tok/s (concurrency {rows[0]['concurrency']}) — {report['overall']}"
    if report["simulator"]:
        title += "\nSIMULATOR — not SGLang figures"
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("decode tok/s per request (median)")
    ax.set_ylim(0, max(e + u for e, u in zip(est, err[1])) * 1.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
