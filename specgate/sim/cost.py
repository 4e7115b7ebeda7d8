"""SIMULATOR cost model: how long each step of the toy engine pretends to take.

Shaped after the user's story (Kimi-K2.5 with EAGLE-3: verify of 3 tokens took ~29 ms
against ~12 ms for one decode step in prefill attention mode): where prefill and decode run
on different attention backends (SGLang's hybrid pair), verify in *prefill* attention mode
runs the prefill kernels and pays `prefill_verify_factor` times a decode step; in *decode*
mode, or with one backend for both (SGLang then ignores the mode), it costs a decode step
plus a little per extra draft token. Disabling CUDA graphs multiplies every step, as
launch overhead would on a GPU, and so does a batch larger than the captured graphs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class CostModel:
    decode_step_ms: float = 2.0
    draft_step_ms: float = 0.3
    prefill_base_ms: float = 2.0
    prefill_per_token_ms: float = 0.005
    verify_per_extra_token: float = 0.05
    prefill_verify_factor: float = 2.4
    no_cuda_graph_factor: float = 3.0
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

    def _scale(self, ms: float) -> float:
        factor = (1.0 + self.slowdown) * (1.0 if self.cuda_graph else self.no_cuda_graph_factor) * self.boot_factor * self.request_factor
        if self.drift_per_min:
            factor *= 1.0 + self.drift_per_min * (time.monotonic() - self.born) / 60.0
        return ms * factor / 1000.0

    def prefill_s(self, prompt_tokens: int) -> float:
        return self._scale(self.prefill_base_ms + self.prefill_per_token_ms * prompt_tokens)

    def decode_step_s(self) -> float:
        return self._scale(self.decode_step_ms)

    def spec_cycle_s(self, steps: int, draft_tokens: int, attention_mode: str) -> float:
        draft = steps * self.draft_step_ms
        if attention_mode == "prefill" and self.hybrid_attention:
            verify = self.decode_step_ms * self.prefill_verify_factor
        else:
            verify = self.decode_step_ms * (1.0 + self.verify_per_extra_token * max(0, draft_tokens - 1))
        return self._scale(draft + verify)
