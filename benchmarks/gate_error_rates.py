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

    python3 benchmarks/gate_error_rates.py --plans [--runs 200] [--tolerance 0.05]

compares the designs of a no-regression speedup gate at the H200's measured spreads
(within-boot SD 3.3%, between-boot SD 4.9%; `specgate calibrate llama8b-dummy-h200`, 3 rounds):
one boot a side widened by a 3-boot calibration's 80% bound; one boot a side widened by the
runner's pooled spread (specgate.verdicts.history: a calibration and --pooled-runs unchanged
runs); and sequential boots (a baseline of --max-boots boots; this run boots another replicate
only while the gate is undecided, up to --max-boots, the error budget split over the boot looks).
Per plan: how often an unchanged build FAILS (false alarm), how often a true 3% and 10%
regression FAILS (power), how often it ends INCONCLUSIVE, and the boots it spent.
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
from specgate.measure.pairing import across_boots, ratio_series  # noqa: E402
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, PASS, at_least, decide_sequentially, planned_looks, within  # noqa: E402
from specgate.verdicts.history import BootValue, pool  # noqa: E402
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


H200_WITHIN_SD = 0.033  # eagle3 speedup, within one boot (specgate calibrate llama8b-dummy-h200)
H200_BOOT_SD = 0.049  # its spread between boots


def _spread_from(rng, frames: list[int], requests: int) -> BootSpread:
    """The spread the runner would hold after boots grouped in `frames` (a calibration's rounds,
    unchanged runs against one stored baseline), pooled by the suite's own code."""
    noise = (1.2533 * H200_WITHIN_SD) ** 2 / requests
    values = [
        [
            BootValue(
                boot=k + 1,
                level=float(rng.normal(0, np.sqrt(H200_BOOT_SD**2 + noise))),
                within_log_sd=H200_WITHIN_SD,
                requests=requests,
            )
            for k in range(n)
        ]
        for n in frames
    ]
    found = pool(values)
    assert found is not None
    return BootSpread(found.log_sd_upper, f"pooled over {found.df} degrees of freedom")


def plan_run(rng, prompts, change: float, spread: BootSpread, stored_boots: int, max_boots: int, tol: float, dep):
    """One speedup gate: `stored_boots` stored boots, this run booting one more while undecided up
    to `max_boots` (1: one boot), each measured to the cap at once (a later look would cost a
    boot). Returns (status, boots booted now)."""
    n = dep.workload.max_repeats
    sd = H200_BOOT_SD

    def boot(level: float) -> list[float]:
        offset = level + rng.normal(0.0, sd)
        return [float(np.exp(offset + prompts[i] + rng.normal(0.0, H200_WITHIN_SD))) for i in range(n)]

    stored = across_boots({k + 1: boot(0.0) for k in range(stored_boots)})
    now = {1: boot(change)}

    def more() -> bool:
        if len(now) >= max_boots:
            return False
        now[len(now) + 1] = boot(change)
        return True

    status, _, _ = decide_sequentially(
        lambda level: ratio_interval(ratio_series(now, stored), level, spread, boots_other=stored_boots)[0],
        lambda iv: at_least(iv, 1 - tol),
        more,
        dep.gates.confidence,
        max_boots,
    )
    return status, len(now)


def plans(args, dep) -> int:
    rng = np.random.default_rng(args.seed)
    n = dep.workload.max_repeats
    prompts = rng.normal(0.0, PROMPT_SD, size=n)
    started = time.monotonic()
    designs = [
        ("one boot a side, 3-boot calibration", lambda: _spread_from(rng, [3], n), 1, 1),
        (f"one boot a side, pooled ({args.pooled_runs} unchanged runs + calibration)", None, 1, 1),
        (
            f"sequential: up to {args.max_boots} boots now, baseline of {args.max_boots}, pooled",
            None,
            args.max_boots,
            args.max_boots,
        ),
    ]
    print(
        f"# no-regression speedup gate designs: {args.runs} simulated runs per cell; within-boot SD "
        f"{H200_WITHIN_SD:.1%}, between-boot SD {H200_BOOT_SD:.1%} (H200, eagle3); {n} requests per boot; "
        f"tolerance {args.tolerance:.0%}; {dep.gates.confidence:.0%} overall\n"
    )
    print(
        "| plan | unchanged: FAIL (false alarm) | unchanged: INCONCLUSIVE | -3%: FAIL | -10%: FAIL | -10%: INCONCLUSIVE | boots now (mean, unchanged / -10%) |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, calibrated, stored_boots, max_boots in designs:
        cells: dict[float, list[tuple[str, int]]] = {0.0: [], -0.03: [], -0.10: []}
        for _ in range(args.runs):
            # pooled: the calibration's 3 rounds, and the unchanged runs against one stored baseline
            spread = calibrated() if calibrated else _spread_from(rng, [3, args.pooled_runs], n)
            for change in cells:
                cells[change].append(
                    plan_run(rng, prompts, np.log(1 + change), spread, stored_boots, max_boots, args.tolerance, dep)
                )
        rate = {
            (c, st): sum(s == st for s, _ in got) / args.runs for c, got in cells.items() for st in (FAIL, INCONCLUSIVE)
        }
        boots = {c: float(np.mean([b for _, b in got])) for c, got in cells.items()}
        print(
            f"| {label} | {rate[0.0, FAIL]:.1%} | {rate[0.0, INCONCLUSIVE]:.1%} | {rate[-0.03, FAIL]:.1%} "
            f"| {rate[-0.10, FAIL]:.1%} | {rate[-0.10, INCONCLUSIVE]:.1%} | {boots[0.0]:.1f} / {boots[-0.10]:.1f} |"
        )
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--boot-sd", type=float, default=0.05, help="per-boot offset SD of log speed (the fault's S)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--calibration-rounds", type=int, default=5, help="A/A rounds of each calibration (specgate calibrate --boots)"
    )
    p.add_argument("--plans", action="store_true", help="compare one-boot, pooled-spread and sequential-boot designs")
    p.add_argument("--tolerance", type=float, default=0.05, help="--plans: the gate's tolerance")
    p.add_argument("--pooled-runs", type=int, default=40, help="--plans: unchanged runs in the pooled history")
    p.add_argument("--max-boots", type=int, default=4, help="--plans: the sequential plan's boots per side")
    args = p.parse_args()
    if args.plans:
        if args.runs < 1 or args.pooled_runs < 2 or args.max_boots < 2 or not 0 <= args.tolerance < 1:
            p.error("expected --runs >= 1, --pooled-runs >= 2, --max-boots >= 2 and 0 <= --tolerance < 1")
        return plans(args, load_deployment("sim"))
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
        t_ref = _gate_model(tps_noise, tol_now, True, dep).suggested
        t_spec = _gate_model(sp_noise, tol_now, False, dep).suggested
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
