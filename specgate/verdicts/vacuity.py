"""Gates that cannot fail, by arithmetic: a threshold in the deployment under which no plausible
figure fails the gate is VACUOUS, whatever this run measures.

Each rule is decided from what the gate's figure can be, not from figures seen on some machine:

- **Accept-length floor at or below 1.0** (`[[gates.accept_length]] at_least`): every verify step
  accepts at least the verified token, so τ >= 1 always; such a floor passes a drafter that
  accepts nothing.
- **Accept-length regression tolerance** (`[gates.tolerance] accept_length`): the bar is the
  stored τ times (1 - tolerance), and a stored τ is at most `--speculative-num-steps` + 1 (one
  verify step accepts at most every draft step and the verified token). Where
  (steps + 1)(1 - tolerance) <= 1 the bar is at or below 1.0 for every baseline that can be stored
  (without the flag: a tolerance of 1.0, a bar of 0). Per stored figure the judge also calls a bar
  at or below 1.0 vacuous (verdicts.judge).
- **Speed tolerance over 0.5** (`[gates.tolerance] decode_tps`, `decode_tps_by_config`): the
  no-regression gate fails below (1 - tolerance) of the stored speed (the reference) or speedup
  (a speculative config). Over 0.5 that bar is under half the stored figure, so a config taking
  twice as long per token as when its baseline was stored clears it: the regressions this gate
  exists for (speculation silently off on a config that was 2x, a verify pass or a cycle twice as
  dear, CUDA graphs gone on a small model) all land at or above half, so no plausible regression
  is caught. At exactly 0.5 a halving sits on the bar, and the gate fails it (its interval cannot
  clear the bar), so 0.5 itself is still a gate, if a coarse one. Where calibration says one boot
  needs more, the noise of one boot is what to fix (more `launch.boots` on both sides shrink it by
  sqrt(boots)); a tolerance that passes a halving is no gate.
- **Beats ratio under 0.1** (`[[gates.beats]] ratio`): a speculative cycle yields at least one
  token and costs its draft steps plus one verify pass, so a config whose every draft is rejected
  and whose drafter is as dear as the target still decodes at 1/(steps + 1) of plain decoding
  (0.125 at 7 steps). A bar under 0.1 asks for less than a tenth of plain decoding's speed: only a
  config spending more than ten plain decode steps per token fails it, which no speculative
  config of a drafter no larger than its target does below nine draft steps.

The gate's interval is never looked at for these: a vacuous threshold is VACUOUS regardless of
the figures, the same before any server boots (`specgate check`) and in the run's report.

Checks that report what they could detect are held to one rule as well (`undetectable`): where
the smallest effect a check detects exceeds the least effect of the faults it exists for, it is
VACUOUS, not PASS. The sampling check reports the likelihood shift (nats per token) it detects
with 80% power:

- **Too few samples to reject at all** (`[sampling] prompts`, `samples`): its rank test's least
  possible p over P prompts of S samples a side (every speculative sample above every reference
  one, ties included) is at or above its level (alpha / 2 / settings): no shift, however large,
  is detected. Decided from the deployment, before anything boots.
- **A detectable shift over 1 nat per token** (measured, from the A/A's spread): the sampler
  faults this check exists for (verify taking the argmax, the temperature applied twice, a filter
  left off accepted drafts) move the samples' log-likelihood by a few tenths of a nat per token
  (0.08 to 0.3 on the simulator at temperatures up to 1, 2.7 at 1.3); above 1 nat per token only
  a sampler off by a factor e on every token is found.

The gates meet the same rule through their thresholds: a no-regression gate fails where its
interval's low end crosses 1 - tolerance, so the regression it sees with 80% power
(verdicts.noise.detection) never exceeds its tolerance (a wide interval shows as a high chance
of failing an unchanged build, which the report states, not as a blind gate); the tolerance rule
above is what it could detect, decided before anything boots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specgate.deployment import Deployment, flag_int
from specgate.gate_kinds import calling, kinds
from specgate.sampling_spec import SamplingSpec

# The least accept length there is: the verified token (verdicts.judge uses the same figure).
TAU_FLOOR = 1.0
# A speed tolerance above this sets a bar under half the stored speed or speedup: a halving passes.
SPEED_TOLERANCE_VACUOUS = 0.5
# A beats ratio below this asks for less than a tenth of the speed of the config it is over.
BEATS_RATIO_VACUOUS = 0.1
# A sampling check that detects no likelihood shift under this (nats per token) finds no sampler fault.
DETECTABLE_SHIFT_VACUOUS = 1.0


@dataclass(frozen=True)
class Vacuity:
    """One threshold under which a gate cannot fail: where it is, its value and why."""

    field: str  # the deployment's field, e.g. "gates.tolerance.decode_tps" or "gates.beats[0].ratio"
    value: float
    why: str
    by: str = "arithmetic"  # or "measurement": what this run's own figures showed

    def summary(self, deployment: Deployment) -> str:
        return f"VACUOUS by {self.by}: {self.field} = {self.value:g} in {deployment.path}: {self.why}"


def undetectable(field: str, value: float, detectable: float, bound: float, why: str, by: str) -> Vacuity | None:
    """The one rule for a check that reports the smallest effect it detects: above `bound`, the
    least effect of the faults it exists for, the check cannot fail them and is VACUOUS."""
    if detectable <= bound:
        return None
    return Vacuity(field, value, why, by)


def _rank_z_most(samples: int) -> float:
    """The largest |z| the likelihood test's per-prompt rank test (sampling.stats._u_z) can reach
    with `samples` a side: every B above every A, with and without ties within a side."""
    n = 2 * samples
    half = samples * samples / 2
    untied = half / math.sqrt(samples * samples * (n + 1) / 12)
    ties = 2 * (samples**3 - samples)
    tied_var = samples * samples / 12 * ((n + 1) - ties / (n * (n - 1)))
    return max(untied, half / math.sqrt(tied_var) if tied_var > 0 else 0.0)


def sampling_size(spec: SamplingSpec) -> Vacuity | None:
    """The sampling check, where its likelihood test cannot reject at its level with this many
    prompts and samples (Stouffer over prompts of the rank test's largest z): no shift is detected."""
    from scipy.stats import norm  # here: `specgate check` pays for scipy only where sampling is on

    if not spec.active:
        return None
    level = spec.alpha / 2 / len(spec.settings)
    least_p = float(2 * norm.sf(math.sqrt(spec.prompts) * _rank_z_most(spec.samples)))
    return undetectable(
        "sampling.samples",
        spec.samples,
        math.inf if least_p >= level else 0.0,
        DETECTABLE_SHIFT_VACUOUS,
        f"with {spec.prompts} prompt(s) of {spec.samples} samples a side, the likelihood test's least p (every "
        f"speculative sample more likely than every reference one) is {least_p:.2g}, not below its level "
        f"{level:.2g} (alpha {spec.alpha:g} / 2 / {len(spec.settings)} settings): no shift of the samples, however "
        "large, fails it. Raise sampling.samples or sampling.prompts (the defaults, 64 and 8, detect a few "
        "hundredths of a nat per token)",
        "arithmetic",
    )


def sampling_setting(spec: SamplingSpec, setting: dict[str, Any]) -> Vacuity | None:
    """One setting of the sampling check's report row, by what it could detect: the deployment's
    size (sampling_size), else the shift this run's A/A says it detects with 80% power."""
    static = sampling_size(spec)
    if static is not None:
        return static
    shift = float(setting["detectable_shift"])
    return undetectable(
        "sampling.samples",
        spec.samples,
        shift,
        DETECTABLE_SHIFT_VACUOUS,
        f"setting {setting['setting']} detects only a log-likelihood shift of {shift:.2f} nats per token or more "
        f"(80% power, from this run's A/A at {spec.prompts} prompt(s) × {spec.samples} samples × "
        f"{spec.max_new_tokens} tokens), over the {DETECTABLE_SHIFT_VACUOUS:g} above which no sampler fault this "
        "check exists for is found: raise sampling.samples, prompts or max_new_tokens",
        "measurement",
    )


def judge_sampling_row(spec: SamplingSpec, row: dict[str, Any]) -> Vacuity | None:
    """Marks the sampling check's row (sampling.check) by this rule: a setting that passed but
    could detect nothing a fault makes is VACUOUS, and so is the row where none failed. Returns
    the first such setting's vacuity (None: the row stands as judged)."""
    first: Vacuity | None = None
    for setting in row["settings"]:
        if setting["status"] != "PASS":
            continue
        found = sampling_setting(spec, setting)
        if found is not None:
            setting["status"] = "VACUOUS"
            setting["evidence"].append(f"VACUOUS by {found.by}: {found.why}")
            first = first or found
    if first is not None and row["status"] == "PASS":
        row["status"] = "VACUOUS"
    return first


def speed_tolerance(deployment: Deployment, config: str) -> Vacuity | None:
    """The no-regression gate on `config`'s decode tok/s (or speedup), where its tolerance cannot fail."""
    tol = deployment.gates.tolerance
    allowed = tol.decode_tps_for(config)
    if allowed <= SPEED_TOLERANCE_VACUOUS:
        return None
    field = (
        f"gates.tolerance.decode_tps_by_config.{config}"
        if config in tol.decode_tps_by_config
        else "gates.tolerance.decode_tps"
    )
    return Vacuity(
        field,
        allowed,
        f"a config's decode tok/s (the reference) or its speedup over the reference (a speculative config) may "
        f"fall to {1 - allowed:.0%} of the stored figure and pass: over {SPEED_TOLERANCE_VACUOUS:.0%} a config "
        "taking twice as long per token (speculation silently off, a verify pass or a cycle twice as dear) "
        "clears the bar, so no plausible regression is caught. Use at most 50%; "
        f"{deployment.launch.more_boots} narrow the noise that calls for a wide one",
    )


def accept_tolerance(deployment: Deployment, config: str) -> Vacuity | None:
    """The accept-length regression gate of `config`, where no stored accept length can make it fail."""
    tol = deployment.gates.tolerance.accept_length
    steps = flag_int(deployment.configs[config].args, "--speculative-num-steps")
    most = float(steps + 1) if steps is not None else None
    bar = most * (1 - tol) if most is not None else 1 - tol
    if (most is not None and bar > TAU_FLOOR) or (most is None and tol < 1.0):
        return None
    if most is None:
        why = "the bar is 0: every accept length passes"
    else:
        why = (
            f"a config of --speculative-num-steps {steps} accepts at most {most:g} tokens per verify step (its draft "
            f"steps + the verified token), and {most:g} less {tol:.0%} is {bar:.3f}, at or below {TAU_FLOOR:g}, the least an "
            "accept length can be: whatever baseline is stored, a drafter that accepts nothing passes"
        )
    return Vacuity("gates.tolerance.accept_length", tol, why)


def vacuities(deployment: Deployment) -> list[Vacuity]:
    """Every threshold of the deployment under which some gate cannot fail, each once."""
    found: list[Vacuity] = []
    for kind in kinds():
        with calling(kind, "vacuities"):
            found.extend(kind.vacuities(deployment))
    if (size := sampling_size(deployment.sampling)) is not None:
        found.append(size)
    # One field may make several configs' gates vacuous: said once per field, with each config's reason.
    merged: dict[str, Vacuity] = {}
    for v in found:
        if v.field in merged and v.why not in merged[v.field].why:
            merged[v.field] = Vacuity(v.field, v.value, merged[v.field].why + "; " + v.why)
        else:
            merged.setdefault(v.field, v)
    return list(merged.values())
