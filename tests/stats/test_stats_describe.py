"""describe(): every number against hand computations, written-out formulas and counting."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from pinlab.errors import UsageError
from pinlab.stats import AV_LIMIT_S, RV_LIMIT, InvalidSample, describe, median_ci_ranks
from pinlab.stats.variability import t_quantile
from tests.stats import stats_reference as ref


def test_three_runs_by_hand():
    d = describe([1.0, 2.0, 4.0])
    # mean 7/3; deviations -4/3, -1/3, 5/3; squares 16/9 + 1/9 + 25/9 = 42/9; / (n - 1) = 7/3
    assert d.n == 3
    assert d.mean == pytest.approx(7 / 3, rel=1e-15)
    assert d.median == 2.0
    assert (d.min, d.max) == (1.0, 4.0)
    assert d.variance == pytest.approx(7 / 3, rel=1e-15)
    assert d.std == pytest.approx(math.sqrt(7 / 3), rel=1e-15)
    assert d.av == 3.0 and d.rv == 0.75 and d.unstable
    # t quantile with 2 df in closed form: t^2 = 2 c^2 / (1 - c^2), c = 0.95 -> 4.30265...
    t = math.sqrt(2 * 0.95**2 / (1 - 0.95**2))
    assert t == pytest.approx(4.3026527297494639, rel=1e-12)  # = sqrt(1.805 / 0.0975)
    half = t * math.sqrt(7 / 3) / math.sqrt(3)
    assert d.mean_ci == pytest.approx((7 / 3 - half, 7 / 3 + half), rel=1e-12)
    # (min, max) covers the median with probability 1 - 2 / 2^3 = 0.75 < 0.95: no interval
    assert d.median_ci is None and d.median_ci_ranks is None and d.median_ci_coverage is None


def test_one_run_is_described_with_nan_and_none():
    d = describe([3.5])
    assert (d.n, d.mean, d.median, d.min, d.max) == (1, 3.5, 3.5, 3.5, 3.5)
    assert math.isnan(d.variance) and math.isnan(d.std)
    assert d.av == 0.0 and d.rv == 0.0 and not d.unstable
    assert d.mean_ci is None and d.median_ci is None and d.median_ci_coverage is None
    out = d.to_dict()
    assert out["variance"] is None and out["std"] is None and out["mean_ci"] is None
    json.dumps(out, allow_nan=False)


def test_two_runs_by_hand():
    d = describe([4.0, 2.0])
    assert (d.mean, d.median, d.variance) == (3.0, 3.0, 2.0)  # (1 + 1) / 1
    assert d.std == pytest.approx(math.sqrt(2))
    # 1 df: the Cauchy quantile tan(pi * 0.475) = 12.7062...; half-width t * s / sqrt(n) = t
    t = ref.t_quantile_df1(0.975)
    assert t == pytest.approx(12.706204736174694, rel=1e-12)
    assert d.mean_ci == pytest.approx((3.0 - t, 3.0 + t), rel=1e-12)
    assert d.median_ci is None
    # at 50 %, (min, max) is enough: P(B = 1), B ~ Bin(2, 1/2), is 1/2
    d50 = describe([4.0, 2.0], confidence=0.5)
    assert d50.median_ci == (2.0, 4.0) and d50.median_ci_ranks == (1, 2)
    assert d50.median_ci_coverage == 0.5
    assert d50.to_dict()["median_ci"] == [2.0, 4.0]


def test_constant_sample():
    d = describe([5.0] * 8)
    assert d.variance == 0.0 and d.std == 0.0 and d.av == 0.0 and d.rv == 0.0
    assert d.mean_ci == (5.0, 5.0) and d.median_ci == (5.0, 5.0)
    assert not d.unstable


def test_thirty_five_runs_against_numpy_formulas():
    rng = np.random.default_rng(2011)
    x = rng.gamma(4.0, 0.5, size=35) + 20.0
    d = describe(list(x), confidence=0.9)
    n = 35
    m = x.sum() / n
    v = ((x - m) ** 2).sum() / (n - 1)
    s = np.sort(x)
    assert d.n == n
    assert d.mean == pytest.approx(m, rel=1e-14)
    assert d.variance == pytest.approx(v, rel=1e-12)
    assert d.std == pytest.approx(math.sqrt(v), rel=1e-12)
    assert d.median == s[17]
    assert (d.min, d.max) == (s[0], s[-1])
    assert d.av == s[-1] - s[0]
    assert d.rv == pytest.approx((s[-1] - s[0]) / s[-1], rel=1e-15)
    # t_{0.95, 34} = 1.690924... (table value); the interval is symmetric around the mean
    lo, hi = d.mean_ci
    assert (hi - lo) / 2 == pytest.approx(1.6909242551868549 * math.sqrt(v / n), rel=1e-9)
    assert (lo + hi) / 2 == pytest.approx(m, rel=1e-14)
    j = ref.median_ranks(n, 0.9)
    assert d.median_ci_ranks == (j, n + 1 - j)
    assert d.median_ci == (s[j - 1], s[n - j])
    assert d.median_ci_coverage == pytest.approx(ref.median_coverage(n, j), abs=1e-12)


# AV > 1 s or RV > 1 % ([mazouz2011variability]); a value exactly at a threshold is stable
@pytest.mark.parametrize(
    ("sample", "av", "rv", "unstable"),
    [
        ([200.0, 201.0], 1.0, 1 / 201, False),  # AV exactly 1 s, RV 0.5 %
        ([200.0, 200.9375], 0.9375, 0.9375 / 200.9375, False),
        ([200.0, 201.0625], 1.0625, 1.0625 / 201.0625, True),  # AV just above 1 s, RV < 1 %
        ([200.0, 201.001], 1.001, 1.001 / 201.001, True),
        ([49.5, 50.0], 0.5, 0.01, False),  # RV exactly 1 %, AV 0.5 s
        ([49.5625, 50.0], 0.4375, 0.00875, False),  # RV just below
        ([49.4375, 50.0], 0.5625, 0.01125, True),  # RV just above 1 %, AV < 1 s
        ([99.0, 100.0], 1.0, 0.01, False),  # at both thresholds
        ([0.99, 1.0], 0.01, 0.01, False),  # decimal input at 1 %, judged as written
        ([0.989, 1.0], 0.011, 0.011, True),
        ([1.5, 1.0, 1.2], 0.5, 0.5 / 1.5, True),  # short program: RV decides
        ([1000.0, 1001.5, 1000.7], 1.5, 1.5 / 1001.5, True),  # long program: AV decides
    ],
)
def test_av_rv_unstable_thresholds(sample, av, rv, unstable):
    d = describe(sample)
    assert d.av == pytest.approx(av, rel=1e-12, abs=1e-15)
    assert d.rv == pytest.approx(rv, rel=1e-12)
    assert d.unstable is unstable
    assert (AV_LIMIT_S, RV_LIMIT) == (1.0, 0.01)


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_median_ci_ranks_and_coverage_by_counting(confidence):
    rng = np.random.default_rng(7)
    for n in range(1, 81):
        x = rng.lognormal(1.0, 0.3, size=n)
        d = describe(x, confidence=confidence)
        j = ref.median_ranks(n, confidence)
        if j is None:
            assert d.median_ci is None and d.median_ci_ranks is None and d.median_ci_coverage is None
            assert median_ci_ranks(n, confidence) is None
            continue
        cover = ref.median_coverage(n, j)
        assert cover >= confidence
        assert j == n // 2 or ref.median_coverage(n, j + 1) < confidence  # the narrowest
        assert d.median_ci_ranks == (j, n + 1 - j)
        assert d.median_ci_coverage == pytest.approx(cover, abs=1e-12)
        s = np.sort(x)
        assert d.median_ci == (s[j - 1], s[n - j])
        assert d.median_ci[0] <= d.median <= d.median_ci[1]


def test_median_ci_known_values():
    # n = 5: 1 - 2/32 = 0.9375 < 0.95; n = 6: 1 - 2/64 = 0.96875
    assert median_ci_ranks(5, 0.95) is None
    assert median_ci_ranks(6, 0.95) == ((1, 6), 0.96875)
    # n = 10: j = 2 covers 1 - 2 (1 + 10) / 1024; j = 3 only 1 - 2 (1 + 10 + 45) / 1024 = 0.890625
    assert median_ci_ranks(10, 0.95) == ((2, 9), 1 - 22 / 1024)


def test_median_ci_empirical_coverage():
    """The interval is distribution-free: on skewed data it holds the true median as often as
    it claims (20,000 samples of 20 exponential run times, true median ln 2)."""
    n, reps = 20, 20_000
    (j, k), cover = median_ci_ranks(n, 0.95)
    s = np.sort(np.random.default_rng(35).exponential(1.0, size=(reps, n)), axis=1)
    hit = np.mean((s[:, j - 1] <= math.log(2)) & (math.log(2) <= s[:, k - 1]))
    sigma = math.sqrt(cover * (1 - cover) / reps)
    assert abs(hit - cover) < 4 * sigma
    assert cover == pytest.approx(ref.median_coverage(n, j), abs=1e-12)


def test_accepts_lists_tuples_arrays():
    x = [3.0, 1.0, 2.0, 5.0]
    assert describe(x) == describe(tuple(x)) == describe(np.array(x))


@pytest.mark.parametrize("sample", [[], [1.0, float("nan")], [1.0, float("inf")], [1.0, -2.0], [0.0, 1.0], [[1.0, 2.0]], ["x"]])
def test_bad_samples_are_refused(sample):
    with pytest.raises(InvalidSample) as info:
        describe(sample)
    assert isinstance(info.value, ValueError) and isinstance(info.value, UsageError)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.1, 1.5])
def test_bad_confidence_is_refused(confidence):
    with pytest.raises(InvalidSample):
        describe([1.0, 2.0], confidence=confidence)


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_t_quantile_by_closed_forms(confidence):
    """1 and 2 degrees of freedom have closed forms (evaluated with some cancellation near 1,
    hence 1e-12); older scipy's t.ppf missed them by 1e-11 to 1e-9."""
    p = (1 + confidence) / 2
    assert t_quantile(confidence, 1) == pytest.approx(ref.t_quantile_df1(p), rel=1e-12)
    assert t_quantile(confidence, 2) == pytest.approx(ref.t_quantile_df2(p), rel=1e-12)
    # and in general, its two-sided tail is 1 - confidence
    for df in (3, 7, 34, 200):
        q = t_quantile(confidence, df)
        assert 2 * stats.t.sf(q, df) == pytest.approx(1 - confidence, rel=1e-13)
