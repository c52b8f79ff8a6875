"""How sure autopin's choice is: the candidates' sub-window rates compared with pinlab.stats.

Each probing window of ``t`` seconds is cut into sub-windows; the mean rate per worker thread of
each sub-window is one sample value. A candidate's rate is the mean of its sub-window rates
weighted by their lengths, the work per thread over the time it was measured: the rate the probe
lines print, so that the best candidate is never one whose printed rate is lower (a sub-window
cut short by a late wake-up, or one where a thread pool had not grown yet, would otherwise count
as much as a whole one). The best candidate (highest rate) is compared with every other one by
:func:`pinlab.stats.compare` (one-sided, higher is better): the verdict, p-value (the
Wilcoxon-Mann-Whitney test the verdict rests on) and effect are those against the runner-up.

The p-values are adjusted so that ``alpha`` bounds the chance of calling a winner among
candidates that are all alike: x 2 because the direction was chosen after seeing the data (the
best is the one with the highest rate), and for the comparisons with the other k - 1 candidates
by Holm's step-down procedure, as tune's race does ([holm1979]): the smallest p-value x (k - 1),
the next x (k - 2), ... until one is not significant, so a candidate clearly beaten does not
weaken the test of the runner-up (with Bonferroni's x (k - 1) for all, 3 candidates of 5
sub-windows each could not decide on a runner-up two of whose 25 pairs of sub-windows were
above the best's, p = 4/252 x 4, even with the third far behind); with ``--rounds auto``, which tests after every round (up to ``looks`` of them), the
level is also the share of alpha spent at this round: half at the first, the rest evenly over
the others. The shares sum to 1, so over all the rounds the chance of a false verdict stays
within alpha (a union bound), while a clear difference can stop the probing after one round
(counting every possible round at each, x ``looks``, left 3 candidates unable to stop after
round 1 even when every sub-window of the best was above every one of the others:
1/252 x 2 x 2 x 5 > 0.05). A candidate is *settled* when the best beats it significantly, or
when the two are equivalent within ``tolerance`` (two one-sided tests: the 1 - 2 alpha Welch
interval of the difference of the means lies within +-tolerance of the best's mean). Adaptive
probing measures again only the candidates that are not settled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pinlab.stats import FASTER, compare
from pinlab.stats.variability import t_quantile

#: Sample values must be positive for pinlab.stats; a window where the program did no work at all
#: (a rate of exactly 0) counts as this tiny rate instead.
_FLOOR = 1e-90


@dataclass
class Judgement:
    """The verdict on one set of measurements (indexes are the candidates')."""

    best: int
    runner_up: int | None
    p_value: float | None
    effect: float | None  # best / runner-up - 1 (0 when neither did any work)
    decided: bool  # the best beats the runner-up significantly
    beaten: list[int] = field(default_factory=list)  # significantly worse than the best
    within_tolerance: list[int] = field(default_factory=list)  # equivalent to the best within the tolerance
    equivalent: list[int] = field(default_factory=list)  # not distinguishable from the best (not beaten)
    verdict: str = ""

    @property
    def settled(self) -> set[int]:
        """Candidates that need no more measuring: beaten, or equivalent within the tolerance."""
        return set(self.beaten) | set(self.within_tolerance)

    def unsettled(self, candidates: Sequence[int]) -> list[int]:
        """The candidates another round should measure (the best included when any other is)."""
        others = [c for c in candidates if c != self.best and c not in self.settled]
        return sorted([self.best, *others]) if others else []


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def rate(values: Sequence[float], seconds: Sequence[float] | None = None) -> float:
    """The sub-window rates' mean weighted by the sub-windows' lengths (plain when they are not
    known, from a log written before they were): the work per thread over the time measured."""
    if not values:
        return math.nan
    if seconds is None or len(seconds) != len(values) or sum(seconds) <= 0:
        return _mean(values)
    return sum(v * s for v, s in zip(values, seconds)) / sum(seconds)


def _positive(values: Sequence[float]) -> list[float]:
    return [max(float(v), _FLOOR) for v in values]


def within(best: Sequence[float], other: Sequence[float], alpha: float, tolerance: float) -> bool:
    """Two one-sided tests: is |mean(best) - mean(other)| surely below tolerance x mean(best)?"""
    if len(best) < 2 or len(other) < 2 or tolerance <= 0:
        return False

    mb, mo = _mean(best), _mean(other)
    vb = sum((x - mb) ** 2 for x in best) / (len(best) - 1)
    vo = sum((x - mo) ** 2 for x in other) / (len(other) - 1)
    se2 = vb / len(best) + vo / len(other)
    margin = tolerance * abs(mb)
    if se2 == 0:
        return abs(mb - mo) <= margin
    # Welch-Satterthwaite degrees of freedom, the interval at confidence 1 - 2 alpha.
    df = se2**2 / ((vb / len(best)) ** 2 / (len(best) - 1) + (vo / len(other)) ** 2 / (len(other) - 1))
    q = t_quantile(1 - 2 * alpha, max(1, int(math.floor(df))))
    low, high = mb - mo - q * math.sqrt(se2), mb - mo + q * math.sqrt(se2)
    return -margin < low and high < margin


def spent(look: int, looks: int) -> float:
    """The share of alpha spent at round ``look`` of at most ``looks``: all of it with one, else
    half at the first and the other half evenly over the rest."""
    if looks <= 1:
        return 1.0
    return 0.5 if look <= 1 else 0.5 / (looks - 1)


def correction(candidates: int, look: int = 1, looks: int = 1) -> float:
    """The factor of the smallest p-value at round ``look`` of at most ``looks`` (Holm's first
    step; each later one counts one comparison fewer): 2 (direction chosen after the data) x
    (k - 1), over the share of alpha spent at that round."""
    return 2 * max(1, candidates - 1) / spent(look, looks)


def smallest_p(n: int) -> float:
    """The smallest one-sided Wilcoxon-Mann-Whitney p-value of n values against n (no ties): 1 / C(2n, n)."""
    return 1 / math.comb(2 * n, n)


def judge(
    samples: Mapping[int, Sequence[float]],
    names: Mapping[int, str],
    alpha: float = 0.05,
    tolerance: float = 0.01,
    looks: int = 1,
    no_work_why: str | None = None,
    look: int = 1,
    seconds: Mapping[int, Sequence[float]] | None = None,
    distrust: str | None = None,
    beats_interval: float | None = None,
) -> Judgement:
    """The best candidate and how sure that is, from each candidate's sub-window rates.

    ``no_work_why``: what the metric knows of why it saw no work (a rate of 0), for the verdict;
    ``look``: the round this judgement follows, of at most ``looks`` (see :func:`correction`);
    ``seconds``: each candidate's sub-window lengths, in the order of its rates (see :func:`rate`);
    ``distrust``: why the metric cannot rank these candidates (threads waiting by sched_yield under
    task-clock): nothing is then called decided, whatever the test says, and the verdict says why;
    ``beats_interval``: with rates in heartbeat beats, the window (-T) they were measured over: a
    verdict that separates nothing then says when the beats were too coarse (:func:`coarse_beats`).
    """
    measured = {c: list(v) for c, v in samples.items() if v}
    if not measured:
        raise ValueError("no candidate was measured")
    rated = {c: rate(v, (seconds or {}).get(c)) for c, v in measured.items()}
    ranked = sorted(measured, key=lambda c: (-rated[c], c))
    best = ranked[0]
    if len(ranked) == 1:
        verdict = f"{names[best]} is the only candidate measured: nothing to compare it with"
        if no_work_why and rated[best] == 0:
            verdict += f"; no work was measured: {no_work_why}"
        return Judgement(best, None, None, None, False, verdict=verdict)

    result = Judgement(best, ranked[1], None, None, False)
    share, tests = spent(look, looks), max(1, len(samples) - 1)

    def against(other: int, steps: int):
        level = alpha * share / (2 * steps)  # see correction(): steps comparisons left
        return compare(_positive(measured[other]), _positive(measured[best]), alpha=level, better="higher")

    # Holm's step-down ([holm1979]), as in tune's race: the smallest p-value against alpha over all
    # the comparisons, the next against one fewer, ... until one is not significant.
    first = {other: against(other, tests) for other in ranked[1:]}
    raw = {o: 1.0 if math.isnan(c.median_p_faster) else float(c.median_p_faster) for o, c in first.items()}
    adjusted: dict[int, float | None] = {}
    running, stopped = 0.0, False
    for k, other in enumerate(sorted(ranked[1:], key=lambda o: (raw[o], o))):
        steps = max(1, tests - k)
        running = max(running, min(1.0, raw[other] * 2 * steps / share))
        adjusted[other] = None if math.isnan(first[other].median_p_faster) else running
        if not stopped and (first[other] if steps == tests else against(other, steps)).verdict == FASTER:
            result.beaten.append(other)
        else:
            stopped = True
    result.equivalent = [o for o in ranked[1:] if o not in result.beaten]
    result.within_tolerance = [o for o in ranked[1:] if within(measured[best], measured[o], alpha, tolerance)]
    other = ranked[1]
    result.p_value = adjusted[other]
    best_mean, other_mean = rated[best], rated[other]
    result.effect = best_mean / other_mean - 1 if other_mean > 0 else (0.0 if best_mean == 0 else math.inf)
    result.decided = other in result.beaten and distrust is None
    coarse = coarse_beats(measured, seconds or {}, beats_interval) if beats_interval is not None else None
    result.verdict = _sentence(result, names, tolerance, no_work=rated[best] == 0, no_work_why=no_work_why, distrust=distrust, coarse=coarse)
    return result


#: Beats per thread in a sub-window below which one beat more or less moves its rate by more than
#: 5%: a verdict that separates nothing then says how to measure finer.
FINE_BEATS = 20


def coarse_beats(samples: Mapping[int, Sequence[float]], seconds: Mapping[int, Sequence[float]], interval: float) -> str | None:
    """What to do when the sub-windows held too few beats: a program that beats once per long
    iteration gives a handful of beats per sub-window, and rates quantised by a whole beat hide
    differences smaller than one beat. None when a typical sub-window holds ``FINE_BEATS`` or more."""
    beats = sorted(r * t for c in samples for r, t in zip(samples[c], seconds.get(c) or []) if math.isfinite(r) and r > 0)
    lengths = sorted(t for c in samples for t in seconds.get(c) or [])
    if not beats or not lengths:
        return None
    typical, length = beats[len(beats) // 2], lengths[len(lengths) // 2]
    if typical >= FINE_BEATS:
        return None
    return (
        f"the heartbeat gives about {typical:.2g} beats per thread in a sub-window of {length:.2g} s (one beat is "
        f"{100 / typical:.0f}% of its rate): to tell closer candidates apart, give a longer -T (about {interval * FINE_BEATS / typical:.2g} s "
        f"for {FINE_BEATS} beats a sub-window) or more rounds (--rounds auto)"
    )


def _sentence(
    j: Judgement,
    names: Mapping[int, str],
    tolerance: float,
    no_work: bool = False,
    no_work_why: str | None = None,
    distrust: str | None = None,
    coarse: str | None = None,
) -> str:
    best, other = names[j.best], names[j.runner_up]
    if no_work:
        why = no_work_why or "is the work done by threads autopin does not see, such as a child process's?"
        return f"no work was measured on any candidate (a rate of 0: {why}): nothing tells {best} from {other}; keeping {best}"
    p = "p unknown" if j.p_value is None else f"p = {j.p_value:.2g}"
    effect = "an unbounded margin" if j.effect is None or math.isinf(j.effect) else f"{j.effect:.1%}"
    if distrust is not None:
        return f"{best} leads {other} by {effect} ({p}), but {distrust}: keeping {best}, no verdict on speed"
    if j.decided:
        rest = " and every other candidate" if not j.equivalent and len(j.beaten) > 1 else ""
        return f"{best} beats {other}{rest} by {effect}, {p}"
    if j.runner_up in j.within_tolerance:
        return f"{best} and {other} are equivalent within {tolerance:.0%} ({best} leads by {effect}, {p}): keeping {best}, the higher mean"
    undecided = f"{best} leads {other} by {effect} but not significantly ({p}): the two are statistically indistinguishable"
    return f"{undecided}; {coarse}" if coarse else undecided
