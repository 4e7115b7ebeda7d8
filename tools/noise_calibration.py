#!/usr/bin/env python3
"""The kept calibration of the A/B gate on the H200, derived from the A/A rounds of tools/gpu_noise.sh
(lab tool, issue 50).

    python3 tools/noise_calibration.py DIR [DIR ...]     (each DIR an unpacked results.tar.gz)

Prints the `[gates.between_boot]` block that fixtures/deployments/llama8b-dummy-h200-ab.toml
declares, and the arithmetic behind it, so the block is chosen from rounds kept before the gate runs
it judges (never fitted to them). Per machine (rounds of different machines are different frames):

- the pair E/T (eagle3-decode against its identical twin, booted side by side in one round): each
  round's figure is the median over prompts of log(E / T), as the A/B gate computes it; its spread
  between rounds, less what the requests alone give a median of that many, is the pair's
  between-boot part, at the product's own rule and 80% upper bound (`verdicts.noise.between_boot_spread`,
  the one `specgate calibrate` uses). Half its variance is each server's own part.
- E alone: each round's median log decode tok/s, the same way, with the within-round spread taken
  after each prompt's own effect is removed (the prompts are the same every round, so their effect
  does not move a round's median): the whole between-boot spread of one speculative server.
- Each server's own part: the larger of the pair's bound / sqrt 2 and the noise model's (specgate/sim/noise.py,
  E against D over 8-10 boots): a few rounds bound it from above only.
- The shared part is what E's whole spread holds beyond its own part.
- The request lag-1 of the paired log ratios left after each prompt's effect, per round, beside the
  0.32 the noise model keeps (specgate/sim/noise.py); the larger is declared, as the wider answer.
- A request's own spread (E's leftovers within a round), beside the noise model's; the larger is
  declared: `specgate check` states the sensitivity from it (the judge measures its own requests).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import noise_rounds  # noqa: E402  (the rounds' reader, beside this file)

from specgate.sim.noise import REQUEST_LAG1, SERVER_SD, SPEC_REQUEST_SD  # noqa: E402
from specgate.verdicts.noise import between_boot_spread  # noqa: E402

CANDIDATE, TWIN = "eagle3-decode", "eagle3-decode-twin"


def _paired_logs(per: dict[str, dict[str, float]]) -> dict[str, float]:
    """log(E / T) per prompt both answered, in send order."""
    e, t = per[CANDIDATE], per[TWIN]
    return {k: math.log(e[k] / t[k]) for k in e if k in t}


def _leftovers(rounds: list[dict[str, float]]) -> list[list[float]]:
    """Each round's per-request log figure (prompt -> value) less that prompt's mean over the
    rounds, in send order."""
    by_prompt: dict[str, list[float]] = {}
    for r in rounds:
        for k, v in r.items():
            by_prompt.setdefault(k, []).append(v)
    effect = {k: statistics.mean(v) for k, v in by_prompt.items()}
    return [[v - effect[k] for k, v in r.items()] for r in rounds]


def _rms(xs: list[float]) -> float:
    return math.sqrt(statistics.mean(x * x for x in xs))


def machine(rounds: list[dict]) -> dict[str, float] | None:
    if len(rounds) < 2:
        return None
    pairs = [_paired_logs(r["per"]) for r in rounds]
    pair_round = [statistics.median(p.values()) for p in pairs]
    pair_within = [statistics.stdev(p.values()) for p in pairs]
    # The pair's lag-1 after each prompt's own effect on the ratio is taken out.
    pair_lags = [noise_rounds.lag1(x) for x in _leftovers(pairs)]
    n = [len(p) for p in pairs]
    requests = min(n)
    pair_point, pair_upper = between_boot_spread(pair_round, _rms(pair_within), requests)
    e_round = [math.log(statistics.median(r["per"][CANDIDATE].values())) for r in rounds]
    e_logs = [{k: math.log(v) for k, v in r["per"][CANDIDATE].items()} for r in rounds]
    e_within = _rms([statistics.stdev(x) for x in _leftovers(e_logs)])
    e_point, e_upper = between_boot_spread(e_round, e_within, requests)
    return {
        "rounds": len(rounds),
        "requests": requests,
        "pair_round_sd": statistics.stdev(pair_round),
        "pair_within": _rms(pair_within),
        "pair_point": pair_point,
        "pair_upper": pair_upper,
        "pair_lag1": statistics.mean(pair_lags),
        "e_round_sd": statistics.stdev(e_round),
        "e_within": e_within,
        "e_point": e_point,
        "e_upper": e_upper,
    }


def main(folders: list[Path]) -> int:
    by_machine: dict[str, list[dict]] = {}
    for folder in folders:
        if not folder.is_dir():
            print(f"{folder}: no such folder: expected an unpacked results.tar.gz of tools/gpu_noise.sh", file=sys.stderr)
            return 2
        if not (folder / "provenance.txt").is_file():
            print(
                f"{folder}: no provenance.txt: expected an unpacked results.tar.gz of tools/gpu_noise.sh",
                file=sys.stderr,
            )
            return 2
        if not noise_rounds.rounds(folder):
            print(
                f"{folder}: no A/A round (round-*/benchmark.json with every config of {', '.join(noise_rounds.CONFIGS)}): "
                "an ab round is a gate trial (tools/gate_trials.py analyse), not a noise round",
                file=sys.stderr,
            )
    for r in noise_rounds.rounds_of(folders):
        by_machine.setdefault(r["gpu"], []).append(r)
    found = {}
    for gpu, rounds in sorted(by_machine.items()):
        figures = machine(rounds)
        if figures is None:
            print(f"- {gpu}: {len(rounds)} round: no spread (one round per machine gives no degrees of freedom)")
            continue
        found[gpu] = figures
        f = figures
        print(
            f"- {gpu}: {f['rounds']} rounds of {f['requests']} requests.\n"
            f"  E/T (median per-prompt log ratio): rounds sd {f['pair_round_sd']:.2%}; requests within a round "
            f"{f['pair_within']:.2%}, which alone give a median of {f['requests']} "
            f"{noise_rounds_median_sd(f['pair_within'], f['requests']):.2%}; between-boot part {f['pair_point']:.2%}, "
            f"80% upper bound {f['pair_upper']:.2%}; lag-1 of the leftovers {f['pair_lag1']:+.2f}\n"
            f"  E alone (median log tok/s): rounds sd {f['e_round_sd']:.2%}; leftover requests within a round "
            f"{f['e_within']:.2%}; between-boot part {f['e_point']:.2%}, 80% upper bound {f['e_upper']:.2%}"
        )
    if not found:
        print("no machine with two rounds or more: nothing to declare", file=sys.stderr)
        return 1
    # One machine's frame: the one with the most rounds (frames of different machines do not pool
    # without the history's machinery; the others are printed above for comparison).
    gpu, f = max(found.items(), key=lambda kv: kv[1]["rounds"])
    # A few rounds can bound the own part from above only; where the bound is under the noise
    # model's own part (E against D over more boots), the model's is declared: the wider answer.
    own = max(f["pair_upper"] / math.sqrt(2), SERVER_SD)
    whole = max(f["e_upper"], own)
    shared = math.sqrt(max(0.0, whole**2 - own**2))
    lag = max(f["pair_lag1"], REQUEST_LAG1)
    request = max(f["e_within"], SPEC_REQUEST_SD)
    print(
        f"\nDeclared from {gpu} ({f['rounds']} rounds, {f['rounds'] - 1} degrees of freedom): each server's own part "
        f"{own:.2%} (the larger of the pair's upper bound / sqrt 2, {f['pair_upper'] / math.sqrt(2):.2%}, and the noise model's "
        f"{SERVER_SD:.2%}), the whole spread {whole:.2%}, shared {shared:.2%}, lag-1 {lag:.2f} "
        f"(the larger of {f['pair_lag1']:+.2f} here and the noise model's {REQUEST_LAG1}), a request's own spread {request:.2%} "
        f"(the larger of {f['e_within']:.2%} here and the noise model's {SPEC_REQUEST_SD:.2%})\n"
    )
    print("[gates.between_boot]")
    print(f"decode_tps = {whole:.4f}")
    print(f"decode_tps_shared = {shared:.4f}")
    print(f"speedup = {whole:.4f}")
    print(f"speedup_shared = {shared:.4f}")
    print(f"request_lag1 = {lag:.2f}")
    print(f"request_sd = {request:.4f}")
    return 0


def noise_rounds_median_sd(within: float, requests: int) -> float:
    from specgate.verdicts.noise import MEDIAN_EFFICIENCY

    return MEDIAN_EFFICIENCY * within / math.sqrt(requests)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main([Path(a) for a in sys.argv[1:]]))
