"""SIMULATOR cost model: how long each step of the toy engine pretends to take.

Shaped after the user's story (Kimi-K2.5 with EAGLE-3: verify of 3 tokens took ~29 ms
against ~12 ms for one decode step in prefill attention mode): where prefill and decode run
on different attention backends (SGLang's hybrid pair), verify in *prefill* attention mode
runs the prefill kernels and pays `prefill_verify_factor` times a decode step; in *decode*
mode, or with one backend for both (SGLang then ignores the mode), it costs a decode step
plus a little per extra draft token. Disabling CUDA graphs multiplies every step, as
launch overhead would on a GPU, and so does a batch larger than the captured graphs.

Attention reads the whole KV cache, so each step also grows with the request's KV length
(prompt + answer so far), on its own curve: the plain decode step (`step_growth`), the
decode-path verify (`decode_verify_growth`) and the prefill-path verify
(`prefill_verify_growth`). A curve is piecewise linear in milliseconds per 1,000 KV tokens
(`Growth`), zero by default, so a deployment without growth flags keeps its short-context
figures exactly. The draft steps stay flat: the draft head is one layer, its attention a
small share of its step. The fault `prefill-verify-past=N` (`prefill_path_from`) moves the
prefill-mode verify onto the prefill path only from KV length N on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Growth:
    """A step's extra milliseconds against the KV length: piecewise linear, `slopes` being
    (from KV tokens, ms per 1,000 KV tokens) pairs in ascending order, the first from 0. The
    public record of the prefill-path verify (issue 48) climbs steeply from 2K to 10K tokens and
    flatter after, which no single slope reproduces; a kernel model would claim more than it knows."""

    slopes: tuple[tuple[int, float], ...] = ((0, 0.0),)

    def ms(self, kv_tokens: int) -> float:
        total = 0.0
        for i, (start, per_1k) in enumerate(self.slopes):
            end = self.slopes[i + 1][0] if i + 1 < len(self.slopes) else None
            if kv_tokens <= start:
                break
            span = (kv_tokens if end is None else min(kv_tokens, end)) - start
            total += per_1k * span / 1000.0
        return total

    @property
    def spec(self) -> str:
        """The flag value that gives this curve back (`parse_growth`)."""
        parts = [f"{self.slopes[0][1]:g}"] + [f"{start}:{per_1k:g}" for start, per_1k in self.slopes[1:]]
        return ",".join(parts)


FLAT = Growth()


def parse_growth(text: str, flag: str) -> Growth:
    """`MS[,FROM:MS...]`: MS the step's extra milliseconds per 1,000 KV tokens from 0, then from
    each FROM (KV tokens, ascending) on. `flag` names the flag in the error."""
    expected = f"{flag} {text!r}: expected MS[,FROM:MS...] (ms per 1,000 KV tokens, from KV length FROM on), e.g. 0.08 or 0.5,2048:4.3,10240:0.8"
    slopes: list[tuple[int, float]] = []
    for i, part in enumerate(text.split(",")):
        start_text, sep, ms_text = part.strip().rpartition(":")
        if (i == 0) == bool(sep):
            raise ValueError(expected)
        try:
            start = int(start_text) if sep else 0
            per_1k = float(ms_text)
        except ValueError:
            raise ValueError(expected) from None
        if not (per_1k == per_1k and 0 <= per_1k < 1e6):
            raise ValueError(f"{flag} {text!r}: a slope must be a finite number >= 0 (a step cannot get cheaper with more KV)")
        if slopes and start <= slopes[-1][0]:
            raise ValueError(f"{flag} {text!r}: the FROM lengths must ascend from above 0")
        slopes.append((start, per_1k))
    return Growth(tuple(slopes))


@dataclass(frozen=True)
class CostModel:
    decode_step_ms: float = 2.0
    draft_step_ms: float = 0.3
    prefill_base_ms: float = 2.0
    prefill_per_token_ms: float = 0.005
    verify_per_extra_token: float = 0.05
    prefill_verify_factor: float = 2.4
    no_cuda_graph_factor: float = 3.0
    step_growth: Growth = FLAT  # the plain decode step against the KV length
    decode_verify_growth: Growth = FLAT  # verify on the decode path (decode mode, or one backend)
    prefill_verify_growth: Growth = FLAT  # verify on the prefill path (prefill mode, hybrid backends)
    prefill_path_from: int | None = None  # fault prefill-verify-past: the prefill path from this KV length on
    slowdown: float = 0.0
    cuda_graph: bool = True
    hybrid_attention: bool = False  # prefill and decode on different backends
    cuda_graph_max_bs: int | None = None
    boot_factor: float = 1.0  # this boot's own speed (fault boot-offset): servers differ between boots
    drift_per_min: float = 0.0  # fault drift: the machine slows while the run goes on
    request_factor: float = 1.0  # fault h200-noise: this request's own speed (sim/noise.py)
    born: float = field(default_factory=time.monotonic)

    def for_batch(self, running: int) -> CostModel:
        """The cost model for a request joining `running` others: no graph for a larger batch."""
        if self.cuda_graph and self.cuda_graph_max_bs is not None and running > self.cuda_graph_max_bs:
            return replace(self, cuda_graph=False)
        return self

    @property
    def static_factor(self) -> float:
        """What every step is multiplied by, less the drift (which moves with the clock)."""
        return (1.0 + self.slowdown) * (1.0 if self.cuda_graph else self.no_cuda_graph_factor) * self.boot_factor * self.request_factor

    def _scale(self, ms: float) -> float:
        factor = self.static_factor
        if self.drift_per_min:
            factor *= 1.0 + self.drift_per_min * (time.monotonic() - self.born) / 60.0
        return ms * factor / 1000.0

    def prefill_s(self, prompt_tokens: int) -> float:
        return self._scale(self.prefill_base_ms + self.prefill_per_token_ms * prompt_tokens)

    # Each request is timed on its own clock (the server paces every request by itself; a batch
    # shares no step), so a step grows with that request's own KV length. On a GPU the attention
    # of a batched step reads every member's KV (their sum), but the simulator has no shared step
    # to charge it to; a request sent with others in one body (n > 1, a batch of prompts) costs
    # its longest member, which with these curves is the one of the longest KV.
    def plain_step_ms(self, kv_tokens: int) -> float:
        """One plain decode step at this KV length, before the factors."""
        return self.decode_step_ms + self.step_growth.ms(kv_tokens)

    def cycle_ms(self, steps: int, draft_tokens: int, attention_mode: str, kv_tokens: int) -> float:
        """One draft-then-verify cycle at this KV length, before the factors."""
        draft = steps * self.draft_step_ms
        if self.prefill_path(attention_mode, kv_tokens):
            verify = self.decode_step_ms * self.prefill_verify_factor + self.prefill_verify_growth.ms(kv_tokens)
        else:
            verify = self.decode_step_ms * (1.0 + self.verify_per_extra_token * max(0, draft_tokens - 1))
            verify += self.decode_verify_growth.ms(kv_tokens)
        return draft + verify

    def prefill_path(self, attention_mode: str, kv_tokens: int) -> bool:
        """Whether a verify runs the prefill kernels: prefill mode on a hybrid backend pair, or,
        under fault prefill-verify-past=N, prefill mode from KV length N on (whatever the backends)."""
        if attention_mode != "prefill":
            return False
        if self.prefill_path_from is not None:
            return kv_tokens >= self.prefill_path_from
        return self.hybrid_attention

    def decode_step_s(self, kv_tokens: int) -> float:
        return self._scale(self.plain_step_ms(kv_tokens))

    def spec_cycle_s(self, steps: int, draft_tokens: int, attention_mode: str, kv_tokens: int) -> float:
        return self._scale(self.cycle_ms(steps, draft_tokens, attention_mode, kv_tokens))
