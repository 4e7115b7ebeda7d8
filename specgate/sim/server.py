"""SIMULATOR HTTP server: the subset of SGLang's native API that specgate speaks.

Endpoints: GET /health, /health_generate, /get_server_info, /get_model_info, /v1/models,
POST /generate (non-streaming JSON, or server-sent events with `"stream": true`),
POST /flush_cache. Response shapes follow SGLang's: `text`, `output_ids` and a
`meta_info` with token counts, finish_reason, latency, optional logprobs and, for
speculative configs, the spec_* counters under SGLang's newer or older names.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from specgate.sim import SIM_LABEL, SIM_VERSION
from specgate.sim.cost import CostModel
from specgate.sim.engine import Generation, GenParams, GenState, SpecSettings
from specgate.sim.faults import Faults
from specgate.sim.features import parse_features
from specgate.sim.noise import RequestNoise
from specgate.sim.sampled_api import SampledServer, answer, wants_sampled_path
from specgate.sim.tokenizer import decode, encode


@dataclass(frozen=True)
class LogprobAsk:
    """What a /generate request asked of logprobs (SGLang's return_logprob, top_logprobs_num,
    return_text_in_logprobs)."""

    on: bool
    top_n: int
    text: bool


@dataclass
class SimServerState:
    server_args: dict[str, Any]
    spec: SpecSettings | None
    faults: Faults
    cost: CostModel
    meta_names: str  # which SGLang release's spelling of the spec counters to send
    incremental_stream: bool  # --incremental-streaming-output: chunks carry deltas
    enable_metrics: bool = False  # --enable-metrics: the final chunk carries decode_throughput, as SGLang's does
    release: str = SIM_VERSION  # --sim-release: the SGLang release this server claims to be
    api_key: str | None = None  # --api-key: as SGLang, 401 without it (health endpoints excepted)
    weights: str = ""  # another --model-path than the default toy: another model
    requests_seen: int = 0
    tokens_total: int = 0
    verify_total: int = 0
    running: int = 0  # requests being generated now: the log's "#running-req"
    lock: threading.Lock = field(default_factory=threading.Lock)
    request_noise: RequestNoise | None = None  # fault h200-noise: each request's own speed

    def cost_for_request(self) -> CostModel:
        """The cost model of a request arriving now (call under `lock`): the batch it joins, and
        its own draw of the request noise."""
        cost = self.cost.for_batch(self.running + 1)
        if self.request_noise is not None:
            cost = replace(cost, request_factor=math.exp(self.request_noise.next()))
        return cost


def spec_counters(st: GenState, names: str) -> dict[str, Any]:
    """The spec_* keys, spelled as the SGLang release `names` spells them."""
    verify = max(st.verify_ct, 1)
    out: dict[str, Any] = {"spec_verify_ct": st.verify_ct}
    if names == "0.5.3":
        return out
    out["spec_accept_length"] = len(st.output_ids) / verify
    out["spec_accept_rate"] = st.accepted_drafts / max(st.proposed_drafts, 1)
    if names == "0.5.8":
        out["spec_accept_token_num"] = st.accepted_drafts
        out["spec_draft_token_num"] = st.proposed_drafts
    elif names == "0.5.11":
        out["spec_accepted_drafts"] = st.accepted_drafts
        out["spec_proposed_drafts"] = st.proposed_drafts
        out["spec_accept_histogram"] = list(st.accept_histogram)
    else:  # "latest": the renamed counters, aliases gone
        out["spec_num_correct_drafts"] = st.accepted_drafts
        out["spec_num_proposed_drafts"] = st.proposed_drafts
        out["spec_correct_drafts_histogram"] = list(st.accept_histogram)
    return out


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] {message}", flush=True)


class Handler(BaseHTTPRequestHandler):
    server_version = "specgate-sim/" + SIM_VERSION
    state: SimServerState  # set on the class by serve()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass  # SGLang logs requests at debug level only; keep the log readable

    # --- plumbing -------------------------------------------------------------
    def _send_json(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _ready(self) -> bool:
        return not self.state.faults.never_ready

    # --- endpoints ------------------------------------------------------------
    def _refused(self, path: str) -> bool:
        """SGLang with --api-key: 401 unless the bearer token matches; /health* is always open."""
        key = self.state.api_key
        if key is None or path.startswith("/health") or self.headers.get("Authorization") == f"Bearer {key}":
            return False
        self._send_json(401, {"error": "Unauthorized"})
        return True

    def _check_length(self, prompt: int, max_new: int) -> int:
        """SGLang 0.5.14's refusals, in its words: the tokenizer manager counts the slots an EAGLE
        server reserves for draft tokens (max(topk x steps, draft tokens)) with the prompt and
        refuses past the context length; the scheduler refuses a prompt of max_req_input_len, and
        clips an answer to max_req_len (the context length less one) less the prompt less one.
        Returns the answer length the request gets. Written apart from
        specgate.equivalence.context_edge on purpose: the gate's model of these rules is tested
        against this one, and one shared function would pass its own mistakes."""
        context = int(self.state.server_args["context_length"])
        spec = self.state.spec
        eagle = spec is not None and spec.algorithm.upper() in ("EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN")
        reserved = max(spec.topk * spec.steps, spec.draft_tokens) if spec and eagle else 0
        reserved += self.state.faults.reserve
        held = prompt + reserved
        if held >= context:
            raise ValueError(f"The input ({held} tokens) is longer than the model's context length ({context} tokens).")
        if held + max_new > context:
            raise ValueError(
                f"Requested token count exceeds the model's maximum context length of {context} tokens. You requested "
                f"a total of {held + max_new} tokens: {held} tokens from the input messages and {max_new} tokens for "
                "the completion. Please reduce the number of tokens in the input messages or the completion to fit "
                "within the limit."
            )
        longest = int(self.state.server_args["max_req_input_len"])
        if prompt >= longest:
            raise ValueError(
                f"Input length ({prompt} tokens) exceeds the maximum allowed length ({longest} tokens). Use a shorter "
                "input or enable --allow-auto-truncate."
            )
        return max(0, min(max_new, context - 1 - prompt - 1))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if self._refused(path):
            return
        if path == self.state.faults.trickle_get:
            self._trickle_body(path)
            return
        if path in ("/health", "/health_generate"):
            if self._ready():
                self._send_json(200, {})
            else:
                self._send_json(503, {"error": "SIMULATOR fault never-ready"})
        elif path == "/get_server_info":
            with self.state.lock:
                avg = self.state.tokens_total / self.state.verify_total if self.state.verify_total else None
            info = dict(self.state.server_args)
            info["version"] = self.state.release + "-specgate-sim"
            info["simulator"] = SIM_LABEL
            info["internal_states"] = [{"avg_spec_accept_length": avg, "last_gen_throughput": 0.0}]
            self._send_json(200, [info] if self.state.faults.server_info_list else info)
        elif path == "/v1/models":
            # SGLang's OpenAI-style list: the only place it names the model's context length.
            model = self.state.server_args["model_path"]
            card = {"id": model, "object": "model", "root": model, "max_model_len": self.state.server_args["context_length"]}
            self._send_json(200, {"object": "list", "data": [card]})
        elif path == "/get_model_info":
            self._send_json(
                200,
                {
                    "model_path": self.state.server_args["model_path"],
                    "tokenizer_path": self.state.server_args["model_path"],
                    "is_generation": True,
                },
            )
        else:
            self._send_json(404, {"error": f"not found: {path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if self._refused(path):
            return
        if path == "/flush_cache":
            self._send_json(200, {})
            return
        if path != "/generate":
            self._send_json(404, {"error": f"not found: {path}"})
            return
        if self.state.faults.echo_headers:
            self._send_json(500, {"error": "SIMULATOR fault echo-headers", "request_headers": dict(self.headers)})
            return
        try:
            body = json.loads(raw)
            if isinstance(body, dict) and wants_sampled_path(body):
                if not self._count_request():
                    self._answer_sampled(body)
                return
            generation, logprobs = self._parse_generate(body)
            choices = self._choices(body, generation)
        except (ValueError, TypeError, KeyError) as exc:
            self._send_json(400, {"error": {"message": f"bad /generate request: {exc}"}})
            return
        if self._count_request():
            return
        if choices:
            self._run_choices([generation, *choices], logprobs)
            return
        self._run(generation, bool(body.get("stream")), logprobs)

    def _choices(self, body: dict, first: Generation) -> list[Generation]:
        """The choices after the first of sampling_params.n > 1 (greedy: all the same answer)."""
        n = int((body.get("sampling_params") or {}).get("n", 1))
        if n < 1:
            raise ValueError("sampling_params.n must be >= 1")
        if n > 1 and body.get("stream"):
            raise ValueError("the simulator answers n > 1 unstreamed only")
        return [
            Generation(first.prompt_ids, first.params, self.state.spec, self.state.faults, first.cost, self.state.weights, j)
            for j in range(1, n)
        ]

    def _run_choices(self, gens: list[Generation], logprobs: LogprobAsk) -> None:
        """n answers of one request, as SGLang's list of answer objects; they run together (one batch):
        the request costs its longest choice."""
        rid = uuid.uuid4().hex
        started = time.perf_counter()
        costs = [sum(cost for _, cost in gen.steps()) for gen in gens]
        delay = started + max(costs) - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        bodies = [
            {"text": g.state.text, "output_ids": list(g.state.output_ids), "meta_info": self._meta(g, started, logprobs, f"{rid}-{j}")}
            for j, g in enumerate(gens)
        ]
        self._send_json(200, bodies)

    def _count_request(self) -> bool:
        """Counts the request for the crash and trickle faults; True where a fault answered it."""
        with self.state.lock:
            self.state.requests_seen += 1
            seen = self.state.requests_seen
        crash_after = self.state.faults.crash_after
        if crash_after is not None and seen > crash_after:
            log(f"SIMULATOR fault crash-after={crash_after}: exiting on request {seen}")
            os._exit(3)
        trickle_after = self.state.faults.trickle_after
        if trickle_after is not None and seen > trickle_after:
            self._trickle(trickle_after, seen)
            return True
        return False

    def _answer_sampled(self, body: dict) -> None:
        """Sampled, batched or prompt-logprob requests (sampled_api.py), answered whole."""
        with self.state.lock:
            cost = self.state.cost_for_request()
        server = SampledServer(
            self.state.spec,
            self.state.faults,
            cost,
            self.state.weights,
            self._check_length,
            lambda st: spec_counters(st, self.state.meta_names),
        )
        started = time.perf_counter()
        response, cost_s = answer(server, body)
        delay = started + cost_s - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        self._send_json(200, response)

    def _trickle(self, after: int, seen: int) -> None:
        """Headers, then keep-alive comments forever: no read ever times out, nothing finishes."""
        log(f"SIMULATOR fault trickle-after={after}: request {seen} gets keep-alives only")
        self._send_forever("text/event-stream", b": keep-alive\n\n", 0.2)

    def _trickle_body(self, path: str) -> None:
        """Headers promising a body, then one byte of it at a time: every read gets a byte in time."""
        log(f"SIMULATOR fault trickle-get={path}: the body trickles and never finishes")
        self._send_forever("application/json", b" ", 0.1, length=10**9)

    def _send_forever(self, content_type: str, chunk: bytes, pause_s: float, length: int | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        try:
            while True:
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(pause_s)
        except OSError:
            return  # the client gave up

    def _parse_generate(self, body: dict) -> tuple[Generation, LogprobAsk]:
        if "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                raise ValueError("input_ids must be a list of integers")
            prompt_ids = list(ids)
        elif isinstance(body.get("text"), str):
            prompt_ids = encode(body["text"])
        else:
            raise ValueError("expected 'text' (a string) or 'input_ids' (a list of integers)")
        sp = body.get("sampling_params") or {}
        stop = sp.get("stop") or ()
        max_new = self._check_length(len(prompt_ids), int(sp.get("max_new_tokens", 128)))
        params = GenParams(
            max_new_tokens=max_new,
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
            stop_token_ids=tuple(sp.get("stop_token_ids") or ()),
            ignore_eos=bool(sp.get("ignore_eos", False)),
            no_stop_trim=bool(sp.get("no_stop_trim", False)),
            features=parse_features(sp),
        )
        with self.state.lock:
            cost = self.state.cost_for_request()
        generation = Generation(prompt_ids, params, self.state.spec, self.state.faults, cost, self.state.weights)
        logprobs = LogprobAsk(
            bool(body.get("return_logprob")),
            int(body.get("top_logprobs_num") or 0),
            bool(body.get("return_text_in_logprobs")),
        )
        return generation, logprobs

    def _meta(
        self,
        gen: Generation,
        started: float,
        logprobs: LogprobAsk,
        rid: str,
        first_token_at: float | None = None,
    ) -> dict:
        st = gen.state
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": st.finish_reason,
            "prompt_tokens": len(gen.prompt_ids),
            "completion_tokens": len(st.output_ids),
            "cached_tokens": 0,
        }
        if logprobs.on:

            def text(tok: int) -> str | None:
                return decode([tok]) if logprobs.text else None

            meta["output_token_logprobs"] = [
                [d.logprob_of(t), t, text(t)] for t, d in zip(st.output_ids, st.distributions)
            ]
            if logprobs.top_n:
                meta["output_top_logprobs"] = [
                    [[lp, tok, text(tok)] for lp, tok in d.top_logprobs(logprobs.top_n)] for d in st.distributions
                ]
        if st.finish_reason is None:
            return meta  # SGLang adds latency and spec counters to the final chunk only
        now = time.perf_counter()
        meta["e2e_latency"] = now - started
        if self.state.enable_metrics and first_token_at is not None and now > first_token_at:
            # SGLang: completion_tokens over the time from the first output to the finish
            meta["decode_throughput"] = len(st.output_ids) / (now - first_token_at)
        if self.state.spec is not None:
            meta.update(spec_counters(st, self.state.meta_names))
            if self.state.faults.fake_verify_ct:  # only the count: the other counters stay the true ones
                meta["spec_verify_ct"] = max(1, round(len(st.output_ids) / self.state.faults.fake_verify_ct))
        return meta

    def _run(self, gen: Generation, stream: bool, logprobs: LogprobAsk) -> None:
        rid = uuid.uuid4().hex
        started = time.perf_counter()
        deadline = started
        sent_text = sent_ids = 0
        first_step: tuple[float, int] | None = None  # (when, tokens) after the prefill step
        held: list[bytes] | None = [] if stream and self.state.faults.burst_stream else None
        halfway = False
        with self.state.lock:
            self.state.running += 1
        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
        try:
            for _tokens, cost_s in gen.steps():
                # Pace against a deadline so sleep overhead never accumulates.
                deadline += cost_s
                delay = deadline - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                if first_step is None:
                    first_step = (time.perf_counter(), len(gen.state.output_ids))
                if stream:
                    text, ids = gen.state.text, list(gen.state.output_ids)
                    if self.state.incremental_stream:
                        text, ids = text[sent_text:], ids[sent_ids:]
                        sent_text, sent_ids = len(gen.state.text), len(gen.state.output_ids)
                    chunk = {
                        "text": text,
                        "output_ids": ids,
                        "meta_info": self._meta(
                            gen, started, logprobs, rid, first_step[0] if first_step else None
                        ),
                    }
                    event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
                    if held is not None:
                        # burst-stream: held until half of max_new_tokens is out, then the rest at the end
                        held.append(event)
                        if not halfway and 2 * len(gen.state.output_ids) >= gen.params.max_new_tokens:
                            halfway = True
                            self.wfile.write(b"".join(held))
                            self.wfile.flush()
                            held.clear()
                        continue
                    self.wfile.write(event)
                    self.wfile.flush()
            if held:
                self.wfile.write(b"".join(held))
                self.wfile.flush()
            with self.state.lock:
                self.state.tokens_total += len(gen.state.output_ids)
                self.state.verify_total += max(gen.state.verify_ct, 1) if self.state.spec else 0
            if stream:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            else:
                body = {
                    "text": gen.state.text,
                    "output_ids": list(gen.state.output_ids),
                    "meta_info": self._meta(gen, started, logprobs, rid),
                }
                self._send_json(200, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; SGLang aborts the request the same way
        with self.state.lock:
            running = self.state.running
            self.state.running -= 1
        # Like SGLang's "Decode batch" line: tokens decoded after the prefill step over the time they took.
        if first_step is not None and len(gen.state.output_ids) > first_step[1]:
            n = len(gen.state.output_ids)
            rate = (n - first_step[1]) / max(time.perf_counter() - first_step[0], 1e-9)
            log(
                f"Decode batch, #running-req: {running}, #token: {n}, cuda graph: {gen.cost.cuda_graph}, "
                f"gen throughput (token/s): {rate:.2f}, #queue-req: 0"
            )


def serve(host: str, port: int, state: SimServerState) -> None:
    handler = type("BoundHandler", (Handler,), {"state": state})
    httpd = ThreadingHTTPServer((host, port), handler)
    httpd.daemon_threads = True
    log(f"{SIM_LABEL}: serving on http://{host}:{port}")
    if state.faults.active:
        log(f"SIMULATOR faults injected: {', '.join(state.faults.active)}")
    log("The server is fired up and ready to roll!" if not state.faults.never_ready else "never-ready fault: not ready")
    try:
        httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        sys.stdout.flush()
