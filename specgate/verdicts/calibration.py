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

from specgate.atomic import write_json_atomic
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


def _sd(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field}: expected a number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"{field}: expected a spread from 0 to 1, got {value}")
    return float(value)


def load_calibration(path: Path) -> Calibration:
    """Checked for meaning like a baseline: a record that widens every interval must be sound."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"calibration record cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(path, f"field 'format': expected {FORMAT!r}")
    try:
        fingerprint = Fingerprint.from_dict(data["fingerprint"])
        if path.stem != fingerprint.slug:
            raise ValueError(f"fingerprint: names {fingerprint.slug!r}, but the file is {path.name!r}")
        boots = data["boots"]
        if isinstance(boots, bool) or not isinstance(boots, int) or boots < 2:
            raise ValueError(f"boots: expected a whole number >= 2, got {boots!r}")
        provenance = data.get("provenance", {})
        if not isinstance(provenance, dict):
            raise ValueError(f"provenance: expected an object, got {type(provenance).__name__}")
        configs = data["configs"]
        if not isinstance(configs, dict) or not configs:
            raise ValueError("configs: expected an object with at least one config")
        spread: dict[str, dict[str, float]] = {}
        for config, entry in configs.items():
            if not isinstance(entry, dict):
                raise ValueError(f"configs.{config}: expected an object")
            for kind in KINDS:
                figure = entry.get(kind)
                if figure is None:
                    continue
                # the upper bound where recorded: a spread from few boots is uncertain (see calibrate.analyse)
                key = "between_boot_log_sd_upper" if "between_boot_log_sd_upper" in figure else "between_boot_log_sd"
                spread.setdefault(config, {})[kind] = _sd(f"configs.{config}.{kind}.{key}", figure.get(key))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BaselineError(path, f"calibration record malformed: {type(exc).__name__}: {exc}") from None
    return Calibration(path, fingerprint, provenance, boots, spread, data)


def find_calibration(root: Path, deployment: str, fingerprint: Fingerprint | None) -> Calibration | None:
    if fingerprint is None:
        return None
    path = calibration_path(root, deployment, fingerprint)
    return load_calibration(path) if path.is_file() else None


def write_calibration(root: Path, deployment: str, fingerprint: Fingerprint, document: dict) -> Path:
    path = calibration_path(root, deployment, fingerprint)
    document = {"format": FORMAT, "deployment": deployment, "fingerprint": fingerprint.as_dict(), **document}
    write_json_atomic(path, document)
    return path
