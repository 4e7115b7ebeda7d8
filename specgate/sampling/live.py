"""The sampling check's view of a running server: POST /generate with a prepared body, a dead or
hung server told as the pool tells it for every other request (pool.LiveServer.generate)."""

from __future__ import annotations

from typing import Any

from specgate.errors import ClientError, RequestTimeout
from specgate.sampling.check import Post
from specgate.server.pool import LiveServer


def poster(server: LiveServer) -> Post:
    def post(body: dict[str, Any]) -> Any:
        try:
            answer = server.client.generate_raw(body)
        except RequestTimeout as exc:
            server.pool.fail_hung(server.name, exc.missed)
            raise
        except ClientError as exc:
            server.pool.raise_if_dead(server.name, during=str(exc))
            raise
        server.handle.requests_served += 1
        return answer

    return post


def why_not_checkable(deployment: Any, reference_stored: bool) -> str | None:
    """Why this run cannot compare samples (None: it can): the reference scores every sample, so
    it must boot in this run, and outputs must be the model's. Servers that take turns are no
    reason: the config's samples are drawn while it is up and scored when its reference is."""
    if not deployment.equivalence.enabled:
        return f"outputs are declared not the model's ([equivalence] enabled = false: {deployment.equivalence.skip_reason})"
    if not deployment.sampling.enabled:
        return "turned off by the deployment ([sampling] enabled = false)"
    if not deployment.sampling.settings:
        return "every setting is turned off by the deployment ([sampling] skip)"
    if reference_stored:
        return 'the reference is not booted (launch.reference_from = "stored"): nothing can score the samples'
    return None
