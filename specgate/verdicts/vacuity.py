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
"""

from __future__ import annotations

from dataclasses import dataclass

from specgate.deployment import Deployment, flag_int
from specgate.gate_kinds import calling, kinds

# The least accept length there is: the verified token (verdicts.judge uses the same figure).
TAU_FLOOR = 1.0
# A speed tolerance above this sets a bar under half the stored speed or speedup: a halving passes.
SPEED_TOLERANCE_VACUOUS = 0.5
# A beats ratio below this asks for less than a tenth of the speed of the config it is over.
BEATS_RATIO_VACUOUS = 0.1


@dataclass(frozen=True)
class Vacuity:
    """One threshold under which a gate cannot fail: where it is, its value and why."""

    field: str  # the deployment's field, e.g. "gates.tolerance.decode_tps" or "gates.beats[0].ratio"
    value: float
    why: str

    def summary(self, deployment: Deployment) -> str:
        return f"VACUOUS by arithmetic: {self.field} = {self.value:g} in {deployment.path}: {self.why}"


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
    # One field may make several configs' gates vacuous: said once per field, with each config's reason.
    merged: dict[str, Vacuity] = {}
    for v in found:
        if v.field in merged and v.why not in merged[v.field].why:
            merged[v.field] = Vacuity(v.field, v.value, merged[v.field].why + "; " + v.why)
        else:
            merged.setdefault(v.field, v)
    return list(merged.values())
