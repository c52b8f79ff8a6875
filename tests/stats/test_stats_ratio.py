"""speedup_interval: the speedup of medians and its percentile bootstrap interval, recomputed here."""

from __future__ import annotations

import numpy as np
import pytest

from pinlab.stats import InvalidSample, compare, median_test
from pinlab.stats.ratio import speedup_interval


def test_the_interval_is_the_percentiles_of_the_resampled_speedups():
    base = [10.0, 10.4, 9.8, 10.1, 10.9, 10.2, 9.9]
    cand = [8.0, 8.3, 7.9, 8.8, 8.1, 8.2]
    got = speedup_interval(base, cand, confidence=0.9, seed=7, resamples=500)
    rng = np.random.default_rng(7)
    b, c = np.array(base), np.array(cand)
    mb = np.median(b[rng.integers(0, 7, size=(500, 7))], axis=1)
    mc = np.median(c[rng.integers(0, 6, size=(500, 6))], axis=1)
    low, high = np.quantile(mb / mc, [0.05, 0.95])
    assert got.speedup == pytest.approx(np.median(b) / np.median(c)) and (got.low, got.high) == pytest.approx((low, high))
    assert got.low <= got.speedup <= got.high and got.confidence == 0.9
    again = speedup_interval(base, cand, confidence=0.9, seed=7, resamples=500)
    assert again == got  # seeded: the same runs give the same interval


def test_for_rates_the_speedup_is_candidate_over_baseline():
    base, cand = [100.0, 101.0, 99.0, 100.5], [150.0, 151.0, 149.0, 150.2]
    up = speedup_interval(base, cand, better="higher")
    down = speedup_interval(base, cand, better="lower")
    assert up.speedup == pytest.approx(150.1 / 100.25) and down.speedup == pytest.approx(100.25 / 150.1)
    assert up.low > 1.4 and down.high < 0.7


def test_within_says_whether_the_whole_interval_is_inside_the_margin():
    same = [1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0002] * 3
    assert speedup_interval(same, same[::-1]).within(0.01)
    apart = speedup_interval([1.0, 1.01, 0.99, 1.0] * 3, [1.05, 1.06, 1.04, 1.05] * 3)
    assert not apart.within(0.02) and apart.within(0.2)


def test_bad_samples_and_levels_are_refused():
    with pytest.raises(InvalidSample):
        speedup_interval([], [1.0])
    with pytest.raises(InvalidSample):
        speedup_interval([1.0], [1.0], confidence=1.0)
    with pytest.raises(InvalidSample):
        speedup_interval([1.0], [1.0], better="faster")


def test_median_test_gives_compare_s_median_p_values():
    rng = np.random.default_rng(3)
    for better in ("lower", "higher"):
        for n in (5, 12):  # the exact distribution, then the normal approximation
            b, c = list(rng.normal(10, 1, n)), list(rng.normal(9.5, 1, n + 1))
            full = compare(b, c, better=better)
            assert median_test(b, c, better=better) == pytest.approx((full.median_p_faster, full.median_p_slower))
