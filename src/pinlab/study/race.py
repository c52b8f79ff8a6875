"""A racing study: placements run in rounds and leave the race once the runs show them worse.

Racing ([birattari2002race]) spends runs where the choice is still open. Every placement still in
the race gets one run per round, in an order that rotates from round to round (so a drifting
machine load spreads over all of them). At a few *looks*, after :attr:`StudyPlan.min_runs` runs
each and then at counts growing by half, the leader (the best median) is compared with every
other placement by the one-sided Wilcoxon-Mann-Whitney test of :func:`pinlab.stats.compare`
(:func:`pinlab.stats.median_test`),
and those shown worse leave (a placement whose first 3 runs all failed leaves at once), Holm's procedure ([holm1979]) holding the risk of dropping at
least one placement wrongly at one look to ``alpha / looks`` (Bonferroni over the looks, so over
the whole race to ``alpha``). The race ends when one placement is left, when the ones left are
all equivalent to the leader (the bootstrap interval of each speedup within ``tolerance`` of 1,
:mod:`pinlab.stats.ratio`), when every one has ``max_runs`` runs, or when the budget would be
passed by another round.

Nothing of the race is stored but the runs: :func:`race` replays it from them, so a resumed race
continues where it stopped and a report shows how it went.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pinlab.stats import InvalidSample, median_test
from pinlab.stats.ratio import speedup_interval
from pinlab.study.direction import study_direction
from pinlab.study.plan import StudyPlan

#: Looks come at min_runs runs each, then at counts growing by this factor, then at max_runs.
LOOK_GROWTH = 1.5
#: A placement whose first this many runs all failed leaves at once: a placement that cannot run
#: (a timeout, too many threads on its CPUs) costs these runs, not min_runs of them.
FIRST_FAILURES = 3

#: Why a race ended (:attr:`Race.ended`); None while it goes on.
ONE_LEFT = "one placement left"
ALL_FAILED = "every placement's first runs failed"
EQUIVALENT = "the placements left are equivalent"
MAX_RUNS = "every placement left has its most runs"
BUDGET = "the budget is spent"


@dataclass(frozen=True)
class Drop:
    """A placement out of the race: at which look (runs each), against which leader, the p-value
    of "it is slower than the leader" and the level it was held to; or it had too few good runs."""

    position: int
    runs: int
    leader: int
    p: float | None
    level: float | None
    reason: str = "slower than the leader"


@dataclass
class Race:
    """The race replayed from the stored runs: who is left, who left and when, who leads."""

    alive: list[int]
    drops: list[Drop] = field(default_factory=list)
    looks: list[int] = field(default_factory=list)  # the runs each at which looks were taken
    leader: int | None = None
    ended: str | None = None
    measured: int = 0
    seconds: float = 0.0
    stored: int = 0  # every run stored, warm-ups included (what ``seconds`` is the time of)
    values: dict[int, list[float]] = field(default_factory=dict)  # position -> its successful measured runs' metrics


def look_points(min_runs: int, max_runs: int) -> list[int]:
    """The runs each at which the race looks: min_runs, then x1.5 each time, and max_runs."""
    points = [min_runs]
    while points[-1] < max_runs:
        points.append(min(max_runs, max(points[-1] + 1, math.ceil(points[-1] * LOOK_GROWTH))))
    return points


def _values(runs: list[dict[str, Any]], upto: int | None = None) -> list[float]:
    """The metrics of the successful runs among ``runs`` (of index below ``upto``, if given)."""
    return [r["metric"] for r in runs if (upto is None or r["run_index"] < upto) and r["status"] == "ok" and r["metric"] is not None]


def race(plan: StudyPlan, configs: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]) -> Race:
    """Replay the race from the stored runs (warm-ups count only towards the time spent)."""
    direction = study_direction(plan.parameters())
    by_position: dict[int, list[dict[str, Any]]] = {c["position"]: [] for c in configs}
    position_of = {c["id"]: c["position"] for c in configs}
    state = Race(alive=sorted(by_position))
    for run in runs:
        state.seconds += run.get("wall_seconds") or 0.0
        state.stored += 1
        if not run["warmup"]:
            by_position[position_of[run["config_id"]]].append(run)
            state.measured += 1
    for p in list(state.alive):
        first = [r for r in by_position[p] if r["run_index"] < FIRST_FAILURES]
        if len(first) == FIRST_FAILURES and not any(r["status"] == "ok" and r["metric"] is not None for r in first):
            state.drops.append(Drop(p, FIRST_FAILURES, p, None, None, f"its first {FIRST_FAILURES} runs failed"))
            state.alive.remove(p)
    state.values = {p: _values(by_position[p]) for p in by_position}
    if not state.alive:
        state.ended = ALL_FAILED
        return state
    points = look_points(plan.min_runs, plan.max_runs)
    level = plan.alpha / len(points)
    sign = 1 if direction.better == "higher" else -1
    for n in points:
        if any(len(by_position[p]) < n for p in state.alive):
            break  # this look's runs are not all in yet
        state.looks.append(n)
        values = {p: _values(by_position[p], n) for p in state.alive}
        usable = [p for p in state.alive if len(values[p]) >= 3]
        if not usable:
            continue
        leader = max(usable, key=lambda p: (sign * statistics.median(values[p]), -p))
        state.leader = leader
        tested: list[tuple[float, int]] = []
        for p in state.alive:
            if p == leader:
                continue
            if p not in usable:
                state.drops.append(Drop(p, n, leader, None, None, f"fewer than 3 successful runs of {n}"))
                continue
            try:
                _, p_slower = median_test(values[leader], values[p], better=direction.better)
            except InvalidSample:
                continue
            tested.append((p_slower if not math.isnan(p_slower) else 1.0, p))
        for k, (p_value, p) in enumerate(sorted(tested)):  # Holm: the smallest p-value first, each against level / (m - k)
            holm = level / (len(tested) - k)
            if p_value >= holm:
                break
            state.drops.append(Drop(p, n, leader, p_value, holm))
        gone = {d.position for d in state.drops}
        state.alive = [p for p in state.alive if p not in gone]
        if len(state.alive) == 1:
            state.ended = ONE_LEFT
            break
        if _equivalent(plan, direction.better, leader, {p: values[p] for p in state.alive}, level):
            state.ended = EQUIVALENT
            break
    if state.ended is None and all(len(by_position[p]) >= plan.max_runs for p in state.alive):
        state.ended = MAX_RUNS
    if state.ended is None and _over_budget(plan, state, len(state.alive)):
        state.ended = BUDGET
    return state


def _equivalent(plan: StudyPlan, better: str, leader: int, values: dict[int, list[float]], level: float) -> bool:
    """Every placement left is within ``tolerance`` of the leader: each speedup's interval at
    confidence 1 - 2 x level (the two one-sided tests' equivalence) lies in 1 +- tolerance."""
    if plan.tolerance <= 0:
        return False
    for p, sample in values.items():
        if p == leader:
            continue
        if len(sample) < 3:
            return False
        try:
            interval = speedup_interval(sample, values[leader], better=better, confidence=1 - 2 * level, seed=p)
        except InvalidSample:  # a metric of 0 or below has no speedup: nothing is shown equivalent
            return False
        if not interval.within(plan.tolerance):
            return False
    return True


def _over_budget(plan: StudyPlan, state: Race, next_round: int) -> bool:
    """Whether another round of ``next_round`` runs would pass the budget (runs, or seconds at
    the mean run's length so far)."""
    if plan.budget_runs is not None and state.measured + next_round > plan.budget_runs:
        return True
    if plan.budget_seconds is not None:
        mean = state.seconds / state.stored if state.stored else 0.0
        return state.seconds + mean * next_round > plan.budget_seconds
    return False


def race_round(plan: StudyPlan, configs: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]) -> list[tuple[int, int, bool]]:
    """The next round: one more run of every placement left with fewer than max_runs, the order
    rotated by the round's number; empty when the race has ended."""
    state = race(plan, configs, runs)
    if state.ended is not None:
        return []
    counts = {c["position"]: 0 for c in configs}
    position_of = {c["id"]: c["position"] for c in configs}
    for run in runs:
        if not run["warmup"]:
            counts[position_of[run["config_id"]]] += 1
    behind = [p for p in state.alive if counts[p] < plan.max_runs]
    if not behind:
        return []
    fewest = min(counts[p] for p in behind)
    behind = [p for p in behind if counts[p] == fewest]  # a round cut short (resumed): the rest catch up first
    shift = min(counts[p] for p in behind) % len(behind)
    order = behind[shift:] + behind[:shift]
    return [(p, counts[p], False) for p in order]
