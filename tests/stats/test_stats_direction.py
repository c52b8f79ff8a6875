"""A metric where higher is better (MB/s): every statistic on the values as they are, turned round.

Before, such metrics were compared through 1/value, so the speedups and t-tests could not be
recomputed from the means shown; and [mazouz2011variability]'s "AV > 1 s" was applied to MB/s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pinlab.stats import FASTER, HIGHER, LOWER, SLOWER, InvalidSample, compare, describe, overall

# Rates in MB/s: the candidate moves more data per second than the baseline.
BASE = [10120.0, 10480.0, 9870.0, 10310.0, 10050.0, 10600.0, 9930.0, 10240.0]
CAND = [12050.0, 11890.0, 12430.0, 12200.0, 11760.0, 12610.0, 12020.0, 12330.0]


def test_higher_is_better_speedups_are_ratios_of_the_values_shown():
    cmp = compare(BASE, CAND, better=HIGHER)
    assert cmp.better == HIGHER
    assert cmp.mean_speedup == pytest.approx(np.mean(CAND) / np.mean(BASE), rel=1e-13)
    assert cmp.median_speedup == pytest.approx(np.median(CAND) / np.median(BASE), rel=1e-13)
    # the descriptions are of the values themselves, in MB/s (not of 1/value)
    assert cmp.baseline.mean == pytest.approx(np.mean(BASE)) and cmp.candidate.variance == pytest.approx(np.var(CAND, ddof=1))
    assert cmp.verdict == FASTER and cmp.mean_verdict == FASTER and cmp.median_verdict == FASTER


def test_higher_is_better_tests_are_scipys_on_the_values():
    cmp = compare(BASE, CAND, better=HIGHER)
    equal_var = cmp.variances_differ is False
    assert cmp.variance_p == pytest.approx(stats.levene(BASE, CAND, center="median").pvalue, rel=1e-10)
    assert cmp.mean_p_faster == pytest.approx(stats.ttest_ind(CAND, BASE, equal_var=equal_var, alternative="greater").pvalue, rel=1e-10)
    assert cmp.mean_p_slower == pytest.approx(stats.ttest_ind(BASE, CAND, equal_var=equal_var, alternative="greater").pvalue, rel=1e-10)
    assert cmp.t_statistic > 0  # positive when the candidate is better
    assert cmp.median_p_faster == pytest.approx(stats.mannwhitneyu(CAND, BASE, alternative="greater").pvalue, rel=1e-12)
    assert cmp.u_statistic == len(BASE) * len(CAND)  # every candidate run beats every baseline run
    assert cmp.baseline_shapiro_p == pytest.approx(stats.shapiro(BASE).pvalue, rel=1e-12)
    assert cmp.candidate_shapiro_p == pytest.approx(stats.shapiro(CAND).pvalue, rel=1e-12)


def test_the_same_numbers_as_times_point_the_other_way():
    """Read as times (lower is better), the candidate's larger values are slower."""
    as_times = compare(BASE, CAND)
    as_rates = compare(BASE, CAND, better=HIGHER)
    assert as_times.better == LOWER and as_times.verdict == SLOWER and as_rates.verdict == FASTER
    assert as_times.mean_speedup == pytest.approx(1 / as_rates.mean_speedup, rel=1e-13)
    assert as_times.mean_p_faster == pytest.approx(as_rates.mean_p_slower, rel=1e-12)
    assert as_times.median_p_faster == pytest.approx(as_rates.median_p_slower, rel=1e-12)


def test_the_median_test_of_rates_equals_that_of_their_inverse():
    """Mann-Whitney depends on ranks only: 1/rate ranks the runs the other way round."""
    on_rates = compare(BASE, CAND, better=HIGHER)
    on_inverse = compare([1 / v for v in BASE], [1 / v for v in CAND])
    assert on_rates.median_p_faster == pytest.approx(on_inverse.median_p_faster, rel=1e-12)
    assert on_rates.median_verdict == on_inverse.median_verdict == FASTER


def test_overall_for_rates_is_the_placements_total_over_the_baselines():
    suite = {"a": {"none": BASE, "compact": CAND}, "b": {"none": [5.0, 6.0, 7.0], "compact": [4.0, 4.5, 5.0]}}
    row = overall(suite, better=HIGHER)[0]
    assert row.better == HIGHER
    means = {p: [np.mean(suite[k][p]) for k in suite] for p in ("none", "compact")}
    assert row.mean_speedup == pytest.approx(sum(means["compact"]) / sum(means["none"]), rel=1e-13)
    speedups = [np.mean(suite[k]["compact"]) / np.mean(suite[k]["none"]) for k in suite]
    assert row.geomean_speedup == pytest.approx(math.sqrt(speedups[0] * speedups[1]), rel=1e-13)
    # variances of the values themselves (MB/s squared), as in the per-configuration rows
    assert row.max_variance == pytest.approx(np.var(CAND, ddof=1), rel=1e-12)
    assert row.baseline_min_variance == pytest.approx(1.0, rel=1e-12)


def test_the_absolute_threshold_applies_to_seconds_only():
    rates = [10000.0, 10005.0, 10010.0]  # AV = 10 MB/s, RV = 0.1 %
    assert describe(rates, seconds=False).unstable is False
    assert describe(rates).unstable is True  # the same numbers as seconds: AV = 10 s
    assert describe([100.0, 101.5], seconds=False).unstable is True  # RV = 1.48 %: unit-free, still applies
    assert compare(rates, rates, better=HIGHER).baseline.unstable is False
    assert compare(rates, rates).baseline.seconds is True


def test_a_bad_direction_is_refused():
    with pytest.raises(InvalidSample, match="better must be"):
        compare(BASE, CAND, better="up")
