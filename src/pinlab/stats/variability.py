"""One sample of run times: centre, spread, variability (AV, RV, unstable) and confidence intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pinlab.stats._base import Record, all_equal, as_sample, check_level, num

#: A program has non-negligible variability when AV > 1 s or RV > 1 % ([mazouz2011variability], section 2.4).
#: The absolute threshold is in seconds: it applies only to samples of times (``seconds=True``).
AV_LIMIT_S = 1.0
RV_LIMIT = 0.01
#: A value within one part in a billion of a threshold counts as *at* the threshold, so that
#: decimal inputs are judged as written (0.99 s and 1.0 s give RV = 1 %, not 1 % + 1 ulp).
_AT_THRESHOLD = 1e-9


@dataclass(frozen=True)
class Description(Record):
    """Summary of one sample of run times (seconds), or of any positive metric (its own unit).

    ``variance`` is the sample variance (ddof=1) and ``std`` its square root, NaN when n < 2 and
    exactly 0 when every run took the same time (``constant``; a single run is not called constant:
    it says nothing of the spread). ``mean`` lies within [min, max] (rounding never pushes it out:
    a constant sample's mean is its value exactly).
    ``av`` = max - min (in the sample's unit) and ``rv`` = (max - min) / max are the absolute and
    relative variability of [mazouz2011variability]; ``unstable`` is ``av > 1 s or rv > 1 %`` for times
    (``seconds``), ``rv > 1 %`` alone otherwise: an absolute threshold in seconds means nothing
    for MB/s, and RV is unit-free (the RV of a rate equals the RV of the times 1/rate).
    ``mean_ci`` is the Student-t interval of the mean at ``confidence`` (None when n < 2; the
    single point (mean, mean) for a constant sample).
    ``median_ci`` is the distribution-free interval of the median between the order statistics
    of 1-based ranks ``median_ci_ranks`` = (j, n + 1 - j); ``median_ci_coverage`` is its exact
    coverage, at least ``confidence`` (all three None when even (min, max) covers less).
    """

    n: int
    mean: float
    median: float
    min: float
    max: float
    variance: float
    std: float
    constant: bool
    av: float
    rv: float
    unstable: bool
    seconds: bool
    confidence: float
    mean_ci: tuple[float, float] | None
    median_ci: tuple[float, float] | None
    median_ci_ranks: tuple[int, int] | None
    median_ci_coverage: float | None


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[tuple[int, int], float] | None:
    """The narrowest symmetric order-statistic interval for the median with coverage >= confidence.

    With B ~ Binomial(n, 1/2) the number of runs below the true median, the interval
    [X_(j), X_(n+1-j)] holds the median with probability P(j <= B <= n - j)
    = 1 - 2 * P(B <= j - 1), whatever the (continuous) distribution. Returns ((j, n + 1 - j),
    coverage) for the largest such j, or None when even j = 1 (min, max) covers less than asked.
    """
    import numpy as np
    from scipy import stats

    check_level(confidence, "confidence")
    if n < 2:
        return None
    js = np.arange(1, n // 2 + 1)
    coverage = stats.binom.cdf(n - js, n, 0.5) - stats.binom.cdf(js - 1, n, 0.5)
    ok = np.flatnonzero(coverage >= confidence)
    if ok.size == 0:
        return None
    # coverage falls as j grows: the last j that still reaches the confidence is the narrowest
    i = int(ok[-1])
    j = int(js[i])
    return (j, n + 1 - j), float(coverage[i])


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student-t quantile q: P(-q <= T <= q) = confidence, T with ``df`` degrees of freedom.

    scipy's quantile function is off by up to ~1e-9 (relative) in older releases (1.10 to at
    least 1.15: t.ppf(0.975, 1) = 12.706204736432 where tan(0.475 pi) = 12.706204736175; 1.10
    to 1.12 also t.ppf(0.95, 34) by 3e-9), while its tail function t.sf is accurate in all of
    them: scipy's value is polished by Newton's method on the upper tail, so the interval is
    the same, to ~1e-15, whichever scipy is installed.
    """
    from scipy import stats

    a = (1 - confidence) / 2
    q = num(stats.t.isf(a, df))
    for _ in range(3):
        step = (num(stats.t.sf(q, df)) - a) / num(stats.t.pdf(q, df))
        q += step
        if abs(step) <= 1e-15 * q:
            break
    return q


def is_unstable(av: float, rv: float, seconds: bool = True) -> bool:
    """Seed 004's rule: AV > 1 s or RV > 1 % (values at a threshold are stable).

    AV is compared with 1 s only when the values are seconds (``seconds``): for any other unit
    (MB/s, a count a program prints) only the unit-free RV decides.
    """
    if rv > RV_LIMIT * (1 + _AT_THRESHOLD):
        return True
    return bool(seconds and av > AV_LIMIT_S * (1 + _AT_THRESHOLD))


def describe(sample: Sequence[float], confidence: float = 0.95, seconds: bool = True) -> Description:
    """Describe one sample of run times (seconds, finite, > 0; n >= 1).

    ``seconds=False`` for values in another unit (a rate, a figure a program prints): the
    statistics are the same, but the "unstable" flag then uses RV alone (see :class:`Description`).

    Never fails on small samples: what n does not allow is NaN (numbers) or None (intervals).
    Degenerate samples are decided here, not by numpy's rounding: a constant sample (n >= 2, all
    runs equal) has variance 0, std 0 and mean exactly its value (numpy's mean of [0.1] * 3 is
    0.1 + 1 ulp, and its variance about 1e-34); any mean is clipped into [min, max].
    """
    import numpy as np

    x = as_sample(sample)
    confidence = check_level(confidence, "confidence")
    n = int(x.size)
    lo, hi = num(np.min(x)), num(np.max(x))
    mean = min(max(num(np.mean(x)), lo), hi)
    constant = n >= 2 and all_equal(x)
    if n < 2:
        variance = math.nan
    elif constant:
        variance = 0.0
    else:
        variance = num(np.var(x, ddof=1))
    std = math.sqrt(variance) if n >= 2 else math.nan
    av = hi - lo
    rv = av / hi

    mean_ci = None
    if n >= 2:
        q = t_quantile(confidence, n - 1)
        half = q * std / math.sqrt(n)
        mean_ci = (mean - half, mean + half)

    med_ci = ranks = coverage = None
    found = median_ci_ranks(n, confidence)
    if found is not None:
        ranks, coverage = found
        ordered = np.sort(x)
        med_ci = (num(ordered[ranks[0] - 1]), num(ordered[ranks[1] - 1]))

    median = num(np.median(x))
    return Description(
        n=n,
        mean=mean,
        median=median,
        min=lo,
        max=hi,
        variance=variance,
        std=std,
        constant=constant,
        av=av,
        rv=rv,
        unstable=is_unstable(av, rv, seconds),
        seconds=bool(seconds),
        confidence=confidence,
        mean_ci=mean_ci,
        median_ci=med_ci,
        median_ci_ranks=ranks,
        median_ci_coverage=coverage,
    )
