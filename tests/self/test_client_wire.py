"""The client against SGLang's wire formats, replayed through httpx.MockTransport:
the variants no simulator flag produces (deltas that repeat, a last event without its
blank line, prompt ids in front, a missing completion_tokens)."""

from __future__ import annotations

import json

import httpx
import pytest

from specgate.client import GenerateRequest, SglangClient
from specgate.errors import ClientError


def sse(*chunks: dict, trailing_blank: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]"
    return body + (b"\n\n" if trailing_blank else b"")


def client_for(body: bytes, content_type: str = "text/event-stream") -> SglangClient:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": content_type})
    )
    return SglangClient("http://sglang.test", transport=transport)


def meta(tokens: int, finish: dict | None = None, **extra) -> dict:
    return {"completion_tokens": tokens, "prompt_tokens": 3, "finish_reason": finish, **extra}


STREAM = GenerateRequest(max_new_tokens=3, text="hi", stream=True)


def test_repeated_deltas_are_all_kept():
    body = sse(
        {"text": "ab", "output_ids": [7], "meta_info": meta(1)},
        {"text": "ab", "output_ids": [7], "meta_info": meta(2)},
        {"text": "ab", "output_ids": [7], "meta_info": meta(3, {"type": "length", "length": 3}, spec_verify_ct=2)},
    )
    r = client_for(body).generate(STREAM)
    assert r.text == "ababab" and r.output_ids == (7, 7, 7)
    assert r.completion_tokens == 3 and r.accept_length == 1.5


def test_cumulative_chunks_and_a_last_event_without_blank_line():
    body = sse(
        {"text": "a", "output_ids": [1], "meta_info": meta(1)},
        {"text": "a b c", "output_ids": [1, 2, 3], "meta_info": meta(3, {"type": "stop", "matched": 2})},
        trailing_blank=False,
    )
    r = client_for(body).generate(STREAM)
    assert r.text == "a b c" and r.output_ids == (1, 2, 3) and r.finish_reason.kind == "stop"
    assert r.first_chunk_tokens == 1 and r.chunks == 2


def test_prompt_ids_in_front_are_dropped():
    body = json.dumps({"text": "x y", "output_ids": [90, 91, 5, 6], "meta_info": meta(2, {"type": "length"})}).encode()
    r = client_for(body, "application/json").generate(GenerateRequest(max_new_tokens=2, text="hi"))
    assert r.output_ids == (5, 6)


def test_missing_completion_tokens_is_an_error_not_an_empty_match():
    body = json.dumps({"text": "x", "output_ids": [5], "meta_info": {"finish_reason": None}}).encode()
    with pytest.raises(ClientError, match="no completion_tokens"):
        client_for(body, "application/json").generate(GenerateRequest(max_new_tokens=2, text="hi"))


def test_error_inside_the_stream_is_raised():
    body = b'data: {"error": {"message": "out of memory"}}\n\n'
    with pytest.raises(ClientError, match="out of memory"):
        client_for(body).generate(STREAM)


def test_a_caller_can_tell_a_status_from_a_broken_connection_from_a_malformed_answer():
    """Errors by category, as httpx's: the status and the URL travel on the exception."""
    from specgate.errors import HTTPStatusError, MalformedAnswer, TransportError

    plain = GenerateRequest(max_new_tokens=2, text="hi")
    loading = httpx.MockTransport(lambda request: httpx.Response(503, content=b"model is loading"))
    with pytest.raises(HTTPStatusError) as status:
        SglangClient("http://sglang.test", transport=loading).generate(plain)
    assert status.value.status == 503 and status.value.url == "http://sglang.test/generate"
    assert "model is loading" in str(status.value)

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(TransportError) as broken:
        SglangClient("http://sglang.test", transport=httpx.MockTransport(refuse)).generate(plain)
    assert broken.value.status is None and broken.value.url == "http://sglang.test/generate"

    with pytest.raises(MalformedAnswer) as odd:
        client_for(b"<html>proxy login</html>", "text/html").generate(plain)
    assert odd.value.url == "http://sglang.test/generate"
    # A field of the answer's meta_info that is wrong carries the URL too.
    no_count = json.dumps({"text": "x", "meta_info": {"finish_reason": None}}).encode()
    with pytest.raises(MalformedAnswer, match="completion_tokens") as field:
        client_for(no_count).generate(plain)
    assert field.value.url == "http://sglang.test/generate"
    for counter in ("Infinity", "-3"):  # Python's json reads Infinity; int() of it overflows
        odd_spec = b'{"text": "x", "meta_info": {"completion_tokens": 2, "spec_verify_ct": ' + counter.encode() + b"}}"
        with pytest.raises(MalformedAnswer, match="spec_"):
            client_for(odd_spec).generate(plain)
    assert all(issubclass(e, ClientError) for e in (HTTPStatusError, TransportError, MalformedAnswer))
