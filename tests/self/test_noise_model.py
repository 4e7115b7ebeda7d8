"""The noise model the H200 data supports (specgate/verdicts/noise.py, docs/statistics.md): a part of
the between-boot spread shared by the servers of one run, each server's own part, and requests
autocorrelated within a boot. Replicas booted side by side no longer buy a √N they do not deliver,
a pair of speculative servers of one run cancels what they share only where the split is known,
the runner history counts a run once, and calibrate measures the parts it can."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specgate.verdicts.history import BootValue, Entry, RunnerHistory, pooled_spread
from specgate.verdicts.noise import (
    BootSpread,
    autocorrelation_inflation,
    lag1_autocorrelation,
    pair_spread,
    ratio_interval_held,
)


def _log_width(series, spread):
    iv, _ = ratio_interval_held(series, 0.95, spread, boots_other=1)
    return math.log(iv.high) - math.log(iv.low)


def _replicas(n: int) -> dict[int, list[float]]:
    rng = np.random.default_rng(3)
    return {b: list(np.exp(rng.normal(0.0, 0.004, 24))) for b in range(1, n + 1)}


def test_side_by_side_replicas_do_not_narrow_what_the_servers_of_a_run_share():
    """Was: four replicas halved the between-boot term (√4); one run's replicas share its offset."""
    spread = BootSpread(0.03, "test")
    one, four = _log_width(_replicas(1), spread), _log_width(_replicas(4), spread)
    assert four > 0.9 * one  # no √4 narrowing: the between-boot term is the same draw for all four
    # With the split known, only each server's own part averages over replicas.
    split = BootSpread(0.03, "test", shared_log_sd=0.025)
    assert split.between_variance(4, 1) == pytest.approx(0.025**2 * 2 + (0.03**2 - 0.025**2) * (1 / 4 + 1))
    assert BootSpread(0.03, "t").between_variance(4, 1) == pytest.approx(0.03**2 * 2)


def test_autocorrelated_requests_widen_the_requests_interval_by_the_ar1_factor():
    assert autocorrelation_inflation(0.32) == pytest.approx(math.sqrt(1.32 / 0.68))
    assert autocorrelation_inflation(None) == 1.0 and autocorrelation_inflation(-0.2) == 1.0
    series = {1: list(np.exp(np.random.default_rng(5).normal(0, 0.04, 30)))}
    plain, _ = ratio_interval_held(series, 0.95, BootSpread(1e-9, "t"))
    lagged, held = ratio_interval_held(series, 0.95, BootSpread(1e-9, "t", request_lag1=0.32))
    ratio = (math.log(lagged.high) - math.log(lagged.low)) / (math.log(plain.high) - math.log(plain.low))
    assert ratio == pytest.approx(math.sqrt(1.32 / 0.68), rel=0.02)
    assert "lag-1 autocorrelation 0.32" in held.words


def test_lag1_is_recovered_from_ar1_requests():
    rng = np.random.default_rng(11)
    runs = []
    for _ in range(20):
        x, out = 0.0, []
        for _ in range(30):
            x = 0.32 * x + rng.normal(0, 0.04)
            out.append(math.exp(x))
        runs.append(out)
    assert lag1_autocorrelation(runs) == pytest.approx(0.32, abs=0.08)
    assert lag1_autocorrelation([[1.0, 1.1]]) is None  # too few pairs to say


def test_a_pair_of_one_run_cancels_the_shared_part_only_where_the_split_is_known():
    known_a = BootSpread(0.027, "cal", shared_log_sd=0.025)
    known_b = BootSpread(0.027, "cal", shared_log_sd=0.025)
    cancelled = pair_spread(known_a, known_b, same_run=True)
    assert cancelled is not None and cancelled.log_sd == pytest.approx(math.hypot(known_a.own_log_sd, known_b.own_log_sd))
    unknown = pair_spread(BootSpread(0.027, "cal"), known_b, same_run=True)
    assert unknown is not None and unknown.log_sd == pytest.approx(math.hypot(0.027, 0.027))
    assert pair_spread(None, known_b, same_run=True) is None


def _entry(source: str, frame: str, levels: list[float]) -> Entry:
    return Entry(
        source=source, config="e", kind="speedup", args_digest="d", frame=frame, date="2026-12-05", host_id="h",
        commit="c", sglang="0.5.23", fingerprint="f",
        values=[BootValue(boot=i + 1, level=lv, within_log_sd=0.01, requests=20) for i, lv in enumerate(levels)],
    )  # fmt: skip


def test_the_history_counts_a_run_of_replicas_once():
    runs = [_entry("run", "stored-1", [0.01 * k, 0.01 * k + 0.001, 0.01 * k - 0.001]) for k in range(4)]
    history = RunnerHistory(schema_version=1, deployment="x", fingerprint={}, entries=runs)
    found = pooled_spread(history, "e", "speedup", "d")
    assert found is not None and found.df == 3  # four runs, not twelve replicas
    # The levels differ between runs, not between replicas: the spread is the runs' (≈ 1.3%).
    assert found.log_sd == pytest.approx(float(np.std([0.0, 0.01, 0.02, 0.03], ddof=1)), abs=0.003)


def test_calibrate_splits_shared_and_own_where_rounds_booted_replicas():
    from specgate.calibrate.analyse import _noise

    rng = np.random.default_rng(7)
    rounds = []
    for _ in range(40):
        shared = rng.normal(0, 0.025)
        rounds.append(
            {b: list(np.exp(shared + rng.normal(0, 0.011) + rng.normal(0, 0.004, 30))) for b in (1, 2)}
        )
    noise = _noise(rounds)
    assert noise is not None and noise.shared_log_sd is not None and noise.own_log_sd is not None
    share = noise.shared_log_sd**2 / noise.between_boot_log_sd_upper**2
    assert share == pytest.approx(0.025**2 / (0.025**2 + 0.011**2), abs=0.12)
    assert noise.request_lag1 is not None and abs(noise.request_lag1) < 0.15  # independent requests here


def test_check_states_each_gates_sensitivity_under_the_model(tmp_path):
    """At the H200's spreads (speculative decode 2.7% between boots, 2.5% of it shared by a run's
    servers; requests 3.9%, lag-1 0.32), A/B in one run sees what a stored baseline cannot."""
    from specgate.deployment import parse_deployment
    from specgate.verdicts.planned import sensitivity_lines
    from tests.self.helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data["configs"]["eagle3-base"] = dict(data["configs"]["eagle3-decode"])
    data["gates"]["ab"] = [{"config": "eagle3-decode", "base": "eagle3-base"}]
    data["gates"]["between_boot"] = {
        "decode_tps": 0.027, "speedup": 0.027, "decode_tps_shared": 0.025, "speedup_shared": 0.025,
        "request_lag1": 0.32, "source": "H200 steady runs (issue 46's table)",
    }  # fmt: skip
    dep = parse_deployment(data, tmp_path / "d.toml")
    lines = sensitivity_lines(dep, tmp_path)
    ab = next(line for line in lines if line.strip().startswith("ab:eagle3-decode-vs-eagle3-base:speed"))
    stored = next(line for line in lines if line.strip().startswith("regression:eagle3-decode:speedup"))

    def detects(line: str) -> float:
        return float(line.split("detects a regression of ")[1].split("%")[0]) / 100

    assert detects(ab) < 0.05 < detects(stored)  # a few percent from one run; a stored side sees far less
    assert "A/B in one run" in ab and "2.5% of it shared" in stored


def test_check_states_the_ab_gates_bar_and_what_it_leaves_out(tmp_path):
    """Before a run, the A/B speed gate's line says the regression it FAILs at its own tolerance
    beside the bare sensitivity, counts the declared requests' spread (`request_sd`), says so
    where none is declared, and no regression gate is listed where none compares with stored
    figures (`against_stored = false`)."""
    from specgate.deployment import parse_deployment
    from specgate.verdicts.planned import sensitivity_lines
    from tests.self.helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data["configs"]["eagle3-base"] = dict(data["configs"]["eagle3-decode"])
    data["gates"]["ab"] = [{"config": "eagle3-decode", "base": "eagle3-base", "tolerance": 0.04}]
    data["gates"]["against_stored"] = False
    spread = {
        "decode_tps": 0.048, "speedup": 0.048, "decode_tps_shared": 0.047, "speedup_shared": 0.047,
        "request_lag1": 0.32, "source": "twin rounds",
    }  # fmt: skip
    data["gates"]["between_boot"] = dict(spread)
    (unknown,) = sensitivity_lines(parse_deployment(data, tmp_path / "a.toml"), tmp_path)
    assert unknown.strip().startswith("ab:eagle3-decode-vs-eagle3-base:speed")  # no regression:… lines
    assert "the requests' own spread NOT known and left out" in unknown
    # Said as what it does to the figures ("more requests are taken to cost nothing" said neither).
    assert "the regressions stated are floors, the gate sees only larger ones" in unknown
    data["gates"]["between_boot"] = dict(spread, request_sd=0.0387)
    (known,) = sensitivity_lines(parse_deployment(data, tmp_path / "b.toml"), tmp_path)
    assert "within-boot 3.9%" in known and "NOT known" not in known

    def figure(line: str, words: str) -> float:
        return float(line.split(words)[1].split("%")[0]) / 100

    bare, at_bar = figure(known, "detects a regression of "), figure(known, "it FAILs a regression of ")
    assert figure(unknown, "detects a regression of ") < bare  # the requests' part counts
    assert "at its own bar (0.04 tolerance)" in known
    assert at_bar == pytest.approx(1 - 0.96 * (1 - bare), abs=0.0006)  # the figures are printed to 0.1%


def test_check_with_no_gate_across_boots_says_there_is_nothing_to_state_not_that_no_spread_is_known(tmp_path):
    """`against_stored = false` and no [[gates.ab]]: no gate's sensitivity exists. The line said
    "no runner history or calibration ... and no [gates.between_boot]" (false where one is declared
    or stored) and asked for `specgate calibrate`; and the tolerance line listed bars no gate holds."""
    from specgate.deployment import parse_deployment
    from specgate.gate_kinds import descriptions
    from specgate.verdicts.planned import sensitivity_lines
    from tests.self.helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data["gates"]["against_stored"] = False
    data["gates"]["between_boot"] = {"decode_tps": 0.02, "speedup": 0.02, "source": "assumed"}
    dep = parse_deployment(data, tmp_path / "d.toml")
    (line,) = sensitivity_lines(dep, tmp_path)
    assert "nothing to state" in line and "against_stored = false" in line, line
    assert "calibrate" not in line and "no [gates.between_boot]" not in line
    said = "\n".join(descriptions(dep))
    assert "no-regression tolerance" not in said and "against_stored = false" in said, said


def test_a_declared_request_sd_of_zero_is_refused_by_name(tmp_path):
    """`request_sd = 0` was taken and said "within-boot 0.0%": the same floor as leaving it out,
    without the words that say it is one."""
    from specgate.deployment import parse_deployment
    from specgate.errors import DeploymentError
    from tests.self.helpers import sim_deployment_dict

    data = sim_deployment_dict()
    data["gates"]["between_boot"] = {"decode_tps": 0.02, "speedup": 0.02, "source": "assumed", "request_sd": 0.0}
    with pytest.raises(DeploymentError, match=r"gates.between_boot.request_sd.*is 0: .*leave it out"):
        parse_deployment(data, tmp_path / "d.toml")
    data["gates"]["between_boot"]["request_sd"] = 0.03
    assert parse_deployment(data, tmp_path / "d.toml").gates.between_boot.request_log_sd == 0.03


def test_the_reports_width_line_says_not_pass_where_the_sensitivity_line_says_fail():
    """Beside "at its own bar it FAILs a regression of 14.9%", the width line said "this run sees
    regressions of 8% or more; an unchanged build fails it with probability 3%", counting an
    INCONCLUSIVE as a failure: two figures for one gate, both called failing."""
    from specgate.verdicts.regression_gate import seen_at_width

    said = seen_at_width(0.08, 0.03)
    assert said == (
        "this run keeps regressions of 8.0% or more from PASS (80% power); an unchanged build does not PASS it "
        "with probability 3%"
    )
    assert "fails" not in seen_at_width(0.5, 0.6) and "does not PASS it with probability 60%" in seen_at_width(0.5, 0.6)


def test_check_asks_the_simulator_for_a_calibration_without_a_gpu_runner(tmp_path):
    from specgate.deployment import parse_deployment
    from specgate.verdicts.planned import sensitivity_lines
    from tests.self.helpers import sim_deployment_dict

    (line,) = sensitivity_lines(parse_deployment(sim_deployment_dict(), tmp_path / "d.toml"), tmp_path)
    assert "sensitivity not stated" in line and "specgate calibrate" in line and "GPU runner" not in line
