"""The sampling plan: which server to measure next, how many requests more, in which order.

Verdicts only read data; this module decides what data there will be. One mechanism
serves the speed tests, measuring more while a gate is undecided, and replicate boots:

- Where servers coexist, measurement goes in rounds: the next pinned request to every
  server in a fresh random order, then the request after it. Slow drift of the machine
  (clocks, thermals, a neighbour's job) then hits every config alike and cancels in the
  paired ratios, where block order (all of A, then all of B) would turn it into a
  difference between A and B.
- Where they cannot coexist, each server is measured in one block, since switching costs
  a boot, and to the cap at once, so that no later look boots it again; the report says that
  the ratios then hold the drift between blocks.
- Once the speed phase is over, every reference sends its first requests again (a second
  block of it where servers take turns: reference, configs, reference), so that how far the
  host drifted during the run is measured, not assumed away (`launch.drift_check`).
- `launch.boots = N` gives every config N servers (CONFIG, CONFIG@2, …): the between-boot
  noise then shows in the data and the two-level intervals hold it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from specgate.deployment import Deployment, bucket_label
from specgate.errors import SpecgateError
from specgate.measure.drift import ReferenceDrift, measure_drift
from specgate.measure.speed import SpeedMeter
from specgate.server.pool import ServerPool, server_name, split_server_name


@dataclass
class PlanLog:
    """What the plan did, for the report: how the figures were gathered."""

    interleaved: bool
    boots: int
    rounds: int = 0
    orders: list[list[str]] = field(default_factory=list)  # the first rounds' orders, as evidence
    drift: list[ReferenceDrift] = field(default_factory=list)
    # Why a config booted more than once in a run of servers that take turns (one line each).
    reboots: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "interleaved": self.interleaved,
            "boots": self.boots,
            "rounds": self.rounds,
            "orders": self.orders,
            "drift": [d.as_dict() for d in self.drift],
            "reboots": self.reboots,
        }


class SamplingPlan:
    def __init__(
        self,
        deployment: Deployment,
        pool: ServerPool,
        meter: SpeedMeter,
        configs: Sequence[str] | None = None,
        seed: int | None = None,
        on_measured: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.deployment = deployment
        # Told (what, requests measured, requests this look asks for) after each measurement, for
        # a progress line with the time left (report.progress): measuring can take many minutes.
        self.on_measured = on_measured
        self.pool = pool
        self.meter = meter
        self.configs = list(configs or deployment.configs)
        self.boots = deployment.launch.boots
        self.interleaved = deployment.launch.coexist
        # A fresh order every run unless seeded (the self-tests seed it): a fixed order would
        # let a periodic disturbance line up with one config.
        self.rng = random.Random(seed)
        self.log = PlanLog(self.interleaved, self.boots)
        self.errors: dict[str, str] = {}  # server name -> why it could not be measured
        self._drift: dict[tuple[str, int], ReferenceDrift | None] = {}

    def servers_of(self, config: str) -> list[str]:
        return [server_name(config, b) for b in range(1, self.boots + 1)]

    def all_servers(self, configs: Sequence[str] | None = None) -> list[str]:
        return [n for c in (configs or self.configs) for n in self.servers_of(c)]

    def _have(self, name: str, concurrency: int) -> int:
        config, boot = split_server_name(name)
        return self.meter.record(config, concurrency).count(boot)

    def _measure(self, name: str, concurrency: int, count: int) -> None:
        try:
            self.meter.prepare()  # may acquire the reference's server to size a bucket: before `name`'s
            self.meter.measure(self.pool.acquire(name), concurrency, count)
        except (SpecgateError, ValueError) as exc:
            # One server's death must not stop the others' measurement; its own tests report it.
            self.errors[name] = str(exc)

    def ensure(self, configs: Sequence[str], concurrency: int, per_boot: int) -> None:
        """Every server of `configs` reaches `per_boot` measured requests (where it can)."""
        names = self.all_servers(configs)
        if not self.interleaved:
            # A later look would boot the server again (minutes, an hour on a big model): measure
            # its whole cap while it is up.
            per_boot = max(per_boot, self.deployment.workload.max_repeats)
        told = self._progress(configs, concurrency, per_boot)
        if not self.interleaved:
            for name in names:
                missing = per_boot - self._have(name, concurrency)
                if missing > 0 and name not in self.errors:
                    self._measure(name, concurrency, missing)
                    told()
            return
        while True:
            due = [n for n in names if n not in self.errors and self._have(n, concurrency) < per_boot]
            if not due:
                return
            self.rng.shuffle(due)
            self.log.rounds += 1
            if len(self.log.orders) < 5:
                self.log.orders.append(list(due))
            for name in due:
                self._measure(name, concurrency, concurrency)
                told()

    def _progress(self, configs: Sequence[str], concurrency: int, per_boot: int) -> Callable[[], None]:
        """What `ensure` tells on_measured after each measurement: the requests measured of those
        this look asks for (a server that failed counts as done: nothing more is asked of it)."""
        names = self.all_servers(configs)
        have = {n: self._have(n, concurrency) for n in names}
        total = sum(max(0, per_boot - have[n]) for n in names)
        what = f"decode speed of {', '.join(configs)} at concurrency {concurrency}"
        if self.meter.context:  # a bucket's requests take many times a short one's: say which
            what += f", {bucket_label(self.meter.context)} context"

        def told() -> None:
            if self.on_measured is None or not total:
                return
            done = sum(
                max(0, per_boot - have[n]) if n in self.errors else min(per_boot, self._have(n, concurrency)) - min(per_boot, have[n])
                for n in names
            )
            self.on_measured(what, done, total)

        if self.on_measured is not None and total:
            self.on_measured(what, 0, total)  # the look's start: its time left is timed from here
        return told

    def raise_for(self, config: str) -> None:
        """Raise the first error of `config`'s servers, if measuring any of them failed."""
        for name in self.servers_of(config):
            if name in self.errors:
                raise SpecgateError(f"config {config!r} could not be measured ({name}): {self.errors[name]}")

    def per_boot(self, configs: Sequence[str], concurrency: int) -> int:
        """Requests every server of `configs` has (the fewest)."""
        return min((self._have(n, concurrency) for n in self.all_servers(configs)), default=0)

    def more(self, configs: Sequence[str], concurrency: int, cap_per_boot: int, batch: int) -> bool:
        """Measure up to `batch` more requests per server, interleaved; False at the cap."""
        have = self.per_boot(configs, concurrency)
        target = min(cap_per_boot, have + batch)
        if target <= have:
            return False
        self.ensure(configs, concurrency, target)
        return self.per_boot(configs, concurrency) > have

    def drift(self, reference: str, concurrency: int, confidence: float) -> ReferenceDrift | None:
        """How far `reference` moved during the run: its first requests sent again now, paired
        with the first time (once per run; None where it cannot be measured or is turned off)."""
        key = (reference, concurrency)
        if key in self._drift:
            return self._drift[key]
        self._drift[key] = None
        first = self.meter.record(reference, concurrency).by_boot().get(1, [])
        count = min(len(first), self.deployment.workload.repeats)
        if not self.deployment.launch.drift_check or reference not in self.configs or count < 2:
            return None
        reboot = reference not in self.pool.live
        try:
            server = self.pool.acquire(reference)
            again = self.meter.sample(server, concurrency, count)
        except (SpecgateError, ValueError) as exc:
            self.errors.setdefault(f"{reference}:drift", str(exc))
            return None
        if reboot:
            self.log.reboots.append(
                f"{reference} booted again after the other configs to measure how far the host drifted during the "
                "run (reference, configs, reference); launch.drift_check = false saves that boot"
            )
        found = measure_drift(
            reference,
            concurrency,
            [s.decode_tps for s in first[:count]],
            [s.decode_tps for s in again],
            confidence,
            "a second boot" if reboot else "the same server",
        )
        if found is not None:
            found = replace(found, after_round=self.log.rounds)
            self.log.drift.append(found)
        self._drift[key] = found
        return found
