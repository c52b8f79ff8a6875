"""compare() and decided(): speedups, p-values re-derived independently, and the verdict rules."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from pinlab.stats import (
    FASTER,
    MORE_RUNS,
    NO_DIFFERENCE,
    SLOWER,
    InvalidSample,
    compare,
    decided,
)
from tests.stats import stats_reference as ref


def normal_sample(mu: float, sigma: float, n: int, shift: float = 0.0) -> list[float]:
    """A deterministic, perfectly normal-looking sample: the normal quantiles at (i - 1/2) / n,
    rotated so the runs are not in order."""
    nd = NormalDist(mu, sigma)
    q = [nd.inv_cdf((i + 0.5 + shift) / (n + 2 * shift)) for i in range(n)]
    return q[1::2] + q[0::2]


def bimodal(lo: float, hi: float, n: int) -> list[float]:
    """Half the runs near lo, half near hi: strongly non-normal."""
    return [lo + 0.01 * i for i in range(n // 2)] + [hi + 0.01 * i for i in range(n - n // 2)]


def check_against_reference(cmp, b, c):
    """Every number of a comparison, re-derived without the code under test."""
    assert cmp.mean_speedup == pytest.approx(ref.mean(b) / ref.mean(c), rel=1e-13)
    assert cmp.median_speedup == pytest.approx(ref.median(b) / ref.median(c), rel=1e-13)
    assert cmp.baseline.variance == pytest.approx(ref.var(b), rel=1e-10)
    assert cmp.candidate.variance == pytest.approx(ref.var(c), rel=1e-10)
    # Shapiro-Wilk only through scipy (no independent formula for its p-value)
    assert cmp.baseline_shapiro_p == pytest.approx(stats.shapiro(b).pvalue, rel=1e-12)
    assert cmp.candidate_shapiro_p == pytest.approx(stats.shapiro(c).pvalue, rel=1e-12)
    assert cmp.variance_test == "levene"
    assert cmp.variance_p == pytest.approx(ref.brown_forsythe_p(b, c), rel=1e-8, abs=1e-14)
    assert cmp.variances_differ == (cmp.variance_p < cmp.alpha)
    test = ref.welch if cmp.variances_differ else ref.student
    assert cmp.mean_test == ("welch" if cmp.variances_differ else "student")
    t, _, p_faster = test(b, c)
    _, _, p_slower = test(c, b)
    assert cmp.t_statistic == pytest.approx(t, rel=1e-9)
    assert cmp.mean_p_faster == pytest.approx(p_faster, rel=1e-8, abs=1e-300)
    assert cmp.mean_p_slower == pytest.approx(p_slower, rel=1e-8, abs=1e-300)
    assert cmp.u_statistic == ref.u_statistic(b, c)
    assert cmp.median_p_faster == pytest.approx(ref.mwu_p_greater(b, c), rel=1e-8, abs=1e-300)
    assert cmp.median_p_slower == pytest.approx(ref.mwu_p_greater(c, b), rel=1e-8, abs=1e-300)
    json.dumps(cmp.to_dict(), allow_nan=False)


def test_clearly_faster_with_35_runs():
    b = normal_sample(10.0, 0.1, 35)
    c = normal_sample(9.0, 0.1, 35, shift=0.3)
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)
    assert cmp.mean_test_valid and "more than 30" in cmp.mean_validity
    assert (cmp.mean_verdict, cmp.median_verdict, cmp.verdict) == (FASTER, FASTER, FASTER)
    assert cmp.mean_speedup == pytest.approx(10 / 9, rel=1e-3)
    # every baseline run is longer: U = 35 * 35, and the Wilcoxon test says so loudly
    assert cmp.u_statistic == 35 * 35 and cmp.median_p_faster < 1e-10
    assert decided(cmp)


def test_clearly_slower_with_35_runs():
    b = normal_sample(9.0, 0.1, 35, shift=0.3)
    c = normal_sample(10.0, 0.1, 35)
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)
    assert (cmp.mean_verdict, cmp.median_verdict, cmp.verdict) == (SLOWER, SLOWER, SLOWER)
    assert cmp.mean_speedup < 1 and cmp.u_statistic == 0.0


def test_identical_samples_show_no_difference():
    x = normal_sample(5.0, 0.2, 12)
    cmp = compare(x, list(x))
    assert cmp.mean_speedup == 1.0 and cmp.median_speedup == 1.0
    assert cmp.variance_p == pytest.approx(1.0) and cmp.variances_differ is False
    assert cmp.t_statistic == 0.0
    assert cmp.mean_p_faster == pytest.approx(0.5) and cmp.mean_p_slower == pytest.approx(0.5)
    assert cmp.u_statistic == 12 * 12 / 2
    check_against_reference(cmp, x, x)
    assert cmp.mean_test_valid  # normal by construction
    assert (cmp.mean_verdict, cmp.median_verdict, cmp.verdict) == (NO_DIFFERENCE,) * 3
    assert decided(cmp)  # a valid mean test: more runs are not what is missing


def test_shapiro_on_known_normal_and_non_normal_samples():
    assert stats.shapiro(bimodal(1.0, 2.0, 20)).pvalue < 0.001
    assert stats.shapiro(normal_sample(10.0, 0.2, 20)).pvalue > 0.9
    seeded = np.random.default_rng(12345).normal(10.0, 0.2, 20)
    assert stats.shapiro(seeded).pvalue > 0.05
    cmp = compare(bimodal(1.0, 2.0, 20), seeded)
    assert cmp.baseline_shapiro_p == stats.shapiro(bimodal(1.0, 2.0, 20)).pvalue
    assert cmp.candidate_shapiro_p == stats.shapiro(seeded).pvalue


def test_small_normal_samples_give_a_valid_mean_test():
    b = list(np.random.default_rng(12345).normal(10.0, 0.2, 20))
    c = normal_sample(9.7, 0.2, 15)
    cmp = compare(b, c)
    assert cmp.baseline_shapiro_p > 0.05 and cmp.candidate_shapiro_p > 0.05
    assert cmp.mean_test_valid and cmp.mean_validity == "both samples pass Shapiro-Wilk"
    check_against_reference(cmp, b, c)
    assert cmp.mean_verdict == FASTER and cmp.verdict == FASTER


def test_small_non_normal_sample_needs_more_runs_for_the_mean():
    b = bimodal(10.0, 11.0, 20)  # 10.00 .. 10.09 and 11.00 .. 11.09
    c = normal_sample(9.5, 0.1, 20)
    cmp = compare(b, c)
    assert cmp.baseline_shapiro_p < 0.05 < cmp.candidate_shapiro_p
    assert not cmp.mean_test_valid
    assert cmp.mean_verdict == MORE_RUNS
    check_against_reference(cmp, b, c)  # p-values still reported
    assert cmp.mean_p_faster < 1e-6
    # the median test needs no normality: every baseline run is longer (U = 400)
    assert cmp.u_statistic == 400 and cmp.median_verdict == FASTER
    # an invalid mean test does not contradict the median: the verdict stands
    assert cmp.verdict == FASTER
    assert decided(cmp)


def test_small_non_normal_samples_with_no_median_decision_are_undecided():
    b = bimodal(10.0, 11.0, 10)
    c = bimodal(10.005, 11.005, 10)
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)
    assert cmp.mean_verdict == MORE_RUNS and cmp.median_verdict == NO_DIFFERENCE
    assert cmp.verdict == NO_DIFFERENCE
    assert not decided(cmp)


def test_thirty_five_non_normal_runs_are_large_enough():
    b = bimodal(10.0, 11.0, 35)
    c = bimodal(9.0, 10.2, 35)
    cmp = compare(b, c)
    assert cmp.baseline_shapiro_p < 0.05 and cmp.candidate_shapiro_p < 0.05
    assert cmp.mean_test_valid and "more than 30" in cmp.mean_validity
    check_against_reference(cmp, b, c)
    assert cmp.mean_verdict == FASTER and cmp.verdict == FASTER


@pytest.mark.parametrize(("nb", "nc", "valid"), [(31, 31, True), (30, 31, False), (30, 30, False), (35, 10, False)])
def test_large_sample_rule_is_n_above_30_in_both(nb, nc, valid):
    b = bimodal(10.0, 11.0, nb)
    c = bimodal(9.0, 10.2, nc)
    cmp = compare(b, c)
    assert cmp.baseline_shapiro_p < 0.05 and cmp.candidate_shapiro_p < 0.05
    assert cmp.mean_test_valid is valid
    assert (cmp.mean_verdict == MORE_RUNS) is not valid


def test_ties_from_a_coarse_timer():
    # times read with a 10 ms timer: many ties within and across the samples
    rng = np.random.default_rng(4)
    b = [round(v, 2) for v in rng.normal(2.00, 0.02, 25)]
    c = [round(v, 2) for v in rng.normal(1.98, 0.02, 25)]
    assert ref.has_ties(b, c)
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)  # asymptotic p with the tie-corrected variance


def test_constant_samples_by_hand():
    b, c = [6.0, 6.0, 6.0], [5.0, 5.0, 5.0]
    cmp = compare(b, c)
    assert cmp.mean_speedup == 1.2 and cmp.median_speedup == 1.2
    assert cmp.u_statistic == 9.0
    # ties -> normal approximation: two groups of 3 tied values, sum(t^3 - t) = 48, N = 6
    # sigma^2 = 3*3/12 * (7 - 48/30) = 4.05; z = (9 - 4.5 - 0.5) / sqrt(4.05)
    z = 4.0 / math.sqrt(4.05)
    assert cmp.median_p_faster == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)), rel=1e-12)
    assert cmp.median_p_faster == pytest.approx(0.02342, abs=1e-5)
    assert cmp.median_verdict == FASTER
    # zero variances: the difference is certain (t = +inf, p = 0); 3 equal runs count as normal
    # (Shapiro-Wilk is skipped for them, whatever scipy would say: p = 1 up to 1.17, NaN in 1.18)
    assert cmp.baseline_shapiro_p is None and cmp.baseline_shapiro_skipped == "all runs equal"
    assert cmp.t_statistic == math.inf and (cmp.mean_p_faster, cmp.mean_p_slower) == (0.0, 1.0)
    assert cmp.mean_test_valid and cmp.mean_verdict == FASTER
    assert cmp.verdict == FASTER
    # the same constant twice: t = 0 and p = 1/2 each way, as for any sample against itself
    same = compare(b, b)
    assert same.t_statistic == 0.0 and (same.mean_p_faster, same.mean_p_slower) == (0.5, 0.5)
    assert (same.median_p_faster, same.median_p_slower) == (1.0, 1.0) and same.median_method == "all tied"
    assert same.mean_verdict == NO_DIFFERENCE and same.verdict == NO_DIFFERENCE


@pytest.mark.parametrize(
    ("b", "c"),
    [
        ([5.1, 5.3, 4.9, 5.6, 5.2], [4.8, 4.7, 5.0, 4.6, 4.95]),
        ([2.0, 2.4, 2.1, 2.35], [2.2, 1.9, 2.05, 2.3, 1.95, 2.25]),
        ([7.0, 7.5, 6.9], [7.2, 7.1, 6.8, 7.3, 7.05, 6.95, 7.15, 7.25, 7.35, 7.45, 6.85, 6.7, 7.6, 7.4]),
    ],
)
def test_exact_mann_whitney_by_enumeration(b, c):
    cmp = compare(b, c)
    assert cmp.u_statistic == ref.u_statistic(b, c)
    assert cmp.median_p_faster == pytest.approx(ref.mwu_exact_p_greater(b, c), rel=1e-12)
    assert cmp.median_p_slower == pytest.approx(ref.mwu_exact_p_greater(c, b), rel=1e-12)


def test_five_against_five_fully_separated_by_hand():
    cmp = compare([10.0, 11.0, 12.0, 13.0, 14.0], [5.0, 6.0, 7.0, 8.0, 9.0])
    # one rank assignment of C(10, 5) = 252 gives U = 25
    assert cmp.u_statistic == 25.0
    assert cmp.median_p_faster == pytest.approx(1 / 252, rel=1e-12)
    assert cmp.median_p_slower == pytest.approx(1.0)
    # equal variances (2.5 each): Student's t = 5 / sqrt(2.5 * 2 / 5) = 5 with 8 df
    assert cmp.variances_differ is False and cmp.mean_test == "student"
    assert cmp.t_statistic == pytest.approx(5.0, rel=1e-12)
    assert cmp.mean_p_faster == pytest.approx(stats.t.sf(5.0, 8), rel=1e-10)
    assert cmp.mean_speedup == 12 / 7 and cmp.median_speedup == 12 / 7
    assert cmp.verdict == FASTER


def test_welch_when_variances_differ():
    b = normal_sample(10.0, 1.0, 35)
    c = normal_sample(9.5, 0.05, 35)
    cmp = compare(b, c)
    assert cmp.variances_differ is True and cmp.mean_test == "welch"
    t, df, p = ref.welch(b, c)
    assert 34 < df < 36  # Welch-Satterthwaite: far from the pooled 68
    assert cmp.t_statistic == pytest.approx(t, rel=1e-10)
    assert cmp.mean_p_faster == pytest.approx(p, rel=1e-8)
    check_against_reference(cmp, b, c)


def test_mean_contradicting_median_gives_no_verdict():
    # most candidate runs are faster, but a fifth of them are very slow
    b = normal_sample(10.0, 0.1, 35)
    c = normal_sample(9.5, 0.1, 28) + [30.0] * 7
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)
    assert cmp.median_verdict == FASTER
    assert cmp.mean_test_valid and cmp.mean_verdict == SLOWER
    assert cmp.verdict == NO_DIFFERENCE
    assert decided(cmp)


def test_mean_alone_gives_no_verdict():
    # the baseline has a few long runs: its mean is larger, its median is not
    b = normal_sample(10.0, 0.1, 30) + [20.0] * 5
    c = normal_sample(10.05, 0.1, 35)
    cmp = compare(b, c)
    check_against_reference(cmp, b, c)
    assert cmp.mean_verdict == FASTER and cmp.median_verdict == NO_DIFFERENCE
    assert cmp.verdict == NO_DIFFERENCE


@pytest.mark.parametrize(("b", "c"), [([1.0], [2.0]), ([1.0], [1.0]), ([1.0, 1.1], [2.0, 2.2]), ([1.0, 1.1], [0.5])])
def test_one_and_two_runs_never_fail(b, c):
    cmp = compare(b, c)
    assert cmp.baseline_shapiro_p is None and cmp.candidate_shapiro_p is None
    assert not cmp.mean_test_valid and cmp.mean_verdict == MORE_RUNS
    assert cmp.mean_speedup == pytest.approx(ref.mean(b) / ref.mean(c))
    assert cmp.u_statistic == ref.u_statistic(b, c)
    # too few runs for Wilcoxon-Mann-Whitney to reach 5 %: the best is 1/6 with 2 + 2 runs
    assert cmp.median_verdict == NO_DIFFERENCE and cmp.verdict == NO_DIFFERENCE
    assert not decided(cmp)
    json.dumps(cmp.to_dict(), allow_nan=False)


def test_alpha_changes_the_verdict():
    # 4 + 4 fully separated runs: exact p = 1 / C(8, 4) = 1/70 = 0.0143
    b, c = [10.0, 10.2, 10.4, 10.6], [9.0, 9.2, 9.4, 9.6]
    assert compare(b, c, alpha=0.05).median_verdict == FASTER
    assert compare(b, c, alpha=0.01).median_verdict == NO_DIFFERENCE
    assert compare(b, c, alpha=0.01).median_p_faster == pytest.approx(1 / 70)
    assert compare(b, c, alpha=0.01).baseline.confidence == 0.99


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, -0.05])
def test_bad_alpha_is_refused(alpha):
    with pytest.raises(InvalidSample):
        compare([1.0, 2.0], [1.0, 2.0], alpha=alpha)


def test_bad_samples_are_refused():
    with pytest.raises(InvalidSample, match="baseline"):
        compare([], [1.0])
    with pytest.raises(InvalidSample, match="candidate"):
        compare([1.0], [0.0])


def test_to_dict_nests_the_descriptions():
    out = compare([1.0, 1.2, 1.1], [0.9, 0.95, 1.0]).to_dict()
    assert out["baseline"]["n"] == 3 and out["candidate"]["median"] == 0.95
    assert set(out) >= {"mean_speedup", "median_speedup", "mean_verdict", "median_verdict", "verdict"}
    json.dumps(out, allow_nan=False)
