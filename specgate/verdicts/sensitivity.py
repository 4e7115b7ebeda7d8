"""What a no-regression speed gate can see, said before and after the run.

A gate compares this run's level of a figure with the stored run's. Its estimate varies with
the boots on both sides (the between-boot spread s, per boot) and with the requests of each
boot (the within-boot spread w, a median of n requests: 1.2533·w/√n):

    sd² = (s² + (1.2533·w)²/n) · (1/B + 1/M)        B boots now, M stored

The *sensitivity* is the regression such a comparison catches with 80% power when its bar sits
where an unchanged build crosses it at the deployment's false-alarm target (1 − `[gates]
confidence`; split over both sides for the two-sided reference gate):

    detects = 1 − exp(−(z_fa + z_0.8) · sd)

It depends on the design, not on this run's luck, so `specgate check` states it before anything
boots and the report after, from the spread the judge uses (pooled history, calibration or
declared). For `[gates] detect = D` it gives the boots per side (launch.boots, and a baseline
recorded with as many) that bring it to D, and their minutes from the measured boot and request
times. More requests alone cannot: the between-boot term does not shrink with n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
POWER = 0.8


@dataclass(frozen=True)
class Design:
    between_log_sd: float  # per boot, as the judge uses it (an upper bound where estimated)
    within_log_sd: float | None  # None where unknown (a declared spread): the requests' part then left out
    boots_now: int
    boots_stored: int
    requests: int  # per boot, at the gate's cap
    false_alarm: float
    two_sided: bool

    def sd(self, boots_now: int | None = None, boots_stored: int | None = None) -> float:
        b, m = boots_now or self.boots_now, boots_stored or self.boots_stored
        per_boot = self.between_log_sd**2 + (MEDIAN_EFFICIENCY * (self.within_log_sd or 0.0)) ** 2 / max(1, self.requests)
        return math.sqrt(per_boot * (1 / max(1, b) + 1 / max(1, m)))

    def detects(self, boots_now: int | None = None, boots_stored: int | None = None) -> float:
        from scipy.stats import norm

        alpha = self.false_alarm / (2 if self.two_sided else 1)
        z = float(norm.ppf(1 - alpha)) + float(norm.ppf(POWER))
        return 1 - math.exp(-z * self.sd(boots_now, boots_stored))

    def boots_for(self, target: float, most: int) -> int | None:
        """The fewest boots per side (now and stored alike) that detect `target`; None past `most`."""
        return next((b for b in range(1, most + 1) if self.detects(b, b) <= target), None)


def minutes(boots: int, boot_seconds: float | None, request_seconds: float | None, requests: int) -> float | None:
    """GPU minutes of `boots` boots of one server measuring `requests` each; None where unknown."""
    if boot_seconds is None or request_seconds is None:
        return None
    return boots * (boot_seconds + requests * request_seconds) / 60


def sentence(design: Design, source: str) -> str:
    within = "" if design.within_log_sd is None else f", within-boot {design.within_log_sd:.1%}"
    return (
        f"sensitivity: detects a regression of {design.detects():.1%} with {POWER:.0%} power at a "
        f"{design.false_alarm:.0%} false-alarm rate ({design.boots_now} boot(s) now, {design.boots_stored} stored, "
        f"{design.requests} requests per boot; between-boot spread {design.between_log_sd:.1%}{within}, {source})"
    )


def plan_sentence(
    design: Design,
    target: float,
    most: int,
    seconds_per_boot: float | None,
    request_seconds: float | None,
    url: bool = False,
) -> str:
    """What `[gates] detect = target` would take: boots per side and their minutes. Servers attached
    by url (`url`) are one boot a run whatever launch.boots says: their boots come by hand."""
    if design.detects() <= target:
        return f"detect = {target:.0%}: reached with this design"
    boots = design.boots_for(target, most)
    if boots is None:
        return (
            f"detect = {target:.0%}: not reached within {most} boots per side (at {most}: {design.detects(most, most):.1%}); "
            "a smaller between-boot spread (pool more unchanged runs) or a larger detect is needed"
        )
    cost = minutes(boots, seconds_per_boot, request_seconds, design.requests)
    spent = (
        f"about {cost:.0f} GPU minutes per config and side"
        if cost is not None
        else "minutes unknown (no measured boot and request times: specgate calibrate records them)"
    )
    how = (
        f"servers attached by url are one boot a run: restart them by hand between {boots} runs, or let specgate "
        f'launch them (launcher = "local" or "ssh", which boot each config {boots} times a run)'
        if url
        else f"launch.boots = {boots}, and a baseline recorded with as many"
    )
    return f"detect = {target:.0%}: needs {boots} boots per side ({how}; more requests alone cannot get there), {spent}"
