"""How sure autopin's choice is: the candidates' sub-window rates compared with pinlab.stats.

Each probing window of ``t`` seconds is cut into sub-windows; the mean rate per worker thread of
each sub-window is one sample value. The best candidate (highest mean) is compared with every
other one by :func:`pinlab.stats.compare` (one-sided, higher is better, at ``alpha``): the verdict,
p-value (the Wilcoxon-Mann-Whitney test the verdict rests on) and effect are those against the
runner-up. A candidate is *settled* when the best beats it significantly, or when the two are
equivalent within ``tolerance`` (two one-sided tests: the 1 - 2 alpha Welch interval of the
difference of the means lies within +-tolerance of the best's mean). Adaptive probing
(``--rounds auto``) measures again only the candidates that are not settled.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: Sample values must be positive for pinlab.stats; a window where the program did no work at all
#: (a rate of exactly 0) counts as this tiny rate instead.
_FLOOR = 1e-90


@dataclass
class Judgement:
    """The verdict on one set of measurements (indexes are the candidates')."""

    best: int
    runner_up: int | None
    p_value: float | None
    effect: float | None  # best / runner-up - 1
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


def _positive(values: Sequence[float]) -> list[float]:
    return [max(float(v), _FLOOR) for v in values]


def within(best: Sequence[float], other: Sequence[float], alpha: float, tolerance: float) -> bool:
    """Two one-sided tests: is |mean(best) - mean(other)| surely below tolerance x mean(best)?"""
    if len(best) < 2 or len(other) < 2 or tolerance <= 0:
        return False
    from pinlab.stats.variability import t_quantile

    mb, mo = _mean(best), _mean(other)
    vb = sum((x - mb) ** 2 for x in best) / (len(best) - 1)
    vo = sum((x - mo) ** 2 for x in other) / (len(other) - 1)
    se2 = vb / len(best) + vo / len(other)
    margin = tolerance * abs(mb)
    if se2 == 0:
        return abs(mb - mo) < margin
    # Welch-Satterthwaite degrees of freedom, the interval at confidence 1 - 2 alpha.
    df = se2 ** 2 / ((vb / len(best)) ** 2 / (len(best) - 1) + (vo / len(other)) ** 2 / (len(other) - 1))
    q = t_quantile(1 - 2 * alpha, max(1, int(math.floor(df))))
    low, high = mb - mo - q * math.sqrt(se2), mb - mo + q * math.sqrt(se2)
    return -margin < low and high < margin


def judge(samples: Mapping[int, Sequence[float]], names: Mapping[int, str], alpha: float = 0.05, tolerance: float = 0.01) -> Judgement:
    """The best candidate and how sure that is, from each candidate's sub-window rates."""
    from pinlab.stats import FASTER, compare

    measured = {c: list(v) for c, v in samples.items() if v}
    if not measured:
        raise ValueError("no candidate was measured")
    ranked = sorted(measured, key=lambda c: (-_mean(measured[c]), c))
    best = ranked[0]
    if len(ranked) == 1:
        return Judgement(best, None, None, None, False, verdict=f"{names[best]} is the only candidate measured: nothing to compare it with")
    result = Judgement(best, ranked[1], None, None, False)
    for other in ranked[1:]:
        comparison = compare(_positive(measured[other]), _positive(measured[best]), alpha=alpha, better="higher")
        if comparison.verdict == FASTER:
            result.beaten.append(other)
        else:
            result.equivalent.append(other)
        if within(measured[best], measured[other], alpha, tolerance):
            result.within_tolerance.append(other)
        if other == result.runner_up:
            p = comparison.median_p_faster
            result.p_value = None if math.isnan(p) else float(p)
            result.effect = _mean(measured[best]) / _mean(measured[other]) - 1 if _mean(measured[other]) > 0 else math.inf
            result.decided = comparison.verdict == FASTER
    result.verdict = _sentence(result, names, tolerance)
    return result


def _sentence(j: Judgement, names: Mapping[int, str], tolerance: float) -> str:
    best, other = names[j.best], names[j.runner_up]
    p = "p unknown" if j.p_value is None else f"p = {j.p_value:.2g}"
    effect = "an unbounded margin" if j.effect is None or math.isinf(j.effect) else f"{j.effect:.1%}"
    if j.decided:
        rest = " and every other candidate" if not j.equivalent else ""
        return f"{best} beats {other}{rest} by {effect}, {p}"
    if j.runner_up in j.within_tolerance:
        return f"{best} and {other} are equivalent within {tolerance:.0%} ({best} leads by {effect}, {p}): keeping {best}, the higher mean"
    return f"{best} leads {other} by {effect} but not significantly ({p}): the two are statistically indistinguishable"
