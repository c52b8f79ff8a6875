"""What ``pinlab tune`` is asked, checked before anything runs: the CLI and ``pinlab.tune`` share it."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pinlab.errors import UsageError
from pinlab.study.limits import MAX_RUNS_PER_CONFIG

#: Runs of every placement before the first look: below 6 runs each, the one-sided median test
#: cannot reach the risk a look is held to once several placements are compared.
MIN_RUNS = 6
#: Most runs of a placement: 40% of the 35 runs each of an exhaustive study ([mazouz2011hpcs]).
MAX_RUNS = 14

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|sec|m|min|h)\s*$", re.IGNORECASE)
_RUNS = re.compile(r"^\s*([0-9]+)\s*(runs?)?\s*$", re.IGNORECASE)


def parse_budget(text: str | None) -> tuple[int | None, float | None]:
    """``--budget``: a duration (``90s``, ``10m``, ``1.5h``) or a number of runs (``60``,
    ``60runs``); (runs, seconds), one of them None (both for no budget)."""
    if text is None:
        return None, None
    if m := _RUNS.match(str(text)):
        runs = int(m.group(1))
        if runs < 1:
            raise UsageError(f"--budget {text}: give at least one run")
        return runs, None
    if m := _DURATION.match(str(text)):
        seconds = float(m.group(1)) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m.group(2).lower()]
        if not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(f"--budget {text}: give a positive duration")
        return None, seconds
    raise UsageError(f"--budget {text!r} is neither a duration (90s, 10m, 1h) nor a number of runs (60)")


@dataclass
class TuneRequest:
    """One tune: a program (or a built-in workload), its thread count, the candidates' options,
    the race's risks and budget, and where the runs are stored."""

    program: Sequence[str] = ()
    workload: str | None = None
    threads: int | None = None
    budget: str | None = None
    corun: str = "none"
    metric: str = "time"
    metric_better: str | None = None
    alpha: float = 0.05
    tolerance: float = 0.02
    min_runs: int = MIN_RUNS
    max_runs: int = MAX_RUNS
    max_candidates: int = 6
    mem: bool = False
    graph: str | None = None
    warmup: int = 1
    timeout: float | None = None
    db: str = "pinlab.db"
    name: str | None = None
    resume: str | None = None
    output: str | None = None

    def validate(self) -> None:
        """Refuse what cannot be tuned, in one line, before anything runs."""
        if self.resume is not None:
            if self.program or self.workload:
                raise UsageError("--resume continues a stored tune with its own program: give no program or --workload")
            changed = [option for name, option in _KEPT_ON_RESUME.items() if getattr(self, name) != getattr(TuneRequest, name)]
            if changed:
                raise UsageError(
                    f"--resume continues a stored tune with its own settings: leave {', '.join(changed)} out (for more runs, start a new tune)"
                )
        elif bool(self.program) == bool(self.workload):
            raise UsageError(
                "give the program to tune after -- (or one --workload NAME), not both"
                if self.program
                else "nothing to tune: give -- PROGRAM ARGS or --workload NAME"
            )
        if self.threads is not None and (isinstance(self.threads, bool) or self.threads < 1):
            raise UsageError(f"-n must be a positive number of threads (got {self.threads})")
        if self.threads is not None and self.threads > len(os.sched_getaffinity(0)) * 8:
            raise UsageError(f"-n {self.threads} is more than 8 threads per allowed CPU: give fewer threads")
        parse_budget(self.budget)
        if not 0 < self.alpha < 0.5:
            raise UsageError(f"--alpha must be between 0 and 0.5 (got {self.alpha})")
        if not (math.isfinite(self.tolerance) and 0 <= self.tolerance < 1):
            raise UsageError(f"--tolerance must be a share between 0 and 1, e.g. 0.02 for 2% (got {self.tolerance})")
        if self.min_runs < 3:
            raise UsageError(f"--min-runs must be at least 3: the tests need that many runs (got {self.min_runs})")
        if not self.min_runs <= self.max_runs <= MAX_RUNS_PER_CONFIG:
            raise UsageError(f"--max-runs must be between --min-runs ({self.min_runs}) and {MAX_RUNS_PER_CONFIG} (got {self.max_runs})")
        if self.max_candidates < 1:
            raise UsageError(f"--max-candidates must be at least 1 (got {self.max_candidates})")
        if self.graph is not None and self.graph != "auto" and not os.path.isfile(self.graph):
            raise UsageError(f"--graph {self.graph}: no such file; give a graph written by pinlab trace, or --graph auto to trace the program once")
        if self.output is not None and os.path.isdir(self.output):
            raise UsageError(f"-o {self.output} is a directory: give the plan file's name")


#: The settings a resumed tune keeps from its start (request field -> its option).
_KEPT_ON_RESUME = {
    "threads": "-n",
    "budget": "--budget",
    "corun": "--corun",
    "metric": "--metric",
    "metric_better": "--metric-better",
    "alpha": "--alpha",
    "tolerance": "--tolerance",
    "min_runs": "--min-runs",
    "max_runs": "--max-runs",
    "max_candidates": "--max-candidates",
    "mem": "--mem",
    "graph": "--graph",
    "warmup": "--warmup",
    "timeout": "--timeout",
    "name": "--name",
}
