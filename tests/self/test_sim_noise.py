"""The simulator's H200-shaped speed noise (fault h200-noise, specgate/sim/noise.py): the speculative
servers of one run share an offset, plain does not, requests are AR(1), and SPECGATE_SIM_SEED
reproduces every draw. Unit level: the drawing functions, no server booted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specgate.sim import noise
from specgate.sim.cost import CostModel
from specgate.sim.faults import parse_faults


def _env(config: str, run: str | None = None, seed: str | None = None) -> dict[str, str]:
    env = {"SPECGATE_CONFIG": config}
    if run is not None:
        env[noise.RUN_ID_ENV] = run
    if seed is not None:
        env["SPECGATE_SIM_SEED"] = seed
    return env


def test_speculative_servers_of_one_run_share_its_offset_and_plain_does_not():
    e = noise.boot_offsets(_env("eagle3-decode", run="r1"), speculative=True)
    d = noise.boot_offsets(_env("eagle3-decode-drawn", run="r1"), speculative=True)
    plain = noise.boot_offsets(_env("baseline", run="r1"), speculative=False)
    other_run = noise.boot_offsets(_env("eagle3-decode", run="r2"), speculative=True)
    assert e.run == d.run != 0.0
    assert e.own != d.own  # each server's own part, drawn per boot
    assert plain.run == 0.0 and plain.own != 0.0
    assert other_run.run != e.run


def test_the_components_have_the_measured_spreads_and_correlation():
    runs = 3000
    e = [noise.boot_offsets(_env("e", run=f"run{k}"), speculative=True) for k in range(runs)]
    d = [noise.boot_offsets(_env("d", run=f"run{k}"), speculative=True) for k in range(runs)]
    plain = [noise.boot_offsets(_env("b", run=f"run{k}"), speculative=False) for k in range(runs)]
    log_e = np.array([o.run + o.own for o in e])
    log_d = np.array([o.run + o.own for o in d])
    log_b = np.array([o.own for o in plain])
    # E / D between boots: the shared part cancels, the two own parts remain (1.53% measured).
    assert np.std(log_e - log_d) == pytest.approx(noise.PAIR_BOOT_SD, rel=0.1)
    # E's speedup over plain between boots: 2.72% measured.
    assert np.std(log_e - log_b) == pytest.approx(noise.SPEEDUP_BOOT_SD, rel=0.1)
    assert np.corrcoef(log_e, log_d)[0, 1] == pytest.approx(0.81, abs=0.05)  # E and D move together
    assert abs(np.corrcoef(log_e, log_b)[0, 1]) < 0.08  # plain does not move with them
    assert noise.RUN_SD == pytest.approx(0.0242, abs=0.0005) and noise.SERVER_SD == pytest.approx(0.0108, abs=0.0002)


def test_requests_are_ar1_at_the_measured_lag1_and_spread():
    import random

    process = noise.RequestNoise(random.Random(7), sd=0.04)
    x = np.array([process.next() for _ in range(20000)])
    assert np.std(x) == pytest.approx(0.04, rel=0.05)
    assert np.corrcoef(x[:-1], x[1:])[0, 1] == pytest.approx(noise.REQUEST_LAG1, abs=0.03)
    with pytest.raises(ValueError, match="between -1 and 1"):
        noise.RequestNoise(random.Random(1), sd=0.01, rho=1.0)


def test_the_seed_reproduces_every_draw():
    first = _env("eagle3-decode", run="a", seed="5")
    again = _env("eagle3-decode", run="b", seed="5")  # the seed names the run: the run id is not used
    assert noise.boot_offsets(first, True) == noise.boot_offsets(again, True)
    one, two = noise.request_noise(first, True), noise.request_noise(again, True)
    assert [one.next() for _ in range(5)] == [two.next() for _ in range(5)]
    # Under one seed, the servers of the run still share the run offset alone.
    drawn = noise.boot_offsets(_env("eagle3-decode-drawn", seed="5"), True)
    assert drawn.run == noise.boot_offsets(first, True).run and drawn.own != noise.boot_offsets(first, True).own
    assert noise.boot_offsets(_env("eagle3-decode", seed="6"), True) != noise.boot_offsets(first, True)


def test_the_fault_parses_and_scales_each_request():
    assert parse_faults(["h200-noise"]).h200_noise == 1.0
    assert parse_faults(["h200-noise=2.5"]).h200_noise == 2.5
    for bad in ("h200-noise=x", "h200-noise=0", "h200-noise=-1"):
        with pytest.raises(ValueError, match="h200-noise"):
            parse_faults([bad])
    cost = CostModel(boot_factor=1.1, request_factor=1.2)
    assert cost.decode_step_s(0) == pytest.approx(CostModel().decode_step_s(0) * 1.1 * 1.2)


def test_the_server_draws_each_request_its_own_factor():
    import random

    from specgate.sim.server import SimServerState

    state = SimServerState(
        server_args={},
        spec=None,
        faults=parse_faults([]),
        cost=CostModel(),
        meta_names="0.5.11",
        incremental_stream=False,
        request_noise=noise.RequestNoise(random.Random(3), sd=0.05),
    )
    factors = [state.cost_for_request().request_factor for _ in range(4)]
    assert len(set(factors)) == 4 and all(math.isfinite(f) and f > 0 for f in factors)
    state.request_noise = None
    assert state.cost_for_request().request_factor == 1.0


def test_the_run_id_is_the_one_the_launcher_marks_every_server_with():
    from specgate.server.orphans import RUN_ID_ENV, RunRecord

    assert noise.RUN_ID_ENV == RUN_ID_ENV
    record = RunRecord()
    record._written = [record.paths[0]]  # as after its first server: marking writes nothing more
    assert record.mark({})[RUN_ID_ENV] == record.mark({"SPECGATE_CONFIG": "x"})[RUN_ID_ENV]
