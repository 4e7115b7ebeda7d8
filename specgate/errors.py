"""Errors that name what went wrong and where.

Every error a user can cause (a deployment file, a baseline file, a flag, a server
that never boots) is one of these, and its message names the file, field or command
and what was expected, so nobody has to read a traceback to fix their input.
"""

from __future__ import annotations

from pathlib import Path


class SpecgateError(Exception):
    """Base class: a problem the user can act on, reported without a traceback."""


class DeploymentError(SpecgateError):
    """A deployment file is missing, unreadable or has a bad field."""

    def __init__(self, path: Path | str, field: str | None, problem: str) -> None:
        self.path = Path(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}" + (f": field '{field}'" if field else "")
        super().__init__(f"{where}: {problem}")


class DeploymentErrors(DeploymentError):
    """Every problem found in one deployment file (`specgate check` lists them all)."""

    def __init__(self, errors: list[DeploymentError]) -> None:
        self.errors = errors
        first = errors[0]
        if len(errors) == 1:
            super().__init__(first.path, first.field, first.problem)
            return
        lines = [(f"field '{e.field}': " if e.field else "") + e.problem for e in errors]
        super().__init__(first.path, None, f"{len(errors)} problems:\n  " + "\n  ".join(lines))
        self.field = first.field


class GateKindError(SpecgateError):
    """A gate kind's own code is broken (specgate.gate_kinds): its module, its KIND, or a call of it."""


class BaselineError(SpecgateError):
    """A stored baseline file is corrupt or of an unknown format."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


class ReportError(SpecgateError):
    """A report.json that cannot be read back: not JSON, of a newer version, or a bad field."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


class ServerBootError(SpecgateError):
    """A server never became ready: it exited (`died`), or the boot timeout passed."""

    def __init__(self, message: str, died: bool = False) -> None:
        super().__init__(message)
        self.died = died


class ServerUnavailable(ServerBootError):
    """A server someone else runs (attached by url) never answered: the run could not reach it,
    which says nothing of the change (the run itself broke, not a gate)."""


class Unauthorized(ServerBootError):
    """A server refused specgate's credentials (HTTP 401 or 403): waiting cannot help, and every
    request would be refused the same, so the boot fails at once, naming the credential fields."""


class ServerDiedError(SpecgateError):
    """A server that was ready stopped answering or exited mid-run."""


class ClientError(SpecgateError):
    """A request to a server failed or its answer was not what SGLang sends. Callers that must
    tell the causes apart catch the subclasses (as httpx's exceptions are caught by category);
    `url` is the request's where known, `status` the HTTP status where the server sent one."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class RequestTimeout(ClientError):
    """A request got no complete answer within its wall-clock deadline: the server hangs
    (frozen, or trickling bytes without finishing). Its config is unusable from then on.
    `missed`: what the request missed, without the message's advice (the pool words its own)."""

    def __init__(self, message: str, *, url: str | None = None, missed: str = "") -> None:
        super().__init__(message, url=url)
        self.missed = missed or message


class UntimeableAnswer(SpecgateError):
    """An answer whose decode speed cannot be timed: its tokens arrived in one piece (a server or
    proxy that does not stream, too few tokens, or a client so starved of CPU that it read the
    whole stream at once). `ended_on_its_own`: the answer stopped at the model's end of sequence,
    so sending it again gives the same one piece."""

    def __init__(self, message: str, ended_on_its_own: bool = False) -> None:
        super().__init__(message)
        self.ended_on_its_own = ended_on_its_own


class TransportError(ClientError):
    """No answer at all: the connection was refused, reset or broke mid-answer (a server that
    died, or another process on the port)."""


class HTTPStatusError(ClientError):
    """The server answered with an error status (`status`): 503 while it loads, 400 for a
    request it rejects, 401 without its API key."""


class MalformedAnswer(ClientError):
    """The server answered, but not as SGLang does: not JSON, or a field missing or of the wrong
    type (a proxy, another server on the port, or a release that renamed a field)."""


class EquivalenceFailure(SpecgateError, AssertionError):
    """A speculative answer is not the greedy baseline's: a gate test's failure (an
    AssertionError, so pytest reports it as a failed test, not an error)."""


class GoldenFileError(SpecgateError, ValueError):
    """One field of a stored reference's golden answers is wrong; `field` is its dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field '{field}': {problem}")
        self.field, self.problem = field, problem


class NotRecordedYet(SpecgateError, LookupError):
    """An answer the run was to record first is not there (an ordering of gate tests broken)."""


class GpuQueryFailed(SpecgateError):
    """NVML (the driver's management library) is there but did not answer: unlike "no GPU",
    nothing can be confirmed."""


class SweepStateError(SpecgateError):
    """A sweep's state file is corrupt, or belongs to another grid."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")
