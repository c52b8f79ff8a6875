"""Independent re-derivations for the stats tests: formulas written out, brute force, enumeration.

Nothing here imports pinlab. scipy appears only for distribution tail functions (t.sf, f.sf)
applied to statistics computed here by formula.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from statistics import NormalDist

import numpy as np
from scipy import stats


def mean(x) -> float:
    return math.fsum(x) / len(x)


def var(x) -> float:
    m = mean(x)
    return math.fsum((v - m) ** 2 for v in x) / (len(x) - 1)


def median(x) -> float:
    s = sorted(x)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def u_statistic(b, c) -> float:
    """Mann-Whitney U of b: pairs (i, j) with b_i > c_j, ties counted 1/2 (brute force)."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in b for y in c)


def has_ties(b, c) -> bool:
    pooled = list(b) + list(c)
    return len(set(pooled)) < len(pooled)


def mwu_exact_p_greater(b, c) -> float:
    """P(U >= U_obs) under H0, by enumerating every way to give len(b) of the N ranks to b."""
    assert not has_ties(b, c)
    n1, n2 = len(b), len(c)
    pooled = sorted(list(b) + list(c))
    rank = {v: i + 1 for i, v in enumerate(pooled)}
    u_obs = sum(rank[v] for v in b) - n1 * (n1 + 1) / 2
    total = hits = 0
    for ranks in itertools.combinations(range(1, n1 + n2 + 1), n1):
        total += 1
        if sum(ranks) - n1 * (n1 + 1) / 2 >= u_obs:
            hits += 1
    return hits / total


def mwu_asymptotic_p_greater(b, c) -> float:
    """Normal approximation with tie correction and continuity correction (0.5)."""
    n1, n2 = len(b), len(c)
    n = n1 + n2
    u = u_statistic(b, c)
    ties = Counter(list(b) + list(c)).values()
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    z = (u - n1 * n2 / 2 - 0.5) / sigma
    return 0.5 * math.erfc(z / math.sqrt(2))  # the standard normal's upper tail


def mwu_p_greater(b, c) -> float:
    """scipy's documented 'auto' choice: exact when a sample has <= 8 runs and no ties."""
    if min(len(b), len(c)) <= 8 and not has_ties(b, c):
        return mwu_exact_p_greater(b, c)
    return mwu_asymptotic_p_greater(b, c)


def welch(b, c) -> tuple[float, float, float]:
    """Welch's t of b - c, Welch-Satterthwaite df, one-sided p (alternative mean(b) > mean(c))."""
    n1, n2 = len(b), len(c)
    a1, a2 = var(b) / n1, var(c) / n2
    t = (mean(b) - mean(c)) / math.sqrt(a1 + a2)
    df = (a1 + a2) ** 2 / (a1**2 / (n1 - 1) + a2**2 / (n2 - 1))
    return t, df, float(stats.t.sf(t, df))


def student(b, c) -> tuple[float, float, float]:
    """Pooled-variance t of b - c, df = n1 + n2 - 2, one-sided p (alternative mean(b) > mean(c))."""
    n1, n2 = len(b), len(c)
    pooled = ((n1 - 1) * var(b) + (n2 - 1) * var(c)) / (n1 + n2 - 2)
    t = (mean(b) - mean(c)) / math.sqrt(pooled * (1 / n1 + 1 / n2))
    df = n1 + n2 - 2
    return t, df, float(stats.t.sf(t, df))


def brown_forsythe_p(b, c) -> float:
    """Levene's test centred on the medians (Brown-Forsythe), by its formula, then F's tail."""
    groups = [np.abs(np.asarray(g, float) - median(g)) for g in (b, c)]
    n = sum(len(z) for z in groups)
    k = len(groups)
    grand = np.concatenate(groups).mean()
    between = sum(len(z) * (z.mean() - grand) ** 2 for z in groups)
    within = sum(((z - z.mean()) ** 2).sum() for z in groups)
    w = (n - k) / (k - 1) * between / within
    return float(stats.f.sf(w, k - 1, n - k))


def median_coverage(n: int, j: int) -> float:
    """P(X_(j) <= median <= X_(n+1-j)) = P(j <= B <= n - j), B ~ Binomial(n, 1/2), by counting."""
    return sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2**n


def median_ranks(n: int, confidence: float):
    """The largest j whose symmetric interval still covers >= confidence, or None."""
    best = None
    for j in range(1, n // 2 + 1):
        if median_coverage(n, j) >= confidence:
            best = j
    return best


def wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval (no continuity correction)."""
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def t_quantile_df1(p: float) -> float:
    """Student t with 1 degree of freedom is Cauchy: F^-1(p) = tan(pi (p - 1/2))."""
    return math.tan(math.pi * (p - 0.5))


def t_quantile_df2(p: float) -> float:
    """Student t with 2 degrees of freedom: F(t) = 1/2 + t / (2 sqrt(2 + t^2)), solved for t."""
    c = 2 * p - 1
    return math.sqrt(2 * c * c / (1 - c * c))
