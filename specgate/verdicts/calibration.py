"""The stored result of `specgate calibrate`: this machine's between-boot spread per config.

`baselines/<deployment>/calibration/<fingerprint slug>.json`, beside the baselines it
serves, readable JSON with provenance. The judge reads it to widen one-boot intervals by
the noise they cannot show, and every report names the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from specgate.atomic import write_json_atomic
from specgate.documents import problem, read_json
from specgate.errors import BaselineError
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.noise import BootSpread, between_boot_spread

FORMAT = "specgate-calibration/1"
KINDS = ("decode_tps", "speedup")
# How far a stated spread may sit from the one its per-boot figures give (plus 2% of it): the
# figures are stored rounded, a hand edit moves it further.
SPREAD_AGREEMENT = 0.002


@dataclass(frozen=True)
class Calibration:
    path: Path
    fingerprint: Fingerprint
    provenance: dict
    boots: int
    # config -> kind ("decode_tps", "speedup") -> SD of log(figure) between boots
    spread: dict[str, dict[str, float]]
    document: dict

    def spread_of(self, config: str, kind: str, args_digest: str | None = None) -> BootSpread | None:
        """None where the record has nothing for the config, or measured it booted with other flags."""
        sd = self.spread.get(config, {}).get(kind)
        recorded = (self.document.get("configs", {}).get(config) or {}).get("args_digest")
        if sd is None or (recorded and args_digest and recorded != args_digest):
            return None
        date = str(self.provenance.get("date", "?"))[:10]
        figure = (self.document.get("configs", {}).get(config) or {}).get(kind) or {}
        shared, lag1 = figure.get("shared_log_sd"), figure.get("request_lag1")
        return BootSpread(
            sd,
            f"80% upper bound from calibration {self.path.name}, {self.boots} boots, {date}",
            float(shared) if isinstance(shared, (int, float)) else None,
            float(lag1) if isinstance(lag1, (int, float)) else None,
        )


def calibration_path(root: Path, deployment: str, fingerprint: Fingerprint) -> Path:
    return root / deployment / "calibration" / f"{fingerprint.slug}.json"


class _Spread(BaseModel):
    """One figure's between-boot spread (SD of log(figure)) and the per-boot figures it was
    estimated from (calibrate.analyse writes both); the rest of the analysis is kept as written."""

    model_config = ConfigDict(extra="allow", strict=True)
    between_boot_log_sd: float | None = None
    between_boot_log_sd_upper: float | None = None  # the 80% upper bound: what the judge uses where present
    boot_medians: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    within_log_sd: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] | None = None
    requests_per_boot: Annotated[int, Field(ge=1)] | None = None
    # Components (noise.py): the part the servers of one run share, each server's own, and the
    # requests' lag-1 autocorrelation; absent in records written before them.
    shared_log_sd: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] | None = None
    own_log_sd: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] | None = None
    request_lag1: Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)] | None = None
    # Why the rounds give no spread (calibrate.analyse: servers it does not boot, or boots that
    # differed no more than their requests): recorded so, without one, and gates treat it as unknown.
    not_estimated: str | None = None

    @field_validator("between_boot_log_sd", "between_boot_log_sd_upper")
    @classmethod
    def _a_spread(cls, value: float | None) -> float | None:
        # No upper limit: a very noisy runner's spread is what its boot medians give (checked
        # below), and an interval that wide is INCONCLUSIVE, said, rather than no record at all.
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"expected a spread of 0 or more, got {value}")
        return value

    def used(self) -> tuple[str, float | None]:
        """The field the judge uses and its value: the upper bound where recorded (a spread from
        few boots is uncertain, see calibrate.analyse)."""
        key = (
            "between_boot_log_sd_upper" if "between_boot_log_sd_upper" in self.model_fields_set else "between_boot_log_sd"
        )
        return key, getattr(self, key)

    def estimation_problem(self) -> str | None:
        """Why the spread used cannot stand (None where it can): a spread of 0 says boots never
        differ, which no A/A rounds can show, and it would take the between-boot noise (and the
        warning that it is unknown) out of every one-boot interval; a spread must be estimable from
        at least two boots' figures, and be what those figures give."""
        key, value = self.used()
        if value is not None and value <= 0:
            return (
                f"'{key}': expected a spread above 0, got {value}: no A/A rounds show that boots never differ "
                "(a spread of 0 would remove the between-boot noise from every interval)"
            )
        if self.boot_medians is None or self.within_log_sd is None or self.requests_per_boot is None:
            return (
                f"'{key}': not estimable from this record: expected the per-boot figures it was estimated from "
                "(boot_medians, within_log_sd, requests_per_boot), as specgate calibrate writes them; a spread "
                "known from elsewhere goes into the deployment's [gates.between_boot], with its source"
            )
        if len(self.boot_medians) < 2:
            return f"'boot_medians': expected the medians of at least 2 boots, got {len(self.boot_medians)}"
        logs = [math.log(m) for m in self.boot_medians]
        point, upper = between_boot_spread(logs, self.within_log_sd, self.requests_per_boot)
        for field, computed in (("between_boot_log_sd", point), ("between_boot_log_sd_upper", upper)):
            stated = getattr(self, field)
            # The figures are stored rounded (medians to 4 decimals, SDs to 5): agreement within that.
            if stated is not None and abs(stated - computed) > SPREAD_AGREEMENT + SPREAD_AGREEMENT * 10 * computed:
                return (
                    f"'{field}': states {stated}, but boot_medians, within_log_sd and requests_per_boot give "
                    f"{computed:.5f}: the record was edited after specgate calibrate wrote it"
                )
        return None


class _ConfigEntry(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    args_digest: str | None = None  # the flags it was measured with: another set makes it no calibration
    decode_tps: _Spread | None = None
    speedup: _Spread | None = None


class CalibrationRecord(BaseModel):
    """`baselines/<deployment>/calibration/<fingerprint slug>.json`, as `specgate calibrate` writes it."""

    model_config = ConfigDict(extra="allow", strict=True)
    format: Literal["specgate-calibration/1"]
    fingerprint: dict[str, Any]
    provenance: dict[str, Any] = {}
    boots: int = Field(ge=2)
    configs: dict[str, _ConfigEntry] = Field(min_length=1)


def load_calibration(path: Path) -> Calibration:
    """Checked for meaning like a baseline: a record that widens every interval must be sound."""
    try:
        data = read_json(path, "a calibration record (a JSON file)")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"calibration record cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(path, f"field 'format': expected {FORMAT!r}")
    try:
        record = CalibrationRecord.model_validate(data)
    except ValidationError as exc:
        raise BaselineError(path, f"calibration record malformed: {problem(exc)}") from None
    try:
        fingerprint = Fingerprint.from_dict(record.fingerprint)
        if path.stem != fingerprint.slug:
            raise ValueError(f"fingerprint: names {fingerprint.slug!r}, but the file is {path.name!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(path, f"calibration record malformed: {type(exc).__name__}: {exc}") from None
    spread: dict[str, dict[str, float]] = {}
    for config, entry in record.configs.items():
        for kind in KINDS:
            figure = getattr(entry, kind)
            if figure is None:
                continue
            key, value = figure.used()
            if value is None and figure.not_estimated:
                continue  # measured, but no spread: the gates say the between-boot noise is unknown
            if value is None:
                field = f"configs.{config}.{kind}.{key}"
                raise BaselineError(path, f"calibration record malformed: field '{field}': expected a number, got None")
            if (why := figure.estimation_problem()) is not None:
                raise BaselineError(path, f"calibration record refused: field 'configs.{config}.{kind}.{why}")
            spread.setdefault(config, {})[kind] = float(value)
    return Calibration(path, fingerprint, record.provenance, record.boots, spread, data)


def find_calibration(root: Path, deployment: str, fingerprint: Fingerprint | None) -> Calibration | None:
    if fingerprint is None:
        return None
    path = calibration_path(root, deployment, fingerprint)
    # exists(), not is_file(): a FIFO or a folder there is refused by name, not taken for no record
    return load_calibration(path) if path.exists() else None


def write_calibration(root: Path, deployment: str, fingerprint: Fingerprint, document: dict) -> Path:
    """Stored only where the reader would take it (BaselineError "not written" otherwise: rounds
    whose spread came out 0 are no calibration, whatever wrote them)."""
    path = calibration_path(root, deployment, fingerprint)
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    try:
        record = CalibrationRecord.model_validate(json.loads(json.dumps(document)))
    except ValidationError as exc:
        raise BaselineError(path, f"calibration NOT written: {problem(exc)}") from None
    for config, entry in record.configs.items():
        for kind in KINDS:
            figure = getattr(entry, kind)
            if figure is not None and (why := figure.estimation_problem()) is not None:
                raise BaselineError(path, f"calibration NOT written: field 'configs.{config}.{kind}.{why}")
    write_json_atomic(path, document)
    return path
