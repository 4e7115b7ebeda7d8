"""How often does the sampling equivalence test fail a sampler that is right? (a benchmark, not a test)

    python3 benchmarks/sampling_false_alarms.py [--runs 200] [--fault-runs 10] [--deployment sim] [--seed 1]
        [--alpha A] [--confirm-alpha C]   # another design than the deployment's (C 0: no confirmation)
        [--faults temperature-twice,...]  # only these faults' power (--runs 0: no healthy runs)
        [--jitter S]                      # every sampler, both sides, off the scoring pass by N(0, S)
        [--healthy aa,eagle3]             # which healthy runs (two processes can share the work)

Each run is the whole test of one config, in-process on the SIMULATOR's sampler
(specgate.sim.sampled_api.in_process: the same code the simulator's /generate serves), with the
deployment's `[sampling]` settings, prompts and sample sizes, and a fresh seed:
- A/A: the "speculative" side is the plain reference itself, sampled under other seeds;
- healthy: an EAGLE-3 config (2 steps, topk 1) verifying by rejection sampling, exact in theory.
With --jitter S both sides' samplers carry the simulator's boundary-jitter=S (no defect: the
scoring pass ranks a few healthy tokens past a filter's edge on both sides, as bf16 does on an
H200), which the violation test must not mistake for speculation's.
It prints how often each run FAILED (the false-alarm rate; alpha x confirm_alpha is its bound),
how often stage 1 rejected (and so a confirmation was drawn), which settings and statistics the
false alarms came from, then, for a few runs each, how often each sampling fault is caught (its
power on this deployment).
"""

from __future__ import annotations

import argparse
import dataclasses
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
FAULTS = ("greedy-accept", "drafts-unfiltered", "drafts-unfiltered=min_p", "temperature-twice")


def run(dep_name: str, spec: SpecSettings | None, faults: list[str], seed: int, design: dict, jitter: float = 0.0) -> dict:
    dep = load_deployment(dep_name)
    prompts = prompts_for(dep.sampling, dep.workload.speed_sequence(), dep.workload.prompt_format)
    checker = SamplingChecker(dataclasses.replace(dep.sampling, **design), prompts, seed)
    both = [f"boundary-jitter={jitter}"] if jitter else []
    return checker.check(
        "candidate", dep.reference, in_process(spec, parse_faults(faults + both)), in_process(None, parse_faults(both))
    )


def why(row: dict) -> list[str]:
    out = []
    for s in row["settings"]:
        if s["status"] == "FAIL":
            kinds = []
            if s.get("violation_p") is not None and s["violation_p"] < row["violation_threshold"]:
                kinds.append("violations")
            if s["likelihood"]["p"] < row["likelihood_threshold"]:
                kinds.append("likelihood")
            if s["positions_rejected"]:
                kinds.append("positions")
            if s.get("confirmation"):
                kinds.append("confirmed")
            out.append(f"{s['setting']}:{'+'.join(kinds)}")
    return out


def confirmations(row: dict) -> int:
    return sum(bool(s.get("confirmation")) for s in row["settings"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--fault-runs", type=int, default=10)
    ap.add_argument("--deployment", default="sim")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--alpha", type=float, help="stage 1's alpha instead of the deployment's")
    ap.add_argument("--confirm-alpha", type=float, help="the confirmation's level instead (0: none)")
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults whose power to measure")
    ap.add_argument("--jitter", type=float, default=0.0, help="boundary-jitter SD (nats) on both sides' samplers")
    ap.add_argument("--healthy", default="aa,eagle3", help="the healthy runs: aa (A/A), eagle3, or both")
    args = ap.parse_args()
    design = {k: v for k, v in (("alpha", args.alpha), ("confirm_alpha", args.confirm_alpha)) if v is not None}
    dep = load_deployment(args.deployment)
    sp = dataclasses.replace(dep.sampling, **design)
    print(
        f"deployment {dep.name}: {len(sp.settings)} settings ({', '.join(s.name for s in sp.settings)}), "
        f"{sp.prompts} prompts x {sp.samples} samples x {sp.max_new_tokens} tokens per side, alpha {sp.alpha}, "
        f"confirm_alpha {sp.confirm_alpha}: false-alarm bound {100 * sp.false_alarm_rate:.3g}%"
        + (f"; boundary-jitter {args.jitter} on both sides" if args.jitter else "")
    )
    healthy = (("aa", "A/A (reference against itself, other seeds)", None), ("eagle3", "healthy EAGLE-3 (rejection sampling)", EAGLE))
    for key, label, spec in healthy:
        if args.runs <= 0:
            break
        if key not in args.healthy.split(","):
            continue
        started = time.perf_counter()
        failed, aa_failed, confirmed, broken = 0, 0, 0, [0, 0]
        causes: Counter[str] = Counter()
        for i in range(args.runs):
            row = run(args.deployment, spec, [], args.seed * 100_003 + i, design, args.jitter)
            failed += row["status"] == "FAIL"
            for s in row["settings"]:
                broken[0] += sum(s["violations"].values())
                broken[1] += sum(s["violations_reference"].values())
            causes.update(why(row))
            aa_failed += not all(s["aa_passed"] for s in row["settings"])
            confirmed += confirmations(row) > 0
        rate = failed / args.runs
        print(
            f"{label}: {failed} of {args.runs} runs FAILED = {100 * rate:.1f}% (bound {100 * sp.false_alarm_rate:.3g}%); "
            f"stage 1 rejected (a confirmation drawn) in {confirmed}; in-run A/A flagged in {aa_failed}; "
            f"causes {dict(causes) or 'none'}; tokens outside a setting, candidate / reference: {broken[0]} / "
            f"{broken[1]}; {time.perf_counter() - started:.0f} s"
        )
    for fault in (f for f in args.faults.split(",") if f):
        caught = 0
        causes = Counter[str]()
        for i in range(args.fault_runs):
            row = run(args.deployment, EAGLE, [fault], args.seed * 7919 + i, design, args.jitter)
            caught += row["status"] == "FAIL"
            causes.update(why(row))
        print(f"fault {fault}: caught in {caught} of {args.fault_runs} runs; failing settings {dict(causes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
