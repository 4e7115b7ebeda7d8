"""Stored baselines: `baselines/<deployment>/<fingerprint slug>.json`.

Human-readable JSON with provenance and the raw samples, so any verdict can be
re-derived. Written only on request (`--specgate-update-baselines` or
`specgate baseline update`), atomically (temp file, then rename). A file that cannot
be read is an error naming it, never silently replaced.

Format versions: `specgate-baseline/1` holds figures and samples; `/2` adds, optionally, the
reference's golden answers (`golden`, written for deployments with `launch.reference_from =
"stored"`, which check equivalence against them without booting the reference) and each
config's boot time (`boot_seconds`, so a run that skips a boot can say what it saved). Both
load; a `/1` file simply has neither, and a run that needs them says so and fails closed.
Every write is `/2`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from specgate.atomic import write_json_atomic
from specgate.equivalence.golden import GoldenAnswers, parse_golden
from specgate.errors import BaselineError, GoldenFileError
from specgate.verdicts.fingerprint import Fingerprint

FORMAT = "specgate-baseline/2"
# Every format this version reads (oldest first); see the module docstring for what each holds.
READABLE_FORMATS = ("specgate-baseline/1", FORMAT)


@dataclass(frozen=True)
class StoredFigures:
    """One config at one concurrency, as stored."""

    args_digest: str
    decode_tps_median: float  # the stored run's median decode tok/s (the document's decode_tps.estimate)
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
    # The draft weights' checksum when the baseline was recorded (specgate.report.drafters), if known.
    drafter_sha256: str | None = None
    # The release the config's own server reported (per config: a run may hold two installs).
    server_version: str | None = None
    # Per-request TTFT in the same order (absent in files written before it was read back).
    ttft_samples: tuple[float, ...] = ()
    # Seconds its server took to boot in the recording run (format /2; None where unknown).
    boot_seconds: float | None = None

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
    format: str = FORMAT
    # The reference's answers for a fixed case list (format /2, stored-reference deployments only).
    golden: GoldenAnswers | None = None


def _require(cond: bool, path: Path, problem: str) -> None:
    if not cond:
        raise BaselineError(path, problem)


def _excluded(path: Path, raw: object) -> dict[str, str]:
    _require(
        isinstance(raw, dict) and all(isinstance(v, str) for v in raw.values()),
        path,
        "field 'excluded': expected a table of config name to reason",
    )
    return {str(k): v for k, v in cast(dict, raw).items()}  # _require checked it is one


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
    _require(
        data.get("format") in READABLE_FORMATS,
        path,
        f"field 'format': expected one of {', '.join(map(repr, READABLE_FORMATS))}, got {data.get('format')!r}",
    )
    try:
        fingerprint = Fingerprint.from_dict(data["fingerprint"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(path, f"field 'fingerprint': {exc}") from None
    figures: dict[tuple[str, int], StoredFigures] = {}
    configs = data.get("configs")
    _require(isinstance(configs, dict), path, "field 'configs': expected an object of configs")
    for name, entry in configs.items():
        try:
            figures.update(_config_figures(name, entry))
        except _Bad as bad:
            raise BaselineError(
                path, f"field '{bad.field}': {bad.problem}; the file is wrong, not the machine: fix it or record it anew"
            ) from None
    golden = None
    if data.get("golden") is not None:
        _require(data["format"] != READABLE_FORMATS[0], path, "field 'golden': format specgate-baseline/1 holds none")
        try:
            golden = parse_golden(data["golden"])
        except GoldenFileError as exc:
            raise BaselineError(path, f"{exc}; the file is wrong, not the machine: fix it or record it anew") from None
    return StoredBaseline(
        path,
        str(data.get("deployment", "")),
        str(data.get("workload_digest", "")),
        fingerprint,
        dict(data.get("provenance", {})),
        figures,
        _excluded(path, data.get("excluded", {})),
        format=data["format"],
        golden=golden,
    )


# Far beyond any real figure: such a value is a broken file, and it would decide a gate.
_ABSURD_TPS = 1e7
_ABSURD_TOKENS = 1 << 20


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


def _num(field: str, value: object, *, minimum: float = 0.0, strict: bool = True, maximum: float = math.inf) -> float:
    """A finite JSON number above (or, not strict, at least) `minimum`: a string, bool or NaN is no figure."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(field, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise _Bad(field, f"expected a finite number, got {value}")
    if value < minimum or (strict and value == minimum) or value > maximum:
        bound = f"{'>' if strict else '>='} {minimum:g}" + (f" and <= {maximum:g}" if maximum < math.inf else "")
        raise _Bad(field, f"expected a number {bound}, got {value}")
    return float(value)


def _whole(field: str, value: object, minimum: int, maximum: int = _ABSURD_TOKENS) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _Bad(field, f"expected a whole number from {minimum} to {maximum}, got {value!r}")
    return value


def _obj(field: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise _Bad(field, f"expected an object, got {value!r}")
    return value


def _list(field: str, value: object, n: int) -> list:
    if not isinstance(value, list):
        raise _Bad(field, f"expected a list of {n} per-request figures, got {str(value)[:80]}")
    if len(value) != n:
        raise _Bad(field, f"expected {n} per-request figures (field 'n'), got {len(value)}")
    return value


def _interval(field: str, raw: object, maximum: float = math.inf, minimum: float = 0.0) -> tuple[float, float, float]:
    iv = _obj(field, raw)
    est, low, high = (
        _num(f"{field}.{k}", iv.get(k), minimum=minimum, maximum=maximum) for k in ("estimate", "low", "high")
    )
    if low > high:
        raise _Bad(field, f"low {low} is above high {high}")
    return est, low, high


def _config_figures(name: str, entry: object) -> dict[tuple[str, int], StoredFigures]:
    where = f"configs.{name}"
    entry = _obj(where, entry)
    digest = entry.get("args_digest")
    if not isinstance(digest, str) or not digest:
        raise _Bad(f"{where}.args_digest", f"expected the launch digest string, got {digest!r}")
    drafter = entry.get("drafter_sha256")
    if drafter is not None and (not isinstance(drafter, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", drafter)):
        raise _Bad(f"{where}.drafter_sha256", f"expected a sha256 hex digest or null, got {drafter!r}")
    drafter = drafter.lower() if drafter else None
    version = entry.get("server_version")
    if version is not None and (not isinstance(version, str) or not version.strip()):
        raise _Bad(f"{where}.server_version", f"expected the release the server reported (a string) or null, got {version!r}")
    boot_seconds = None
    if entry.get("boot_seconds") is not None:
        boot_seconds = _num(f"{where}.boot_seconds", entry["boot_seconds"], strict=False, maximum=1e6)
    out = {}
    for conc, raw in _obj(f"{where}.concurrency", entry.get("concurrency")).items():
        at = f"{where}.concurrency.{conc}"
        if not conc.isdigit() or int(conc) < 1:
            raise _Bad(at, "expected a concurrency (a whole number >= 1) as the key")
        fig = _obj(at, raw)
        n = _whole(f"{at}.n", fig.get("n"), 1)
        tps = _interval(f"{at}.decode_tps", fig.get("decode_tps"), _ABSURD_TPS)
        accept = None
        if fig.get("accept_length") is not None:
            accept = _interval(f"{at}.accept_length", fig["accept_length"], minimum=1.0)[0]
        ratio = None
        if fig.get("ratio_to_reference") is not None:
            ratio = _interval(f"{at}.ratio_to_reference", fig["ratio_to_reference"])[0]
        samples = _obj(f"{at}.samples", fig.get("samples"))
        tps_samples = tuple(
            _num(f"{at}.samples.decode_tps[{i}]", v, maximum=_ABSURD_TPS)
            for i, v in enumerate(_list(f"{at}.samples.decode_tps", samples.get("decode_tps"), n))
        )
        tokens = tuple(
            _whole(f"{at}.samples.completion_tokens[{i}]", v, 1)
            for i, v in enumerate(_list(f"{at}.samples.completion_tokens", samples.get("completion_tokens"), n))
        )
        verify = []
        for i, v in enumerate(_list(f"{at}.samples.verify_ct", samples.get("verify_ct"), n)):
            # Each verify step yields at least one token: more steps than tokens is no record of a run.
            verify.append(None if v is None else _whole(f"{at}.samples.verify_ct[{i}]", v, 1, tokens[i]))
        ttft: tuple[float, ...] = ()
        if samples.get("ttft_s") is not None:
            ttft = tuple(
                _num(f"{at}.samples.ttft_s[{i}]", v, strict=False, maximum=1e6)
                for i, v in enumerate(_list(f"{at}.samples.ttft_s", samples["ttft_s"], n))
            )
        boots: tuple[int, ...] = ()
        if samples.get("boot") is not None:  # recorded with launch.boots > 1 (absent in older files)
            boots = tuple(
                _whole(f"{at}.samples.boot[{i}]", v, 1, 1000)
                for i, v in enumerate(_list(f"{at}.samples.boot", samples["boot"], n))
            )
        out[(name, int(conc))] = StoredFigures(
            args_digest=digest,
            decode_tps_median=tps[0],
            decode_tps_low=tps[1],
            decode_tps_high=tps[2],
            accept_length=accept,
            ratio_to_reference=ratio,
            n=n,
            decode_tps_samples=tps_samples,
            completion_tokens=tokens,
            verify_ct=tuple(verify),
            boots=boots,
            drafter_sha256=drafter,
            server_version=version,
            ttft_samples=ttft,
            boot_seconds=boot_seconds,
        )
    return out


@dataclass(frozen=True)
class BaselineLookup:
    exact: StoredBaseline | None
    others: list[StoredBaseline]


def find_baselines(deployment: str, fingerprint: Fingerprint, root: Path) -> BaselineLookup:
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


def write_baseline(deployment: str, fingerprint: Fingerprint, document: dict, root: Path) -> Path:
    folder = root / deployment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{fingerprint.slug}.json"
    if path.exists():
        load_baseline(path)  # refuse to replace a file we cannot read: a human must look first
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    write_json_atomic(path, document)
    return path
