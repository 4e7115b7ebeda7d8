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

    def spread_of(self, config: str, kind: str) -> BootSpread | None:
        sd = self.spread.get(config, {}).get(kind)
        if sd is None:
            return None
        date = str(self.provenance.get("date", "?"))[:10]
        return BootSpread(sd, f"80% upper bound from calibration {self.path.name}, {self.boots} boots, {date}")


def calibration_path(root: Path, deployment: str, fingerprint: Fingerprint) -> Path:
    return root / deployment / "calibration" / f"{fingerprint.slug}.json"


def load_calibration(path: Path) -> Calibration:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"calibration record cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(path, f"field 'format': expected {FORMAT!r}")
    try:
        fingerprint = Fingerprint.from_dict(data["fingerprint"])
        boots = int(data["boots"])
        spread: dict[str, dict[str, float]] = {}
        for config, entry in data["configs"].items():
            for kind in KINDS:
                figure = entry.get(kind) or {}
                # the upper bound where recorded: a spread from few boots is uncertain (see calibrate.analyse)
                sd = figure.get("between_boot_log_sd_upper", figure.get("between_boot_log_sd"))
                if sd is None:
                    continue
                sd = float(sd)
                if not math.isfinite(sd) or sd < 0 or sd > 1:
                    raise ValueError(f"configs.{config}.{kind}.between_boot_log_sd = {sd!r}: expected 0..1")
                spread.setdefault(config, {})[kind] = sd
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BaselineError(path, f"calibration record malformed: {type(exc).__name__}: {exc}") from None
    return Calibration(path, fingerprint, dict(data.get("provenance", {})), boots, spread, data)


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
