"""Measuring says how far it is and the time left (issue 45): only boots did, and a measuring
phase of many minutes on a big model was silent."""

from __future__ import annotations

from types import SimpleNamespace

from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.report.progress import BootDisplay


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Meter:
    """Each request takes 2 s of the fake clock."""

    def __init__(self, clock: _Clock, context: int = 0) -> None:
        self.clock = clock
        self.context = context
        self.records: dict[str, ConfigSpeed] = {}

    def record(self, config, concurrency):
        return self.records.setdefault(config, ConfigSpeed(config, concurrency))

    def prepare(self):  # the pinned requests: the plan builds them before it acquires a server
        pass

    def measure(self, server, concurrency, count):
        rec = self.record(server.config, concurrency)
        for _ in range(count):
            self.clock.now += 2.0
            rec.samples.append(SpeedSample(1.0, 0.0, 0.0, 8, 1, None, None, 1, boot=server.boot, index=rec.count(server.boot)))


class _Pool:
    def acquire(self, name):
        config, _, boot = name.partition("@")
        return SimpleNamespace(name=name, config=config, boot=int(boot or 1))


def _plan(display: BootDisplay, clock: _Clock, context: int = 0) -> SamplingPlan:
    dep = SimpleNamespace(
        configs={"baseline": None, "a": None},
        launch=SimpleNamespace(boots=1, coexist=True),
        workload=SimpleNamespace(max_repeats=50),
    )
    return SamplingPlan(dep, _Pool(), _Meter(clock, context), ["baseline", "a"], 7, display.measuring)


def test_measuring_says_the_requests_done_and_the_time_left_every_few_seconds():
    clock = _Clock()
    display = BootDisplay(None, every_s=10.0, clock=clock)
    said: list[str] = []
    display._print = lambda text, style="": said.append(text)  # type: ignore[method-assign]
    _plan(display, clock).ensure(["baseline", "a"], 1, 20)  # 40 requests, 2 s each: 80 s
    progress = [line for line in said if line.startswith("specgate: measuring")]
    assert len(progress) == 7, said  # every 10 s of the 80
    first = progress[0]
    assert "decode speed of baseline, a at concurrency 1: 5 of 40 requests, 10 s so far, about 70 s left" in first, first
    assert said[-1] == "specgate: measured decode speed of baseline, a at concurrency 1: 40 requests in 80 s"


def test_a_short_look_says_nothing():
    clock = _Clock()
    display = BootDisplay(None, every_s=10.0, clock=clock)
    said: list[str] = []
    display._print = lambda text, style="": said.append(text)  # type: ignore[method-assign]
    _plan(display, clock).ensure(["baseline", "a"], 1, 2)  # 4 requests: 8 s
    assert said == []


def test_a_context_buckets_measuring_names_the_bucket():
    """A 32K bucket's requests take many times a short one's: the line says which it is."""
    clock = _Clock()
    display = BootDisplay(None, every_s=10.0, clock=clock)
    said: list[str] = []
    display._print = lambda text, style="": said.append(text)  # type: ignore[method-assign]
    _plan(display, clock, context=32768).ensure(["baseline", "a"], 1, 20)
    assert said[-1] == "specgate: measured decode speed of baseline, a at concurrency 1, 32K context: 40 requests in 80 s"
