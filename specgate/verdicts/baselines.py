"""Stored baselines: `baselines/<deployment>/<fingerprint slug>.json`.

Human-readable JSON with provenance and the raw samples, so any verdict can be
re-derived. Written only on request (`--specgate-update-baselines` or
`specgate baseline update`), atomically (temp file, then rename). A file that cannot
be read is an error naming it, never silently replaced.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from specgate.errors import BaselineError
from specgate.verdicts.fingerprint import Fingerprint

FORMAT = "specgate-baseline/1"
BASELINES_DIR = Path(__file__).resolve().parent.parent.parent / "baselines"


@dataclass(frozen=True)
class StoredFigures:
    """One config at one concurrency, as stored."""

    args_digest: str
    decode_tps: float
    decode_tps_low: float
    decode_tps_high: float
    accept_length: float | None
    ratio_to_reference: float | None
    n: int
    # Per-request samples in pinned-sequence order, for paired comparison.
    decode_tps_samples: tuple[float, ...]
    completion_tokens: tuple[int, ...]
    verify_ct: tuple[int | None, ...]
    # Which boot answered each sample (a baseline recorded with launch.boots > 1); all 1 otherwise.
    boots: tuple[int, ...] = ()

    def series(self) -> dict[int, list[float]]:
        """Stored decode tok/s per boot, in pinned-sequence order (see specgate.measure.pairing)."""
        marks = self.boots or (1,) * len(self.decode_tps_samples)
        out: dict[int, list[float]] = {}
        for boot, value in zip(marks, self.decode_tps_samples):
            out.setdefault(boot, []).append(value)
        return out

    @property
    def boot_count(self) -> int:
        return len(set(self.boots)) if self.boots else 1


@dataclass(frozen=True)
class StoredBaseline:
    path: Path
    deployment: str
    workload_digest: str
    fingerprint: Fingerprint
    provenance: dict
    figures: dict[tuple[str, int], StoredFigures]
    excluded: dict[str, str] = field(default_factory=dict)  # config -> why it was not stored


def _require(cond: bool, path: Path, problem: str) -> None:
    if not cond:
        raise BaselineError(path, problem)


def _excluded(path: Path, raw: object) -> dict[str, str]:
    _require(
        isinstance(raw, dict) and all(isinstance(v, str) for v in raw.values()),
        path,
        "field 'excluded': expected a table of config name to reason",
    )
    return {str(k): v for k, v in raw.items()}  # type: ignore[union-attr]


def load_baseline(path: Path) -> StoredBaseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BaselineError(
            path, f"corrupt: not valid JSON ({exc}); fix it or move it aside, it is never overwritten"
        ) from None
    except OSError as exc:
        raise BaselineError(path, f"cannot be read: {exc}") from None
    _require(isinstance(data, dict), path, "expected a JSON object at the top")
    _require(data.get("format") == FORMAT, path, f"field 'format': expected {FORMAT!r}, got {data.get('format')!r}")
    try:
        fingerprint = Fingerprint.from_dict(data["fingerprint"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(path, f"field 'fingerprint': {exc}") from None
    figures: dict[tuple[str, int], StoredFigures] = {}
    configs = data.get("configs")
    _require(isinstance(configs, dict), path, "field 'configs': expected an object of configs")
    for name, entry in configs.items():
        try:
            for conc, fig in entry["concurrency"].items():
                figures[(name, int(conc))] = StoredFigures(
                    args_digest=str(entry["args_digest"]),
                    decode_tps=float(fig["decode_tps"]["estimate"]),
                    decode_tps_low=float(fig["decode_tps"]["low"]),
                    decode_tps_high=float(fig["decode_tps"]["high"]),
                    accept_length=None if fig.get("accept_length") is None else float(fig["accept_length"]["estimate"]),
                    ratio_to_reference=None
                    if fig.get("ratio_to_reference") is None
                    else float(fig["ratio_to_reference"]["estimate"]),
                    n=int(fig["n"]),
                    decode_tps_samples=tuple(float(x) for x in fig["samples"]["decode_tps"]),
                    completion_tokens=tuple(int(x) for x in fig["samples"]["completion_tokens"]),
                    verify_ct=tuple(None if x is None else int(x) for x in fig["samples"]["verify_ct"]),
                    boots=tuple(int(x) for x in fig["samples"].get("boot", ())),
                )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(path, f"field 'configs.{name}': malformed ({type(exc).__name__}: {exc})") from None
    return StoredBaseline(
        path,
        str(data.get("deployment", "")),
        str(data.get("workload_digest", "")),
        fingerprint,
        dict(data.get("provenance", {})),
        figures,
        _excluded(path, data.get("excluded", {})),
    )


@dataclass(frozen=True)
class BaselineLookup:
    exact: StoredBaseline | None
    others: list[StoredBaseline]


def find_baselines(deployment: str, fingerprint: Fingerprint, root: Path = BASELINES_DIR) -> BaselineLookup:
    folder = root / deployment
    exact, others = None, []
    for path in sorted(folder.glob("*.json")):
        stored = load_baseline(path)  # a corrupt file anywhere is an error, not a skip
        if stored.fingerprint == fingerprint:
            exact = stored
        else:
            others.append(stored)
    others.sort(key=lambda b: str(b.provenance.get("date", "")), reverse=True)
    return BaselineLookup(exact, others)


def write_baseline(deployment: str, fingerprint: Fingerprint, document: dict, root: Path = BASELINES_DIR) -> Path:
    folder = root / deployment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{fingerprint.slug}.json"
    if path.exists():
        load_baseline(path)  # refuse to replace a file we cannot read: a human must look first
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
