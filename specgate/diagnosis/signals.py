"""Witnesses beside the timings: the server's log, the accept histogram, the draft's config.

Each reader returns None when its witness is absent (no log, an SGLang release without the
histogram, a draft given as a hub id rather than a local folder), so a lever that needs
it is simply not named: the diagnosis never fills a gap with a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specgate.documents import parse_json
from specgate.measure.fidelity import parse_decode_lines
from specgate.measure.speed import ConfigSpeed


@dataclass(frozen=True)
class GraphUse:
    """Decode-batch log lines written while the measured requests ran, by graph use."""

    with_graph: int
    without_graph: int

    @property
    def lines(self) -> int:
        return self.with_graph + self.without_graph


def graph_use(log_path: Path | None, record: ConfigSpeed) -> GraphUse | None:
    if log_path is None or not log_path.is_file() or not record.samples:
        return None
    start = min(s.sent_at for s in record.samples) - 1.0
    end = max(s.sent_at + s.e2e_s for s in record.samples) + 1.0
    flags = [
        ln.graph
        for ln in parse_decode_lines(log_path.read_text(encoding="utf-8", errors="replace"))
        if ln.graph is not None and start <= ln.at <= end
    ]
    on, off = flags.count(True), flags.count(False)
    return GraphUse(on, off) if on + off else None


def pooled_histogram(record: ConfigSpeed) -> tuple[int, ...] | None:
    """Cycles by accepted drafts, summed over the measured requests (None if any lacks it)."""
    hists = [s.accept_histogram for s in record.samples if s.verify_ct]
    if not hists or any(h is None for h in hists):
        return None
    width = max(len(h) for h in hists)  # type: ignore[arg-type]
    return tuple(sum(h[k] for h in hists if h is not None and k < len(h)) for k in range(width))


@dataclass(frozen=True)
class DraftConfig:
    path: Path
    max_positions: int | None
    architectures: tuple[str, ...]


def draft_config(draft_model_path: str | None) -> DraftConfig | None:
    """The draft's config.json where the draft is a local folder (the local launcher's host)."""
    if not draft_model_path:
        return None
    path = Path(draft_model_path) / "config.json"
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    positions = data.get("max_position_embeddings")
    return DraftConfig(
        path=path,
        max_positions=int(positions) if isinstance(positions, int) else None,
        architectures=tuple(str(a) for a in data.get("architectures") or ()),
    )
