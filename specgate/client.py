"""Client for SGLang's native HTTP API, recording what each request measured.

Token counts come from `meta_info`, never from counting stream chunks: under
speculation one chunk carries several tokens. Fields are read defensively because
SGLang renamed them across releases (see `SPEC_FIELD_NAMES`), streamed `output_ids`
and `text` are cumulative in some releases and deltas in others, and 0.5.1–0.5.4
prefixed `output_ids` with prompt tokens.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import httpx

from specgate.deadline import DeadlineTransport, deadline_at, passed
from specgate.documents import parse_json
from specgate.errors import ClientError, HTTPStatusError, MalformedAnswer, RequestTimeout, TransportError
from specgate.secrets import redact

# Each counter under every name SGLang has used, newest first.
SPEC_FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "accepted_drafts": ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"),
    "proposed_drafts": ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"),
    "histogram": ("spec_correct_drafts_histogram", "spec_accept_histogram"),
}


@dataclass(frozen=True)
class GenerateRequest:
    """One greedy /generate call. `top_logprobs` > 0 asks for that many per output position."""

    max_new_tokens: int
    text: str | None = None
    input_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    top_logprobs: int = 0
    stream: bool = False
    # More sampling params, by SGLang's names, as JSON text (specgate.equivalence.features: the
    # request features equivalence draws, e.g. penalties, min_new_tokens, logit_bias, n, regex).
    extra: str = ""

    @property
    def choices(self) -> int:
        """How many answers the request asks for (sampling_params.n): SGLang returns a list when > 1."""
        return int(json.loads(self.extra).get("n", 1)) if self.extra else 1

    def payload(self) -> dict[str, Any]:
        sampling: dict[str, Any] = {"temperature": 0.0, "max_new_tokens": self.max_new_tokens}
        if self.stop:
            sampling["stop"] = list(self.stop)
        if self.ignore_eos:
            sampling["ignore_eos"] = True
        if self.extra:
            sampling.update(json.loads(self.extra))
        body: dict[str, Any] = {"sampling_params": sampling, "stream": self.stream}
        if self.input_ids is not None:
            body["input_ids"] = list(self.input_ids)
        else:
            body["text"] = self.text
        if self.top_logprobs:
            # logprob_start_len -1: logprobs of output tokens only, not the prompt. The tokens' text
            # comes too, so that a report can say which words a parting chose between.
            body.update(
                return_logprob=True,
                top_logprobs_num=self.top_logprobs,
                logprob_start_len=-1,
                return_text_in_logprobs=True,
            )
        return body


@dataclass(frozen=True)
class FinishReason:
    kind: str  # "length", "stop", "abort" or "unknown"
    matched: int | str | None = None

    @classmethod
    def parse(cls, raw: Any) -> FinishReason:
        if isinstance(raw, dict):
            return cls(str(raw.get("type", "unknown")), raw.get("matched"))
        if isinstance(raw, str):
            return cls(raw)
        return cls("unknown")

    def __str__(self) -> str:
        return self.kind if self.matched is None else f"{self.kind}({self.matched!r})"


@dataclass(frozen=True)
class SpecCounters:
    """Speculative-decoding counters of one request (absent on plain servers)."""

    verify_ct: int
    accepted_drafts: int | None
    proposed_drafts: int | None
    histogram: tuple[int, ...] | None
    server_accept_length: float | None


@dataclass(frozen=True)
class GenerateResult:
    request: GenerateRequest
    text: str
    output_ids: tuple[int, ...]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    e2e_s: float  # measured here, request sent to last byte
    server_e2e_s: float | None  # meta_info.e2e_latency
    ttft_s: float | None = None  # streaming only
    decode_s: float | None = None  # first to last token-bearing chunk
    first_chunk_tokens: int = 0
    chunks: int = 0
    top_logprobs: tuple[tuple[tuple[int, float], ...], ...] | None = None  # per position: (id, logprob) best first
    # The text of each token id seen in top_logprobs, where the server gave it (a token's text does
    # not depend on its position): (id, text) pairs, to name the words a parting chose between.
    token_texts: tuple[tuple[int, str], ...] = ()
    spec: SpecCounters | None = None
    sent_at: float = 0.0  # wall clock (epoch seconds) when the request went out: finds it in server logs
    server_decode_tps: float | None = None  # meta_info.decode_throughput (SGLang with --enable-metrics)
    # The other answers of a request with sampling_params.n > 1 (this one is the first), in order.
    other_choices: tuple[GenerateResult, ...] = ()

    def token_text(self, token: int) -> str | None:
        return self._texts.get(token)

    @cached_property
    def _texts(self) -> dict[int, str]:
        return dict(self.token_texts)

    @property
    def decode_tps(self) -> float | None:
        """Tokens after the first chunk over the time they took to arrive."""
        later = self.completion_tokens - self.first_chunk_tokens
        if self.decode_s is None or self.decode_s <= 0 or later <= 0:
            return None
        return later / self.decode_s

    @property
    def accept_length(self) -> float | None:
        """completion_tokens / spec_verify_ct of this request alone (the server's own
        average in /get_server_info is cumulative since boot, warmup included)."""
        if self.spec is None or self.spec.verify_ct <= 0:
            return None
        return self.completion_tokens / self.spec.verify_ct


@dataclass
class _StreamState:
    text: str = ""
    ids: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    chunks: int = 0
    t_first: float | None = None
    t_last: float | None = None
    first_tokens: int = 0


def curl_command(base_url: str, request: GenerateRequest, api_key_env: str | None = None) -> str:
    """A copy-paste reproducer for one request: the key by its variable, never its value, and
    no password from the URL."""
    body = json.dumps(request.payload(), ensure_ascii=False)
    auth = f' -H "Authorization: Bearer ${api_key_env}"' if api_key_env else ""
    url = redact(base_url.rstrip("/") + "/generate")
    return f"curl -s {shlex.quote(url)}{auth} -H 'Content-Type: application/json' -d {shlex.quote(body)}"


# Whole-request deadlines of the probes (each probe's, not the boot's: boot_timeout_s bounds that).
HEALTH_PROBE_S = 10.0
INFO_REQUEST_S = 30.0
# The statuses of a server that refuses the request's credentials (none, or the wrong ones).
UNAUTHORIZED = (401, 403)


class SglangClient:
    """`timeout_s` bounds each request in wall-clock time (workload.request_timeout_s): a server
    that trickles bytes or keep-alives without finishing is cut off at that deadline, not only
    one that goes silent (httpx's own timeout is per read; `deadline.py` bounds the whole). The
    probes (/health_generate, the info endpoints) have whole-request deadlines of their own."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
        api_key: str | None = None,
    ) -> None:
        if (problem := url_problem(base_url)) is not None:
            raise ClientError(f"{redact(base_url)}: {problem}", url=base_url)
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.last_probe = ""  # why the last /health_generate probe was not a 200, for boot errors
        self.last_status: int | None = None  # the last probe's HTTP status (None: no answer)
        self.last_unreached = False  # the last probe's connection was not taken (refused, no route)
        # No pool cap: the workload's concurrency is what the server must see at once, and a
        # cap would queue requests here while the report still called it that concurrency.
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self._http = httpx.Client(
            # SGLang started with --api-key answers 401 to requests without the key as a bearer token.
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            limits=limits,
            # tests replay SGLang's wire formats here without a server
            transport=transport if transport is not None else DeadlineTransport(limits),
        )

    def close(self) -> None:
        self._http.close()

    # --- server endpoints -------------------------------------------------------
    def is_ready(self, within_s: float = HEALTH_PROBE_S) -> bool:
        """SGLang's /health_generate runs a one-token generation: ready means it can serve. The
        probe ends within `within_s` whatever the server sends; `last_probe` says why it was not ready."""
        url = self.base_url + "/health_generate"
        at = time.monotonic() + within_s
        self.last_status = None
        self.last_unreached = False
        try:
            with deadline_at(at):
                status = self._http.get(url, timeout=within_s).status_code
        except httpx.TimeoutException as exc:
            self.last_probe = self._probe_timeout("GET", url, within_s, at, exc)
            return False
        except httpx.ConnectError as exc:  # nothing listens there (yet): a server that is starting, or a wrong address
            self.last_unreached = True
            self.last_probe = f"GET {redact(url)}: {type(exc).__name__}: {redact(str(exc))}"
            return False
        except httpx.HTTPError as exc:
            self.last_probe = f"GET {redact(url)}: {type(exc).__name__}: {redact(str(exc))}"
            return False
        self.last_status = status
        self.last_probe = "" if status == 200 else f"GET {redact(url)}: HTTP {status}"
        return status == 200

    @staticmethod
    def _probe_timeout(method: str, url: str, within_s: float, at: float, exc: Exception) -> str:
        how = (
            "the deadline passed before the answer was complete"
            if passed(at)
            else f"{type(exc).__name__}: no byte came for that long"
        )
        return f"{method} {redact(url)}: no complete answer within {within_s:g} s ({how})"

    def _get_first(self, paths: tuple[str, ...]) -> dict[str, Any]:
        """The first of `paths` that answers a JSON object, all of them asked within the client's
        timeout (each within INFO_REQUEST_S too): init's 10 s per server took 30 s per path from a
        server trickling its answer, two paths, two servers: two minutes."""
        errors = []
        denied: int | None = None  # 401/403: the server answered and wants a key (said apart: its fix differs)
        whole = time.monotonic() + self.timeout_s
        for path in paths:
            limit = min(INFO_REQUEST_S, max(0.0, whole - time.monotonic()))
            at = time.monotonic() + limit
            try:
                with deadline_at(at):
                    resp = self._http.get(self.base_url + path, timeout=limit)
            except httpx.TimeoutException as exc:
                errors.append(self._probe_timeout("GET", self.base_url + path, limit, at, exc))
                continue
            except httpx.HTTPError as exc:
                errors.append(f"{path}: {exc}")
                continue
            if resp.status_code == 200:
                try:
                    body = parse_json(resp.content)
                except ValueError as exc:  # a NestedTooDeeply among them: its RecursionError was a traceback
                    errors.append(f"{path}: not JSON ({str(exc)[:120]})")
                    continue
                if isinstance(body, dict):
                    return body
                errors.append(f"{path}: expected a JSON object, got {type(body).__name__} {str(body)[:100]}")
            elif resp.status_code in UNAUTHORIZED:
                # Refused, not missing: the older name would be refused the same, and the caller
                # must say the credentials are wrong, not that the server reports nothing.
                raise HTTPStatusError(
                    f"GET {redact(self.base_url + path)} answered HTTP {resp.status_code}",
                    url=self.base_url + path,
                    status=resp.status_code,
                )
            else:
                errors.append(f"{path}: HTTP {resp.status_code}")
                if resp.status_code in (401, 403):
                    denied = resp.status_code
        said = f"{self.base_url}: none of {', '.join(paths)} answered: {'; '.join(errors)}"
        if denied is not None:
            raise HTTPStatusError(said, url=self.base_url, status=denied)
        raise ClientError(said, url=self.base_url)

    def server_info(self) -> dict[str, Any]:
        # /server_info is the newer name (0.5.6+); /get_server_info the older one.
        return self._get_first(("/server_info", "/get_server_info"))

    def model_info(self) -> dict[str, Any]:
        return self._get_first(("/model_info", "/get_model_info"))

    def served_models(self) -> dict[str, Any]:
        """The OpenAI-compatible model list: SGLang's names the model's context length there
        (`max_model_len`), which no field of /server_info holds."""
        return self._get_first(("/v1/models",))

    # --- generation ---------------------------------------------------------------
    def generate(self, request: GenerateRequest) -> GenerateResult:
        url = self.base_url + "/generate"
        started = time.perf_counter()
        deadline = started + self.timeout_s
        at = time.monotonic() + self.timeout_s  # the same deadline, for the reads themselves
        st = _StreamState() if request.stream else None
        try:
            with deadline_at(at), self._http.stream("POST", url, json=request.payload()) as resp:
                if resp.status_code != 200:
                    body = self._read_until(resp, deadline, url)
                    text = body.decode("utf-8", errors="replace")
                    raise HTTPStatusError(
                        f"POST {url} answered HTTP {resp.status_code}: {text[:500]}", url=url, status=resp.status_code
                    )
                if st is not None:
                    return self._generate_stream(url, request, started, deadline, resp, st)
                body = self._read_until(resp, deadline, url)
        except httpx.TimeoutException as exc:
            how = (
                "the deadline passed before the answer was complete"
                if passed(at)
                else f"{type(exc).__name__}: no byte came for that long"
            )
            raise self._timeout(url, how) from None
        except httpx.HTTPError as exc:
            raise TransportError(f"POST {url} failed: {type(exc).__name__}: {exc}", url=url) from None
        ended = time.perf_counter()
        try:
            parsed = parse_json(body)
        except ValueError:
            raise MalformedAnswer(f"POST {url} answered non-JSON: {body[:200]!r}", url=url) from None
        if request.choices > 1:
            return self._choices(url, request, parsed, started, ended)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("meta_info"), dict):
            raise MalformedAnswer(
                f"POST {url}: expected an object with a meta_info object, got {str(parsed)[:200]}", url=url
            )
        return self._result(
            request, parsed.get("text", ""), parsed.get("output_ids"), parsed["meta_info"], started, ended
        )

    def _choices(self, url: str, request: GenerateRequest, parsed: Any, started: float, ended: float) -> GenerateResult:
        """SGLang answers sampling_params.n > 1 with a list of n answer objects: the first, carrying
        the others (GenerateResult.other_choices)."""
        if (
            not isinstance(parsed, list)
            or len(parsed) != request.choices
            or not all(isinstance(a, dict) and isinstance(a.get("meta_info"), dict) for a in parsed)
        ):
            raise MalformedAnswer(
                f"POST {url}: sampling_params.n = {request.choices}: expected a list of {request.choices} objects with "
                f"a meta_info object each, got {str(parsed)[:200]}",
                url=url,
            )
        answers = [self._result(request, a.get("text", ""), a.get("output_ids"), a["meta_info"], started, ended) for a in parsed]
        return replace(answers[0], other_choices=tuple(answers[1:]))

    def generate_raw(self, payload: dict[str, Any]) -> Any:
        """POST /generate with a body built elsewhere (the sampling test's batches and scoring
        requests), under the same whole-request deadline; the parsed JSON answer."""
        url = self.base_url + "/generate"
        deadline = time.perf_counter() + self.timeout_s
        at = time.monotonic() + self.timeout_s
        try:
            with deadline_at(at), self._http.stream("POST", url, json=payload) as resp:
                body = self._read_until(resp, deadline, url)
                if resp.status_code != 200:
                    text = body.decode("utf-8", errors="replace")
                    raise HTTPStatusError(
                        f"POST {url} answered HTTP {resp.status_code}: {text[:500]}", url=url, status=resp.status_code
                    )
        except httpx.TimeoutException as exc:
            how = (
                "the deadline passed before the answer was complete"
                if passed(at)
                else f"{type(exc).__name__}: no byte came for that long"
            )
            raise self._timeout(url, how) from None
        except httpx.HTTPError as exc:
            raise TransportError(f"POST {url} failed: {type(exc).__name__}: {exc}", url=url) from None
        try:
            return parse_json(body)
        except ValueError:
            raise MalformedAnswer(f"POST {url} answered non-JSON: {body[:200]!r}", url=url) from None

    def _timeout(self, url: str, how: str) -> RequestTimeout:
        missed = f"POST {url}: no complete answer within workload.request_timeout_s = {self.timeout_s:g} s ({how})"
        return RequestTimeout(
            f"{missed}; the server hangs, or that deadline is too short for one answer of the workload"
            + (" (it is under a second)" if self.timeout_s < 1 else ""),
            url=url,
            missed=missed,
        )

    def _read_until(self, resp: httpx.Response, deadline: float, url: str) -> bytes:
        body = b""
        for data in resp.iter_bytes():
            body += data
            if time.perf_counter() > deadline:
                raise self._timeout(url, f"still sending after {len(body)} bytes")
        return body

    def _generate_stream(
        self,
        url: str,
        request: GenerateRequest,
        started: float,
        deadline: float,
        resp: httpx.Response,
        st: _StreamState,
    ) -> GenerateResult:
        buffer = b""
        for data in resp.iter_bytes():
            now = time.perf_counter()
            buffer += data
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                self._on_event(url, event, now, st)
            if now > deadline:
                # Checked after every read: keep-alives and slow trickles never end a read timeout.
                raise self._timeout(url, f"still streaming after {st.chunks} chunk(s)")
        ended = time.perf_counter()
        if buffer.strip():  # a last event without its blank line
            self._on_event(url, buffer, ended, st)
        if not st.meta:
            raise MalformedAnswer(f"POST {url} (stream) ended without a single data chunk", url=url)
        return self._result(request, st.text, st.ids, st.meta, started, ended, st)

    @staticmethod
    def _on_event(url: str, event: bytes, now: float, st: _StreamState) -> None:
        line = event.strip()
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        try:
            chunk = parse_json(data)
        except ValueError:
            raise MalformedAnswer(f"POST {url} (stream): chunk is not JSON: {data[:200]!r}", url=url) from None
        if not isinstance(chunk, dict):
            raise MalformedAnswer(f"POST {url} (stream): expected each chunk to be a JSON object, got {data[:200]!r}", url=url)
        if "error" in chunk:
            raise ClientError(f"POST {url} (stream): server sent an error: {chunk['error']}", url=url)
        meta = chunk.get("meta_info") or {}
        if not isinstance(meta, dict):
            raise MalformedAnswer(f"POST {url} (stream): meta_info: expected an object, got {str(meta)[:200]}", url=url)
        tokens = _count(url, meta, "completion_tokens", 0)
        before = int(st.meta.get("completion_tokens", 0))
        # Cumulative or delta? Decided from the ids, whose count meta_info gives us:
        # cumulative chunks carry all `tokens` ids (0.5.1-0.5.4: more, prompt first).
        ids = chunk.get("output_ids")
        text = chunk.get("text", "")
        if not isinstance(text, str):
            raise MalformedAnswer(f"POST {url} (stream): text: expected a string, got {str(text)[:100]}", url=url)
        if isinstance(ids, list):
            cumulative = len(ids) >= tokens and (len(ids) > 0 or tokens == 0)
            st.ids = list(ids) if cumulative else st.ids + list(ids)
        else:
            cumulative = text.startswith(st.text)  # no ids: the text itself is all there is to go by
        st.text = text if cumulative else st.text + text
        st.meta = {**st.meta, **meta}
        st.chunks += 1
        if tokens > before:
            if st.t_first is None:
                st.t_first, st.first_tokens = now, tokens
            st.t_last = now

    def _result(
        self,
        request: GenerateRequest,
        text: str,
        output_ids: Any,
        meta: dict[str, Any],
        started: float,
        ended: float,
        st: _StreamState | None = None,
    ) -> GenerateResult:
        where = f"{self.base_url}/generate"
        if meta.get("completion_tokens") is None:
            # Without it nothing can be counted; an empty answer would pass as "equal".
            raise MalformedAnswer(f"{where}: meta_info has no completion_tokens: {str(meta)[:300]}", url=where)
        completion = _count(where, meta, "completion_tokens")
        if output_ids is not None and (
            not isinstance(output_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in output_ids)
        ):
            raise MalformedAnswer(f"{where}: output_ids: expected a list of token ids, got {str(output_ids)[:200]}", url=where)
        if not isinstance(text, str):
            raise MalformedAnswer(f"{where}: text: expected a string, got {str(text)[:100]}", url=where)
        top_logprobs, token_texts = _parse_top_logprobs(where, meta.get("output_top_logprobs"), request.top_logprobs)
        ids = tuple(output_ids or ())
        if completion and len(ids) > completion:
            ids = ids[len(ids) - completion :]  # 0.5.1–0.5.4 put prompt tokens in front
        return GenerateResult(
            request=request,
            text=text,
            output_ids=ids,
            prompt_tokens=_count(where, meta, "prompt_tokens", 0),
            completion_tokens=completion,
            finish_reason=FinishReason.parse(meta.get("finish_reason")),
            e2e_s=ended - started,
            server_e2e_s=_reading(where, meta, "e2e_latency"),
            ttft_s=(st.t_first - started) if st and st.t_first is not None else None,
            decode_s=(st.t_last - st.t_first) if st and st.t_first is not None and st.t_last is not None else None,
            first_chunk_tokens=st.first_tokens if st else 0,
            chunks=st.chunks if st else 1,
            top_logprobs=top_logprobs,
            token_texts=token_texts,
            spec=_parse_spec(where, meta),
            sent_at=time.time() - (time.perf_counter() - started),
            server_decode_tps=_reading(where, meta, "decode_throughput"),
        )


def _count(where: str, meta: dict[str, Any], key: str, default: int | None = None) -> int:
    """A token count from meta_info: a whole number >= 0, or an error naming the field."""
    value = meta.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedAnswer(f"{where}: meta_info.{key}: expected a whole number >= 0, got {value!r}", url=where)
    return value


def url_problem(url: str) -> str | None:
    """Why httpx cannot send a request to `url` (a host that is no IDNA name: an emoji), or None.
    httpx raises InvalidURL, which is no httpx.HTTPError, at the request: a raw traceback."""
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError) as exc:
        return f"not an address a request can be sent to ({exc})"
    return None


def _reading(where: str, meta: dict[str, Any], key: str) -> float | None:
    """A figure the server measured (a time, a rate, an accept length): None where it gave none, a
    finite number >= 0 where it did. Anything else (NaN, Infinity, a word: Python's json reads the
    first two) is a misbehaving server, named by the field: a NaN that reached the statistics ended
    the run as an ERROR with no report."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise MalformedAnswer(f"{where}: meta_info.{key}: expected a finite number >= 0, got {str(value)[:100]}", url=where)
    return float(value)


TopLogprobs = tuple[tuple[tuple[int, float], ...], ...]


def _parse_top_logprobs(
    where: str, raw: Any, asked: int = 0
) -> tuple[TopLogprobs | None, tuple[tuple[int, str], ...]]:
    """[[(logprob, id, text), ...] per position] → ((id, logprob), ...) per position, best first,
    and the (id, text) pairs where the server gave a text (return_text_in_logprobs; None without).
    Only the `asked` best of a position are kept (all where nothing was asked): a server that
    lists more than asked cannot make a report that much larger."""
    if raw is None:
        return None, ()
    bad = MalformedAnswer(
        f"{where}: meta_info.output_top_logprobs: expected a list per position of [logprob, token_id, text] "
        f"entries, got {str(raw)[:200]}",
        url=where,
    )
    if not isinstance(raw, list):
        raise bad
    positions = []
    texts: dict[int, str] = {}
    for entry in raw:
        if entry is not None and not isinstance(entry, list):
            raise bad
        listed = []
        for item in entry or ():
            if not isinstance(item, (list, tuple)) or len(item) < 2:
                raise bad
            if item[0] is None:
                continue
            logprob, token = item[0], item[1]
            if (
                isinstance(logprob, bool)
                or not isinstance(logprob, (int, float))
                or not math.isfinite(logprob)  # an infinite logprob ranks nothing, and no report could hold it
                or isinstance(token, bool)
                or not isinstance(token, int)
            ):
                raise bad
            listed.append((token, float(logprob), item[2] if len(item) > 2 and isinstance(item[2], str) else None))
        listed.sort(key=lambda p: -p[1])
        kept = listed[:asked] if asked > 0 else listed
        for token, _, text in kept:
            if text is not None:
                texts.setdefault(token, text)
        positions.append(tuple((token, logprob) for token, logprob, _ in kept))
    return tuple(positions), tuple(sorted(texts.items()))


def _first_present(meta: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if meta.get(name) is not None:
            return meta[name]
    return None


def _parse_spec(where: str, meta: dict[str, Any]) -> SpecCounters | None:
    if meta.get("spec_verify_ct") is None:
        return None
    accept_length = _reading(where, meta, "spec_accept_length")
    try:
        return _spec_counters(meta, accept_length)
    except (TypeError, ValueError, OverflowError) as exc:  # Infinity parses as JSON; int() of it overflows
        raise MalformedAnswer(
            f"{where}: meta_info spec_* counters: expected whole numbers ({exc}): {str(meta)[:300]}", url=where
        ) from None


def _spec_counters(meta: dict[str, Any], accept_length: float | None) -> SpecCounters:
    accepted = _first_present(meta, SPEC_FIELD_NAMES["accepted_drafts"])
    proposed = _first_present(meta, SPEC_FIELD_NAMES["proposed_drafts"])
    histogram = _first_present(meta, SPEC_FIELD_NAMES["histogram"])
    counters = SpecCounters(
        verify_ct=int(meta["spec_verify_ct"]),
        accepted_drafts=None if accepted is None else int(accepted),
        proposed_drafts=None if proposed is None else int(proposed),
        histogram=tuple(int(x) for x in histogram) if isinstance(histogram, list) else None,
        server_accept_length=accept_length,
    )
    counts = [counters.verify_ct, counters.accepted_drafts, counters.proposed_drafts, *(counters.histogram or ())]
    if any(c is not None and c < 0 for c in counts):
        raise ValueError("a negative count")
    return counters
