"""Where a measured request's answer ended, inside the fixed length it was made to run.

Speed requests run by default with `ignore_eos` to `max_new_tokens`, so that every config does
the same work (`workload.ignore_eos`). An answer shorter than that goes on past the model's end-of-sequence token, and the
accept length a gate pools then mixes the answer with whatever the model writes after it. This
module finds where each answer ended (the first of the model's `eos_token_id` ids in its
output), so that a report can say how much of what it pooled came after that.

The ids come from the model's own files (`generation_config.json`, then `config.json`) in the
folder the server loaded, on this host: SGLang's HTTP API does not report them. Where the model
is not a local folder (a hub id, another host's path) nothing is claimed. A model whose turns end
on a token its config does not name as `eos_token_id` has its answers counted as running to the
end: the share past the end is then understated, never overstated.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CONFIG_FILES = ("generation_config.json", "config.json")
MAX_CONFIG_BYTES = 1 << 20  # a model's config is a few KB: anything this large is not one


def _ids(value: object) -> set[int]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value} if value >= 0 else set()
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    return set()


def end_ids(model_dir: str | Path) -> frozenset[int]:
    """The model's `eos_token_id` ids from its local config files; empty where the model is not
    a local folder or its files name none (unreadable or odd files are no evidence either)."""
    directory = Path(model_dir)
    found: set[int] = set()
    for name in CONFIG_FILES:
        try:
            with (directory / name).open("rb") as fh:
                raw = fh.read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                continue
            data = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            found |= _ids(data.get("eos_token_id"))
    return frozenset(found)


# Recorded beside digests kept in files (a drafter's record): digests made another way are not compared.
ANSWER_DIGEST_SCHEME = "sha256 of the comma-joined decimal token ids, first 16 hex digits"


def answer_digest(ids: list[int] | tuple[int, ...]) -> str:
    """An answer's identity by its token ids (16 hex digits of a sha256): a measured request's
    and the answer training walked for the same prompt are the same text exactly when these agree."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()[:16]


def answer_tokens(output_ids: tuple[int, ...], completion_tokens: int, ends: frozenset[int]) -> int | None:
    """Tokens up to and including the first end-of-sequence id (all of them where none came);
    None where that cannot be told: no end ids known, or an answer without all its token ids."""
    if not ends or not output_ids or len(output_ids) != completion_tokens:
        return None
    for i, token in enumerate(output_ids):
        if token in ends:
            return i + 1
    return completion_tokens


def past_the_end(samples: list[tuple[int, int | None]]) -> dict | None:
    """Over (completion_tokens, answer_tokens) pairs: how many requests ran past their answer's
    end and what share of all their tokens came after it; None where no answer end is known."""
    known = [(n, a) for n, a in samples if a is not None]
    if not known:
        return None
    total = sum(n for n, _ in known)
    after = sum(n - a for n, a in known)
    return {
        "requests": sum(1 for n, a in known if a < n),
        "of": len(known),
        "tokens": after,
        "token_share": round(after / total, 4) if total else 0.0,
    }
