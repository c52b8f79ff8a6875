"""Speedups of a placement over a baseline, with the Speedup-Test protocol's verdicts.

Seeds 000 (section 2.3) and 004 (section 2.4): the mean speedup is declared with a one-sided
Student t-test, valid only for large samples (n > 30) or samples that pass Shapiro-Wilk; the
median speedup with a one-sided Wilcoxon-Mann-Whitney test. Over a suite of programs the
tables give the overall speedups of the mean and of the median, the min and max variances and
the share of programs significantly accelerated.

Every test is scipy's; every function is pure (plain sequences of seconds in, frozen records out).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pinlab.stats._base import InvalidSample, Record, as_sample, check_level, num, quiet
from pinlab.stats.variability import Description, describe

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no significant difference"
MORE_RUNS = "more runs needed"
#: Samples with more than this many runs are "large": the t-test needs no normality there.
LARGE_SAMPLE = 30
#: How variances are compared (scipy.stats.levene with its default center="median", i.e. the
#: Brown-Forsythe variant, robust to non-normal run times).
VARIANCE_TEST = "levene"

_OPPOSITE = {FASTER: SLOWER, SLOWER: FASTER}


@dataclass(frozen=True)
class Comparison(Record):
    """A candidate placement's runs against the baseline's (times in seconds).

    Speedups are baseline / candidate (> 1: the candidate is faster). Every ``*_p_faster`` is
    the p-value of a one-sided test whose alternative is "the candidate takes less time";
    ``*_p_slower`` the opposite one. p-values scipy cannot define are NaN (None in ``to_dict``).

    - ``baseline_shapiro_p`` / ``candidate_shapiro_p``: Shapiro-Wilk, None when n < 3.
    - ``variance_test`` = "levene", ``variance_p`` its p-value; ``variances_differ`` is
      ``variance_p < alpha``, None when Levene is undefined (then Welch's test is used).
    - ``mean_test``: "welch" when variances differ (or that is unknown), else "student";
      ``t_statistic`` is positive when the candidate's mean is lower.
    - ``mean_test_valid``: both n > 30, or both samples pass Shapiro-Wilk (p > alpha);
      ``mean_validity`` says which, or why not.
    - ``u_statistic``: Mann-Whitney U of the baseline (pairs where the baseline run is longer,
      ties count 1/2); the p-values use scipy's method "auto" and its tie handling.
    - ``mean_verdict``, ``median_verdict``, ``verdict``: see :func:`compare`.
    """

    alpha: float
    baseline: Description
    candidate: Description
    mean_speedup: float
    median_speedup: float
    baseline_shapiro_p: float | None
    candidate_shapiro_p: float | None
    variance_test: str
    variance_p: float
    variances_differ: bool | None
    mean_test: str
    t_statistic: float
    mean_p_faster: float
    mean_p_slower: float
    mean_test_valid: bool
    mean_validity: str
    mean_verdict: str
    u_statistic: float
    median_p_faster: float
    median_p_slower: float
    median_verdict: str
    verdict: str


@dataclass(frozen=True)
class OverallRow(Record):
    """One line of the seed tables: a placement against the baseline over a suite of programs.

    ``mean_speedup`` = sum of the baseline's mean times / sum of the placement's mean times,
    ``median_speedup`` the same with medians; ``geomean_speedup`` is the geometric mean of the
    per-program mean speedups. ``min_variance`` / ``max_variance`` are the smallest and largest
    sample variances of the placement's runs across programs (``baseline_*`` the same for the
    baseline, as in the tables' captions; NaN where no program has two runs).
    ``n_faster`` / ``n_slower`` count the programs whose overall verdict is "faster" / "slower";
    ``share_faster`` = n_faster / n_programs with its Wilson interval at 1 - alpha.
    ``programs`` and ``verdicts`` list the programs compared and their verdicts, in order.
    """

    placement: str
    baseline: str
    alpha: float
    n_programs: int
    programs: tuple[str, ...]
    verdicts: tuple[str, ...]
    mean_speedup: float
    median_speedup: float
    geomean_speedup: float
    min_variance: float
    max_variance: float
    baseline_min_variance: float
    baseline_max_variance: float
    n_faster: int
    n_slower: int
    share_faster: float
    share_faster_ci: tuple[float, float]


def _check_alpha(alpha: float) -> float:
    a = check_level(alpha, "alpha")
    if a >= 0.5:
        raise InvalidSample(f"alpha is the risk of a one-sided test and must be below 0.5, got {alpha!r}")
    return a


def _direction(p_faster: float, p_slower: float, alpha: float) -> str:
    # NaN p-values (undefined tests) compare False: no significant difference
    if p_faster < alpha:
        return FASTER
    if p_slower < alpha:
        return SLOWER
    return NO_DIFFERENCE


def _shapiro(x: np.ndarray) -> float | None:
    if x.size < 3:
        return None
    # W is scale-free but scipy's zero-range check is absolute (1e-19): bring the runs to
    # [0.5, 1) by a power of two (exact), so seconds and nanoseconds get the same answer
    y = np.ldexp(x, -math.frexp(float(x.max()))[1])
    with quiet():
        return num(stats.shapiro(y).pvalue)


def _levene(b: np.ndarray, c: np.ndarray) -> float:
    # the same call whichever sample is the baseline: swapping the samples swaps the verdicts exactly
    first, second = (b, c) if (b.size, b.tolist()) <= (c.size, c.tolist()) else (c, b)
    with quiet():
        return num(stats.levene(first, second).pvalue)


def compare(baseline: Sequence[float], candidate: Sequence[float], alpha: float = 0.05) -> Comparison:
    """Compare a candidate placement's run times with the baseline's (seconds, n >= 1 each).

    Verdict rules (risk ``alpha``, 0 < alpha < 0.5; a test is significant when p < alpha):

    - ``median_verdict``: one-sided Wilcoxon-Mann-Whitney (scipy.stats.mannwhitneyu on
      (baseline, candidate), alternative "greater" for "faster"; the same on (candidate, baseline)
      for "slower"): "faster", "slower" or "no significant difference".
    - ``mean_verdict``: one-sided t-test the same way (scipy.stats.ttest_ind, Welch's variant when
      Levene says the variances differ or cannot tell). "more runs needed" unless the test is
      valid: both samples have n > 30, or both pass Shapiro-Wilk (p > alpha). The p-values are
      reported even when not valid.
    - ``verdict``: the median verdict when it is "faster" or "slower" and the mean verdict is not
      the opposite direction (an invalid or non-significant mean test does not contradict);
      "no significant difference" otherwise.
    """
    alpha = _check_alpha(alpha)
    b = as_sample(baseline, "baseline")
    c = as_sample(candidate, "candidate")
    db, dc = describe(b, 1 - alpha), describe(c, 1 - alpha)

    shapiro_b, shapiro_c = _shapiro(b), _shapiro(c)
    variance_p = _levene(b, c)
    variances_differ = None if math.isnan(variance_p) else bool(variance_p < alpha)
    equal_var = variances_differ is False

    with quiet():
        faster = stats.ttest_ind(b, c, equal_var=equal_var, alternative="greater")
        slower = stats.ttest_ind(c, b, equal_var=equal_var, alternative="greater")
        u_faster = stats.mannwhitneyu(b, c, alternative="greater", method="auto")
        u_slower = stats.mannwhitneyu(c, b, alternative="greater", method="auto")

    if b.size > LARGE_SAMPLE and c.size > LARGE_SAMPLE:
        valid, validity = True, f"both samples have more than {LARGE_SAMPLE} runs"
    elif shapiro_b is not None and shapiro_c is not None and shapiro_b > alpha and shapiro_c > alpha:
        valid, validity = True, "both samples pass Shapiro-Wilk"
    else:
        valid = False
        validity = (f"needs more than {LARGE_SAMPLE} runs in each sample, or both samples "
                    f"normal by Shapiro-Wilk (at least 3 runs each)")

    mean_p_faster, mean_p_slower = num(faster.pvalue), num(slower.pvalue)
    mean_verdict = _direction(mean_p_faster, mean_p_slower, alpha) if valid else MORE_RUNS
    median_p_faster, median_p_slower = num(u_faster.pvalue), num(u_slower.pvalue)
    median_verdict = _direction(median_p_faster, median_p_slower, alpha)
    if median_verdict in _OPPOSITE and mean_verdict != _OPPOSITE[median_verdict]:
        verdict = median_verdict
    else:
        verdict = NO_DIFFERENCE

    return Comparison(
        alpha=alpha, baseline=db, candidate=dc,
        mean_speedup=db.mean / dc.mean, median_speedup=db.median / dc.median,
        baseline_shapiro_p=shapiro_b, candidate_shapiro_p=shapiro_c,
        variance_test=VARIANCE_TEST, variance_p=variance_p, variances_differ=variances_differ,
        mean_test="student" if equal_var else "welch", t_statistic=num(faster.statistic),
        mean_p_faster=mean_p_faster, mean_p_slower=mean_p_slower,
        mean_test_valid=valid, mean_validity=validity, mean_verdict=mean_verdict,
        u_statistic=num(u_faster.statistic),
        median_p_faster=median_p_faster, median_p_slower=median_p_slower,
        median_verdict=median_verdict, verdict=verdict,
    )


def decided(comparison: Comparison) -> bool:
    """Whether a comparison needs no more runs (the adaptive mode's stopping rule).

    Decided when the median test is significant in either direction, or when the mean test is
    valid (large or normal samples), whatever its verdict. An adaptive study adds runs to the
    comparisons that are not decided until all are (or its run budget is spent).
    """
    return comparison.median_verdict in _OPPOSITE or comparison.mean_test_valid


def _extreme(values: list[float], fn) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(fn(finite)) if finite else math.nan


def overall(
    programs: Mapping[str, Mapping[str, Sequence[float]]],
    baseline: str = "none",
    alpha: float = 0.05,
) -> list[OverallRow]:
    """The seed tables: one row per placement other than ``baseline``, in first-seen order.

    ``programs`` maps each program to {placement: run times}. Every program must have runs under
    ``baseline``; a placement's row covers the programs that have runs under it.
    """
    alpha = _check_alpha(alpha)
    if not programs:
        raise InvalidSample("no programs to summarise")
    for program, samples in programs.items():
        if baseline not in samples:
            raise InvalidSample(f"program {program!r} has no runs under the baseline placement {baseline!r}")
    placements: list[str] = []
    for samples in programs.values():
        placements += [p for p in samples if p != baseline and p not in placements]

    rows = []
    for placement in placements:
        names = [name for name, samples in programs.items() if placement in samples]
        comps = [compare(programs[name][baseline], programs[name][placement], alpha) for name in names]
        verdicts = tuple(cmp.verdict for cmp in comps)
        n = len(comps)
        k = verdicts.count(FASTER)
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="wilson")
        rows.append(OverallRow(
            placement=placement, baseline=baseline, alpha=alpha, n_programs=n,
            programs=tuple(names), verdicts=verdicts,
            mean_speedup=math.fsum(x.baseline.mean for x in comps) / math.fsum(x.candidate.mean for x in comps),
            median_speedup=math.fsum(x.baseline.median for x in comps) / math.fsum(x.candidate.median for x in comps),
            geomean_speedup=num(stats.gmean([x.mean_speedup for x in comps])),
            min_variance=_extreme([x.candidate.variance for x in comps], min),
            max_variance=_extreme([x.candidate.variance for x in comps], max),
            baseline_min_variance=_extreme([x.baseline.variance for x in comps], min),
            baseline_max_variance=_extreme([x.baseline.variance for x in comps], max),
            n_faster=k, n_slower=verdicts.count(SLOWER), share_faster=k / n,
            share_faster_ci=(num(ci.low), num(ci.high)),
        ))
    return rows
