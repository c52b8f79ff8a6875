"""Degenerate samples: one run, two runs, all runs equal, every run tied, values out of range.

scipy's answers on such samples change across versions (Shapiro-Wilk of a constant sample is
p = 1 with a warning up to scipy 1.17 and NaN from 1.18; ttest_ind, levene and mannwhitneyu
return NaN, inf, 0 or 1 depending on the case and the version). pinlab.stats decides these cases
by its own rules, so every test here runs inside :func:`scipy_only_on_regular_samples`: scipy's
tests refuse (AssertionError) to be asked about a degenerate sample, pinlab's warning filter is
taken away and any warning is an error. The expected values are the documented rules, not
anything scipy computes on the degenerate samples.
"""

from __future__ import annotations

import contextlib
import json
import math
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from pinlab.stats import (
    FASTER,
    MORE_RUNS,
    NO_DIFFERENCE,
    SLOWER,
    InvalidSample,
    compare,
    decided,
    describe,
    overall,
    speedup,
)
from tests.stats import stats_reference as ref

pytestmark = pytest.mark.filterwarnings("error")


def _constant(x) -> bool:
    x = np.asarray(x, float)
    return bool(np.all(x == x[0]))


def _flat(x) -> bool:
    """Every value at the same distance from the median (Brown-Forsythe's within spread is 0)."""
    x = np.asarray(x, float)
    d = np.abs(x - np.median(x))
    return bool(np.all(d == d[0])) or x.size == 2


#: scipy's tests that pinlab.stats calls, kept before :func:`scipy_only_on_regular_samples` puts
#: the guards below in their place on scipy.stats (pinlab.stats imports scipy when it computes).
_SCIPY = {name: getattr(scipy_stats, name) for name in ("shapiro", "levene", "ttest_ind", "mannwhitneyu")}


class _GuardedStats:
    """scipy.stats's tests as pinlab.stats.speedup calls them, but failing on a degenerate sample."""

    @staticmethod
    def shapiro(x):
        assert len(x) >= 3 and not _constant(x), f"scipy asked for Shapiro-Wilk on {list(x)}"
        return _SCIPY["shapiro"](x)

    @staticmethod
    def levene(*groups, **kw):
        assert all(len(g) >= 2 for g in groups), f"scipy asked for Levene on a one-run sample {groups}"
        assert not all(_flat(g) for g in groups), f"scipy asked for Levene with no within spread {groups}"
        return _SCIPY["levene"](*groups, **kw)

    @staticmethod
    def ttest_ind(a, b, **kw):
        for x in (a, b):
            assert len(x) >= 2 and not _constant(x), f"scipy asked for a t-test on {list(x)}"
        return _SCIPY["ttest_ind"](a, b, **kw)

    @staticmethod
    def mannwhitneyu(x, y, **kw):
        assert not _constant(np.concatenate([x, y])), "scipy asked for Mann-Whitney on all-tied runs"
        assert kw.get("method") in ("exact", "asymptotic"), "the method is pinlab's choice, not scipy's default"
        return _SCIPY["mannwhitneyu"](x, y, **kw)


@contextlib.contextmanager
def scipy_only_on_regular_samples():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with (
            np.errstate(all="raise"),
            mock.patch.multiple(scipy_stats, **{name: getattr(_GuardedStats, name) for name in _SCIPY}),
            mock.patch.object(speedup, "quiet", contextlib.nullcontext),
        ):
            yield


def guarded_compare(b, c, alpha=0.05):
    with scipy_only_on_regular_samples():
        one, two = compare(b, c, alpha), compare(c, b, alpha)
    json.dumps(one.to_dict(), allow_nan=False)
    # swapping the samples swaps every one-sided result exactly
    assert (one.mean_p_faster, one.median_p_faster) == pytest.approx((two.mean_p_slower, two.median_p_slower), nan_ok=True)
    flip = {FASTER: SLOWER, SLOWER: FASTER}
    assert (two.mean_verdict, two.median_verdict, two.verdict) == tuple(flip.get(v, v) for v in (one.mean_verdict, one.median_verdict, one.verdict))
    assert decided(one) == decided(two)
    return one


# ---- both samples constant ------------------------------------------------------------------


@pytest.mark.parametrize(("nb", "nc"), [(3, 3), (3, 7), (10, 4), (35, 40)])
def test_both_constant_different_values_is_a_certain_difference(nb, nc):
    cmp = guarded_compare([6.0] * nb, [5.0] * nc)
    # Shapiro-Wilk skipped, with the reason; 3+ equal runs count as normal
    assert (cmp.baseline_shapiro_p, cmp.candidate_shapiro_p) == (None, None)
    assert cmp.baseline_shapiro_skipped == cmp.candidate_shapiro_skipped == "all runs equal"
    # both variances exactly 0: equal (p = 1), Student's pooled test
    assert (cmp.variance_p, cmp.variances_differ, cmp.mean_test) == (1.0, False, "student")
    # the difference of the means is exact: t = +inf, p = 0 for "faster", 1 for "slower"
    assert cmp.t_statistic == math.inf and (cmp.mean_p_faster, cmp.mean_p_slower) == (0.0, 1.0)
    assert cmp.mean_test_valid and cmp.mean_verdict == FASTER
    if nb <= 30 or nc <= 30:
        assert cmp.mean_validity == "both samples have all runs equal (zero variance)"
    # Mann-Whitney: ties, so the normal approximation with the tie correction (by formula)
    assert cmp.median_method == "asymptotic" and cmp.u_statistic == nb * nc
    assert cmp.median_p_faster == pytest.approx(ref.mwu_asymptotic_p_greater([6.0] * nb, [5.0] * nc), rel=1e-12)
    assert cmp.median_verdict == FASTER and cmp.verdict == FASTER and decided(cmp)
    assert cmp.mean_speedup == 1.2 and cmp.median_speedup == 1.2
    assert cmp.baseline.variance == 0.0 and cmp.baseline.constant
    assert any("certain" in note for note in cmp.notes)


@pytest.mark.parametrize(("nb", "nc"), [(3, 3), (3, 5), (8, 33), (31, 31)])
def test_both_constant_same_value_is_no_difference(nb, nc):
    # 0.1 is not a binary fraction: numpy's mean of [0.1] * 3 is 0.1 + 1 ulp, that of [0.1] * 5 is
    # not, and comparing those means would call the samples certainly different
    cmp = guarded_compare([0.1] * nb, [0.1] * nc)
    assert cmp.baseline.mean == 0.1 and cmp.candidate.mean == 0.1 and cmp.mean_speedup == 1.0
    assert (cmp.variance_p, cmp.variances_differ) == (1.0, False)
    assert cmp.t_statistic == 0.0 and (cmp.mean_p_faster, cmp.mean_p_slower) == (0.5, 0.5)
    # every run tied: U is its null mean and p = 1 each way
    assert cmp.median_method == "all tied" and cmp.u_statistic == nb * nc / 2
    assert (cmp.median_p_faster, cmp.median_p_slower) == (1.0, 1.0)
    assert cmp.mean_test_valid
    assert (cmp.mean_verdict, cmp.median_verdict, cmp.verdict) == (NO_DIFFERENCE,) * 3
    assert decided(cmp)  # identical constant samples: more runs would not help


def test_two_constant_runs_each_need_more_runs():
    cmp = guarded_compare([6.0, 6.0], [5.0, 5.0])
    assert cmp.baseline_shapiro_skipped == "fewer than 3 runs"
    assert cmp.t_statistic == math.inf and cmp.mean_p_faster == 0.0  # reported, not valid
    assert not cmp.mean_test_valid and cmp.mean_verdict == MORE_RUNS
    # 2 + 2 all-separated tied runs: z = 1.5 / sqrt(4/3), p = 0.097
    assert cmp.median_p_faster == pytest.approx(ref.mwu_asymptotic_p_greater([6.0] * 2, [5.0] * 2), rel=1e-12)
    assert cmp.median_p_faster == pytest.approx(0.0970, abs=1e-4)
    assert cmp.verdict == NO_DIFFERENCE and not decided(cmp)


# ---- one sample constant ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "c",
    [
        [5.0, 5.5, 6.5],  # equal variances by Levene: Student
        [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 6.2],  # wide spread
        list(np.random.default_rng(3).normal(5.0, 0.3, 12)),
    ],
)
def test_one_constant_sample_against_a_normal_one(c):
    b = [6.0, 6.0, 6.0, 6.0]
    cmp = guarded_compare(b, c)
    assert cmp.baseline_shapiro_skipped == "all runs equal" and cmp.candidate_shapiro_skipped is None
    assert cmp.candidate_shapiro_p == pytest.approx(scipy_stats.shapiro(c).pvalue, rel=1e-12)
    # Levene is regular here (the other sample has a within spread): the formula agrees
    assert cmp.variance_p == pytest.approx(ref.brown_forsythe_p(b, c), rel=1e-8, abs=1e-14)
    test = ref.welch if cmp.variances_differ else ref.student
    assert cmp.mean_test == ("welch" if cmp.variances_differ else "student")
    t, df, p = test(b, c)
    if test is ref.welch:
        assert df == pytest.approx(len(c) - 1)  # a zero variance leaves the other sample's df
    assert cmp.t_statistic == pytest.approx(t, rel=1e-12)
    assert cmp.mean_p_faster == pytest.approx(p, rel=1e-10)
    assert cmp.mean_p_slower == pytest.approx(test(c, b)[2], rel=1e-10)
    assert cmp.median_method == "asymptotic"  # the constant sample is full of ties
    assert cmp.median_p_faster == pytest.approx(ref.mwu_asymptotic_p_greater(b, c), rel=1e-12)
    normal = cmp.candidate_shapiro_p > 0.05
    assert cmp.mean_test_valid is normal
    if normal:
        assert cmp.mean_validity == "one sample passes Shapiro-Wilk, the other has all runs equal (zero variance)"


def test_one_constant_sample_against_a_non_normal_one_needs_more_runs():
    b = [10.0] * 12
    c = [9.0 + 0.01 * i for i in range(6)] + [10.5 + 0.01 * i for i in range(6)]  # bimodal
    cmp = guarded_compare(b, c)
    assert cmp.candidate_shapiro_p < 0.05 and not cmp.mean_test_valid and cmp.mean_verdict == MORE_RUNS


# ---- one and two runs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "u", "p_faster", "p_slower", "method"),
    [
        ([1.0], [2.0], 0.0, 1.0, 0.5, "exact"),  # one pair: U is 0 or 1 with probability 1/2
        ([2.0], [1.0], 1.0, 0.5, 1.0, "exact"),
        ([1.0], [1.0], 0.5, 1.0, 1.0, "all tied"),
        ([6.0], [5.0, 5.0, 5.0], 3.0, None, None, "asymptotic"),
        ([1.0, 1.1], [0.5], 2.0, 1 / 3, 1.0, "exact"),  # U = 2 is the largest of 3 equally likely
    ],
)
def test_a_single_run_leaves_the_mean_and_variance_tests_undefined(b, c, u, p_faster, p_slower, method):
    cmp = guarded_compare(b, c)
    assert math.isnan(cmp.variance_p) and cmp.variances_differ is None and cmp.mean_test == "welch"
    assert math.isnan(cmp.t_statistic) and math.isnan(cmp.mean_p_faster) and math.isnan(cmp.mean_p_slower)
    assert cmp.to_dict()["mean_p_faster"] is None and cmp.to_dict()["variance_p"] is None
    assert cmp.baseline_shapiro_p is None and cmp.candidate_shapiro_p is None
    assert "fewer than 3 runs" in (cmp.baseline_shapiro_skipped, cmp.candidate_shapiro_skipped)
    assert not cmp.mean_test_valid and cmp.mean_verdict == MORE_RUNS
    assert cmp.u_statistic == u and cmp.median_method == method
    if p_faster is None:
        p_faster, p_slower = ref.mwu_asymptotic_p_greater(b, c), ref.mwu_asymptotic_p_greater(c, b)
    assert (cmp.median_p_faster, cmp.median_p_slower) == pytest.approx((p_faster, p_slower), rel=1e-12)
    assert cmp.verdict == NO_DIFFERENCE and not decided(cmp)
    assert any("single run" in note for note in cmp.notes)


@pytest.mark.parametrize(
    ("b", "c", "undefined"),
    [
        ([1.0, 1.1], [2.0, 2.2], True),  # 2 runs: each run is half the range from the median
        ([1.0, 1.1], [2.0, 2.25], True),  # same, different ranges: scipy says p = 0
        ([1.0, 1.0, 3.0, 3.0], [5.0, 5.0, 6.0, 6.0], True),  # two tied halves
        ([1.0, 2.0], [5.0, 5.0, 5.0], True),  # 2 runs against a constant sample
        ([1.0, 1.1], [2.0, 2.1, 2.3, 2.2], False),  # the second sample has a within spread
    ],
)
def test_levene_without_within_sample_spread_is_undefined(b, c, undefined):
    """Brown-Forsythe divides by the spread of |run - median| within the samples; when it is 0
    in both (and they are not both constant) the test is undefined, whatever scipy returns
    (p = 0 for different ranges, NaN for equal ones): Welch's t-test, which assumes nothing."""
    cmp = guarded_compare(b, c)
    if undefined:
        assert math.isnan(cmp.variance_p) and cmp.variances_differ is None
        assert cmp.mean_test == "welch" and any("variance test undefined" in n for n in cmp.notes)
    else:
        assert cmp.variance_p == pytest.approx(ref.brown_forsythe_p(b, c), rel=1e-8, abs=1e-14)
        assert not any("variance" in n for n in cmp.notes)
    test = ref.welch if cmp.mean_test == "welch" else ref.student
    t, _, p = test(b, c)
    assert cmp.t_statistic == pytest.approx(t, rel=1e-12) and cmp.mean_p_faster == pytest.approx(p, rel=1e-10)


# ---- what cannot reach the tests -------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [[1.0, float("nan")], [float("inf")], [-float("inf"), 1.0], [0.0], [-1.0, 2.0], [1e-300, 1.0], [5e-324], [1e300, 1.0], [1.7e308], []],
)
def test_nan_infinite_and_out_of_range_times_are_refused(bad):
    with pytest.raises(InvalidSample):
        compare(bad, [1.0, 2.0])
    with pytest.raises(InvalidSample):
        compare([1.0, 2.0], bad)
    with pytest.raises(InvalidSample):
        describe(bad)
    with pytest.raises(InvalidSample):
        overall({"p": {"none": [1.0, 2.0], "x": bad}})


def test_the_range_limits_are_accepted():
    with scipy_only_on_regular_samples():
        cmp = compare([1e100, 1e100, 1e100], [1e-100, 1e-100, 1e-100])
    assert cmp.mean_speedup == pytest.approx(1e200) and cmp.mean_verdict == FASTER
    json.dumps(cmp.to_dict(), allow_nan=False)


# ---- describe ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.1, 1 / 3, 5.0, 1e-100, 1e100])
@pytest.mark.parametrize("n", [2, 3, 7, 40])
def test_constant_description_is_exact(value, n):
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        d = describe([value] * n)
    assert d.constant and d.mean == d.median == d.min == d.max == value
    assert d.variance == 0.0 and d.std == 0.0 and d.av == 0.0 and d.rv == 0.0 and not d.unstable
    assert d.mean_ci == (value, value)


def test_one_run_is_not_called_constant():
    d = describe([2.5])
    assert not d.constant and math.isnan(d.variance)


def test_the_mean_stays_within_min_and_max():
    # three times 0.1 + 1 ulp and once 0.1: numpy's mean rounds above the maximum without clipping
    x = [0.1, 0.1, 0.1]
    assert float(np.mean(x)) > 0.1
    d = describe(x)
    assert d.min <= d.mean <= d.max


# ---- the rules hold for any constant samples --------------------------------------------------

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
values = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@SETTINGS
@given(vb=values, vc=values, nb=st.integers(3, 45), nc=st.integers(3, 45))
def test_any_two_constant_samples(vb, vc, nb, nc):
    cmp = guarded_compare([vb] * nb, [vc] * nc)
    assert cmp.mean_test_valid and cmp.variance_p == 1.0
    if vb == vc:
        assert (cmp.mean_p_faster, cmp.median_p_faster) == (0.5, 1.0)
        assert cmp.verdict == NO_DIFFERENCE
    else:
        # with 3 runs or more each, tied and fully separated, the approximate Mann-Whitney
        # p-value is below 5 % (2.3 % for 3 + 3); the t-test is certain
        expected = FASTER if vb > vc else SLOWER
        assert cmp.mean_verdict == cmp.median_verdict == cmp.verdict == expected
        assert {cmp.mean_p_faster, cmp.mean_p_slower} == {0.0, 1.0}
    assert decided(cmp)


@SETTINGS
@given(v=values, n=st.integers(1, 40), other=st.lists(values, min_size=1, max_size=40))
def test_a_constant_sample_against_anything_never_warns(v, n, other):
    cmp = guarded_compare([v] * n, other)
    assert cmp.verdict in (FASTER, SLOWER, NO_DIFFERENCE)
    if n >= 3:
        assert cmp.baseline_shapiro_skipped == "all runs equal"
