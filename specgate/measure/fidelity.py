"""Do the suite's figures agree with SGLang's own? Three witnesses from the server.

1. **The server's log.** SGLang prints a "Decode batch" line every `decode_log_interval`
   steps with `gen throughput (token/s)`: tokens decoded over the wall time since its
   last such line, measured inside the scheduler. Lines from single-request batches
   logged while the measured requests ran are the scheduler's view of the same decoding.
   A window in which a new request began also holds the idle gap and the prefill; such
   lines (the KV cache's token count fell since the line before) are left out, and the
   median of the rest is compared.
2. **`meta_info.decode_throughput`** (SGLang with `--enable-metrics`): per request,
   completion_tokens over the server's time from first output to finish (as SGLang 0.5.11
   defines it; a release that counts completion_tokens − 1 reads ~1/N higher). Rescaled to the
   suite's numerator (tokens after the first chunk), it is the same quantity measured on
   the other side of HTTP: the cleanest witness, where the server gives it.
3. **`meta_info.e2e_latency`**: the server's time from receiving a request to
   finishing it. Against the client's request-to-last-byte time it measures what HTTP,
   the stream and the client add to every request.

The client's decode tok/s leaves the first chunk out (prefill and the first token);
only the rescaled decode_throughput is that quantity, so gaps to the log are expected to
be small, not zero, and the report explains them.

**The bound** (`FIDELITY_BOUND`). The suite's figure is *contradicted* where the server's own
(meta_info's, else the log's) is more than 1.5 times it or less than 1/1.5 of it. Both time the
same tokens of the same requests; what separates them is how the stream reaches the client: the
first and the last chunk's trips (milliseconds) and the client's scheduling. On SGLang (an H200)
the two agreed within 1%; on the simulator under a 2-core machine's load within ~10% over a
40-token request. A factor of 1.5 leaves that jitter room even on short requests, and is far below
what a stream delivered in bursts does (held to half way and sent in two bursts: 2x; a buffering
proxy seen in the field: 74x). A speed verdict resting on a contradicted figure is no verdict: the
judge FAILS it (verdicts.judge), and the report's Fidelity section says which gates that is.
Where the server gives no figure (SGLang without --enable-metrics and no clean log lines), or
at concurrency > 1 (the log mixes requests), the suite's figure is UNCHECKED, and said so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import median

from specgate.measure.speed import ConfigSpeed

# The suite's figure and the server's may differ by this factor either way before the server's
# contradicts the suite's (the module's docstring says why 1.5).
FIDELITY_BOUND = 1.5
AGREES, CONTRADICTED, UNCHECKED = "agrees", "contradicted", "unchecked"

# "[2026-11-29 11:07:43] Decode batch, #running-req: 1, ... gen throughput (token/s): 349.51, ..."
# Older releases write "Decode batch." and may add a DP rank after the time stamp.
_DECODE_LINE = re.compile(
    r"^\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s*Decode batch[.,]\s*#running-req:\s*(?P<running>\d+)"
    r"(?:,\s*#token:\s*(?P<tokens>\d+))?.*?gen throughput \(token/s\):\s*(?P<tps>[\d.]+)"
)
# "..., cuda graph: True, ..." (the label names the graph backend; releases before it lack the field)
_GRAPH_FLAG = re.compile(r"\b\w+ graph:\s*(?P<flag>True|False)")


@dataclass(frozen=True)
class LogThroughput:
    at: float  # epoch seconds (the log's local time stamp, 1 s resolution)
    running: int
    tps: float
    tokens: int | None = None  # tokens held in the KV cache: it drops when a new request begins
    graph: bool | None = None  # whether the batch ran on a captured graph, where the line says


def parse_decode_lines(log_text: str) -> list[LogThroughput]:
    out = []
    for line in log_text.splitlines():
        m = _DECODE_LINE.search(line)
        if m is None:
            continue
        at = datetime.strptime(m["stamp"], "%Y-%m-%d %H:%M:%S").timestamp()
        tokens = int(m["tokens"]) if m["tokens"] is not None else None
        flag = _GRAPH_FLAG.search(line)
        graph = None if flag is None else flag["flag"] == "True"
        out.append(LogThroughput(at=at, running=int(m["running"]), tps=float(m["tps"]), tokens=tokens, graph=graph))
    return out


@dataclass(frozen=True)
class Fidelity:
    config: str
    suite_decode_tps: float  # median of the measured requests
    log_decode_tps: float | None  # median of the server's single-request lines in the same window
    log_lines: int
    log_lines_low: int  # lines under half the median: windows that straddled a prefill or idle gap
    log_gap: float | None  # suite / log - 1
    log_note: str  # why the log gives no figure, where it does not
    meta_decode_tps: float | None  # median of the server's per-request decode_throughput, rescaled
    meta_gap: float | None  # median over requests of suite / server - 1
    client_overhead_ms: float | None  # median of client e2e - server e2e_latency
    e2e_gap: float | None  # median of server e2e_latency / client e2e - 1 (negative: the client saw longer)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _straddles(before: LogThroughput | None, line: LogThroughput) -> bool:
    """A window in which a new request began (its KV token count fell): it holds an idle gap
    and a prefill, not decoding alone."""
    if before is None or before.tokens is None or line.tokens is None:
        return False
    return line.tokens < before.tokens


def fidelity_of(record: ConfigSpeed, log_path: Path | None) -> Fidelity | None:
    """For single-stream measurements only: at concurrency > 1 the log's lines mix requests."""
    samples = record.samples
    if record.concurrency != 1 or not samples:
        return None
    suite = median(s.decode_tps for s in samples)
    lines: list[LogThroughput] = []
    if log_path is not None and log_path.exists() and all(s.sent_at for s in samples):
        # Each measured request's own time span, in the log's whole seconds (a line stamped S was
        # printed in [S, S+1)), so that requests other tests sent in between are not taken for these.
        spans = [(math.floor(x.sent_at), math.floor(x.sent_at + x.e2e_s)) for x in samples]
        parsed = parse_decode_lines(log_path.read_text(errors="replace"))
        lines = [
            ln
            for before, ln in zip([None, *parsed], parsed)
            if ln.running == 1 and any(a <= ln.at <= b for a, b in spans) and not _straddles(before, ln)
        ]
    note = ""
    if not lines:
        note = "no single-request decode lines in the measured window"
    elif len(lines) < len(samples):
        # Fewer clean windows than requests: the log's windows are about as long as a request
        # (speculation logs every 40 cycles), so what survives is a biased few.
        note = f"only {len(lines)} clean log window(s) for {len(samples)} requests: too few to compare"
    log_tps = median(ln.tps for ln in lines) if lines and not note else None
    pairs = [(s.e2e_s, s.server_e2e_s) for s in samples if s.server_e2e_s]
    rescaled = [
        (s.decode_tps, s.server_decode_tps * (s.completion_tokens - s.first_chunk_tokens) / s.completion_tokens)
        for s in samples
        if s.server_decode_tps and s.completion_tokens > s.first_chunk_tokens
    ]
    return Fidelity(
        config=record.config,
        suite_decode_tps=suite,
        log_decode_tps=log_tps,
        log_lines=len(lines),
        log_lines_low=sum(1 for ln in lines if log_tps and ln.tps < 0.5 * log_tps),
        log_gap=(suite / log_tps - 1) if log_tps else None,
        log_note=note,
        meta_decode_tps=median(server for _, server in rescaled) if rescaled else None,
        meta_gap=median(ours / server - 1 for ours, server in rescaled) if rescaled else None,
        client_overhead_ms=median((c - s) * 1000 for c, s in pairs) if pairs else None,
        e2e_gap=median(s / c - 1 for c, s in pairs) if pairs else None,
    )


@dataclass(frozen=True)
class FidelityCheck:
    """Whether the server's own figure bears out the suite's decode tok/s of one config."""

    config: str
    state: str  # AGREES, CONTRADICTED or UNCHECKED
    witness: str | None  # which of the server's figures was compared
    suite_decode_tps: float | None
    server_decode_tps: float | None
    gap: float | None  # suite / server - 1
    why: str  # what was compared, or why nothing was

    def as_dict(self) -> dict:
        return self.__dict__.copy()

    def contradiction(self) -> str:
        """The reason a speed verdict resting on this figure fails."""
        return (
            f"the server's own figure contradicts the suite's: {self.config}'s {self.witness} is "
            f"{self.server_decode_tps:.1f} tok/s where the suite timed {self.suite_decode_tps:.1f} "
            f"({(self.gap or 0):+.0%}, beyond the fidelity bound of {FIDELITY_BOUND:g}x either way), so this "
            "verdict rests on a figure that does not measure the server's decoding. Likely cause: a buffering "
            "proxy or load balancer between the suite and the server delivering the stream in bursts, or a "
            "client-side timing fault. Check that the deployment's URL reaches SGLang directly or streams "
            "unbuffered (nginx: proxy_buffering off), and compare the client's time with meta_info.e2e_latency "
            "in the report's Fidelity section"
        )


def check_fidelity(config: str, concurrency: int, found: Fidelity | None) -> FidelityCheck:
    """The server's per-request figure where it gives one (the cleanest witness), else its log's."""
    if found is None:
        why = (
            f"not checked at concurrency {concurrency}: the server's figures mix requests there"
            if concurrency != 1
            else "not checked: no request was measured"
        )
        return FidelityCheck(config, UNCHECKED, None, None, None, None, why)
    if found.meta_decode_tps and found.meta_gap is not None:
        witness, server, gap = "meta_info.decode_throughput", found.meta_decode_tps, found.meta_gap
    elif found.log_decode_tps and found.log_gap is not None:
        witness, server, gap = "server log's gen throughput", found.log_decode_tps, found.log_gap
    else:
        log = found.log_note or "no figure"
        return FidelityCheck(
            config,
            UNCHECKED,
            None,
            found.suite_decode_tps,
            None,
            None,
            "not checked: the server gave no figure of its own (no meta_info.decode_throughput: start SGLang with "
            f"--enable-metrics; its log: {log})",
        )
    state = CONTRADICTED if abs(math.log1p(gap)) > math.log(FIDELITY_BOUND) else AGREES
    return FidelityCheck(
        config, state, witness, found.suite_decode_tps, server, gap, f"against {witness}: {gap:+.1%}"
    )
