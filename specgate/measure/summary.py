"""One config's measured speed, summarised the one way both the report and the stored
baseline use: median decode tok/s and TTFT, pooled accept length, and the paired ratio
to the reference config, each with its bootstrap interval."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from specgate.measure.pairing import groups, pooled, ratio_series
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.measure.stats import Interval, median_interval, pooled_ratio, two_level_median
from specgate.prompts import set_of


def pooled_accept_length(tokens: Iterable[int], steps: Iterable[int]) -> float | None:
    """Σ completion tokens / Σ verify steps of requests taken together: the one accept length
    specgate states (from each request's own meta_info counters, never the server's average since
    boot); None where no request made a verify step."""
    t, v = sum(tokens), sum(steps)
    return t / v if v > 0 else None


def accept_length_of(samples: Iterable[SpeedSample]) -> float | None:
    """The pooled accept length of the speculative requests among `samples`."""
    spec = [s for s in samples if s.verify_ct]
    return pooled_accept_length((s.completion_tokens for s in spec), (s.verify_ct or 0 for s in spec))


def accept_interval(speed: ConfigSpeed, confidence: float) -> Interval | None:
    """Σ completion_tokens / Σ spec_verify_ct over the speculative requests; None if there are none."""
    spec = [s for s in speed.samples if s.verify_ct]
    if not spec:
        return None
    return pooled_ratio([s.completion_tokens for s in spec], [s.verify_ct or 0 for s in spec], confidence)


def accept_by_set(speed: ConfigSpeed, label_of: Callable[[SpeedSample], str]) -> dict[str, dict]:
    """Pooled accept length per prompt set (the part of a label before '/'), in the order the
    sets first appear: which kind of traffic the drafter serves worst."""
    by_set: dict[str, list[SpeedSample]] = {}
    for s in speed.samples:
        if s.verify_ct:
            by_set.setdefault(set_of(label_of(s)), []).append(s)
    return {
        name: {"accept_length": round(accept_length_of(samples) or 0.0, 3), "requests": len(samples)}
        for name, samples in by_set.items()
    }


@dataclass(frozen=True)
class SpeedSummary:
    decode_tps_median: Interval
    ttft_s: Interval
    accept_length: Interval | None
    ratio_to_reference: Interval | None  # None for the reference itself, or when it was not measured


def paired_speed_ratio(record: ConfigSpeed, other: ConfigSpeed, confidence: float) -> Interval:
    """Median of record/other per request, paired by pinned request and boot; with several
    boots the interval is the two-level one (boots, then requests)."""
    series = ratio_series(record.decode_tps_by_boot(), other.decode_tps_by_boot())
    parts = groups(series)
    return two_level_median(parts, confidence) if len(parts) > 1 else median_interval(pooled(series), confidence)


def summarise_speed(record: ConfigSpeed, reference: ConfigSpeed | None, confidence: float) -> SpeedSummary:
    """`reference` is the reference config's record at the same concurrency (None for the reference)."""
    ratio = (
        paired_speed_ratio(record, reference, confidence)
        if reference is not None and reference is not record and reference.samples
        else None
    )
    return SpeedSummary(
        decode_tps_median=median_interval(record.decode_tps_per_request, confidence),
        ttft_s=median_interval([s.ttft_s for s in record.samples], confidence),
        accept_length=accept_interval(record, confidence),
        ratio_to_reference=ratio,
    )
