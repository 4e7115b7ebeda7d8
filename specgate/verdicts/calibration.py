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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from specgate.atomic import write_json_atomic
from specgate.documents import problem, read_document
from specgate.errors import BaselineError
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.noise import BootSpread

FORMAT = "specgate-calibration/1"
KINDS = ("decode_tps", "speedup")


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
        return BootSpread(sd, f"80% upper bound from calibration {self.path.name}, {self.boots} boots, {date}")


def calibration_path(root: Path, deployment: str, fingerprint: Fingerprint) -> Path:
    return root / deployment / "calibration" / f"{fingerprint.slug}.json"


class _Spread(BaseModel):
    """One figure's between-boot spread (SD of log(figure)); the analysis beside it is kept as written."""

    model_config = ConfigDict(extra="allow", strict=True)
    between_boot_log_sd: float | None = None
    between_boot_log_sd_upper: float | None = None  # the 80% upper bound: what the judge uses where present

    @field_validator("between_boot_log_sd", "between_boot_log_sd_upper")
    @classmethod
    def _a_spread(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
            raise ValueError(f"expected a spread from 0 to 1, got {value}")
        return value

    def used(self) -> tuple[str, float | None]:
        """The field the judge uses and its value: the upper bound where recorded (a spread from
        few boots is uncertain, see calibrate.analyse)."""
        key = (
            "between_boot_log_sd_upper" if "between_boot_log_sd_upper" in self.model_fields_set else "between_boot_log_sd"
        )
        return key, getattr(self, key)


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
        data = json.loads(read_document(path, "a calibration record (a JSON file)"))
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
            if value is None:
                field = f"configs.{config}.{kind}.{key}"
                raise BaselineError(path, f"calibration record malformed: field '{field}': expected a number, got None")
            spread.setdefault(config, {})[kind] = float(value)
    return Calibration(path, fingerprint, record.provenance, record.boots, spread, data)


def find_calibration(root: Path, deployment: str, fingerprint: Fingerprint | None) -> Calibration | None:
    if fingerprint is None:
        return None
    path = calibration_path(root, deployment, fingerprint)
    # exists(), not is_file(): a FIFO or a folder there is refused by name, not taken for no record
    return load_calibration(path) if path.exists() else None


def write_calibration(root: Path, deployment: str, fingerprint: Fingerprint, document: dict) -> Path:
    path = calibration_path(root, deployment, fingerprint)
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    write_json_atomic(path, document)
    return path
