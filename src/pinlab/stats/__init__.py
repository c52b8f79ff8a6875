"""Statistics on run times: variability, speedups and the Speedup-Test protocol's verdicts.

Pure functions on plain sequences of run times (seconds) that return small frozen records with
``to_dict()`` (JSON-able, NaN as None). Every statistical test is scipy's on regular samples;
degenerate ones (one run, all runs equal, every run tied) follow the rules written out in
:func:`compare`, so verdicts do not depend on the scipy version.

- :func:`describe` — one sample: mean, median, variance, AV, RV, unstable, confidence intervals.
- :func:`compare` — a placement against the baseline: speedups, tests, verdicts (``better``:
  whether lower values, times, or higher values, rates, are faster).
- :func:`overall` — the tables of [mazouz2011hpcs]: one row per placement over a suite of programs.
- :func:`decided` — whether a comparison needs more runs (adaptive studies).
- :func:`median_test` — only the median test of :func:`compare` (a race's many looks).
- :func:`pinlab.stats.ratio.speedup_interval` — a bootstrap interval for a speedup of medians.
"""

from __future__ import annotations

from pinlab.stats._base import InvalidSample, preload
from pinlab.stats.speedup import (
    BETTER,
    FASTER,
    HIGHER,
    LARGE_SAMPLE,
    LOWER,
    MORE_RUNS,
    NO_DIFFERENCE,
    SLOWER,
    Comparison,
    OverallRow,
    check_better,
    compare,
    decided,
    median_test,
    overall,
)
from pinlab.stats.variability import AV_LIMIT_S, RV_LIMIT, Description, describe, median_ci_ranks

__all__ = [
    "AV_LIMIT_S",
    "BETTER",
    "FASTER",
    "HIGHER",
    "LARGE_SAMPLE",
    "LOWER",
    "MORE_RUNS",
    "NO_DIFFERENCE",
    "RV_LIMIT",
    "SLOWER",
    "Comparison",
    "Description",
    "InvalidSample",
    "OverallRow",
    "check_better",
    "compare",
    "decided",
    "describe",
    "median_ci_ranks",
    "median_test",
    "overall",
    "preload",
]
