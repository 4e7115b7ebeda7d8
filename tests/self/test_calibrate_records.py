"""`specgate calibrate` records what it measured: a very noisy runner with its wide spread (and a
warning), a steady one (or steady url servers it cannot restart) without a spread, saying why.
Both were refused before: a spread above 1, or of 0, was no calibration and nothing was stored."""

from __future__ import annotations

import math
from pathlib import Path

from helpers import merge, sim_deployment_dict

from specgate.calibrate.analyse import NO_DRIFT_SHOWN, NO_SPREAD_SHOWN, analyse, render, too_noisy
from specgate.deployment import parse_deployment
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.verdicts.calibration import load_calibration, write_calibration
from specgate.verdicts.fingerprint import Fingerprint

FP = Fingerprint("none (simulator)", 0, "none", "none", "0.1.0", "toy")


def _sample(tps: float, i: int) -> SpeedSample:
    return SpeedSample(decode_tps=tps, ttft_s=0.01, e2e_s=1.0, completion_tokens=64, prompt_tokens=8, verify_ct=None,
                       server_e2e_s=None, chunks=64, index=i)  # fmt: skip


def _rounds(dep, level_of_round, requests=6):
    """Every config's requests in each round: a request's own wobble times the round's level."""
    return [
        {c: ConfigSpeed(c, 1, [_sample(100.0 * level * (1 + 0.02 * math.sin(i * (r + 2) + k)), i) for i in range(requests)])
         for k, c in enumerate(dep.configs)}
        for r, level in enumerate(level_of_round)
    ]  # fmt: skip


def _alike(dep):
    """Two rounds whose every request gave the same figure: a server that did not move at all."""
    return [{c: ConfigSpeed(c, 1, [_sample(100.0 + i, i) for i in range(6)]) for c in dep.configs} for _ in range(2)]


def _record(tmp_path: Path, dep, rounds) -> tuple[dict, Path]:
    configs = analyse(dep, rounds)
    document = {"provenance": {"date": "2026-12-05T00:00:00+00:00"}, "boots": len(rounds), "requests_per_boot": 6, "configs": configs}
    return configs, write_calibration(tmp_path, dep.name, FP, document)


def test_a_very_noisy_runner_is_recorded_with_its_wide_spread_and_a_warning(tmp_path):
    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    configs, path = _record(tmp_path, dep, _rounds(dep, [1.0, 8.0, 0.2]))
    spread = load_calibration(path).spread["baseline"]["decode_tps"]
    assert spread > 1  # a factor of e and more between boots: refused before as "expected a spread from 0 to 1"
    warnings = too_noisy(configs)
    assert warnings and warnings[0].startswith("baseline's no-regression gate cannot tell at its tolerance on this runner")


def test_a_steady_runner_is_recorded_saying_its_spread_was_not_estimated(tmp_path):
    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    configs, path = _record(tmp_path, dep, _rounds(dep, [1.0, 1.0, 1.0]))
    assert configs["baseline"]["decode_tps"]["not_estimated"] == NO_SPREAD_SHOWN
    assert configs["baseline"]["decode_tps"]["within_log_sd"] > 0  # what could be measured is kept
    assert load_calibration(path).spread_of("baseline", "decode_tps") is None  # gates: unknown, as uncalibrated
    assert f"between-boot spread {NO_SPREAD_SHOWN}" in render(dep, configs, 3, [])
    assert not too_noisy(configs)


def test_steady_url_servers_are_recorded_saying_they_could_not_be_restarted(tmp_path):
    data = merge(sim_deployment_dict(), {"launch": {"launcher": "url"}})
    for i, config in enumerate(data["configs"].values()):
        config["url"] = f"http://127.0.0.1:{30000 + i}"
    dep = parse_deployment(data, Path("d.toml"))
    configs, path = _record(tmp_path, dep, _alike(dep))
    assert configs["baseline"]["decode_tps"]["not_estimated"] == NO_DRIFT_SHOWN
    assert load_calibration(path).spread == {} or "baseline" not in load_calibration(path).spread


def test_rounds_alike_to_the_last_digit_are_recorded_not_a_division_by_zero(tmp_path):
    dep = parse_deployment(sim_deployment_dict(), Path("d.toml"))
    configs, _ = _record(tmp_path, dep, _alike(dep))
    assert configs["baseline"]["decode_tps"]["not_estimated"] == NO_SPREAD_SHOWN
