"""Whole-request deadlines for httpx: a server that answers headers and then trickles its body
never trips httpx's own timeouts, which bound each read (and each connect and write) alone.

`DeadlineTransport` is httpx's own transport whose sockets read and write against the calling
thread's deadline, set around a request (headers and body alike) with `deadline_at`: every read
waits at most the time left, and one begun after the deadline fails at once, as httpx's
ReadTimeout. The sync client does a request's I/O on the calling thread, so a thread-local
deadline is the request's own, even on a pooled connection another request opened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_local = threading.local()


def _left(timeout: float | None) -> float | None:
    """`timeout` (httpx's per-operation one), cut to the time left before this thread's deadline."""
    at: float | None = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the whole-request deadline passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def deadline_at(at: float) -> Iterator[None]:
    """I/O on this thread, in this block, ends by `at` (time.monotonic()); nested blocks keep the earlier."""
    previous: float | None = getattr(_local, "at", None)
    _local.at = at if previous is None else min(at, previous)
    try:
        yield
    finally:
        _local.at = previous


def passed(at: float) -> bool:
    return time.monotonic() >= at


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _left(timeout), local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx.HTTPTransport with its connection pool's network backend wrapped (httpx offers no
    argument for one: the pool's attribute is set, and checked, so an httpx that renames it fails
    here, loudly, not by silently losing the deadline)."""

    def __init__(self, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        pool = getattr(self, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
            raise RuntimeError(
                f"httpx {httpx.__version__} / httpcore {httpcore.__version__}: HTTPTransport._pool._network_backend "
                "not found; specgate's whole-request deadline needs it (specgate/deadline.py)"
            )
        inner = pool._network_backend
        pool._network_backend = _Backend(inner)
