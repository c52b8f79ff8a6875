"""overall(): the tables of [mazouz2011hpcs] on a small synthetic suite whose sums are computed by hand."""

from __future__ import annotations

import json
import math

import pytest

from pinlab.stats import FASTER, NO_DIFFERENCE, SLOWER, InvalidSample, compare, overall
from tests.stats import stats_reference as ref

# Five runs each (four for ft). Means, medians and sample variances by hand:
#   bt none    10 11 12 13 19         mean 13   median 12   var (9+4+1+0+36)/4   = 12.5
#   bt compact  5  6  7  8  9         mean 7    median 7    var (4+1+0+1+4)/4    = 2.5   all below: faster
#   bt scatter 20 21 22 23 24         mean 22   median 22   var 2.5                      all above: slower
#   cg none    100 102 104 106 108    mean 104  median 104  var (16+4+0+4+16)/4  = 10
#   cg compact  50  51  52  53  59    mean 53   median 52   var 12.5                     all below: faster
#   cg scatter 101 103 105 107 109    mean 105  median 105  var 10                       interleaved
#   ep none    2 3 4 5 6              mean 4    median 4    var 2.5
#   ep compact 2.5 3.5 4.5 5.5 6.5    mean 4.5  median 4.5  var 2.5                      interleaved
#   ep scatter 0.5 0.75 1 1.25 1.5    mean 1    median 1    var 0.625/4 = 0.15625        all below: faster
#   ft none    3 3.5 4 4.5            mean 3.75 median 3.75 var 1.25/3
#   ft spread  1 1.5 2 2.5            mean 1.75 median 1.75 var 1.25/3                   all below: faster
# "All below" with 5 + 5 runs: the exact one-sided Wilcoxon p is 1 / C(10, 5) = 1/252; 4 + 4: 1/70.
SUITE = {
    "bt": {"none": [10, 11, 12, 13, 19], "compact": [5, 6, 7, 8, 9], "scatter": [20, 21, 22, 23, 24]},
    "cg": {"none": [100, 102, 104, 106, 108], "compact": [50, 51, 52, 53, 59], "scatter": [101, 103, 105, 107, 109]},
    "ep": {"none": [2, 3, 4, 5, 6], "scatter": [0.5, 0.75, 1, 1.25, 1.5], "compact": [2.5, 3.5, 4.5, 5.5, 6.5]},
    "ft": {"none": [3, 3.5, 4, 4.5], "spread": [1, 1.5, 2, 2.5]},
}


def rows_by_placement(rows):
    return {r.placement: r for r in rows}


def test_rows_in_first_seen_order():
    assert [r.placement for r in overall(SUITE)] == ["compact", "scatter", "spread"]


def test_compact_row_by_hand():
    r = rows_by_placement(overall(SUITE))["compact"]
    assert r.baseline == "none" and r.n_programs == 3 and r.programs == ("bt", "cg", "ep")
    assert r.mean_speedup == pytest.approx((13 + 104 + 4) / (7 + 53 + 4.5), rel=1e-14)
    assert r.median_speedup == pytest.approx((12 + 104 + 4) / (7 + 52 + 4.5), rel=1e-14)
    assert r.geomean_speedup == pytest.approx((13 / 7 * 104 / 53 * 4 / 4.5) ** (1 / 3), rel=1e-13)
    assert (r.min_variance, r.max_variance) == pytest.approx((2.5, 12.5))
    assert (r.baseline_min_variance, r.baseline_max_variance) == pytest.approx((2.5, 12.5))
    assert r.verdicts == (FASTER, FASTER, NO_DIFFERENCE)
    assert (r.n_faster, r.n_slower, r.share_faster) == (2, 0, 2 / 3)
    assert r.share_faster_ci == pytest.approx(ref.wilson(2, 3, 0.95), rel=1e-9)


def test_scatter_row_by_hand():
    r = rows_by_placement(overall(SUITE))["scatter"]
    assert r.programs == ("bt", "cg", "ep")
    assert r.mean_speedup == pytest.approx((13 + 104 + 4) / (22 + 105 + 1), rel=1e-14)
    assert r.median_speedup == pytest.approx((12 + 104 + 4) / (22 + 105 + 1), rel=1e-14)
    assert r.geomean_speedup == pytest.approx((13 / 22 * 104 / 105 * 4 / 1) ** (1 / 3), rel=1e-13)
    assert (r.min_variance, r.max_variance) == pytest.approx((0.15625, 10.0))
    assert r.verdicts == (SLOWER, NO_DIFFERENCE, FASTER)
    assert (r.n_faster, r.n_slower) == (1, 1)
    assert r.share_faster_ci == pytest.approx(ref.wilson(1, 3, 0.95), rel=1e-9)


def test_placement_run_for_one_program_only():
    r = rows_by_placement(overall(SUITE))["spread"]
    assert r.n_programs == 1 and r.programs == ("ft",)
    assert r.mean_speedup == r.median_speedup == pytest.approx(3.75 / 1.75)
    assert r.min_variance == r.max_variance == pytest.approx(1.25 / 3)
    assert r.verdicts == (FASTER,) and r.share_faster == 1.0
    low, high = r.share_faster_ci
    assert (low, high) == pytest.approx(ref.wilson(1, 1, 0.95), rel=1e-9)
    assert high == pytest.approx(1.0)


def test_verdicts_are_those_of_compare():
    for r in overall(SUITE):
        for name, verdict in zip(r.programs, r.verdicts):
            assert compare(SUITE[name]["none"], SUITE[name][r.placement]).verdict == verdict


def test_the_fully_separated_p_values():
    assert compare(SUITE["bt"]["none"], SUITE["bt"]["compact"]).median_p_faster == pytest.approx(1 / 252)
    assert compare(SUITE["ft"]["none"], SUITE["ft"]["spread"]).median_p_faster == pytest.approx(1 / 70)


def test_alpha_sets_the_share_interval():
    r = rows_by_placement(overall(SUITE, alpha=0.1))["compact"]
    assert r.alpha == 0.1
    assert r.share_faster_ci == pytest.approx(ref.wilson(2, 3, 0.9), rel=1e-9)


def test_another_baseline_name():
    suite = {p: {("os" if k == "none" else k): v for k, v in s.items()} for p, s in SUITE.items()}
    assert [r.to_dict() for r in overall(suite, baseline="os")] == [{**r.to_dict(), "baseline": "os"} for r in overall(SUITE)]


def test_single_runs_leave_variances_undefined():
    rows = overall({"p": {"none": [2.0], "compact": [1.0]}})
    assert math.isnan(rows[0].min_variance) and math.isnan(rows[0].baseline_max_variance)
    out = rows[0].to_dict()
    assert out["min_variance"] is None and out["mean_speedup"] == 2.0
    json.dumps(out, allow_nan=False)


def test_to_dict_is_json():
    for r in overall(SUITE):
        out = r.to_dict()
        assert out["programs"] == list(r.programs)
        json.dumps(out, allow_nan=False)


def test_missing_baseline_and_empty_suite_are_refused():
    with pytest.raises(InvalidSample, match="'cg'.*'none'"):
        overall({"bt": SUITE["bt"], "cg": {"compact": [1.0, 2.0]}})
    with pytest.raises(InvalidSample):
        overall({})
    assert overall({"bt": {"none": [1.0, 2.0]}}) == []
