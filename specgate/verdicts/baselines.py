"""Stored baselines: `baselines/<deployment>/<fingerprint slug>.json`.

Human-readable JSON with provenance and the raw samples, so any verdict can be
re-derived. Written only on request (`--specgate-update-baselines` or
`specgate baseline update`), atomically (temp file, then rename). A file that cannot
be read is an error naming it, never silently replaced.

Format versions: `specgate-baseline/1` holds figures and samples; `/2` adds, optionally, the
reference's golden answers (`golden`, written for deployments with `launch.reference_from =
"stored"`, which check equivalence against them without booting the reference) and each
config's boot time (`boot_seconds`, so a run that skips a boot can say what it saved); `/3`
records, beside each config's samples at each concurrency, their sha256 (`samples_sha256`),
checked on every read: the gates compare runs with the raw samples, so samples edited by hand
(halved, to hide a 2x slowdown) are refused, naming the file and the field, where they were used
before. A digest is checked wherever one is present, whatever the format says. All three load;
a `/1` file has no golden answers nor boot times, and a run that needs them says so and fails
closed. Every write is `/3`. What an editor who recomputes the digest can still do, and what
holds then (the file's git history, review), is in docs/baselines.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specgate.atomic import write_json_atomic
from specgate.documents import content_digest, meaning, problem, read_json
from specgate.equivalence.golden import GoldenAnswers, parse_golden
from specgate.errors import BaselineError, GoldenFileError
from specgate.verdicts.fingerprint import Fingerprint

FORMAT = "specgate-baseline/3"
# Every format this version reads (oldest first); see the module docstring for what each holds.
READABLE_FORMATS = ("specgate-baseline/1", "specgate-baseline/2", FORMAT)
# The first format whose every figure records its samples' digest.
_DIGESTED_FORMATS = READABLE_FORMATS[2:]


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
    # Per context bucket (its prompt tokens; measure.context): its pinned requests' digest and
    # its figures, keyed as `figures` (concurrency 1). A bucket absent: nothing stored of it.
    contexts: dict[int, tuple[str, dict[tuple[str, int], StoredFigures]]] = field(default_factory=dict)
    # Per context bucket: the characters per token its prompts were built at (measure.density; absent
    # in baselines written before it was stored), so that a digest changed by the reference's
    # tokenizer counting otherwise is named as such, not as an edited workload.
    context_ratios: dict[int, float] = field(default_factory=dict)
    chars_per_token: float | None = None  # at_context's bucket's entry of context_ratios

    def at_context(self, tokens: int) -> StoredBaseline:
        """This baseline as a bucket's judge reads it: that bucket's figures and digest, in the
        places of the short workload's (none where the bucket was never stored)."""
        if not tokens:
            return self
        digest, figures = self.contexts.get(tokens, ("", {}))
        return replace(self, workload_digest=digest, figures=figures, chars_per_token=self.context_ratios.get(tokens))


def workload_changed(stored: StoredBaseline, built_at: float | None, context: int) -> str:
    """Why `stored`'s pinned requests no longer pair with this run's, for a gate's NOT COMPARED:
    where a context bucket's prompts were built at another characters per token (measure.density),
    that is named, with what to do; otherwise the workload's own fields."""
    if context and stored.chars_per_token is not None and built_at is not None and stored.chars_per_token != built_at:
        return (
            f"the {context}-token bucket's prompts were built at {stored.chars_per_token:g} characters per token "
            f"when {stored.path.name} was recorded and at {built_at:g} now (the reference's server counted its "
            "calibration prompt otherwise: another tokenizer, or a count not believed; the report's context "
            "section says which): its requests no longer pair with ours; update the baseline if the "
            "tokenizer changed on purpose"
        )
    return (
        f"the pinned workload changed since {stored.path.name} was recorded (prompts, format, max_new_tokens or "
        "ignore_eos"
        # A bucket's pinned requests are context_repeats long prompts, built at the measured ratio.
        + (", workload.context_repeats, or the characters per token its prompts were built at" if context else "")
        + "): its requests no longer pair with ours; update the baseline"
    )


# Far beyond any real figure: such a value is a broken file, and it would decide a gate.
_ABSURD_TPS = 1e7
_ABSURD_TOKENS = 1 << 20

_Tps = Annotated[float, Field(gt=0, le=_ABSURD_TPS, allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Accept = Annotated[float, Field(ge=1, allow_inf_nan=False)]  # tokens per verify step: 1 is a drafter accepting nothing
_Seconds = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
_Tokens = Annotated[int, Field(ge=1, le=_ABSURD_TOKENS)]
_Boot = Annotated[int, Field(ge=1, le=1000)]
_Figure = TypeVar("_Figure")


def _is_sha256(value: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{64}", value) is not None


class Interval(BaseModel, Generic[_Figure]):
    """A stored estimate with its interval; `confidence` and what else the writer added are kept."""

    model_config = ConfigDict(extra="allow", strict=True)
    estimate: _Figure
    low: _Figure
    high: _Figure

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if self.low > self.high:  # type: ignore[operator]  # every _Figure is a float
            raise ValueError(f"low {self.low} is above high {self.high}")
        return self


class Samples(BaseModel):
    """Per-request figures in pinned-sequence order (their count is the figures' `n`)."""

    model_config = ConfigDict(extra="allow", strict=True)
    decode_tps: list[_Tps]
    completion_tokens: list[_Tokens]
    verify_ct: list[_Tokens | None]  # None where the server reported no speculative counters
    ttft_s: list[_Seconds] | None = None  # absent in files written before it was read back
    boot: list[_Boot] | None = None  # which boot answered each (launch.boots > 1); absent in older files


class ConcurrencyFigures(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    n: _Tokens
    decode_tps: Interval[_Tps]
    accept_length: Interval[_Accept] | None = None
    ratio_to_reference: Interval[_Positive] | None = None
    samples: Samples
    # The samples' content_digest as written (format /3): a hand edit of them is refused on reading.
    samples_sha256: Annotated[str, meaning("a sha256 hex digest", _is_sha256)] | None = None


class ConfigEntry(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    args_digest: Annotated[str, meaning("the launch digest string", bool)]  # the flags it was recorded with
    drafter_sha256: Annotated[str, meaning("a sha256 hex digest or null", _is_sha256)] | None = None
    # The release its own server reported.
    server_version: Annotated[str, meaning("the release the server reported (a string) or null", str.strip)] | None = (
        None
    )
    boot_seconds: _Seconds | None = None  # format /2
    concurrency: dict[str, ConcurrencyFigures]


class ContextEntry(BaseModel):
    """One context bucket's figures (`contexts.<prompt tokens>`): its pinned requests' digest and each
    config's figures as `configs` holds the short workload's."""

    model_config = ConfigDict(extra="allow", strict=True)
    workload_digest: str
    configs: dict[str, ConfigEntry]
    chars_per_token: float | None = None  # what its prompts were built at (measure.density); absent before


class BaselineDocument(BaseModel):
    """`baselines/<deployment>/<fingerprint slug>.json`, as `specgate baseline update` writes it: one
    definition for the reader and the writer (a document it would refuse is never written)."""

    model_config = ConfigDict(extra="allow", strict=True)
    format: Literal["specgate-baseline/1", "specgate-baseline/2", "specgate-baseline/3"]
    deployment: str = ""
    workload_digest: str = ""
    fingerprint: dict[str, Any]
    provenance: dict[str, Any] = {}
    configs: dict[str, ConfigEntry]
    excluded: dict[str, str] = {}  # config -> why it was not stored
    golden: dict[str, Any] | None = None  # format /2, stored-reference deployments: parsed by equivalence.golden
    contexts: dict[str, ContextEntry] = {}  # per context bucket; absent before buckets (any format)


def _require(cond: bool, path: Path, problem: str) -> None:
    if not cond:
        raise BaselineError(path, problem)


_BLAME = "the file is wrong, not the machine: fix it or record it anew"


def load_baseline(path: Path, deployment: str | None = None) -> StoredBaseline:
    """The stored baseline at `path`; `deployment`: the deployment whose folder it was found in,
    which the file must name (a file copied from another deployment's folder, or edited, would be
    compared with figures of another workload in silence)."""
    try:
        data = read_json(path, "a stored baseline (a JSON file)")
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BaselineError(
            path, f"corrupt: not valid JSON ({str(exc)[:200]}); fix it or move it aside, it is never overwritten"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"cannot be read: {exc}") from None
    _require(isinstance(data, dict), path, "expected a JSON object at the top")
    _require(
        data.get("format") in READABLE_FORMATS,
        path,
        f"field 'format': expected one of {', '.join(map(repr, READABLE_FORMATS))}, got {data.get('format')!r}",
    )
    try:  # first: the file's identity, before what it holds
        fingerprint = Fingerprint.from_dict(data["fingerprint"])
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise BaselineError(path, f"field 'fingerprint': {exc}") from None
    try:
        doc = BaselineDocument.model_validate(data)
    except ValidationError as exc:
        raise BaselineError(path, f"{problem(exc)}; {_BLAME}") from None
    # A file without the field predates it (the folder alone said whose it was).
    _require(
        deployment is None or "deployment" not in data or doc.deployment == deployment,
        path,
        f"field 'deployment': expected {deployment!r} (the deployment whose folder holds it), got "
        f"{doc.deployment!r}: a baseline of another deployment, moved or edited; move it back or record one anew",
    )
    _require(
        doc.golden is None or doc.format != READABLE_FORMATS[0],
        path,
        "field 'golden': format specgate-baseline/1 holds none",
    )
    try:
        figures, golden = _contents(doc)
        contexts = _context_figures(doc)
    except _Bad as bad:
        raise BaselineError(path, f"field '{bad.field}': {bad.problem}; {_BLAME}") from None
    return StoredBaseline(
        path, doc.deployment, doc.workload_digest, fingerprint, dict(doc.provenance), figures, dict(doc.excluded),
        format=doc.format, golden=golden, contexts=contexts,
        context_ratios={int(k): c.chars_per_token for k, c in doc.contexts.items() if c.chars_per_token is not None},
    )  # fmt: skip


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


def samples_digest(figures: ConcurrencyFigures) -> str:
    """What `samples_sha256` records: the samples as the model read them (fields the file left out
    stay out), so the writer and every reader spell them alike."""
    return content_digest(figures.samples.model_dump(mode="json", exclude_unset=True))


def _check_digest(at: str, figures: ConcurrencyFigures, required: bool) -> None:
    if figures.samples_sha256 is None:
        if required:
            raise _Bad(f"{at}.samples_sha256", "expected the sha256 of the samples beside them (every /3 file records it)")
        return
    found = samples_digest(figures)
    if found != figures.samples_sha256.lower():
        raise _Bad(
            f"{at}.samples",
            f"not the samples that were recorded: their sha256 is {found[:12]}…, the file records "
            f"{figures.samples_sha256[:12]}… ('{at}.samples_sha256'). Raw samples edited by hand decide every gate "
            "against this baseline (halved, they hide a 2x slowdown); restore the file from git, or record it "
            "anew with `specgate baseline update`",
        )


def _config_figures(name: str, entry: ConfigEntry, digested: bool) -> dict[tuple[str, int], StoredFigures]:
    """What the model cannot say field by field: counts that agree, keys that are concurrencies,
    samples that are those recorded (`digested`: the format requires their digest)."""
    out = {}
    for conc, fig in entry.concurrency.items():
        at = f"configs.{name}.concurrency.{conc}"
        if not conc.isdigit() or int(conc) < 1:
            raise _Bad(at, "expected a concurrency (a whole number >= 1) as the key")
        samples = fig.samples
        for key in ("decode_tps", "completion_tokens", "verify_ct", "ttft_s", "boot"):
            values = getattr(samples, key)
            if values is not None and len(values) != fig.n:
                raise _Bad(
                    f"{at}.samples.{key}", f"expected {fig.n} per-request figures (field 'n'), got {len(values)}"
                )
        for i, (verify, tokens) in enumerate(zip(samples.verify_ct, samples.completion_tokens, strict=True)):
            # Each verify step yields at least one token: more steps than tokens is no record of a run.
            if verify is not None and verify > tokens:
                raise _Bad(
                    f"{at}.samples.verify_ct[{i}]", f"expected at most {tokens} (its completion tokens), got {verify}"
                )
        _check_digest(at, fig, digested)
        out[(name, int(conc))] = StoredFigures(
            args_digest=entry.args_digest,
            decode_tps_median=fig.decode_tps.estimate,
            decode_tps_low=fig.decode_tps.low,
            decode_tps_high=fig.decode_tps.high,
            accept_length=fig.accept_length.estimate if fig.accept_length else None,
            ratio_to_reference=fig.ratio_to_reference.estimate if fig.ratio_to_reference else None,
            n=fig.n,
            decode_tps_samples=tuple(samples.decode_tps),
            completion_tokens=tuple(samples.completion_tokens),
            verify_ct=tuple(samples.verify_ct),
            boots=tuple(samples.boot or ()),
            drafter_sha256=entry.drafter_sha256.lower() if entry.drafter_sha256 else None,
            server_version=entry.server_version,
            ttft_samples=tuple(samples.ttft_s or ()),
            boot_seconds=entry.boot_seconds,
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
        stored = load_baseline(path, deployment)  # a corrupt file anywhere is an error, not a skip
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
        load_baseline(path, deployment)  # refuse to replace a file we cannot read: a human must look first
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    try:  # what the reader would refuse is never stored: a writer's bug fails here, not at the next run
        as_stored = json.loads(json.dumps(document))  # checked as the file will hold it (JSON has no tuples)
    except (TypeError, ValueError) as exc:
        raise BaselineError(path, f"not written: the document this run built is not JSON: {exc}") from None
    try:
        _context_figures(checked := _with_digests(as_stored))
        _contents(checked)
    except ValidationError as exc:
        raise BaselineError(path, f"not written: the document this run built is malformed: {problem(exc)}") from None
    except _Bad as bad:
        raise BaselineError(
            path, f"not written: the document this run built is malformed: field '{bad.field}': {bad.problem}"
        ) from None
    write_json_atomic(path, as_stored)
    return path


def _with_digests(as_stored: dict) -> BaselineDocument:
    """`as_stored` validated, with each figure's samples_sha256 set (in it) from its samples as read."""
    doc = BaselineDocument.model_validate(as_stored)
    sections = [(doc.configs, as_stored["configs"])] + [
        (ctx.configs, as_stored["contexts"][key]["configs"]) for key, ctx in doc.contexts.items()
    ]
    for configs, stored in sections:
        for name, entry in configs.items():
            for conc, fig in entry.concurrency.items():
                digest = samples_digest(fig)
                stored[name]["concurrency"][conc]["samples_sha256"] = digest
                fig.samples_sha256 = digest
    return doc


def _context_figures(doc: BaselineDocument) -> dict[int, tuple[str, dict[tuple[str, int], StoredFigures]]]:
    """Each stored context bucket's digest and figures, checked as the short workload's are."""
    out = {}
    for key, ctx in doc.contexts.items():
        if not key.isdigit() or int(key) < 1:
            raise _Bad(f"contexts.{key}", "expected a context bucket's prompt tokens (a whole number >= 1) as the key")
        figures: dict[tuple[str, int], StoredFigures] = {}
        for name, entry in ctx.configs.items():
            try:
                figures.update(_config_figures(name, entry, True))
            except _Bad as bad:
                raise _Bad(f"contexts.{key}.{bad.field}", bad.problem) from None
        out[int(key)] = (ctx.workload_digest, figures)
    return out


def _contents(doc: BaselineDocument) -> tuple[dict[tuple[str, int], StoredFigures], GoldenAnswers | None]:
    """The figures and golden answers of a validated document, with what the model cannot say
    field by field checked: the same on reading a file and before writing one."""
    figures: dict[tuple[str, int], StoredFigures] = {}
    for name, entry in doc.configs.items():
        figures.update(_config_figures(name, entry, doc.format in _DIGESTED_FORMATS))
    try:
        golden = parse_golden(doc.golden) if doc.golden is not None else None
    except GoldenFileError as exc:
        raise _Bad(exc.field, exc.problem) from None
    return figures, golden
