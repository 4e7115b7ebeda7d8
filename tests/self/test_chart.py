"""report.png: the verdict in its title is always whole, however long the deployment's name."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specgate.report.chart import chart_figure, render_chart

LONG = "kimi-k2.5-rtxpro6000-tp8-sim-with-a-name-longer-than-the-figure-is-wide"


def _report(tmp_path: Path, deployment: str, overall: str) -> Any:
    """What the chart reads of a report (a whole Report holds far more)."""

    def iv(x: float) -> SimpleNamespace:
        return SimpleNamespace(estimate=x, low=x * 0.97, high=x * 1.03)

    def row(config: str, tps: float, ratio: float | None) -> SimpleNamespace:
        return SimpleNamespace(config=config, concurrency=1, context=0, decode_tps=iv(tps), speculative=ratio is not None,
                               ratio_to_reference=iv(ratio) if ratio else None, accept_length=iv(2.0) if ratio else None,
                               verdict=overall)

    return SimpleNamespace(deployment=deployment, overall=overall, simulator=True,
                           speed=[row("baseline", 100.0, None), row("eagle3-decode", 150.0, 1.5)])


@pytest.mark.parametrize("overall", ["FAIL", "INCONCLUSIVE"])
def test_the_verdict_is_whole_in_the_title_of_a_long_deployment_name(tmp_path, overall):
    import matplotlib.pyplot as plt

    fig = chart_figure(_report(tmp_path, LONG, overall))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        title = fig.axes[0].title
        assert overall in title.get_text().splitlines()[0]
        shown = title.get_window_extent(renderer)
        frame = fig.bbox
        assert shown.x0 >= frame.x0 and shown.x1 <= frame.x1, (shown, frame)  # nothing drawn past the edge
    finally:
        plt.close(fig)
    assert render_chart(_report(tmp_path, LONG, overall), tmp_path / "report.png") is not None
