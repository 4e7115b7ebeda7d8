"""How often does the sampling equivalence test fail a sampler that is right? (a benchmark, not a test)

    python3 benchmarks/sampling_false_alarms.py [--runs 200] [--deployment sim] [--seed 1]

Each run is the whole test of one config, in-process on the SIMULATOR's sampler
(specgate.sim.sampled_api.in_process: the same code the simulator's /generate serves), with the
deployment's `[sampling]` settings, prompts and sample sizes, and a fresh seed:
- A/A: the "speculative" side is the plain reference itself, sampled under other seeds;
- healthy: an EAGLE-3 config (2 steps, topk 1) verifying by rejection sampling, exact in theory.
It prints how often each run FAILED (the false-alarm rate; the test's alpha is its bound) and
which settings and statistics the false alarms came from, then, for a few runs each, how often
each sampling fault is caught (its power on this deployment).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specgate.deployment import load_deployment  # noqa: E402
from specgate.sampling.check import SamplingChecker, prompts_for  # noqa: E402
from specgate.sim.engine import SpecSettings  # noqa: E402
from specgate.sim.faults import parse_faults  # noqa: E402
from specgate.sim.sampled_api import in_process  # noqa: E402

EAGLE = SpecSettings("EAGLE3", steps=2, topk=1, draft_tokens=3, attention_mode="decode", draft_agreement=0.7)
FAULTS = ("greedy-accept", "drafts-unfiltered", "temperature-twice")


def run(dep_name: str, spec: SpecSettings | None, faults: list[str], seed: int) -> dict:
    dep = load_deployment(dep_name)
    prompts = prompts_for(dep.sampling, dep.workload.speed_sequence(), dep.workload.prompt_format)
    checker = SamplingChecker(dep.sampling, prompts, seed)
    return checker.check("candidate", dep.reference, in_process(spec, parse_faults(faults)), in_process(None))


def why(row: dict) -> list[str]:
    out = []
    for s in row["settings"]:
        if s["status"] == "FAIL":
            kinds = []
            if s["violations"] or s["violations_reference"]:
                kinds.append("violations")
            if s["likelihood"]["p"] < row["likelihood_threshold"]:
                kinds.append("likelihood")
            if s["positions_rejected"]:
                kinds.append("positions")
            out.append(f"{s['setting']}:{'+'.join(kinds)}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--fault-runs", type=int, default=10)
    ap.add_argument("--deployment", default="sim")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    dep = load_deployment(args.deployment)
    sp = dep.sampling
    print(
        f"deployment {dep.name}: {len(sp.settings)} settings ({', '.join(s.name for s in sp.settings)}), "
        f"{sp.prompts} prompts x {sp.samples} samples x {sp.max_new_tokens} tokens per side, alpha {sp.alpha}"
    )
    for label, spec in (("A/A (reference against itself, other seeds)", None), ("healthy EAGLE-3 (rejection sampling)", EAGLE)):
        started = time.perf_counter()
        failed, aa_failed = 0, 0
        causes: Counter[str] = Counter()
        for i in range(args.runs):
            row = run(args.deployment, spec, [], args.seed * 100_003 + i)
            failed += row["status"] == "FAIL"
            causes.update(why(row))
            aa_failed += not all(s["aa_passed"] for s in row["settings"])
        rate = failed / args.runs
        print(
            f"{label}: {failed} of {args.runs} runs FAILED = {100 * rate:.1f}% (bound: alpha {100 * sp.alpha:g}%); "
            f"in-run A/A flagged in {aa_failed}; causes {dict(causes) or 'none'}; {time.perf_counter() - started:.0f} s"
        )
    for fault in FAULTS:
        caught = 0
        causes = Counter[str]()
        for i in range(args.fault_runs):
            row = run(args.deployment, EAGLE, [fault], args.seed * 7919 + i)
            caught += row["status"] == "FAIL"
            causes.update(why(row))
        print(f"fault {fault}: caught in {caught} of {args.fault_runs} runs; failing settings {dict(causes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
