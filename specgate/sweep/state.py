"""A sweep's JSON state: every point measured so far, written after each one.

An interrupted sweep (a CI job cancelled, a machine's time limit) resumes from this file
and boots only the points it lacks. Speeds are compared as ratios measured side by side,
so each session (one invocation) measures its own plain reference and every point's ratio
is taken against the baseline measured in its own wave of its own session, on its own GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic.dataclasses import dataclass as document  # validated on construction: a resumed file is checked

from specgate.atomic import write_json_atomic
from specgate.documents import problem, read_json
from specgate.errors import SweepStateError
from specgate.shared_files import locked

T = TypeVar("T")
STATE_FORMAT = 2  # 2: a baseline per wave (1: one per session, written by 04e67e0)


@document
class PointResult:
    name: str
    axes: dict[str, Any]
    status: str  # "measured" | "failed" | "unpaired" (measured, no baseline beside it): only "measured" is done
    session: str
    gpu: str
    error: str = ""
    decode_tps: list[float] = field(default_factory=list)  # per request, pinned order
    accept_lengths: list[float] = field(default_factory=list)  # per request
    ratio: dict[str, float] | None = None  # paired, over its session's baseline on its GPU
    tau: dict[str, float] | None = None
    t_c_ms: float | None = None
    cycle_cost: float | None = None
    boot_s: float | None = None
    wave: int | None = None  # its wave in its session: its ratio pairs with that wave's baseline
    # A context bucket's result: the characters per token its prompts were built at (its session's
    # measure.density); None for the short workload, and in states written before it was kept.
    chars_per_token: float | None = None

    @property
    def median_tps(self) -> float | None:
        return median(self.decode_tps) if self.decode_tps else None


@document
class SessionRecord:
    id: str
    provenance: dict[str, Any]
    # GPU -> per wave, per-request decode tok/s of that GPU's resident plain reference
    baselines: dict[str, list[list[float]]] = field(default_factory=dict)
    complete: bool = False


@dataclass
class SweepState:
    path: Path
    deployment: str
    plan_digest: str
    sessions: list[SessionRecord] = field(default_factory=list)
    points: dict[str, PointResult] = field(default_factory=dict)

    def built_at(self, context: int) -> dict[float | None, list[str]]:
        """The measured results of context bucket `context` by the characters per token their
        prompts were built at (None: not recorded): more than one key and the bucket's column mixes
        prompts of sessions that counted the tokenizer apart."""
        out: dict[float | None, list[str]] = {}
        for r in self.points.values():
            if r.status == "measured" and r.axes.get("context") == context:
                out.setdefault(r.chars_per_token, []).append(r.name)
        return out

    def done(self, name: str) -> bool:
        return name in self.points and self.points[name].status == "measured"

    def save(self) -> None:
        """Atomically: a sweep killed while writing keeps the previous state. Under the lock of
        its folder, which the sweep holds for its whole run (sweep.run: one sweep per state)."""
        doc = {
            "format": STATE_FORMAT,
            "deployment": self.deployment,
            "plan_digest": self.plan_digest,
            "sessions": [asdict(s) for s in self.sessions],
            "points": [asdict(p) for p in self.points.values()],
        }
        with locked(self.path):
            write_json_atomic(self.path, doc)

    @classmethod
    def open(cls, path: Path, deployment: str, plan_digest: str) -> SweepState:
        """Resume from `path` if it exists (it must be this deployment's grid), else start fresh."""
        if not path.exists():
            return cls(path, deployment, plan_digest)
        try:
            doc = read_json(path, "a sweep state (a JSON file)")
        except (OSError, ValueError) as exc:
            raise SweepStateError(
                path, f"cannot be read as a sweep state ({exc}); move it away to start over"
            ) from None
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
            raise SweepStateError(path, f"expected a sweep state of format {STATE_FORMAT}")
        if doc.get("deployment") != deployment or doc.get("plan_digest") != plan_digest:
            raise SweepStateError(
                path,
                f"holds the sweep of deployment {doc.get('deployment')!r} with grid {doc.get('plan_digest')!r}, not "
                f"{deployment!r} with grid {plan_digest!r} (the [sweep] table or the base config changed): "
                "pass another --state, or move this one away to start over",
            )
        sessions = _entries(path, doc, "sessions", SessionRecord)
        points = {p.name: p for p in _entries(path, doc, "points", PointResult)}
        return cls(path, deployment, plan_digest, sessions, points)


def _entries(path: Path, doc: dict, key: str, kind: type[T]) -> list[T]:
    """doc[key] as a list of `kind`, each checked; an error names the entry and its field."""
    entries = doc.get(key)
    if not isinstance(entries, list):
        raise SweepStateError(path, f"field '{key}': expected a list, got {type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SweepStateError(path, f"field '{key}[{i}]': expected an object")
        try:
            out.append(kind(**entry))
        except ValidationError as exc:
            raise SweepStateError(path, problem(exc, at=f"{key}[{i}]")) from None
        except TypeError as exc:  # an unknown or missing field name
            raise SweepStateError(path, f"field '{key}[{i}]': malformed entry ({exc})") from None
    return out
