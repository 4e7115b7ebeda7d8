"""How often the results history's change-point detection (specgate.history.changes) finds a
3% step at the commit it was injected at (± 1 run), and how often it flags a healthy history,
over simulated histories of 40 runs at the H200's measured noise (specgate/sim/noise.py).

Each run's figure is what one gate run reports: the median over its requests of the figure, with
the between-boot offset the H200 showed and AR(1) request noise (lag 0.32) within the boot.
Three figures, each at its own measured noise:
- plain decode tok/s (between boots 0.62%, requests 0.75%);
- a speculative config's decode tok/s (the run-shared and the server's own offsets, 2.65%);
- a speculative config's speedup over plain (2.72%, requests 3.94%).

    python3 benchmarks/history_change_points.py [--seeds 500]

docs/history.md quotes what it prints.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass

import numpy as np

from specgate.history.changes import find_changes
from specgate.sim import noise

RUNS = 40
STEP_AT = 20  # the first run after the injected step
STEP = 0.03
THRESHOLD = 0.03
REQUESTS = 54  # sim.toml's workload: 9 repeats of 6 prompt sets


@dataclass(frozen=True)
class Figure:
    name: str
    boot_sd: float
    request_sd: float


FIGURES = (
    Figure("plain decode tok/s", noise.PLAIN_BOOT_SD, noise.PLAIN_REQUEST_SD),
    Figure("speculative decode tok/s", math.hypot(noise.RUN_SD, noise.SERVER_SD), noise.SPEC_REQUEST_SD),
    Figure("speedup over plain", noise.SPEEDUP_BOOT_SD, noise.SPEEDUP_REQUEST_SD),
)


def simulated_history(
    seed: int, figure: Figure, step: float = STEP, step_at: int = STEP_AT, runs: int = RUNS
) -> list[float]:
    """`runs` figures of one config, `step` (a fraction: −0.03 a 3% loss) from run `step_at` on."""
    rng = random.Random(f"history:{seed}:{figure.name}")
    out = []
    for run in range(runs):
        requests = noise.RequestNoise(rng, figure.request_sd)
        median = float(np.median([requests.next() for _ in range(REQUESTS)]))
        shift = math.log1p(step) if run >= step_at else 0.0
        out.append(100.0 * math.exp(shift + rng.gauss(0.0, figure.boot_sd) + median))
    return out


def distance(levels: list[float], at: int = STEP_AT) -> int | None:
    """How many runs from `at` the nearest step found lies (None: none found)."""
    steps = find_changes(levels).steps
    return min(abs(s.index - at) for s in steps) if steps else None


def found_at(levels: list[float], at: int = STEP_AT, slack: int = 1) -> bool:
    """A step found within `slack` runs of `at`."""
    near = distance(levels, at)
    return near is not None and near <= slack


def flagged(levels: list[float]) -> bool:
    """A healthy history flagged: any step or creep found."""
    changes = find_changes(levels)
    return bool(changes.steps) or changes.creep is not None


def rates(figure: Figure, seeds: range) -> tuple[float, float, float, float]:
    """The share of seeds whose step is found within 1 run, within 3, anywhere; and of healthy
    histories flagged."""
    near = [distance(simulated_history(s, figure, -STEP)) for s in seeds]
    alarms = sum(flagged(simulated_history(s, figure, 0.0)) for s in seeds)
    n = len(seeds)
    within = [sum(d is not None and d <= k for d in near) / n for k in (1, 3)]
    return within[0], within[1], sum(d is not None for d in near) / n, alarms / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=500)
    args = parser.parse_args()
    seeds = range(args.seeds)
    print(f"{RUNS} runs, a {STEP:.0%} loss from run {STEP_AT}, {args.seeds} seeds per figure")
    print(f"{'figure':<28}{'found at ±1':>13}{'at ±3':>8}{'anywhere':>10}{'healthy flagged':>17}")
    for figure in FIGURES:
        one, three, anywhere, alarms = rates(figure, seeds)
        print(f"{figure.name:<28}{one:>13.1%}{three:>8.1%}{anywhere:>10.1%}{alarms:>17.1%}")


if __name__ == "__main__":
    main()
