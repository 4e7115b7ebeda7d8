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


class BaselineError(SpecgateError):
    """A stored baseline file is corrupt or of an unknown format."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


class ServerBootError(SpecgateError):
    """A server never became ready: it exited (`died`), or the boot timeout passed."""

    def __init__(self, message: str, died: bool = False) -> None:
        super().__init__(message)
        self.died = died


class ServerDiedError(SpecgateError):
    """A server that was ready stopped answering or exited mid-run."""


class ClientError(SpecgateError):
    """A request to a server failed or its answer was not what SGLang sends."""


class RequestTimeout(ClientError):
    """A request got no complete answer within its wall-clock deadline: the server hangs
    (frozen, or trickling bytes without finishing). Its config is unusable from then on."""


class SweepStateError(SpecgateError):
    """A sweep's state file is corrupt, or belongs to another grid."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")
