"""SIMULATOR /generate for what the greedy path does not serve: sampling (temperature > 0, as
SGLang's default of 1.0 when none is given), batches (`input_ids` a list of lists, or `text` a
list, with one `sampling_params` or one per item) and prompt logprobs (`return_logprob` with
`logprob_start_len` >= 0: `input_token_logprobs`, `input_top_logprobs`).

A pure function of the request and the server's settings (the server sleeps the cost it
returns), so the self-tests and benchmarks/sampling_false_alarms.py call it in-process.

Prompt logprobs and the toy model: its distributions are keyed to the prompt an answer was
generated for (model.py), which a real, causal model has no notion of. A request's prompt
logprobs are therefore computed as if its prompt ended where they start: the first
`logprob_start_len` + 1 tokens. specgate scores a continuation with `logprob_start_len` set to
the prompt's length less one, so the scores are those the continuation was sampled from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specgate.sim.cost import CostModel
from specgate.sim.engine import GenState, SpecSettings
from specgate.sim.faults import Faults
from specgate.sim.model import ToyModel
from specgate.sim.sampled import SampledAnswer, SampledGeneration
from specgate.sim.sampling import SamplingParams, true_top_logprobs
from specgate.sim.tokenizer import decode, encode


@dataclass(frozen=True)
class SampledServer:
    """What of the server's state a sampled request reads."""

    spec: SpecSettings | None
    faults: Faults
    cost: CostModel
    weights: str
    check_length: Callable[[int, int], int]  # the server's refusals: (prompt, max_new) -> answer length
    spec_meta: Callable[[GenState], dict[str, Any]]  # the spec_* counters, in the release's spelling


def wants_sampled_path(body: dict) -> bool:
    ids, text = body.get("input_ids"), body.get("text")
    batch = (isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)) or isinstance(text, list)
    params = body.get("sampling_params")
    params = params[0] if isinstance(params, list) and params else params
    temperature = float((params or {}).get("temperature", 1.0))
    start = body.get("logprob_start_len")
    prompt_logprobs = bool(body.get("return_logprob")) and isinstance(start, int) and start >= 0
    return batch or temperature != 0.0 or prompt_logprobs


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise ValueError(f"{name}: {len(value)} entries for a batch of {n}")
        return value
    return [value] * n


def answer(server: SampledServer, body: dict) -> tuple[Any, float]:
    """The response body (one object, or a list for a batch) and the seconds it costs: a batch runs
    together, as on a GPU, so it costs its longest member."""
    if body.get("stream"):
        raise ValueError("the simulator streams greedy requests only; send sampled or batched requests unstreamed")
    ids, text = body.get("input_ids"), body.get("text")
    batch = (isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)) or isinstance(text, list)
    if ids is not None:
        prompts = ids if batch else [ids]
        if not all(isinstance(p, list) and p and all(isinstance(i, int) for i in p) for p in prompts):
            raise ValueError("input_ids must be a non-empty list of integers, or a list of them")
    elif isinstance(text, (str, list)):
        texts = text if isinstance(text, list) else [text]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("text must be a string or a list of strings")
        prompts = [encode(t) for t in texts]
    else:
        raise ValueError("expected 'text' (a string) or 'input_ids' (a list of integers)")
    n = len(prompts)
    params = _per_item(body.get("sampling_params") or {}, n, "sampling_params")
    starts = _per_item(body.get("logprob_start_len", -1), n, "logprob_start_len")
    top_n = int(body.get("top_logprobs_num") or 0)
    logprobs = bool(body.get("return_logprob"))
    with_text = bool(body.get("return_text_in_logprobs"))
    out, cost = [], 0.0
    for prompt, sp, start in zip(prompts, params, starts):
        if sp.get("stop") or sp.get("stop_token_ids"):
            raise ValueError("the simulator's sampled requests take no stop strings or stop token ids")
        max_new = server.check_length(len(prompt), int(sp.get("max_new_tokens", 128)))
        temperature = float(sp.get("temperature", 1.0))
        seed = sp.get("sampling_seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"sampling_seed: expected an integer, got {seed!r}")
        if temperature == 0.0:
            temperature = 1e-4  # greedy inside a batch: as near the argmax as makes no difference
        bias = sp.get("logit_bias") or {}
        if not isinstance(bias, dict):
            raise ValueError(f"logit_bias: expected an object of token id -> bias, got {bias!r}")
        sampling = SamplingParams(
            temperature=temperature,
            top_p=float(sp.get("top_p", 1.0)),
            top_k=int(sp.get("top_k", -1)),
            min_p=float(sp.get("min_p", 0.0)),
            frequency_penalty=float(sp.get("frequency_penalty", 0.0)),
            presence_penalty=float(sp.get("presence_penalty", 0.0)),
            repetition_penalty=float(sp.get("repetition_penalty", 1.0)),
            logit_bias=tuple(sorted((int(k), float(v)) for k, v in bias.items())),
        )
        gen = SampledGeneration(
            prompt, sampling, max_new, bool(sp.get("ignore_eos", False)), seed,
            server.spec, server.faults, server.cost, server.weights,
        )
        a = gen.run()
        cost = max(cost, a.cost_s)
        out.append(_item(server, prompt, a, logprobs, int(start), top_n, with_text))
    return (out if batch else out[0]), cost


def _item(
    server: SampledServer, prompt: list[int], a: SampledAnswer, logprobs: bool, start: int, top_n: int, with_text: bool
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "finish_reason": a.finish_reason,
        "prompt_tokens": len(prompt),
        "completion_tokens": len(a.output_ids),
        "cached_tokens": 0,
        "e2e_latency": a.cost_s,
    }

    def entry(lp: float | None, tok: int) -> list[Any]:
        return [lp, tok, decode([tok]) if with_text else None]

    if logprobs:
        model = ToyModel(prompt, 0.0, None, server.weights)
        meta["output_token_logprobs"] = [
            entry(model.distribution(prompt + a.output_ids[:i]).logprob_of(t), t) for i, t in enumerate(a.output_ids)
        ]
        if start >= 0:
            keyed = ToyModel(prompt[: start + 1], 0.0, None, server.weights)
            tokens, tops = [], []
            for j in range(min(start, len(prompt)), len(prompt)):
                dist = keyed.distribution(prompt[:j]) if j else None
                tokens.append(entry(dist.logprob_of(prompt[j]) if dist else None, prompt[j]))
                if top_n:
                    tops.append([entry(lp, t) for lp, t in true_top_logprobs(dist, top_n)] if dist else None)
            meta["input_token_logprobs"] = tokens
            if top_n:
                meta["input_top_logprobs"] = tops
    if server.spec is not None:
        state = GenState(
            output_ids=list(a.output_ids),
            verify_ct=a.verify_ct,
            accepted_drafts=a.accepted_drafts,
            proposed_drafts=a.proposed_drafts,
            accept_histogram=list(a.accept_histogram),
        )
        meta.update(server.spec_meta(state))
    return {"text": decode(a.output_ids), "output_ids": list(a.output_ids), "meta_info": meta}


def in_process(spec: SpecSettings | None, faults: Faults | None = None) -> Callable[[dict], Any]:
    """A /generate of this simulator without a process or a socket (JSON both ways, as on the
    wire): for the self-tests and benchmarks/sampling_false_alarms.py."""
    import json

    from specgate.sim.server import spec_counters  # the server imports this module

    server = SampledServer(
        spec, faults or Faults(), CostModel(), "", lambda prompt, max_new: max_new, lambda st: spec_counters(st, "latest")
    )

    def post(body: dict) -> Any:
        return json.loads(json.dumps(answer(server, json.loads(json.dumps(body)))[0]))

    return post
