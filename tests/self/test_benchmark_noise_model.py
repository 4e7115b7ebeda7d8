"""benchmarks/gate_error_rates.py draws the figures it judges from the H200's measured noise
(specgate/sim/noise.py): its draws must show the measured spreads, and its honest-interval
helpers must hold what the suite's intervals leave out (AR(1) requests, what replicas of one run
share). Unit level: no gate run, no server."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from specgate.sim import noise

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gate_error_rates.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gate_error_rates", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_the_draws_show_the_measured_spreads(bench):
    rng = np.random.default_rng(3)
    n, runs = 20, 1500
    speedup, pair = [], []
    for _ in range(runs):
        spec_logs, plain_logs = bench.one_run(rng, 2, 1, n)
        speedup.append(spec_logs[0] - plain_logs[0])
        pair.append(spec_logs[0] - spec_logs[1])
    speedup_a, pair_a = np.array(speedup), np.array(pair)
    # Between runs (the level of a run, its requests averaged out) and per request within one.
    assert np.std(speedup_a.mean(axis=1)) == pytest.approx(
        math.sqrt(noise.SPEEDUP_BOOT_SD**2 + noise.SPEEDUP_REQUEST_SD**2 * bench.ar1_variance_factor(0.32, n) / n),
        rel=0.08,
    )
    assert np.mean(np.std(speedup_a, axis=1, ddof=1)) == pytest.approx(noise.SPEEDUP_REQUEST_SD, rel=0.1)
    assert np.mean(np.std(pair_a, axis=1, ddof=1)) == pytest.approx(noise.PAIR_REQUEST_SD, rel=0.1)
    # Lag-1 on long boots (a 20-request series' own estimate is biased low by ~(1 + 4ρ)/n).
    spec_logs, plain_logs = bench.one_run(rng, 1, 1, 20000)
    long = spec_logs[0] - plain_logs[0]
    assert np.corrcoef(long[:-1], long[1:])[0, 1] == pytest.approx(noise.REQUEST_LAG1, abs=0.03)


def test_ar1_inflation_tends_to_the_effective_sample_size(bench):
    assert bench.ar1_variance_factor(0.32, 1) == 1.0
    assert bench.ar1_variance_factor(0.32, 100000) == pytest.approx(1.32 / 0.68, rel=1e-3)
    rng = np.random.default_rng(5)
    means = bench.ar1(rng, 20000, 20, 1.0).mean(axis=1)
    assert np.var(means) * 20 == pytest.approx(bench.ar1_variance_factor(0.32, 20), rel=0.05)


def test_side_by_side_replicas_do_not_narrow_the_honest_between_boot_part_by_root_n(bench):
    one = bench.stored_design("a", 1, 1).note
    four = bench.stored_design("c", 1, 4).note
    runs = bench.stored_design("b", 4, 1).note

    def honest(note: str) -> float:
        return float(note.rsplit("honest ", 1)[1].rstrip("%")) / 100

    assert honest(runs) == pytest.approx(honest(one) / 2, rel=0.01)  # separate runs: √4
    assert honest(four) > 0.9 * honest(one)  # one run's replicas share its offset


def test_the_honest_interval_is_wider_than_the_suites_request_bootstrap(bench):
    from specgate.measure.stats import median_interval

    rng = np.random.default_rng(9)
    series = {1: list(np.exp(rng.normal(0, 0.04, 20)))}
    plain = median_interval(series[1], 0.95)
    fair = bench.honest_interval(series, 0.95, 1.4, 0.0)
    assert fair.estimate == plain.estimate
    expansion = bench.small_sample_expansion(20, 0.95)  # 20 requests: a percentile bootstrap under-covers
    assert math.log(fair.high / fair.estimate) == pytest.approx(1.4 * expansion * math.log(plain.high / plain.estimate))
    assert bench.honest_interval(series, 0.95, 1.0, 0.02).low < plain.low


def test_the_small_sample_expansion_widens_few_requests_and_fades_with_many(bench):
    assert bench.small_sample_expansion(10, 0.95) == pytest.approx(math.sqrt(10 / 9) * 2.262 / 1.960, rel=1e-3)
    assert bench.small_sample_expansion(10000, 0.95) == pytest.approx(1.0, abs=1e-3)
    assert bench.small_sample_expansion(1, 0.95) == 1.0
