"""The order of a study's runs: warm-ups, then interleaved, blocked or shuffled runs, or the
rounds of an adaptive study; each random placement's seed; how often a run samples its threads.

Every choice here is a function of the plan, the study's seed and the runs stored so far, so a
study resumed (or re-run from its parameters) takes the same runs in the same order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator
from typing import Any

from pinlab.stats import InvalidSample, compare, decided
from pinlab.study.direction import study_direction
from pinlab.study.plan import DEFAULT_SAMPLE_MS, SAMPLE_MS_BOUNDS, SAMPLES_PER_RUN, StudyPlan


def run_seed(study_seed: int, position: int, index: int) -> int:
    """The seed of one run's random placement: a function of the study seed and the run's place only."""
    digest = hashlib.sha256(f"{study_seed}:{position}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def schedule(plan: StudyPlan, n_configs: int) -> Iterator[tuple[int, int, bool]]:
    """(config position, run index, warm-up?) in the order the runs happen, generated lazily.

    Warm-up runs come first (one round over the configurations), then the measured runs:
    interleaved (one run of each configuration in turn, so drift spreads evenly), blocked (all
    runs of a configuration together) or shuffled (a random order from the study's seed). Only
    the shuffled order holds anything in memory: a permutation of run numbers (4-8 bytes a run,
    within the bound :data:`MAX_STUDY_RUNS`).
    """
    for r in range(plan.warmup):
        for c in range(n_configs):
            yield c, r, True
    if plan.rounds_chosen:
        return  # the measured runs are chosen round by round (see next_round, and race_round for a race)
    if plan.order == "blocked":
        for c in range(n_configs):
            for r in range(plan.runs):
                yield c, r, False
        return
    numbers: Iterable[int] = range(plan.runs * n_configs)
    if plan.order == "shuffled":
        # The same permutation as shuffling the list of (config, run) pairs itself: shuffle
        # moves elements by position only, so studies resumed across versions keep their order.
        numbers = list(numbers)
        random.Random(plan.seed).shuffle(numbers)
    for number in numbers:
        yield number % n_configs, number // n_configs, False


def scheduled_runs(plan: StudyPlan, n_configs: int) -> int:
    """How many runs :func:`schedule` yields (for an adaptive study: the most it can take)."""
    return n_configs * (plan.warmup + (plan.max_runs if plan.rounds_chosen else plan.runs))


def _values(runs: list[dict[str, Any]]) -> list[float]:
    """The compared values of successful runs, in the metric's own unit (compare() is told its direction)."""
    return [r["metric"] for r in runs if r["status"] == "ok" and r["metric"] is not None]


def undecided(plan: StudyPlan, configs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[int, str]:
    """Configurations (by position) an adaptive study must run again, with the reason.

    Every configuration gets ``min_runs``; after that, a configuration and its baseline get more
    runs while their comparison is not decided (:func:`pinlab.stats.decided`), until either has
    ``max_runs`` stored runs (failed ones count, so a failing program cannot loop forever).
    """
    by_config: dict[int, list[dict[str, Any]]] = {c["id"]: [] for c in configs}
    for run in runs:
        if not run["warmup"]:
            by_config[run["config_id"]].append(run)
    stored = {c["position"]: len(by_config[c["id"]]) for c in configs}
    values = {c["position"]: _values(by_config[c["id"]]) for c in configs}
    direction = study_direction(plan.parameters())  # a resumed study's stored direction, or what pinlab knows or assumed
    need = {c["position"]: f"{stored[c['position']]}/{plan.min_runs} first runs" for c in configs if stored[c["position"]] < plan.min_runs}
    if need:
        return need

    def group(config):
        return config["program"], config["threads"], config["mem"], config["corun"]

    baselines = {group(c): c["position"] for c in configs if c["placement"] == plan.baseline}
    for config in configs:
        base = baselines.get(group(config))
        position = config["position"]
        if config["placement"] == plan.baseline or base is None:
            continue
        if stored[position] >= plan.max_runs or stored[base] >= plan.max_runs:
            continue
        try:
            settled = decided(compare(values[base], values[position], alpha=plan.alpha, better=direction.better, seconds=direction.seconds))
        except InvalidSample:
            settled = False  # too few successful runs to compare yet
        if not settled:
            need[position] = need[base] = "undecided"
    return need


def next_round(plan: StudyPlan, configs: list[dict[str, Any]], runs: list[dict[str, Any]], round_number: int) -> list[tuple[int, int, bool]]:
    """The next round of an adaptive study: one more run of every configuration still needing one."""
    positions = sorted(undecided(plan, configs, runs))
    if plan.order == "shuffled":
        random.Random(f"{plan.seed}:{round_number}").shuffle(positions)
    counts = {c["id"]: 0 for c in configs}
    for run in runs:
        if not run["warmup"]:
            counts[run["config_id"]] += 1
    return [(p, counts[configs[p]["id"]], False) for p in positions]


def sample_period(plan: StudyPlan, config: dict[str, Any], runs: list[dict[str, Any]]) -> float:
    """How often (ms) a run of ``config`` samples where its threads run.

    A number given with ``--sample-ms`` is used as it is. ``auto`` aims at about
    :data:`SAMPLES_PER_RUN` samples per run whatever its length: the period is the shortest
    wall time among the program's stored warm-up runs (all its configurations) divided by that,
    within :data:`SAMPLE_MS_BOUNDS`. Every measured run of a program thus samples at the same
    period (sampling costs pinlab a little CPU time, the same in every configuration compared).
    Warm-ups themselves, and studies without warm-ups, use :data:`DEFAULT_SAMPLE_MS`.
    """
    if plan.sample_ms != "auto":
        return float(plan.sample_ms)
    walls = [
        r["wall_seconds"]
        for r in runs
        if r["warmup"]
        and r["wall_seconds"]
        and r.get("program", config["program"]) == config["program"]
        and r.get("argv", config["argv"]) == config["argv"]
    ]
    if not walls:
        return DEFAULT_SAMPLE_MS
    low, high = SAMPLE_MS_BOUNDS
    return round(min(high, max(low, min(walls) * 1000 / SAMPLES_PER_RUN)), 1)
