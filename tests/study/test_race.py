"""The race of pinlab tune, replayed from made-up runs: looks, drops held to their risk, the ends."""

from __future__ import annotations

import numpy as np
import pytest

from pinlab.errors import UsageError
from pinlab.study.plan import Program, StudyPlan
from pinlab.study.race import ALL_FAILED, BUDGET, EQUIVALENT, MAX_RUNS, ONE_LEFT, look_points, race, race_round


def plan(n: int, **options) -> StudyPlan:
    settings = dict(min_runs=6, max_runs=14, alpha=0.05, tolerance=0.02, warmup=0)
    settings.update(options)
    return StudyPlan(
        name="r", programs=[Program("p", ["p"])], strategies=["none"] + [f"cpus:{i}" for i in range(n - 1)], threads=[1], runs="race", **settings
    )


def configs(n: int) -> list[dict]:
    return [{"id": 10 + i, "position": i, "placement": "none" if i == 0 else f"cpus:{i - 1}"} for i in range(n)]


def run_race(p: StudyPlan, draw, n: int) -> list[dict]:
    """Run the race to its end, each run's metric from ``draw(position, index)``."""
    runs: list[dict] = []
    while batch := race_round(p, configs(n), runs):
        for position, index, warmup in batch:
            runs.append(
                {
                    "config_id": 10 + position,
                    "run_index": index,
                    "warmup": warmup,
                    "status": "ok",
                    "metric": draw(position, index),
                    "wall_seconds": 1.0,
                }
            )
    return runs


def test_looks_start_at_min_runs_grow_by_half_and_end_at_max_runs():
    assert look_points(6, 14) == [6, 9, 14]
    assert look_points(10, 100) == [10, 15, 23, 35, 53, 80, 100]
    assert look_points(3, 4) == [3, 4] and look_points(5, 5) == [5]


def test_a_clearly_slower_placement_leaves_at_the_first_look_and_the_race_ends_with_one():
    p = plan(3)
    rng = np.random.default_rng(1)
    runs = run_race(p, lambda pos, i: [1.5, 1.0, 2.0][pos] * rng.lognormal(0, 0.01), 3)
    state = race(p, configs(3), runs)
    assert state.ended == ONE_LEFT and state.alive == [1] and state.looks == [6]
    assert {d.position for d in state.drops} == {0, 2} and all(d.runs == 6 and d.leader == 1 for d in state.drops)
    # Holm: the smaller p-value against level / 2, the other against level / 1 (level = alpha / 3 looks)
    assert sorted(d.level for d in state.drops) == pytest.approx([0.05 / 3 / 2, 0.05 / 3])
    assert all(d.p < d.level for d in state.drops) and len(runs) == 18


def test_rounds_rotate_the_order_and_give_each_placement_its_next_run_index():
    p, c = plan(3), configs(3)
    runs: list[dict] = []
    orders = []
    for _ in range(3):
        batch = race_round(p, c, runs)
        orders.append([pos for pos, _, _ in batch])
        assert {index for _, index, _ in batch} == {len(orders) - 1}
        runs += [{"config_id": 10 + pos, "run_index": i, "warmup": False, "status": "ok", "metric": 1.0, "wall_seconds": 1.0} for pos, i, _ in batch]
    assert orders == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def test_equal_placements_stay_until_max_runs_or_are_found_equivalent():
    rng = np.random.default_rng(2)
    noisy = race(plan(3, tolerance=0.0), configs(3), run_race(plan(3, tolerance=0.0), lambda pos, i: rng.lognormal(0, 0.05), 3))
    assert noisy.ended == MAX_RUNS and noisy.alive == [0, 1, 2] and noisy.measured == 42
    quiet = plan(3, tolerance=0.05)
    state = race(quiet, configs(3), run_race(quiet, lambda pos, i: 1.0 + 0.001 * ((i * 7 + pos) % 5), 3))
    assert state.ended == EQUIVALENT and state.looks == [6] and state.alive == [0, 1, 2]


def test_the_budget_stops_before_a_round_that_would_pass_it():
    by_runs = plan(3, budget_runs=20, tolerance=0.0)
    runs = run_race(by_runs, lambda pos, i: 1.0 + 0.01 * ((i + pos) % 3), 3)
    assert len(runs) == 18 and race(by_runs, configs(3), runs).ended == BUDGET
    by_time = plan(3, budget_seconds=10.5, tolerance=0.0)  # 1 s runs: three rounds of 3 fit, a fourth would not
    runs = run_race(by_time, lambda pos, i: 1.0 + 0.01 * ((i + pos) % 3), 3)
    assert len(runs) == 9 and race(by_time, configs(3), runs).ended == BUDGET


def test_a_placement_whose_runs_fail_leaves_the_race():
    p = plan(3)
    runs = []
    while batch := race_round(p, configs(3), runs):
        for pos, i, w in batch:
            failed = pos == 2
            runs.append(
                {
                    "config_id": 10 + pos,
                    "run_index": i,
                    "warmup": w,
                    "status": "failed" if failed else "ok",
                    "metric": None if failed else 1.0 + 0.01 * (i % 4),
                    "wall_seconds": 1.0,
                }
            )
    state = race(p, configs(3), runs)
    assert [(d.position, d.runs, d.reason) for d in state.drops] == [(2, 3, "its first 3 runs failed")]
    assert 2 not in state.alive and sum(1 for r in runs if r["config_id"] == 12) == 3  # 3 runs spent on it, not min_runs


def test_a_race_where_every_placement_fails_ends_after_their_first_runs():
    p = plan(3)
    runs = []
    while batch := race_round(p, configs(3), runs):
        runs += [{"config_id": 10 + pos, "run_index": i, "warmup": w, "status": "failed", "metric": None, "wall_seconds": 1.0} for pos, i, w in batch]
    state = race(p, configs(3), runs)
    assert state.ended == ALL_FAILED and state.alive == [] and len(runs) == 9


def test_a_round_cut_short_is_caught_up_before_the_next():
    p, c = plan(3), configs(3)
    runs = [{"config_id": 10 + pos, "run_index": 0, "warmup": False, "status": "ok", "metric": 1.0, "wall_seconds": 1.0} for pos in (0, 1, 2)]
    runs.append({"config_id": 11, "run_index": 1, "warmup": False, "status": "ok", "metric": 1.0, "wall_seconds": 1.0})  # then interrupted
    assert sorted(race_round(p, c, runs)) == [(0, 1, False), (2, 1, False)]


def test_the_time_budget_counts_warm_ups_in_the_mean_run():
    """Three warm-ups of 1 s and three measured runs of 1 s: 6 s spent, 1 s a run, so a round of 3
    more fits in 9.5 s (dividing by the measured runs alone would say 2 s a run, 12 s) but not in 8.5 s."""
    runs = [
        {"config_id": 10 + pos, "run_index": 0, "warmup": w, "status": "ok", "metric": 1.0, "wall_seconds": 1.0}
        for w in (True, False)
        for pos in (0, 1, 2)
    ]
    assert race(plan(3, budget_seconds=9.5, warmup=1, tolerance=0.0), configs(3), runs).ended is None
    assert race(plan(3, budget_seconds=8.5, warmup=1, tolerance=0.0), configs(3), runs).ended == BUDGET


def test_a_metric_of_zero_is_never_shown_equivalent_nor_a_crash():
    p = plan(2, tolerance=0.5)
    runs = run_race(p, lambda pos, i: 0.0 if pos == 1 else 1.0 + 0.01 * (i % 3), 2)
    assert race(p, configs(2), runs).ended in (ONE_LEFT, MAX_RUNS)


def test_the_race_replays_the_same_from_its_stored_runs_whatever_their_order():
    p = plan(4)
    rng = np.random.default_rng(5)
    runs = run_race(p, lambda pos, i: [1.0, 1.1, 1.0, 1.3][pos] * rng.lognormal(0, 0.03), 4)
    first = race(p, configs(4), runs)
    again = race(p, configs(4), list(reversed(runs)))
    assert (first.alive, first.drops, first.looks, first.ended) == (again.alive, again.drops, again.looks, again.ended)


def test_identical_placements_are_rarely_dropped_wrongly():
    """The risk of dropping at least one placement wrongly over the whole race is at most alpha:
    with 4 identical placements, 40 races, at most a few drops (binomial: P(more than 6) < 0.5%)."""
    wrong = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        p = plan(4, tolerance=0.0, max_runs=9)
        wrong += bool(race(p, configs(4), run_race(p, lambda pos, i: rng.lognormal(0, 0.05), 4)).drops)
    assert wrong <= 6


def test_a_race_refuses_what_it_cannot_race():
    with pytest.raises(UsageError, match="at least two placements"):
        StudyPlan(name="r", programs=[Program("p", ["true"])], strategies=["none"], threads=[1], runs="race").validate(fits=False)
    with pytest.raises(UsageError, match="one program, one thread count"):
        StudyPlan(name="r", programs=[Program("p", ["true"])], strategies=["none", "compact"], threads=[1, 2], runs="race").validate(fits=False)
    with pytest.raises(UsageError, match="--tolerance must be a share"):
        StudyPlan(name="r", programs=[Program("p", ["true"])], strategies=["none", "compact"], threads=[1], runs="race", tolerance=1.5).validate(
            fits=False
        )
    with pytest.raises(UsageError, match="empty placement 'cpus:'"):
        StudyPlan(name="r", programs=[Program("p", ["true"])], strategies=["none", "cpus:"], threads=[1], runs="race").validate(fits=False)
