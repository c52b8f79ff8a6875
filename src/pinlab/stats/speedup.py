"""Speedups of a placement over a baseline, with the Speedup-Test protocol's verdicts.

Seeds 000 (section 2.3) and 004 (section 2.4): the mean speedup is declared with a one-sided
Student t-test, valid only for large samples (n > 30) or samples that pass Shapiro-Wilk; the
median speedup with a one-sided Wilcoxon-Mann-Whitney test. Over a suite of programs the
tables give the overall speedups of the mean and of the median, the min and max variances and
the share of programs significantly accelerated.

Every test is scipy's on regular samples; degenerate ones (a single run, all runs equal, every
run tied) are decided by the rules written in :func:`compare`, the same whatever scipy's version.
Every function is pure (plain sequences of seconds in, frozen records out).

Samples may also be of a metric where higher is better (a rate such as MB/s, ``better="higher"``):
every statistic is then computed on the values as they are, in their own unit, and only the way
round changes: speedups are candidate / baseline and "faster" means larger values. So a displayed
speedup is always the ratio of the displayed means (or medians), whatever the metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinlab.stats._base import InvalidSample, Record, all_equal, as_sample, check_level, num, quiet
from pinlab.stats.variability import Description, describe

if TYPE_CHECKING:  # numpy and scipy load when a statistic is computed: importing pinlab.stats stays cheap
    import numpy as np

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no significant difference"
MORE_RUNS = "more runs needed"
#: Samples with more than this many runs are "large": the t-test needs no normality there.
LARGE_SAMPLE = 30
#: How variances are compared (scipy.stats.levene with its default center="median", i.e. the
#: Brown-Forsythe variant, robust to non-normal run times).
VARIANCE_TEST = "levene"
#: Shapiro-Wilk needs at least this many runs.
SHAPIRO_MIN_RUNS = 3
#: Why Shapiro-Wilk was not run on a sample (``*_shapiro_skipped``).
SHAPIRO_FEW = "fewer than 3 runs"
SHAPIRO_CONSTANT = "all runs equal"
SHAPIRO_UNDEFINED = "no p-value for these runs"
#: The exact Mann-Whitney distribution is used when a sample has at most this many runs (no ties).
EXACT_MWU_MAX_RUNS = 8
#: ``median_method`` when every run of both samples has the same value.
MWU_ALL_TIED = "all tied"

_OPPOSITE = {FASTER: SLOWER, SLOWER: FASTER}
#: Which way a metric is better: ``LOWER`` for times (the default), ``HIGHER`` for rates.
LOWER = "lower"
HIGHER = "higher"
BETTER = (LOWER, HIGHER)


def check_better(better: str) -> str:
    """``"lower"`` or ``"higher"``: which values of the metric mean a faster placement."""
    if better not in BETTER:
        raise InvalidSample(f"better must be {LOWER!r} (times) or {HIGHER!r} (rates such as MB/s), got {better!r}")
    return better


@dataclass(frozen=True)
class Comparison(Record):
    """A candidate placement's runs against the baseline's (times in seconds, or a metric in its unit).

    ``better`` says which way the metric is better. Speedups are baseline / candidate when lower
    is better, candidate / baseline when higher is better: > 1 always means the candidate is
    faster, and a speedup is the ratio of the two samples' means (medians) as described. Every
    ``*_p_faster`` is the p-value of a one-sided test whose alternative is "the candidate takes
    less time" (has larger values, when higher is better); ``*_p_slower`` the opposite one. Undefined p-values are NaN (None in ``to_dict``); which
    ones are undefined is decided by :func:`compare`'s rules, not by scipy.

    - ``baseline_shapiro_p`` / ``candidate_shapiro_p``: Shapiro-Wilk, None when skipped, and
      ``*_shapiro_skipped`` says why ("fewer than 3 runs", "all runs equal"), None when run.
    - ``variance_test`` = "levene", ``variance_p`` its p-value; ``variances_differ`` is
      ``variance_p < alpha``, None when Levene is undefined (then Welch's test is used).
    - ``mean_test``: "welch" when variances differ (or that is unknown), else "student";
      ``t_statistic`` is positive when the candidate's mean is better (lower, or higher when
      higher is better; +inf / -inf when both samples are constant at different values).
    - ``mean_test_valid``: both n > 30, or both samples normal (Shapiro-Wilk p > alpha, or at
      least 3 runs all equal); ``mean_validity`` says which, or why not.
    - ``u_statistic``: Mann-Whitney U counting the pairs where the candidate's run is better
      (for times: the baseline run is longer; ties count 1/2); ``median_method`` is "exact", "asymptotic" (normal approximation with
      tie and continuity corrections) or "all tied" (p = 1).
    - ``mean_verdict``, ``median_verdict``, ``verdict``: see :func:`compare`.
    - ``notes``: each degenerate-sample rule that decided part of this comparison, in words.
    """

    alpha: float
    better: str
    baseline: Description
    candidate: Description
    mean_speedup: float
    median_speedup: float
    baseline_shapiro_p: float | None
    candidate_shapiro_p: float | None
    baseline_shapiro_skipped: str | None
    candidate_shapiro_skipped: str | None
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
    median_method: str
    median_p_faster: float
    median_p_slower: float
    median_verdict: str
    verdict: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class OverallRow(Record):
    """One line of the tables of [mazouz2011hpcs]: a placement against the baseline over a suite of programs.

    ``mean_speedup`` = sum of the baseline's mean times / sum of the placement's mean times
    (when higher is better, ``better="higher"``: sum of the placement's means / sum of the
    baseline's, in the metric's unit), ``median_speedup`` the same with medians;
    ``geomean_speedup`` is the geometric mean of the per-program mean speedups (not of the
    median speedups, nor the ratio of geometric means). ``min_variance`` / ``max_variance`` are the smallest and largest
    sample variances of the placement's runs across programs (``baseline_*`` the same for the
    baseline, as in the tables' captions; NaN where no program has two runs).
    ``n_faster`` / ``n_slower`` count the programs whose overall verdict is "faster" / "slower";
    ``share_faster`` = n_faster / n_programs with its Wilson interval at 1 - alpha.
    ``programs`` and ``verdicts`` list the programs compared and their verdicts, in order.
    """

    placement: str
    baseline: str
    alpha: float
    better: str
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


def _shapiro(x: np.ndarray) -> tuple[float | None, str | None]:
    """Shapiro-Wilk's p-value, or None and why the test was not run.

    Skipped (p None) when n < 3 (the test needs 3 runs) and when all runs are equal: W is then
    0/0, and scipy's answer has changed across versions (p = 1 with a warning up to 1.17, NaN
    from 1.18). Whether such a sample may count as normal is :func:`compare`'s rule, not scipy's.
    """
    import numpy as np
    from scipy import stats

    if x.size < SHAPIRO_MIN_RUNS:
        return None, SHAPIRO_FEW
    if all_equal(x):
        return None, SHAPIRO_CONSTANT
    # W is scale-free but scipy's zero-range check is absolute (1e-19): bring the runs to
    # [0.5, 1) by a power of two (exact), so seconds and nanoseconds get the same answer
    y = np.ldexp(x, -math.frexp(float(x.max()))[1])
    with quiet():
        p = num(stats.shapiro(y).pvalue)
    if math.isnan(p):  # no known regular sample gives this; never read NaN as "normal"
        return None, SHAPIRO_UNDEFINED
    return p, None


def _flat_deviations(x: np.ndarray) -> bool:
    """Every run is exactly as far from the sample's median as every other: 2 runs, all runs
    equal, or an even number of runs in two tied halves (e.g. 1 1 3 3). Brown-Forsythe's
    within-sample spread is then 0."""
    import numpy as np

    n = x.size
    s = np.sort(x)
    if n % 2:
        return bool(s[0] == s[-1])
    return bool(np.all(s[: n // 2] == s[0]) and np.all(s[n // 2 :] == s[-1]))


def _levene(b: np.ndarray, c: np.ndarray, const_b: bool, const_c: bool) -> tuple[float, str | None]:
    """Brown-Forsythe's p-value (Levene centred on the medians) and a note on a degenerate case.

    - a sample with one run: undefined (NaN): there is no spread to compare.
    - both samples constant: both variances are exactly 0, hence equal: p = 1.
    - both samples with flat deviations (see :func:`_flat_deviations`; e.g. 2 runs each) and not
      both constant: the statistic divides by a within-sample spread of 0. It is undefined
      (NaN) rather than scipy's "p = 0" or NaN: 2 runs cannot show that variances differ.
      Undefined selects Welch's t-test, which assumes nothing about the variances.
    - otherwise scipy.stats.levene (center="median").
    """
    from scipy import stats

    if b.size < 2 or c.size < 2:
        return math.nan, "variance test undefined: a sample has a single run"
    if const_b and const_c:
        return 1.0, "variance test: both samples have zero variance (all runs equal), so equal variances (p = 1)"
    if _flat_deviations(b) and _flat_deviations(c):
        return math.nan, ("variance test undefined: in both samples every run is as far from the median as the others (2 runs, or two tied halves)")
    # the same call whichever sample is the baseline: swapping the samples swaps the verdicts exactly
    first, second = (b, c) if (b.size, b.tolist()) <= (c.size, c.tolist()) else (c, b)
    with quiet():
        return num(stats.levene(first, second).pvalue), None


def _t_test(b: np.ndarray, c: np.ndarray, db: Description, dc: Description, equal_var: bool) -> tuple[float, float, float, str | None]:
    """One-sided t-tests both ways: (t of baseline - candidate, p faster, p slower, note).

    - a sample with one run: undefined (NaN): a one-run sample has no variance, so Welch's
      standard error does not exist (and the mean verdict needs >= 3 runs anyway).
    - both samples constant (standard error 0): the difference of the means is exact.
      Different values: t = +inf (candidate faster: p_faster = 0, p_slower = 1) or -inf (the
      reverse) -- the difference is certain. Same value: t = 0 and both p = 1/2, exactly what
      any pair of identical samples gives (the limit of equal means as the variances shrink).
    - one sample constant: its variance is exactly 0 and its mean exactly its value, and the
      statistic is computed by the textbook formula (Welch: t = (mb - mc) / sqrt(vb/nb + vc/nc)
      with the Welch-Satterthwaite df, which is then the other sample's n - 1; Student: pooled
      variance, nb + nc - 2 df), p from Student's t distribution (scipy.stats.t.sf); scipy's
      ttest_ind would see a rounded, non-zero variance and warn.
    - otherwise scipy.stats.ttest_ind (alternative "greater" on (b, c) and on (c, b)).
    """
    from scipy import stats

    if b.size < 2 or c.size < 2:
        return math.nan, math.nan, math.nan, "mean test undefined: a sample has a single run"
    if db.constant and dc.constant:
        if db.mean == dc.mean:
            return 0.0, 0.5, 0.5, "mean test: both samples constant at the same value: t = 0, p = 1/2 each way"
        up = db.mean > dc.mean
        return ((math.inf, 0.0, 1.0) if up else (-math.inf, 1.0, 0.0)) + (
            "mean test: both samples constant at different values: the difference is certain (p = 0)",
        )
    if db.constant or dc.constant:
        nb, nc = b.size, c.size
        if equal_var:
            df = nb + nc - 2
            pooled = ((nb - 1) * db.variance + (nc - 1) * dc.variance) / df
            se = math.sqrt(pooled * (1 / nb + 1 / nc))
        else:
            # Welch-Satterthwaite with one variance 0: df = (runs of the other sample) - 1
            se = math.sqrt(db.variance / nb + dc.variance / nc)
            df = (nc if db.constant else nb) - 1
        t = (db.mean - dc.mean) / se
        return t, num(stats.t.sf(t, df)), num(stats.t.sf(-t, df)), None
    with quiet():
        faster = stats.ttest_ind(b, c, equal_var=equal_var, alternative="greater")
        slower = stats.ttest_ind(c, b, equal_var=equal_var, alternative="greater")
    return num(faster.statistic), num(faster.pvalue), num(slower.pvalue), None


def _mann_whitney(b: np.ndarray, c: np.ndarray) -> tuple[float, float, float, str]:
    """One-sided Wilcoxon-Mann-Whitney both ways: (U of the baseline, p faster, p slower, method).

    The method is chosen here, by the rule of scipy's "auto" up to at least 1.18 (written out so
    that a future default cannot change a verdict): "exact" (the permutation distribution of U)
    when a sample has at most 8 runs and no two of all the runs are equal; "asymptotic"
    otherwise (the normal approximation with the tie-corrected variance and a continuity
    correction of 1/2, as R's wilcox.test does with ties). When every run of both samples has
    the same value the ranks carry no information: every permutation gives U = nb * nc / 2, so
    p = 1 each way (method "all tied"; the normal approximation would divide by 0).
    """
    import numpy as np
    from scipy import stats

    pooled = np.concatenate([b, c])
    if all_equal(pooled):
        return b.size * c.size / 2, 1.0, 1.0, MWU_ALL_TIED
    ties = np.unique(pooled).size < pooled.size
    method = "exact" if min(b.size, c.size) <= EXACT_MWU_MAX_RUNS and not ties else "asymptotic"
    with quiet():
        faster = stats.mannwhitneyu(b, c, alternative="greater", method=method)
        slower = stats.mannwhitneyu(c, b, alternative="greater", method=method)
    return num(faster.statistic), num(faster.pvalue), num(slower.pvalue), method


def median_test(baseline: Sequence[float], candidate: Sequence[float], better: str = LOWER) -> tuple[float, float]:
    """The median test of :func:`compare` alone: (p faster, p slower) of the candidate, the same
    values as ``compare(...).median_p_faster`` and ``median_p_slower`` without the other tests
    (a race looks many times; the descriptions, Shapiro-Wilk and Levene would triple its cost)."""
    better = check_better(better)
    b, c = as_sample(baseline, "baseline"), as_sample(candidate, "candidate")
    first, second = (b, c) if better == LOWER else (c, b)
    _, p_faster, p_slower, _ = _mann_whitney(first, second)
    return p_faster, p_slower


def _normal_enough(p: float | None, skipped: str | None, alpha: float) -> bool:
    # a constant sample (>= 3 runs) counts as normal: the zero-variance limit of a normal sample
    return (p is not None and p > alpha) or skipped == SHAPIRO_CONSTANT


def compare(
    baseline: Sequence[float], candidate: Sequence[float], alpha: float = 0.05, better: str = LOWER, seconds: bool | None = None
) -> Comparison:
    """Compare a candidate placement's run times with the baseline's (seconds, n >= 1 each).

    ``better="higher"`` compares a metric where larger values are better (MB/s): every test runs
    on the values themselves, with the alternatives turned round (the one-sided tests "faster"
    below ask whether the candidate's values are larger), and speedups are candidate / baseline.
    ``seconds`` says whether the values are seconds, for the descriptions' "unstable" flag
    (default: when lower is better).

    Verdict rules (risk ``alpha``, 0 < alpha < 0.5; a test is significant when p < alpha):

    - ``median_verdict``: one-sided Wilcoxon-Mann-Whitney (scipy.stats.mannwhitneyu on
      (baseline, candidate), alternative "greater" for "faster"; the same on (candidate, baseline)
      for "slower"): "faster", "slower" or "no significant difference".
    - ``mean_verdict``: one-sided t-test the same way (scipy.stats.ttest_ind, Welch's variant when
      Levene says the variances differ or cannot tell). "more runs needed" unless the test is
      valid: both samples have n > 30, or both samples are normal -- each passes Shapiro-Wilk
      (p > alpha) or has at least 3 runs all equal (a zero-variance sample: Shapiro-Wilk's W is
      0/0 there, and such a sample is the limit of a normal one as its variance shrinks). The
      p-values are reported even when not valid.
    - ``verdict``: the median verdict when it is "faster" or "slower" and the mean verdict is not
      the opposite direction (an invalid or non-significant mean test does not contradict);
      "no significant difference" otherwise.

    Degenerate samples are decided by the rules below, never by what scipy returns for them
    (which differs across versions); each rule applied is listed in ``notes``:

    - one run in a sample: no Shapiro-Wilk, no variance test, no t-test (NaN); the median test
      still runs (exact for a single pair). Mean verdict "more runs needed".
    - 2 runs in a sample: no Shapiro-Wilk (it needs 3), so "more runs needed" for the mean
      unless both samples have more than 30 runs.
    - all runs equal (n >= 3): Shapiro-Wilk skipped ("all runs equal") and counted as normal.
    - both samples constant, different values: t = +-inf, mean p = 0 one way and 1 the other;
      equal variances (p = 1). With >= 3 runs each the mean verdict is certain.
    - both samples constant, same value: t = 0, mean p = 1/2 each way, Mann-Whitney p = 1 each
      way (all tied): "no significant difference", decided with >= 3 runs each.
    - one sample constant, the other not: the t statistic by formula with a variance of exactly 0.
    - every run as far from its sample's median as the others in both samples (2 runs each, or
      two tied halves), not both constant: the variance test is undefined (NaN), Welch's t-test.
    - ties (a coarse timer): the Mann-Whitney normal approximation with tie correction; every
      run of both samples equal: Mann-Whitney p = 1 each way.
    - NaN, infinite, zero or negative run times, and times outside [1e-100, 1e100], are refused
      (:class:`InvalidSample`): no NaN or infinity can reach a test.
    """
    alpha = _check_alpha(alpha)
    better = check_better(better)
    seconds = better == LOWER if seconds is None else bool(seconds)
    b = as_sample(baseline, "baseline")
    c = as_sample(candidate, "candidate")
    db, dc = describe(b, 1 - alpha, seconds), describe(c, 1 - alpha, seconds)
    notes: list[str] = []

    shapiro_b, skip_b = _shapiro(b)
    shapiro_c, skip_c = _shapiro(c)
    for what, skipped in (("baseline", skip_b), ("candidate", skip_c)):
        if skipped is not None:
            notes.append(f"{what}: Shapiro-Wilk skipped ({skipped})")
    variance_p, note = _levene(b, c, db.constant, dc.constant)
    notes += [note] if note else []
    variances_differ = None if math.isnan(variance_p) else bool(variance_p < alpha)
    equal_var = variances_differ is False

    # every one-sided test below asks whether its first sample is the larger: the baseline's
    # times, or the candidate's values when higher is better (Levene and Shapiro are symmetric)
    (first, d_first), (second, d_second) = ((b, db), (c, dc)) if better == LOWER else ((c, dc), (b, db))
    t_statistic, mean_p_faster, mean_p_slower, note = _t_test(first, second, d_first, d_second, equal_var)
    notes += [note] if note else []
    u_statistic, median_p_faster, median_p_slower, median_method = _mann_whitney(first, second)
    if median_method == MWU_ALL_TIED:
        notes.append("median test: every run of both samples has the same value: U = nb * nc / 2, p = 1 each way")

    valid, validity = _mean_test_validity(b.size, c.size, (shapiro_b, skip_b), (shapiro_c, skip_c), alpha)
    mean_verdict = _direction(mean_p_faster, mean_p_slower, alpha) if valid else MORE_RUNS
    median_verdict = _direction(median_p_faster, median_p_slower, alpha)
    # the median decides, unless the mean says the opposite (an invalid or undecided mean does not)
    verdict = median_verdict if median_verdict in _OPPOSITE and mean_verdict != _OPPOSITE[median_verdict] else NO_DIFFERENCE

    return Comparison(
        alpha=alpha,
        better=better,
        baseline=db,
        candidate=dc,
        mean_speedup=d_first.mean / d_second.mean,
        median_speedup=d_first.median / d_second.median,
        baseline_shapiro_p=shapiro_b,
        candidate_shapiro_p=shapiro_c,
        baseline_shapiro_skipped=skip_b,
        candidate_shapiro_skipped=skip_c,
        variance_test=VARIANCE_TEST,
        variance_p=variance_p,
        variances_differ=variances_differ,
        mean_test="student" if equal_var else "welch",
        t_statistic=t_statistic,
        mean_p_faster=mean_p_faster,
        mean_p_slower=mean_p_slower,
        mean_test_valid=valid,
        mean_validity=validity,
        mean_verdict=mean_verdict,
        u_statistic=u_statistic,
        median_method=median_method,
        median_p_faster=median_p_faster,
        median_p_slower=median_p_slower,
        median_verdict=median_verdict,
        verdict=verdict,
        notes=tuple(notes),
    )


def _mean_test_validity(nb: int, nc: int, shapiro_b: tuple, shapiro_c: tuple, alpha: float) -> tuple[bool, str]:
    """Whether the t-test may decide, and why: large samples, or both normal (Shapiro-Wilk's
    ``(p, why skipped)`` of each; a sample of equal runs counts as normal)."""
    if nb > LARGE_SAMPLE and nc > LARGE_SAMPLE:
        return True, f"both samples have more than {LARGE_SAMPLE} runs"
    if not (_normal_enough(*shapiro_b, alpha) and _normal_enough(*shapiro_c, alpha)):
        return False, f"needs more than {LARGE_SAMPLE} runs in each sample, or both samples normal by Shapiro-Wilk (at least 3 runs each)"
    skipped = (shapiro_b[1] is not None) + (shapiro_c[1] is not None)
    return True, (
        "both samples pass Shapiro-Wilk",
        "one sample passes Shapiro-Wilk, the other has all runs equal (zero variance)",
        "both samples have all runs equal (zero variance)",
    )[skipped]


def decided(comparison: Comparison) -> bool:
    """Whether a comparison needs no more runs (the adaptive mode's stopping rule).

    Decided when the median test is significant in either direction, or when the mean test is
    valid (large or normal samples), whatever its verdict. An adaptive study adds runs to the
    comparisons that are not decided until all are (or its run budget is spent).
    """
    return comparison.median_verdict in _OPPOSITE or comparison.mean_test_valid


def _total_ratio(baseline: list[float], candidate: list[float], better: str) -> float:
    """The seeds' overall speedup: total baseline time over total time; for a metric where higher
    is better, the placement's total over the baseline's (so > 1 is faster either way)."""
    total_b, total_c = math.fsum(baseline), math.fsum(candidate)
    return total_b / total_c if better == LOWER else total_c / total_b


def _extreme(values: list[float], fn) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(fn(finite)) if finite else math.nan


def overall(
    programs: Mapping[str, Mapping[str, Sequence[float]]],
    baseline: str = "none",
    alpha: float = 0.05,
    better: str = LOWER,
    seconds: bool | None = None,
) -> list[OverallRow]:
    """The tables of [mazouz2011hpcs]: one row per placement other than ``baseline``, in first-seen order.

    ``programs`` maps each program to {placement: run times} (or values of a metric where
    ``better="higher"``, see :func:`compare`). Every program must have runs under ``baseline``; a
    placement's row covers the programs that have runs under it.
    """
    from scipy import stats

    alpha = _check_alpha(alpha)
    better = check_better(better)
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
        comps = [compare(programs[name][baseline], programs[name][placement], alpha, better, seconds) for name in names]
        verdicts = tuple(cmp.verdict for cmp in comps)
        n = len(comps)
        k = verdicts.count(FASTER)
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="wilson")
        rows.append(
            OverallRow(
                placement=placement,
                baseline=baseline,
                alpha=alpha,
                better=better,
                n_programs=n,
                programs=tuple(names),
                verdicts=verdicts,
                mean_speedup=_total_ratio([x.baseline.mean for x in comps], [x.candidate.mean for x in comps], better),
                median_speedup=_total_ratio([x.baseline.median for x in comps], [x.candidate.median for x in comps], better),
                geomean_speedup=num(stats.gmean([x.mean_speedup for x in comps])),
                min_variance=_extreme([x.candidate.variance for x in comps], min),
                max_variance=_extreme([x.candidate.variance for x in comps], max),
                baseline_min_variance=_extreme([x.baseline.variance for x in comps], min),
                baseline_max_variance=_extreme([x.baseline.variance for x in comps], max),
                n_faster=k,
                n_slower=verdicts.count(SLOWER),
                share_faster=k / n,
                share_faster_ci=(num(ci.low), num(ci.high)),
            )
        )
    return rows
