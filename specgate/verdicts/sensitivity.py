"""What a no-regression speed gate can see, said before and after the run.

A gate compares this run's level of a figure with the stored run's. Its estimate varies with
the runs on both sides (the part s_r of the between-boot spread that the servers of one run
share), with each side's boots (each server's own part s_o, per boot) and with the requests of
each boot (the within-boot spread w, a median of n requests: 1.2533·w·f/√n, f the inflation of
autocorrelated requests, verdicts/noise.py):

    sd² = 2·s_r² + (s_o² + (1.2533·w·f)²/n) · (1/B + 1/M)        B boots now, M stored

Where the split is not known, all of s is taken as s_r: replicas side by side then do not help.
A/B in one run (`pair`) has no stored side and, where the split is known, no s_r:

    sd² = (2·s_o² + 2·(1.2533·w·f)²/n) / B

The *sensitivity* is the regression such a comparison catches with 80% power when its bar sits
where an unchanged build crosses it at the deployment's false-alarm target (1 − `[gates]
confidence`; split over both sides for the two-sided reference gate):

    detects = 1 − exp(−(z_fa + z_0.8) · sd)

A gate FAILs only where its interval lies wholly below its own bar, 1 − tolerance, so the
regression it FAILs with 80% power is 1 − (1 − tolerance)·exp(−(z_fa + z_0.8)·sd): both are said.

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
    shared_log_sd: float | None = None  # the part the servers of one run share (None: not known, all of it)
    lag1: float | None = None  # the requests' lag-1 autocorrelation (None: taken as independent)
    pair: bool = False  # A/B in one run: both sides booted side by side, no stored side
    tolerance: float | None = None  # the gate's own bar, 1 − tolerance (None: the sensitivity alone)

    def sd(self, boots_now: int | None = None, boots_stored: int | None = None) -> float:
        from specgate.verdicts.noise import autocorrelation_inflation

        b, m = boots_now or self.boots_now, boots_stored or self.boots_stored
        within = (self.within_log_sd or 0.0) * autocorrelation_inflation(self.lag1)
        requests = (MEDIAN_EFFICIENCY * within) ** 2 / max(1, self.requests)
        shared = self.between_log_sd if self.shared_log_sd is None else min(self.shared_log_sd, self.between_log_sd)
        own_sq = self.between_log_sd**2 - shared**2
        if self.pair:
            between = 2 * (own_sq if self.shared_log_sd is not None else self.between_log_sd**2)
            return math.sqrt((between + 2 * requests) / max(1, b))
        return math.sqrt(2 * shared**2 + (own_sq + requests) * (1 / max(1, b) + 1 / max(1, m)))

    def detects(self, boots_now: int | None = None, boots_stored: int | None = None) -> float:
        from scipy.stats import norm

        alpha = self.false_alarm / (2 if self.two_sided else 1)
        z = float(norm.ppf(1 - alpha)) + float(norm.ppf(POWER))
        return 1 - math.exp(-z * self.sd(boots_now, boots_stored))

    def detects_at_tolerance(self) -> float | None:
        """The regression this gate FAILs with 80% power at its own bar: it fails where its interval's
        high end, the estimate times exp(z_fa·sd), lies below 1 − tolerance, so
        1 − (1 − tolerance)·exp(−(z_fa + z_0.8)·sd). With no tolerance this is `detects`; a wider
        tolerance passes more unchanged builds and catches only larger regressions. Sequential looks
        split the false-alarm share further: this is a floor of what the run's cap sees."""
        if self.tolerance is None:
            return None
        return 1 - (1 - self.tolerance) * (1 - self.detects())

    def boots_for(self, target: float, most: int) -> int | None:
        """The fewest boots per side (now and stored alike) that detect `target`; None past `most`."""
        return next((b for b in range(1, most + 1) if self.detects(b, b) <= target), None)


def minutes(boots: int, boot_seconds: float | None, request_seconds: float | None, requests: int) -> float | None:
    """GPU minutes of `boots` boots of one server measuring `requests` each; None where unknown."""
    if boot_seconds is None or request_seconds is None:
        return None
    return boots * (boot_seconds + requests * request_seconds) / 60


def sentence(design: Design, source: str) -> str:
    within = (
        ", the requests' own spread NOT known and left out (as if requests added no noise: the regressions "
        "stated are floors, the gate sees only larger ones)"
        if design.within_log_sd is None
        else f", within-boot {design.within_log_sd:.1%}"
    )
    if design.lag1 is not None:
        within += f", requests' lag-1 {design.lag1:.2f}"
    split = (
        "all of it taken as shared by a run's servers (split not known)"
        if design.shared_log_sd is None
        else f"{design.shared_log_sd:.1%} of it shared by a run's servers"
    )
    sides = (
        f"A/B in one run, {design.boots_now} boot(s) a side"
        if design.pair
        else f"{design.boots_now} boot(s) now, {design.boots_stored} stored"
    )
    at_bar = design.detects_at_tolerance()
    own_bar = (
        f"; at its own bar ({design.tolerance:.3g} tolerance) it FAILs a regression of {at_bar:.1%} with {POWER:.0%} power"
        if at_bar is not None and design.tolerance
        else ""
    )
    return (
        f"sensitivity: detects a regression of {design.detects():.1%} with {POWER:.0%} power at a "
        f"{design.false_alarm * 100:.3g}% false-alarm rate{own_bar} ({sides}, {design.requests} requests per boot; "
        f"between-boot spread {design.between_log_sd:.1%}, {split}{within}; {source})"
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
        shared = "" if design.pair else (
            "; replicas in one run do not shrink what the servers of a run share: A/B in one run ([[gates.ab]]) "
            "cancels it, or calibrate with replicas to learn how much of the spread it is"
        )
        return (
            f"detect = {target:.0%}: not reached within {most} boots per side (at {most}: {design.detects(most, most):.1%}); "
            f"a smaller between-boot spread (pool more unchanged runs) or a larger detect is needed{shared}"
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
