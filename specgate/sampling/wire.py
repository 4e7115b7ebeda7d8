"""SGLang's /generate for the sampling test: batched sampling requests, scoring requests (the
reference's prompt logprobs of prompt + continuation), and their answers read defensively.

- Sampling: `input_ids` a list of lists (the same prompt, once per sample), `sampling_params`
  one per item, each with its own seed under the deployment's `seed_param` (SGLang's
  `sampling_seed`; none where a release has none: then the reproducer is not exact).
- Scoring: `return_logprob` with `logprob_start_len` at the prompt's last token and
  `top_logprobs_num`; temperature 1 and no filter, so that whatever processing a release applies
  to returned logprobs is the identity: the model's own log-probabilities.
- Answers: a list for a batch; meta_info's `input_token_logprobs` / `input_top_logprobs` as
  [logprob, id, text] triples (every release so far), or as parallel `_val` / `_idx` lists
  (the scheduler's own names), aligned from the end: the last entries are the continuation's.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from specgate.errors import MalformedAnswer
from specgate.sampling_spec import SamplingSetting
from specgate.secrets import redact

Tops = tuple[tuple[int, float], ...]


def tokenise_payload(text: str) -> dict[str, Any]:
    """One greedy token, asking the prompt's logprobs from its first token: their ids are the
    prompt's token ids, so both servers are then sent the very same input."""
    return {
        "text": text,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": 0,
    }


def sample_params(setting: SamplingSetting, max_new: int, seed: int, seed_param: str) -> dict[str, Any]:
    params: dict[str, Any] = {**setting.sampling_params(), "max_new_tokens": max_new, "ignore_eos": True}
    if seed_param:
        params[seed_param] = seed
    return params


def sample_payload(
    prompt_ids: list[int], setting: SamplingSetting, seeds: list[int], max_new: int, seed_param: str
) -> dict[str, Any]:
    return {
        "input_ids": [list(prompt_ids) for _ in seeds],
        "sampling_params": [sample_params(setting, max_new, s, seed_param) for s in seeds],
    }


def score_payload(sequences: list[list[int]], prompt_len: int, top_n: int) -> dict[str, Any]:
    return {
        "input_ids": sequences,
        "sampling_params": {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": max(0, prompt_len - 1),
        "top_logprobs_num": top_n,
    }


def items(answer: Any, n: int, where: str) -> list[dict[str, Any]]:
    """A batch's answers, one object with a meta_info per item."""
    found = answer if isinstance(answer, list) else [answer]
    if len(found) != n or not all(isinstance(a, dict) and isinstance(a.get("meta_info"), dict) for a in found):
        raise MalformedAnswer(
            f"{where}: expected a list of {n} answers, each an object with a meta_info object, got {str(answer)[:200]}",
            url=where,
        )
    return found


def output_ids(item: dict[str, Any], where: str) -> list[int]:
    ids = item.get("output_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise MalformedAnswer(f"{where}: output_ids: expected a list of token ids, got {str(ids)[:200]}", url=where)
    completion = item["meta_info"].get("completion_tokens")
    if isinstance(completion, int) and 0 < completion < len(ids):
        ids = ids[len(ids) - completion :]  # 0.5.1-0.5.4 put prompt tokens in front
    return ids


def _triples(meta: dict[str, Any], key: str, where: str) -> list[Any]:
    raw = meta.get(key)
    if raw is None and isinstance(meta.get(f"{key}_val"), list) and isinstance(meta.get(f"{key}_idx"), list):
        raw = [[v, i] for v, i in zip(meta[f"{key}_val"], meta[f"{key}_idx"])]
    if not isinstance(raw, list):
        raise MalformedAnswer(
            f"{where}: meta_info.{key}: expected a list of [logprob, token_id, text] entries (asked with "
            f"return_logprob and logprob_start_len), got {str(raw)[:200]}",
            url=where,
        )
    return raw


def _entry(raw: Any, key: str, where: str) -> tuple[int, float | None]:
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        raise MalformedAnswer(f"{where}: meta_info.{key}: expected [logprob, token_id, text], got {str(raw)[:100]}", url=where)
    lp, token = raw[0], raw[1]
    if isinstance(token, bool) or not isinstance(token, int):
        raise MalformedAnswer(f"{where}: meta_info.{key}: token id {token!r} is not an integer", url=where)
    if lp is None:
        return token, None
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp):
        raise MalformedAnswer(f"{where}: meta_info.{key}: logprob {lp!r} is not a number", url=where)
    return token, float(lp)


def prompt_ids(item: dict[str, Any], where: str) -> list[int]:
    """The prompt's token ids, from a tokenise_payload answer."""
    entries = [_entry(e, "input_token_logprobs", where)[0] for e in _triples(item["meta_info"], "input_token_logprobs", where)]
    told = item["meta_info"].get("prompt_tokens")
    if isinstance(told, int) and told != len(entries):
        raise MalformedAnswer(
            f"{where}: meta_info.input_token_logprobs: {len(entries)} entries for prompt_tokens {told} "
            "(asked from logprob_start_len 0: one per prompt token)",
            url=where,
        )
    return entries


def scores(item: dict[str, Any], continuation: list[int], where: str) -> tuple[list[float], list[Tops]]:
    """The reference's logprob of each continuation token and its top logprobs there."""
    meta = item["meta_info"]
    n = len(continuation)
    tokens = [_entry(e, "input_token_logprobs", where) for e in _triples(meta, "input_token_logprobs", where)][-n:]
    tops_raw = _triples(meta, "input_top_logprobs", where)[-n:]
    if [t for t, _ in tokens] != continuation or len(tops_raw) != n:
        raise MalformedAnswer(
            f"{where}: meta_info.input_token_logprobs: its last {n} token ids are not the continuation scored "
            f"({[t for t, _ in tokens][:8]}... against {continuation[:8]}...)",
            url=where,
        )
    logprobs = []
    for (_, lp) in tokens:
        if lp is None:
            raise MalformedAnswer(f"{where}: meta_info.input_token_logprobs: a continuation token has no logprob", url=where)
        logprobs.append(max(lp, -1e4))  # -inf (a token the reference gives no chance) as a very low number
    tops = []
    for position in tops_raw:
        listed = [_entry(e, "input_top_logprobs", where) for e in (position or [])]
        tops.append(tuple(sorted(((t, lp) for t, lp in listed if lp is not None), key=lambda e: -e[1])))
    return logprobs, tops


def curl(base_url: str, payload: dict[str, Any], api_key_env: str | None = None) -> str:
    """A copy-paste reproducer: the key by its variable, never its value."""
    body = json.dumps(payload, ensure_ascii=False)
    auth = f' -H "Authorization: Bearer ${api_key_env}"' if api_key_env else ""
    url = redact(base_url.rstrip("/") + "/generate")
    return f"curl -s {shlex.quote(url)}{auth} -H 'Content-Type: application/json' -d {shlex.quote(body)}"
