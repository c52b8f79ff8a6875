"""Properties of the statistics on arbitrary samples (hypothesis)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.stats import AV_LIMIT_S, FASTER, RV_LIMIT, SLOWER, compare, decided, describe, overall

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLIP = {FASTER: SLOWER, SLOWER: FASTER}

times = st.floats(min_value=0.01, max_value=1000.0, allow_nan=False, allow_infinity=False)
samples = st.lists(times, min_size=1, max_size=40)
# run times as a timer gives them: few distinct values, so ties are common
coarse = st.lists(st.integers(100, 120).map(lambda k: k / 100), min_size=1, max_size=40)
any_sample = st.one_of(samples, coarse)


def same_numbers(a, b) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


@SETTINGS
@given(b=any_sample, c=any_sample)
def test_swapping_inverts_speedups_and_flips_verdicts(b, c):
    one, two = compare(b, c), compare(c, b)
    assert one.mean_speedup == pytest.approx(1 / two.mean_speedup, rel=1e-12)
    assert one.median_speedup == pytest.approx(1 / two.median_speedup, rel=1e-12)
    assert same_numbers(one.mean_p_faster, two.mean_p_slower)
    assert same_numbers(one.mean_p_slower, two.mean_p_faster)
    assert one.median_p_faster == two.median_p_slower and one.median_p_slower == two.median_p_faster
    assert same_numbers(one.variance_p, two.variance_p)
    assert one.mean_test_valid == two.mean_test_valid
    for field in ("mean_verdict", "median_verdict", "verdict"):
        v = getattr(one, field)
        assert getattr(two, field) == FLIP.get(v, v)
    assert decided(one) == decided(two)


@SETTINGS
@given(b=any_sample, c=any_sample, power=st.integers(-6, 6))
def test_scaling_both_by_a_power_of_two_changes_nothing(b, c, power):
    """Seconds or milliseconds give the same verdicts; powers of two scale floats exactly."""
    k = 2.0**power
    one, two = compare(b, c), compare([k * x for x in b], [k * x for x in c])
    assert one.mean_speedup == two.mean_speedup and one.median_speedup == two.median_speedup
    for field in ("mean_p_faster", "mean_p_slower", "median_p_faster", "median_p_slower", "variance_p"):
        x, y = getattr(one, field), getattr(two, field)
        assert same_numbers(x, y) or x == pytest.approx(y, rel=1e-9, abs=1e-12), field
    assert (one.mean_verdict, one.median_verdict, one.verdict) == (two.mean_verdict, two.median_verdict, two.verdict)


@SETTINGS
@given(b=samples, c=samples, k=st.floats(0.001, 1000.0))
def test_speedups_invariant_to_any_scaling(b, c, k):
    one, two = compare(b, c), compare([k * x for x in b], [k * x for x in c])
    assert one.mean_speedup == pytest.approx(two.mean_speedup, rel=1e-9)
    assert one.median_speedup == pytest.approx(two.median_speedup, rel=1e-9)


@SETTINGS
@given(x=any_sample, confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]))
def test_description_is_consistent(x, confidence):
    d = describe(x, confidence)
    assert d.n == len(x) and d.min <= d.median <= d.max and d.min <= d.mean * (1 + 1e-12)
    assert d.av == d.max - d.min and 0 <= d.rv < 1
    assert d.unstable == (d.av > AV_LIMIT_S * (1 + 1e-9) or d.rv > RV_LIMIT * (1 + 1e-9))
    if d.n >= 2:
        lo, hi = d.mean_ci
        assert lo <= d.mean * (1 + 1e-12) and d.mean <= hi * (1 + 1e-12)
    if d.median_ci is not None:
        j, k = d.median_ci_ranks
        assert j + k == d.n + 1 and d.median_ci_coverage >= confidence
        assert d.min <= d.median_ci[0] <= d.median <= d.median_ci[1] <= d.max
    json.dumps(d.to_dict(), allow_nan=False)


@SETTINGS
@given(b=any_sample, c=any_sample)
def test_one_program_suite_matches_compare(b, c):
    (row,) = overall({"p": {"none": b, "x": c}})
    cmp = compare(b, c)
    assert row.mean_speedup == pytest.approx(cmp.mean_speedup, rel=1e-12)
    assert row.median_speedup == pytest.approx(cmp.median_speedup, rel=1e-12)
    assert row.geomean_speedup == pytest.approx(cmp.mean_speedup, rel=1e-12)
    assert row.verdicts == (cmp.verdict,)
    assert row.n_faster == (cmp.verdict == FASTER)
    low, high = row.share_faster_ci
    assert 0 <= low <= row.share_faster <= high <= 1
    json.dumps(row.to_dict(), allow_nan=False)
