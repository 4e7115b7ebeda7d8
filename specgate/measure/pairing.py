"""Which figures pair with which: request i of boot k of one config against request i of
boot k of another (or of a stored run).

Every config is sent the same pinned request sequence, so request i of two configs
differ by the server alone; the ratio of such a pair removes what the prompt
contributes. With replicate boots, boot k of one config pairs with boot k of the other:
where servers coexist they ran side by side in the same rounds. A side with fewer boots
(a stored baseline of one boot) is reused in turn.
"""

from __future__ import annotations

import math

# boot -> per-request figures in pinned-sequence order
Series = dict[int, list[float]]


def _partner(boots: list[int], boot: int, position: int) -> int:
    return boot if boot in boots else boots[position % len(boots)]


def ratio_series(numerator: Series, denominator: Series) -> Series:
    """numerator / denominator per boot and request, for every request both have."""
    if not numerator or not denominator:
        return {}
    boots = sorted(denominator)
    out: Series = {}
    for position, (boot, values) in enumerate(sorted(numerator.items())):
        other = denominator[_partner(boots, boot, position)]
        n = min(len(values), len(other))
        if n:
            out[boot] = [values[i] / other[i] for i in range(n)]
    return out


def groups(series: Series) -> list[list[float]]:
    return [v for _, v in sorted(series.items()) if v]


def pooled(series: Series) -> list[float]:
    return [x for _, v in sorted(series.items()) for x in v]


def truncated(series: Series, per_boot: int) -> Series:
    return {b: v[:per_boot] for b, v in series.items()}


def across_boots(series: Series) -> Series:
    """A side of several boots as one level per request: the geometric mean over its boots of
    request i (over the requests every boot has). A stored baseline recorded with several boots
    is compared through it, so that each of its boots counts, where pairing boot k with boot k
    would use only the stored boots this run also has (one boot now: the first stored alone)."""
    parts = groups(series)
    if len(parts) <= 1:
        return {1: list(parts[0])} if parts else {}
    n = min(len(p) for p in parts)
    return {1: [math.exp(sum(math.log(p[i]) for p in parts) / len(parts)) for i in range(n)]}
