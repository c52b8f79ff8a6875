"""The verdict on autopin's measurements: which candidate is best and how sure, against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pinlab.autopin.decide import correction, judge, rate, smallest_p, within

NAMES = {i: f"c{i}" for i in range(8)}


def test_a_clear_winner_is_decided_with_the_adjusted_scipy_p_value():
    best, other = [10.0, 10.2, 9.9, 10.1, 10.3, 10.0, 9.8, 10.1], [5.0, 5.2, 4.9, 5.1, 5.3, 5.0, 4.8, 5.1]
    j = judge({0: other, 1: best}, NAMES, alpha=0.05)
    assert j.best == 1 and j.runner_up == 0 and j.decided and j.beaten == [0]
    p = stats.mannwhitneyu(best, other, alternative="greater").pvalue
    assert j.p_value == pytest.approx(min(1, p * correction(2)))
    assert j.effect == pytest.approx(np.mean(best) / np.mean(other) - 1)
    assert j.verdict.startswith("c1 beats c0 by 99.")
    three = judge({0: other, 1: best, 2: [x - 1 for x in other]}, NAMES, alpha=0.05)
    assert three.verdict.startswith("c1 beats c0 and every other candidate by 99.")


def test_the_correction_counts_direction_candidates_and_the_share_of_alpha_spent_at_the_round():
    assert correction(2) == 2 and correction(5) == 8 and correction(1) == 2
    assert [correction(5, look, 3) for look in (1, 2, 3)] == [16, 32, 32]  # half of alpha, then a quarter each
    assert sum(1 / correction(2, look, 5) for look in range(1, 6)) == pytest.approx(1 / 2)  # alpha / 2 in all
    assert smallest_p(5) == pytest.approx(1 / 252)
    # 3 candidates, up to 5 rounds: one round where the best's 5 sub-windows are all above the
    # others' decides (with the factor counting all 5 rounds at each it could not: 1/252 x 20 > 0.05)
    best, a, b = [110.0, 111, 112, 113, 114], [100.0, 101, 102, 103, 104], [90.0, 91, 92, 93, 94]
    first = judge({0: a, 1: best, 2: b}, {0: "a", 1: "best", 2: "b"}, alpha=0.05, looks=5, look=1)
    assert first.decided and first.p_value == pytest.approx(8 / 252), first.verdict


def test_alike_candidates_tested_after_every_round_are_rarely_called_different():
    """Sequential looks on growing samples of one distribution: a false 'decided' at any of the 5
    rounds about alpha of the time at most (the shares of alpha sum to 1). Here 13 of 300 with
    seed 11; without the share (alpha at every round) 21 of 150. The bound is the 99.99%
    quantile of a binomial at alpha, so a correct rule fails it 1 time in 10,000."""
    rng = np.random.default_rng(11)
    trials, false = 200, 0
    for _ in range(trials):
        a: list[float] = []
        b: list[float] = []
        for look in range(1, 6):
            a += list(rng.normal(100, 5, 5))
            b += list(rng.normal(100, 5, 5))
            if judge({0: a, 1: b}, NAMES, alpha=0.05, tolerance=0.0, looks=5, look=look).decided:
                false += 1
                break
    assert false <= stats.binom.ppf(0.9999, trials, 0.05), false


def test_alike_candidates_are_rarely_called_different():
    """Two candidates drawn from one distribution: a false 'decided' at most about alpha of the time."""
    rng = np.random.default_rng(7)
    trials, false = 1000, 0
    for _ in range(trials):
        a, b = rng.normal(100, 5, 8), rng.normal(100, 5, 8)
        false += judge({0: list(a), 1: list(b)}, NAMES, alpha=0.05).decided
    assert false / trials <= 0.065  # alpha, within sampling error; without the factor 2 for the direction it is about 0.1


def test_equivalence_within_the_tolerance_uses_the_welch_interval():
    base = [100.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]
    near = [x * 0.999 for x in base]
    assert within(base, near, 0.05, 0.01)
    assert not within(base, [x * 0.95 for x in base], 0.05, 0.01)
    assert within([3.0] * 4, [3.0] * 4, 0.05, 0.01)  # constant and equal: surely equivalent
    j = judge({0: base, 1: near}, NAMES, alpha=0.05, tolerance=0.01)
    assert 1 in j.within_tolerance or 0 in j.within_tolerance
    assert "equivalent within 1%" in j.verdict


def test_no_work_at_all_is_said_so_not_an_unbounded_margin():
    j = judge({0: [0.0] * 5, 1: [0.0] * 5}, NAMES)
    assert j.effect == 0.0 and not j.decided
    assert "no work was measured" in j.verdict and not math.isinf(j.effect)


def test_one_candidate_needs_no_statistics():
    j = judge({0: [1.0, 2.0]}, NAMES)
    assert j.runner_up is None and j.p_value is None and "only candidate" in j.verdict


def test_the_best_is_ranked_by_the_length_weighted_rate_not_by_one_burst_sub_window():
    """A sub-window cut short (the controller woke late for the one before) that caught a burst of
    work has a huge rate over a few milliseconds: counted like a whole sub-window it would make
    its candidate the best while its printed rate, the work over the time, is lower."""
    bursty, steady = [50.0, 50, 50, 50, 1000], [100.0] * 5
    lengths = {0: [0.2, 0.2, 0.2, 0.39, 0.01], 1: [0.2] * 5}
    assert judge({0: bursty, 1: steady}, NAMES).best == 0  # the plain mean: 240 against 100
    j = judge({0: bursty, 1: steady}, NAMES, seconds=lengths)
    assert j.best == 1 and j.runner_up == 0
    assert rate(bursty, lengths[0]) == pytest.approx(59.5)
    assert j.effect == pytest.approx(100 / 59.5 - 1)
    assert j.verdict.startswith("c1 leads c0 by 68.1% but not significantly"), j.verdict
    # Without lengths (a log written before they were kept), the plain mean as before.
    assert rate(bursty) == pytest.approx(240) and rate(bursty, [0.2]) == pytest.approx(240)


def test_a_metric_that_cannot_rank_the_candidates_leaves_a_clear_lead_undecided():
    best, other = [10.0, 10.2, 9.9, 10.1, 10.3], [5.0, 5.2, 4.9, 5.1, 5.3]
    why = "1 worker thread waits by sched_yield"
    j = judge({0: other, 1: best}, NAMES, distrust=why)
    assert j.best == 1 and not j.decided and j.p_value == pytest.approx(2 / 252)
    assert j.verdict == f"c1 leads c0 by 98.0% (p = 0.0079), but {why}: keeping c1, no verdict on speed"
    assert judge({0: other, 1: best}, NAMES).decided


def test_holm_lets_a_clearly_beaten_third_candidate_leave_the_runner_up_s_test_alone():
    """Two of the 25 pairs of sub-windows have the runner-up above the best: one-sided p = 4/252.
    Bonferroni (x 2 x 2 for 3 candidates) gives 0.063, undecided; Holm tests the far-behind third
    first (1/252 x 4) and then the runner-up against one comparison fewer: 4/252 x 2 = 0.032."""
    best, runner, third = [10.0, 10.5, 11, 12, 13], [9.0, 9.5, 9.6, 9.7, 10.6], [1.0, 2, 3, 4, 5]
    assert stats.mannwhitneyu(best, runner, alternative="greater").pvalue == pytest.approx(4 / 252)
    j = judge({0: best, 1: runner, 2: third}, NAMES, alpha=0.05)
    assert j.decided and j.beaten == [2, 1] and j.p_value == pytest.approx(8 / 252), j.verdict
    # A runner-up not significant after the first step stops the procedure there: nothing beyond is beaten.
    close = [9.0, 9.5, 10.2, 10.7, 11.5]
    k = judge({0: best, 1: close, 2: third}, NAMES, alpha=0.05)
    assert not k.decided and k.beaten == [2] and k.equivalent == [1], k.verdict
