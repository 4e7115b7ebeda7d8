"""The settings a server actually runs with, read from SGLang itself (/get_server_info).

What a deployment file asks for and what SGLang runs can differ: defaults fill gaps
(`speculative_attention_mode` is "prefill" unless told), SGLang rewrites some choices at
boot (spec v1 turns the overlap scheduler off), and an old release may not know a flag at
all. So the diagnosis reasons from what the server reports. Releases name things
differently and some nest the server args; every field is read defensively and is None
when the server did not say.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specgate.server_info import as_bool, decode_graphs_disabled, graph_bound, lookup


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class EffectiveSettings:
    version: str | None
    algorithm: str | None
    num_steps: int | None
    topk: int | None
    draft_tokens: int | None
    attention_mode: str | None
    attention_backend: str | None
    prefill_backend: str | None  # what prefill (and, in prefill mode, verify) runs on
    decode_backend: str | None  # what plain decode steps run on
    cuda_graph_disabled: bool | None
    cuda_graph_max_bs: int | None  # the largest batch a captured graph covers
    overlap_disabled: bool | None
    tp_size: int | None
    context_length: int | None
    draft_model_path: str | None

    @property
    def speculative(self) -> bool:
        return bool(self.algorithm)

    @property
    def hybrid(self) -> bool:
        """Prefill and decode on different attention backends: only then does SGLang's
        --speculative-attention-mode choose which one verify and draft-extend use."""
        return bool(self.prefill_backend and self.decode_backend and self.prefill_backend != self.decode_backend)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def differences(self, other: EffectiveSettings) -> dict[str, tuple[Any, Any]]:
        """field -> (ours, theirs) where the two servers run differently."""
        mine, theirs = self.as_dict(), other.as_dict()
        return {k: (mine[k], theirs[k]) for k in mine if k != "version" and mine[k] != theirs[k]}


def read_settings(server_info: dict[str, Any]) -> EffectiveSettings:
    backend = lookup(server_info, "attention_backend")
    algorithm = lookup(server_info, "speculative_algorithm")
    return EffectiveSettings(
        version=lookup(server_info, "version"),
        algorithm=str(algorithm) if algorithm else None,
        num_steps=_int(lookup(server_info, "speculative_num_steps")),
        topk=_int(lookup(server_info, "speculative_eagle_topk", "speculative_topk")),
        draft_tokens=_int(lookup(server_info, "speculative_num_draft_tokens")),
        attention_mode=lookup(server_info, "speculative_attention_mode"),
        attention_backend=backend,
        prefill_backend=lookup(server_info, "prefill_attention_backend") or backend,
        decode_backend=lookup(server_info, "decode_attention_backend") or backend,
        cuda_graph_disabled=decode_graphs_disabled(server_info),
        cuda_graph_max_bs=graph_bound(server_info),  # in any release's names (server_flags.py)
        overlap_disabled=as_bool(lookup(server_info, "disable_overlap_schedule")),
        tp_size=_int(lookup(server_info, "tp_size", "tensor_parallel_size")),
        context_length=_int(lookup(server_info, "context_length", "context_len")),
        draft_model_path=lookup(server_info, "speculative_draft_model_path"),
    )
