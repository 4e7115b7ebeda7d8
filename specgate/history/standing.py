"""Where one run stands in its results history, in words for the report's first screen, e.g.
"eagle3-decode speedup 1.31x, the lowest of 20 runs on this runner"."""

from __future__ import annotations

from collections.abc import Sequence

from specgate.history.records import ResultRecord

MIN_EARLIER = 3  # fewer earlier runs say nothing of where this one stands
WINDOW = 20  # the runs it is ranked among (this one and the latest earlier ones)
SHOWN = 3  # lines at most: the first screen is short


def _figure(record: ResultRecord) -> str:
    if record.figure == "speedup":
        return f"speedup {record.level:.2f}x"
    return f"decode {record.level:,.1f} tok/s"


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def standing(now: Sequence[ResultRecord], earlier: Sequence[ResultRecord]) -> list[str]:
    """Per series of `now` (speedups first; decode tok/s where a run has no speedup), its rank
    among the latest WINDOW runs of the same series on the same host."""
    chosen = [r for r in now if r.figure == "speedup"] or [r for r in now if r.figure == "decode_tps"]
    lines = []
    for record in chosen[:SHOWN]:
        same = [e for e in earlier if e.series == record.series and e.host_id == record.host_id]
        same = same[-(WINDOW - 1) :]
        if len(same) < MIN_EARLIER:
            continue
        levels = [e.level for e in same]
        runs = len(same) + 1
        below = sum(level < record.level for level in levels)
        above = sum(level > record.level for level in levels)
        where = "this runner" if record.host_id != "unknown" else "this deployment"
        if below == 0:
            rank = "the lowest"
        elif above == 0:
            rank = "the highest"
        elif above < below:
            rank = f"the {_ordinal(above + 1)} highest"
        else:
            rank = f"the {_ordinal(below + 1)} lowest"
        median = sorted(levels)[len(levels) // 2]
        change = record.level / median - 1
        lines.append(
            f"{record.config} {_figure(record)}, {rank} of {runs} runs on {where} ({change:+.1%} from their median)"
        )
    return lines
