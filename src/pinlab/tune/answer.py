"""A tune's answer, from its stored race: the placement to use, its gain over the operating
system's placement with an interval, the runner-up and how sure the choice is.

The claim "it beats the operating system" is tested once, on all the runs, at ``alpha`` divided
by the number of other placements (and memory policies) raced (any of them could have come first, so the risk of a
false winner stays at ``alpha`` whichever it is). The winner is the best median among those
left in the race; with the operating system's placement among them and not beaten, the answer
is that no placement beats it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from pinlab.stats import InvalidSample, median_test
from pinlab.stats.ratio import SpeedupInterval, speedup_interval
from pinlab.study.direction import MetricDirection
from pinlab.study.plan import StudyPlan, explicit_cpus
from pinlab.study.race import Race, race
from pinlab.tune.candidates import FIRST_TOUCH, OS_DEFAULT, OS_DEFAULT_LABEL


@dataclass(frozen=True)
class Entry:
    """One raced placement: as stored, its name, CPUs, successful runs, median and whether it is
    still in the race (else at how many runs each it left, and why)."""

    position: int  # the configuration's, in the study
    placement: str
    mem: str
    label: str
    cpus: list[int] | None
    runs: int
    median: float | None
    left_at: int | None = None
    why_left: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Answer:
    """What a tune found (:meth:`sentence` says it in words; :meth:`to_json` keeps it all)."""

    study: str
    db: str
    program: list[str]
    threads: int
    metric: str
    better: str
    alpha: float
    winner: Entry
    runner_up: Entry | None
    baseline: Entry
    speedup: SpeedupInterval | None  # the winner over the operating system's placement
    p_over_baseline: float | None
    level_over_baseline: float
    beats_baseline: bool
    p_over_runner_up: float | None
    ended: str | None
    measured_runs: int
    seconds: float
    entries: list[Entry] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    plan_file: str | None = None

    @property
    def baseline_failed(self) -> bool:
        """Whether the operating system's placement left the race because its runs failed."""
        return self.baseline.left_at is not None and self.baseline.why_left is not None and "failed" in self.baseline.why_left

    @property
    def leader(self) -> bool:
        """Whether the best placement left is another than the baseline (the operating system's, first touch)."""
        return self.winner.position != self.baseline.position

    @property
    def chosen(self) -> bool:
        """Whether the answer is another placement than the baseline: shown better, or the baseline could not run."""
        return self.leader and (self.beats_baseline or self.baseline_failed)

    @property
    def pinned(self) -> bool:
        """Whether the answer is a pinned placement (not the operating system's)."""
        return self.chosen and self.winner.placement != OS_DEFAULT

    def _use(self) -> str:
        """``use compact, memory interleave:0-1 (CPUs 0,2)``."""
        cpus = "no pinning" if self.winner.cpus is None else "CPUs " + ",".join(map(str, self.winner.cpus))
        return f"use {self.winner.label} ({cpus})"

    def sentence(self) -> str:
        if self.leader and self.baseline_failed:
            return f"{self._use()}: the operating system's placement could not be measured ({self.baseline.why_left})"
        if self.leader and self.p_over_baseline is None:
            return (
                f"not tested: too few successful runs to compare the best, {self.winner.label}, with the operating system's placement "
                "(3 each at least); give a larger --budget"
            )
        if not self.chosen:
            return "no placement beats leaving it to the operating system" + (
                f" (best other: {self.winner.label}, p = {_p(self.p_over_baseline)} against the {self.level_over_baseline:.3g} needed)"
                if self.leader
                else " (it has the best median)"
            )
        assert self.speedup is not None
        return (
            f"{self._use()}: "
            f"{self.speedup.speedup:.3f}x the operating system's placement, {self.speedup.confidence:.0%} interval "
            f"{self.speedup.low:.3f}-{self.speedup.high:.3f} (p = {_p(self.p_over_baseline)})"
        )

    def sureness(self) -> str:
        """How sure the choice is: against the operating system's placement when a pinned one
        leads it without being shown faster, else against the runner-up (at the answer's level)."""
        if self.leader and not self.chosen and self.p_over_baseline is not None:
            return (
                f"not sure: {self.winner.label} leads the operating system's placement (p = {_p(self.p_over_baseline)}) but not at the "
                f"{self.level_over_baseline:.3g} a winner needs; a new tune with more runs (--max-runs, --budget) would tell"
            )
        if self.runner_up is None:
            return "every other placement left the race"
        if self.ended and self.ended.startswith("the placements left are equivalent"):
            return f"{self.runner_up.label} is equivalent (within the tolerance): either will do"
        if self.p_over_runner_up is not None and self.p_over_runner_up < self.level_over_baseline:
            return f"ahead of the runner-up, {self.runner_up.label}, with p = {_p(self.p_over_runner_up)}"
        return f"not sure against the runner-up, {self.runner_up.label} (p = {_p(self.p_over_runner_up)}): a new tune with more runs (--max-runs, --budget) would tell"

    def to_json(self) -> dict[str, Any]:
        return {
            "pinlab_tune": 1,
            "study": self.study,
            "db": self.db,
            "program": self.program,
            "threads": self.threads,
            "metric": self.metric,
            "better": self.better,
            "alpha": self.alpha,
            "answer": self.sentence(),
            "sureness": self.sureness(),
            "chosen": self.chosen,
            "pinned": self.pinned,
            "winner": self.winner.to_json(),
            "runner_up": None if self.runner_up is None else self.runner_up.to_json(),
            "baseline": self.baseline.to_json(),
            "speedup": None if self.speedup is None else self.speedup.to_dict(),
            "p_over_baseline": self.p_over_baseline,
            "level_over_baseline": self.level_over_baseline,
            "p_over_runner_up": self.p_over_runner_up,
            "ended": self.ended,
            "measured_runs": self.measured_runs,
            "seconds": self.seconds,
            "placements": [e.to_json() for e in self.entries],
            "settings": self.settings,
            "plan_file": self.plan_file,
        }


def _p(p: float | None) -> str:
    return "n/a" if p is None or math.isnan(p) else f"{p:.2g}"


def answer(plan: StudyPlan, direction: MetricDirection, configs: list[dict[str, Any]], runs: list[dict[str, Any]], db: str) -> Answer:
    """The answer of the race stored as ``plan``'s study (its configurations and runs)."""
    state: Race = race(plan, configs, runs)
    values = state.values
    left = {d.position: d for d in state.drops}
    entries = {}
    for c in configs:
        p = c["position"]
        drop = left.get(p)
        label = (c.get("extra") or {}).get("label") or (OS_DEFAULT_LABEL if c["placement"] == OS_DEFAULT else c["placement"])
        entries[p] = Entry(
            p,
            c["placement"],
            c["mem"],
            label,
            explicit_cpus(c["placement"]),
            len(values[p]),
            statistics.median(values[p]) if values[p] else None,
            drop.runs if drop else None,
            drop.reason if drop else None,
        )
    sign = 1 if direction.better == "higher" else -1
    medians = {p: m for p in state.alive if (m := entries[p].median) is not None}
    ranked = sorted(medians, key=lambda p: (-sign * medians[p], p))  # the best first
    if not ranked:
        raise InvalidSample(f"no placement of {plan.name} has a successful run: nothing to choose")
    base = next(c["position"] for c in configs if c["placement"] == OS_DEFAULT and c["mem"] == FIRST_TOUCH)
    winner = ranked[0]
    runner_up = ranked[1] if len(ranked) > 1 else None
    level = plan.alpha / max(1, len(configs) - 1)  # any of the others could have come first
    speedup = p_base = p_runner = None
    try:  # a metric of 0 or below has no speedup and no test: the answer then says it is not tested
        if winner != base and len(values[base]) >= 3 and len(values[winner]) >= 3:
            p_base = median_test(values[base], values[winner], better=direction.better)[0]
            speedup = speedup_interval(values[base], values[winner], better=direction.better, confidence=1 - plan.alpha)
        if runner_up is not None and len(values[runner_up]) >= 3:
            p_runner = median_test(values[runner_up], values[winner], better=direction.better)[0]
    except InvalidSample:
        pass
    return Answer(
        study=plan.name,
        db=db,
        program=list(plan.programs[0].argv),
        threads=plan.threads[0],
        metric=plan.metric,
        better=direction.better,
        alpha=plan.alpha,
        winner=entries[winner],
        runner_up=None if runner_up is None else entries[runner_up],
        baseline=entries[base],
        speedup=speedup,
        p_over_baseline=p_base,
        level_over_baseline=level,
        beats_baseline=p_base is not None and p_base < level,
        p_over_runner_up=p_runner,
        ended=state.ended,
        measured_runs=state.measured,
        seconds=state.seconds,
        entries=[entries[c["position"]] for c in configs],
    )
