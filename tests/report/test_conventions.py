"""Every displayed statistic in one stated unit, recomputable from what is shown.

Before, for a larger-is-better metric the speedups, tests and overall table were computed on
1/metric while the per-configuration columns were in the metric's units; "AV > 1 s" was applied
to MB/s; and only the placement's Shapiro-Wilk p was given. These tests recompute the report of
real stored studies (SQLite files, `pinlab report --json`) from the stored runs with scipy.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from pinlab.study.store import Store
from pinlab.workloads import workload_path
from tests.conftest import run_pinlab

MACHINE = {"hostname": "host", "cpu_model": "CPU", "kernel": "6.1"}
# Triad MB/s of two programs under two placements (8 runs each): AV of tens of MB/s, RV < 1 %.
RATES = {
    "stream": {
        "none": [9512.0, 9533.5, 9498.2, 9541.0, 9520.4, 9505.9, 9529.3, 9517.7],
        "compact": [9610.3, 9650.2, 9598.7, 9633.1, 9641.8, 9622.4, 9605.5, 9660.0],
    },
    "nested-stream": {
        "none": [20150.0, 20230.5, 20110.2, 20190.8, 20175.1, 20141.6, 20205.3, 20160.9],
        "compact": [19890.4, 19950.2, 19910.7, 19975.3, 19930.0, 19899.8, 19940.6, 19962.1],
    },
}


def _store(path, metric: str, better: str | None, samples: dict[str, dict[str, list[float]]]) -> None:
    """A stored study of these programs' runs (one configuration per program and placement)."""
    programs = [[name, [workload_path(name), "--json"]] for name in samples]
    placements = list(next(iter(samples.values())))
    parameters = {
        "programs": programs,
        "strategies": placements,
        "threads": [1],
        "runs": 8,
        "order": "interleaved",
        "warmup": 0,
        "mem": ["first-touch"],
        "coruns": ["none"],
        "metric": metric,
        "timeout": None,
        "sample_ms": 100.0,
    }
    if better:
        parameters["metric_better"] = better
    configs = [
        {"program": name, "argv": argv, "threads": 1, "placement": p, "mem": "first-touch", "corun": "none"}
        for name, argv in programs
        for p in placements
    ]
    with Store.open(path) as store:
        study = store.create_study("s", parameters, configs, 0, MACHINE, "1.0")
        for config in store.configs(study.id):
            for i, value in enumerate(samples[config["program"]][config["placement"]]):
                store.add_run(config["id"], i, status="ok", wall_seconds=value if metric == "time" else 1.0, metric=value)


def _report(path, *args) -> dict:
    result = run_pinlab("report", "s", "--db", str(path), "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def rates(tmp_path_factory):
    path = tmp_path_factory.mktemp("rates") / "s.db"
    _store(path, "json:results.triad.best_mbs", "higher", RATES)
    return _report(path)


def _rows(report) -> dict[tuple[str, str], dict]:
    return {(r["program"], r["placement"]): r for r in report["stats"]}


def test_speedups_of_a_rate_are_the_ratios_of_the_means_shown(rates):
    rows = _rows(rates)
    for program in RATES:
        base, row = rows[(program, "none")], rows[(program, "compact")]
        assert base["mean"] == pytest.approx(np.mean(RATES[program]["none"]), rel=1e-12)  # MB/s, as stored
        assert row["mean_speedup"] == pytest.approx(row["mean"] / base["mean"], rel=1e-12)
        assert row["median_speedup"] == pytest.approx(row["median"] / base["median"], rel=1e-12)
    assert rows[("stream", "compact")]["verdict"] == "faster" and rows[("nested-stream", "compact")]["verdict"] == "slower"


def test_the_tests_of_a_rate_are_scipys_on_the_rates(rates):
    rows = _rows(rates)
    for program in RATES:
        b, c = RATES[program]["none"], RATES[program]["compact"]
        row = rows[(program, "compact")]
        equal_var = stats.levene(b, c, center="median").pvalue >= 0.05
        assert row["mean_test"] == ("student" if equal_var else "welch")
        assert row["mean_p"] == pytest.approx(stats.ttest_ind(c, b, equal_var=equal_var, alternative="greater").pvalue, rel=1e-9)
        assert row["median_p"] == pytest.approx(stats.mannwhitneyu(c, b, alternative="greater").pvalue, rel=1e-9)
        # both samples' Shapiro-Wilk p-values: the t-test's validity needs both
        assert row["baseline_shapiro_p"] == pytest.approx(stats.shapiro(b).pvalue, rel=1e-9)
        assert row["placement_shapiro_p"] == pytest.approx(stats.shapiro(c).pvalue, rel=1e-9)
        assert row["mean_test_valid"] is (row["baseline_shapiro_p"] > 0.05 and row["placement_shapiro_p"] > 0.05)
        assert "shapiro_p" not in row


def test_the_overall_table_is_in_the_units_of_the_configurations(rates):
    rows = _rows(rates)
    (overall,) = rates["overall"]
    means = {p: [rows[(program, p)]["mean"] for program in RATES] for p in ("none", "compact")}
    assert overall["mean_speedup"] == pytest.approx(sum(means["compact"]) / sum(means["none"]), rel=1e-12)
    speedups = [rows[(program, "compact")]["mean_speedup"] for program in RATES]
    assert overall["geomean_speedup"] == pytest.approx(stats.gmean(speedups), rel=1e-12)
    variances = [rows[(program, "compact")]["variance"] for program in RATES]
    assert (overall["min_variance"], overall["max_variance"]) == pytest.approx((min(variances), max(variances)), rel=1e-12)
    assert overall["max_variance"] == pytest.approx(np.var(RATES["nested-stream"]["compact"], ddof=1), rel=1e-12)  # (MB/s)^2
    assert overall["better"] == "higher"


def test_the_absolute_threshold_applies_to_times_only(rates, tmp_path):
    rows = _rows(rates)
    assert all(row["av"] > 1 and row["rv"] < 0.01 and row["unstable"] is False for row in rows.values())  # MB/s: RV only
    seconds = {"stream": {p: [v / 20 for v in values] for p, values in RATES["stream"].items()}}  # ~480 s: AV > 1 s, RV < 1 %
    path = tmp_path / "t.db"
    _store(path, "time", None, seconds)
    rows = _rows(_report(path))
    assert all(row["av"] > 1 and row["rv"] < 0.01 and row["unstable"] is True for row in rows.values())
