"""A confidence interval for the speedup of medians: how far one placement's gain can be trusted.

The Speedup-Test protocol says whether a candidate is faster; a user choosing a placement also
asks by how much, and how sure that figure is. The speedup of medians (baseline / candidate for
times, candidate / baseline for rates, as :func:`pinlab.stats.compare` defines it) has no
closed-form interval for run times, which are rarely normal, so it is bootstrapped: both samples
are resampled with replacement, each resample's speedup of medians computed, and the interval is
the percentiles of those speedups (the percentile bootstrap, [efron1993bootstrap] chapter 13).
The generator is seeded: the same runs give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pinlab.stats._base import InvalidSample, Record, as_sample, check_level
from pinlab.stats.speedup import check_better

#: Resamples drawn: enough for the 2.5% and 97.5% percentiles to move by well under 1% between seeds.
RESAMPLES = 2000


@dataclass(frozen=True)
class SpeedupInterval(Record):
    """The speedup of medians (> 1: the candidate is faster) and its ``confidence`` interval."""

    speedup: float
    low: float
    high: float
    confidence: float

    def within(self, tolerance: float) -> bool:
        """Whether the whole interval lies within ``tolerance`` of no change (1 +- tolerance):
        the two placements are equivalent at that margin."""
        return 1 - tolerance <= self.low and self.high <= 1 + tolerance


def speedup_interval(
    baseline: Sequence[float], candidate: Sequence[float], better: str = "lower", confidence: float = 0.95, seed: int = 0, resamples: int = RESAMPLES
) -> SpeedupInterval:
    """The speedup of the candidate's median over the baseline's, with its bootstrap interval."""
    import numpy as np

    check_better(better)
    check_level(confidence, "confidence")
    b, c = as_sample(baseline, "baseline"), as_sample(candidate, "candidate")
    if resamples < 100:
        raise InvalidSample(f"resamples must be at least 100 (got {resamples})")
    rng = np.random.default_rng(seed)
    mb = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    mc = np.median(c[rng.integers(0, c.size, size=(resamples, c.size))], axis=1)
    ratios = mb / mc if better == "lower" else mc / mb
    point = float(np.median(b) / np.median(c) if better == "lower" else np.median(c) / np.median(b))
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return SpeedupInterval(point, float(low), float(high), confidence)
