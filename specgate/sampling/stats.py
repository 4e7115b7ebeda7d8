"""Two-sample statistics of sampled continuations: the reference's samples (A) against another
side's (B: a speculative config's, or the reference's own under other seeds for the A/A).

- The likelihood test: each continuation's mean log-likelihood per token under the reference,
  compared per prompt by a Mann-Whitney rank test, the prompts' signed z combined (Stouffer); the
  shift (B minus A, nats per token, averaged over prompts) with a stratified bootstrap interval.
  A sampler that takes the argmax or applies the temperature twice makes samples more likely
  (a positive shift); one that ignores a filter or the temperature, less likely.
- Per-position token frequencies: at each (prompt, position) a G-test of the two sides' token
  counts, tokens seen fewer than `POOL_BELOW` times over both sides pooled into one category;
  positions left with a single category are not dense enough and are not tested.
- Violations (tokens outside the setting as the reference's scoring pass ranks them): the
  speculative side's count against the reference's own, conditioned on their sum, a one-sided
  binomial test (violation_test). bf16 scoring puts a few healthy tokens past a boundary on both
  sides; a sampler that ignores a filter puts many more on its side only.
Exact under the null of equal distributions (rank test) or close to it (G-test at pooled
counts); the false-alarm rate is measured over simulated A/A runs by
benchmarks/sampling_false_alarms.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

POOL_BELOW = 10  # a token category needs this many over both sides (5 expected per side)
POWER_Z = 0.8416  # z of 80% power


@dataclass(frozen=True)
class LikelihoodTest:
    a_mean: float  # mean log-likelihood per token, side A, averaged over prompts
    b_mean: float
    shift: float  # b_mean - a_mean
    low: float
    high: float
    z: float  # Stouffer z over prompts: > 0 where B's samples are the more likely
    p: float  # two-sided
    se: float  # the shift's standard error (bootstrap)
    strongest: int  # the prompt whose rank test was furthest from the null


@dataclass(frozen=True)
class PositionTest:
    prompt: int
    position: int
    g: float
    df: int
    p: float


def _st() -> ModuleType:
    # Here, not at import: the plugin loads in every pytest run of a user's repo, and scipy.stats
    # costs ~0.8 s of CPU to import; only a run that checks sampling pays it here.
    from scipy import stats

    return stats


def _u_z(a: np.ndarray, b: np.ndarray) -> float:
    """Signed z of the Mann-Whitney U of B over A, tie-corrected (0 where every value ties)."""
    n1, n2 = len(a), len(b)
    ranks = _st().rankdata(np.concatenate([a, b]))
    u = ranks[n1:].sum() - n2 * (n2 + 1) / 2
    n = n1 + n2
    _, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    ties = float((counts**3 - counts).sum())
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 0.0
    return float((u - n1 * n2 / 2) / math.sqrt(var))


def likelihood_test(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float, seed: int, resamples: int = 400
) -> LikelihoodTest:
    """`a[i]`, `b[i]`: per-token mean log-likelihoods of prompt i's continuations on each side."""
    arrays = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in zip(a, b)]
    zs = [_u_z(x, y) for x, y in arrays]
    z = float(sum(zs) / math.sqrt(len(zs))) if zs else 0.0
    p = float(2 * _st().norm.sf(abs(z)))
    a_mean = float(np.mean([x.mean() for x, _ in arrays]))
    b_mean = float(np.mean([y.mean() for _, y in arrays]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(resamples)
    for x, y in arrays:
        # Resample within each prompt: prompts are strata, not draws.
        bx = x[rng.integers(0, len(x), (resamples, len(x)))].mean(axis=1)
        by = y[rng.integers(0, len(y), (resamples, len(y)))].mean(axis=1)
        boots += by - bx
    boots /= max(len(arrays), 1)
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(boots, [tail, 1 - tail]))
    strongest = int(np.argmax(np.abs(zs))) if zs else 0
    return LikelihoodTest(a_mean, b_mean, b_mean - a_mean, low, high, z, p, float(boots.std(ddof=1)), strongest)


def position_tests(a: Sequence[Sequence[Sequence[int]]], b: Sequence[Sequence[Sequence[int]]]) -> list[PositionTest]:
    """`a[i][s]`: the token ids of side A's s-th continuation of prompt i. One G-test per dense
    (prompt, position)."""
    out = []
    for i, (xs, ys) in enumerate(zip(a, b)):
        length = min([len(s) for s in [*xs, *ys]] or [0])
        for pos in range(length):
            ca = Counter(s[pos] for s in xs)
            cb = Counter(s[pos] for s in ys)
            total = ca + cb
            dense = [t for t, n in total.items() if n >= POOL_BELOW]
            rest = [t for t in total if t not in dense]
            rows = [[ca[t] for t in dense], [cb[t] for t in dense]]
            if rest and sum(total[t] for t in rest) > 0:
                rows[0].append(sum(ca[t] for t in rest))
                rows[1].append(sum(cb[t] for t in rest))
            if len(rows[0]) < 2 or min(sum(col) for col in zip(*rows)) == 0:
                continue
            g, p, df, _ = _st().chi2_contingency(rows, correction=False, lambda_="log-likelihood")
            out.append(PositionTest(i, pos, float(g), int(df), float(p)))
    return out


def detectable_shift(se: float, alpha: float) -> float:
    """The likelihood shift (nats per token) found with 80% power at two-sided level alpha."""
    return (float(_st().norm.isf(alpha / 2)) + POWER_Z) * se


def breaks_to_fail(bar: float, share: float = 0.5) -> int:
    """The fewest speculative breaks the violation test fails at `bar` against a reference that
    breaks the setting nowhere: given n = k breaks all on the speculative side, p = share**k."""
    return max(1, math.ceil(math.log(bar) / math.log(share))) if 0 < bar < 1 else 1


def detectable_rate(checked: int, bar: float | None) -> float:
    """The violation rate (share of the `checked` tokens) the violation test fails with 80% power at
    `bar`, against a reference that breaks the setting nowhere and as many reference tokens: the
    rate at which `breaks_to_fail` breaks or more come with probability 0.8. 1 where the setting
    filters nothing (bar None) or nothing was checked."""
    if checked <= 0 or bar is None:
        return 1.0
    k = breaks_to_fail(bar)
    if k > checked:
        return 1.0
    from scipy.special import betaincinv  # P(Binomial(n, p) >= k) = I_p(k, n - k + 1)

    return float(betaincinv(k, checked - k + 1, 0.8))


def violation_test(spec: int, reference: int, spec_tokens: int, reference_tokens: int) -> float:
    """One-sided p that the speculative side breaks the setting more often than the reference:
    under the null both sides break it at one rate, so given n = spec + reference breaks the
    speculative side's count is Binomial(n, its share of the tokens). Exact (conservative: the
    count is discrete); 1 where neither side broke it."""
    n = spec + reference
    if n <= 0 or spec_tokens <= 0:
        return 1.0
    share = spec_tokens / max(spec_tokens + reference_tokens, 1)
    return float(_st().binom.sf(spec - 1, n, share))
