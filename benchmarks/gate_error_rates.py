"""How often do the gates give the wrong verdict under between-boot noise? (a benchmark, not a test)

    python3 benchmarks/gate_error_rates.py [--runs 200] [--boot-sd 0.05] [--seed 1]

Each simulated gate run draws per-request decode figures the way the simulator's faults
make them (`boot-offset=S`: every boot of every config runs exp(N(0, S)) times as fast;
within a boot, requests vary around their own prompt's level), then decides with the
suite's own code: the interval (specgate.verdicts.noise.ratio_interval), the sequential
looks with their Bonferroni split (decide_sequentially), the rule (at_least / within),
and measuring more in batches to the cap. The between-boot spread the gate is given is
*calibrated first*, from separate A/A rounds drawn with another seed
(specgate.calibrate.analyse), never from the runs it is then checked on; the tolerance
for the A/A rows is the one that calibration suggests.

It prints, for the sim deployment's workload (9 requests, batches of 6, cap 30):
- beats gate at a true speedup exactly equal to its bar: how often it PASSES (should be
  at most 5%), without and with the calibrated spread;
- no-regression gates on A/A (nothing changed, per-boot offsets): how often they FAIL
  (should be at most 5%) at the deployment's tolerance and at the calibrated one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specgate.calibrate.analyse import _gate_model, _noise  # noqa: E402
from specgate.deployment import load_deployment  # noqa: E402
from specgate.measure.pairing import ratio_series  # noqa: E402
from specgate.verdicts.gates import PASS, at_least, decide_sequentially, planned_looks, within  # noqa: E402
from specgate.verdicts.noise import BootSpread, ratio_interval  # noqa: E402

WITHIN_SD = 0.02  # per-request SD of log tok/s within a boot (the sim's healthy runs: 0.1–7%)
PROMPT_SD = 0.10  # how much the pinned prompts differ from each other (removed by pairing)


class Boot:
    """One booted server: its own offset, and requests around each prompt's level."""

    def __init__(self, rng: np.random.Generator, level: float, prompts: np.ndarray, boot_sd: float) -> None:
        self.rng = rng
        self.level = level + rng.normal(0.0, boot_sd)
        self.prompts = prompts
        self.values: list[float] = []

    def more(self, count: int) -> None:
        for _ in range(count):
            i = len(self.values)
            self.values.append(float(np.exp(self.level + self.prompts[i] + self.rng.normal(0.0, WITHIN_SD))))

    def series(self) -> dict[int, list[float]]:
        return {1: list(self.values)}


def gate_run(rng, prompts, boot_sd, true_log_ratio, spread, _tolerance, rule, dep) -> bool:
    """One gate, sequential as the judge runs it; True where it PASSES."""
    wl, batch = dep.workload, dep.gates.sample_batch
    a = Boot(rng, true_log_ratio, prompts, boot_sd)
    b = Boot(rng, 0.0, prompts, boot_sd)
    a.more(wl.repeats)
    b.more(wl.repeats)

    def more() -> bool:
        if len(a.values) >= wl.max_repeats:
            return False
        step = min(batch, wl.max_repeats - len(a.values))
        a.more(step)
        b.more(step)
        return True

    looks = planned_looks(wl.repeats, wl.max_repeats, batch)
    status, _, _ = decide_sequentially(
        lambda level: ratio_interval(ratio_series(a.series(), b.series()), level, spread, boots_other=rule[1])[0],
        rule[0],
        more,
        dep.gates.confidence,
        looks,
    )
    return status == PASS


def calibrate(rng, prompts, boot_sd, dep, rounds: int):
    """A/A rounds drawn apart from the checked runs: the spread the gate will be given."""
    tps, speedups = [], []
    for _ in range(rounds):
        ref = Boot(rng, 0.0, prompts, boot_sd)
        spec = Boot(rng, 0.4, prompts, boot_sd)
        ref.more(dep.workload.repeats)
        spec.more(dep.workload.repeats)
        tps.append(ref.series())
        speedups.append(ratio_series(spec.series(), ref.series()))
    return _noise(tps), _noise(speedups)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--boot-sd", type=float, default=0.05, help="per-boot offset SD of log speed (the fault's S)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--calibration-rounds", type=int, default=5, help="A/A rounds of each calibration (specgate calibrate --boots)"
    )
    args = p.parse_args()
    if args.runs < 1 or args.calibration_rounds < 2 or not 0 <= args.boot_sd < 1:
        p.error("expected --runs >= 1, --calibration-rounds >= 2 and 0 <= --boot-sd < 1")
    dep = load_deployment("sim")
    bar = dep.gates.beats[0].ratio
    tol_now = dep.gates.tolerance.decode_tps_fraction
    rng = np.random.default_rng(args.seed)
    cal_rng = np.random.default_rng(args.seed + 1000)  # calibrations never share draws with the runs they serve
    prompts = rng.normal(0.0, PROMPT_SD, size=dep.workload.max_repeats)
    started = time.monotonic()
    one_sided = lambda tol: (lambda iv: at_least(iv, 1 - tol), 1)  # noqa: E731
    two_sided = lambda tol: (lambda iv: within(iv, 1 - tol, 1 + tol), 1)  # noqa: E731
    beats_rule = (lambda iv: at_least(iv, bar), None)
    counts = dict.fromkeys(
        ["beats_raw", "beats_cal", "ref_raw", "spec_raw", "ref_cal_now", "spec_cal_now", "ref_cal", "spec_cal"], 0
    )
    tolerances: list[tuple[float, float]] = []
    spreads: list[tuple[float, float]] = []
    for _ in range(args.runs):
        # Each gate run is preceded by its own calibration, as a user's would be: the rates below
        # hold the luck of the calibration too, not only of the run.
        tps_noise, sp_noise = calibrate(cal_rng, prompts, args.boot_sd, dep, args.calibration_rounds)
        sp = BootSpread(sp_noise.between_boot_log_sd_upper, "benchmark calibration")
        tp = BootSpread(tps_noise.between_boot_log_sd_upper, "benchmark calibration")
        _, _, t_ref = _gate_model(tps_noise, tol_now, True, dep)
        _, _, t_spec = _gate_model(sp_noise, tol_now, False, dep)
        tolerances.append((t_ref, t_spec))
        spreads.append((tp.log_sd, sp.log_sd))
        counts["beats_raw"] += gate_run(rng, prompts, args.boot_sd, np.log(bar), None, 0, beats_rule, dep)
        counts["beats_cal"] += gate_run(rng, prompts, args.boot_sd, np.log(bar), sp, 0, beats_rule, dep)
        counts["ref_raw"] += not gate_run(rng, prompts, args.boot_sd, 0.0, None, 0, two_sided(tol_now), dep)
        counts["spec_raw"] += not gate_run(rng, prompts, args.boot_sd, 0.0, None, 0, one_sided(tol_now), dep)
        counts["ref_cal_now"] += not gate_run(rng, prompts, args.boot_sd, 0.0, tp, 0, two_sided(tol_now), dep)
        counts["spec_cal_now"] += not gate_run(rng, prompts, args.boot_sd, 0.0, sp, 0, one_sided(tol_now), dep)
        counts["ref_cal"] += not gate_run(rng, prompts, args.boot_sd, 0.0, tp, 0, two_sided(t_ref), dep)
        counts["spec_cal"] += not gate_run(rng, prompts, args.boot_sd, 0.0, sp, 0, one_sided(t_spec), dep)
    r = {k: v / args.runs for k, v in counts.items()}
    med = lambda xs: float(np.median(xs))  # noqa: E731
    t_ref_med, t_spec_med = med([t[0] for t in tolerances]), med([t[1] for t in tolerances])
    print(f"# gate error rates: {args.runs} simulated gate runs per row, per-boot offset SD {args.boot_sd:.0%}")
    print(
        f"(sim workload: {dep.workload.repeats} requests, batches of {dep.gates.sample_batch}, cap "
        f"{dep.workload.max_repeats}; confidence {dep.gates.confidence:.0%}; within-boot SD {WITHIN_SD:.0%}; "
        f"each run calibrated first from {args.calibration_rounds} A/A rounds of its own)\n"
    )
    print("| scenario | wrong verdict | rate | bound |")
    print("|---|---|---|---|")
    rows = [
        (f"beats at a true speedup equal to its bar ({bar:g}x), interval of requests only", "PASS", r["beats_raw"]),
        ("the same, interval + calibrated between-boot spread", "PASS", r["beats_cal"]),
        (f"A/A reference (two-sided), tolerance {tol_now:.0%}, requests only", "FAIL", r["ref_raw"]),
        (f"A/A speculative speedup, tolerance {tol_now:.0%}, requests only", "FAIL", r["spec_raw"]),
        (f"A/A reference, tolerance {tol_now:.0%}, + calibrated spread", "FAIL", r["ref_cal_now"]),
        (f"A/A speculative speedup, tolerance {tol_now:.0%}, + calibrated spread", "FAIL", r["spec_cal_now"]),
        (f"A/A reference, calibrated tolerance (median {t_ref_med:.0%}), + calibrated spread", "FAIL", r["ref_cal"]),
        (
            f"A/A speculative speedup, calibrated tolerance (median {t_spec_med:.0%}), + calibrated spread",
            "FAIL",
            r["spec_cal"],
        ),
    ]
    for label, wrong, rate in rows:
        print(f"| {label} | {wrong} | {rate:.1%} | ≤ 5% |")
    print(
        f"\nbetween-boot spread the gates were given (median over calibrations, 80% upper bound): decode tok/s "
        f"{med([s[0] for s in spreads]):.1%}, speedup {med([s[1] for s in spreads]):.1%} "
        f"(true: {args.boot_sd:.1%} and {args.boot_sd * np.sqrt(2):.1%})"
    )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
