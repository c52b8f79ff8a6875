"""What the user asks of autopin, checked as a whole before anything runs (the CLI and the API share it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pinlab.errors import UsageError

#: The paper's default probing interval t (seconds); w = t / 2 and i = w unless given.
DEFAULT_INTERVAL = 30.0
MIGRATE_MODES = ("off", "process", "attached", "accessed")
#: How a candidate is measured: the running program re-pinned there, or a run of its own started there.
PROBE_MODES = ("repin", "restart")
MAX_SECONDS = 7 * 24 * 3600.0
DEFAULT_THRESHOLD = 10.0  # percent, with --monitor
DEFAULT_PATIENCE = 3  # intervals, with --monitor
DEFAULT_RECHECK = 10  # intervals on the choice between measurements of the runner-up, with --monitor


@dataclass
class AutopinOptions:
    """autopin's parameters ([klug2008autopin], section 3: i, w, t) and pinlab's additions.

    ``rounds`` is a number of rounds (each candidate measured that many times, the paper's is 1)
    or ``"auto"``: after the first round only the candidates not yet settled (see
    :mod:`pinlab.autopin.decide`) are measured again, up to ``max_rounds``.
    """

    threads: int | None = None
    candidates: str = "auto"  # auto, or the paper's "0,1;0,2"
    strategies: str | None = None  # compact,scatter,...
    graph: Any = None  # the affinity graph (or its file) of graph strategies among them (lpgp, treematch...)
    max_candidates: int = 8
    cpu_kind: str | None = None
    metric: str | None = None  # None: the best available (see pinlab.autopin.metrics)
    init: float | None = None
    warmup: float | None = None
    interval: float = DEFAULT_INTERVAL
    windows: int = 5
    rounds: str = "1"
    max_rounds: int = 5
    alpha: float = 0.05
    tolerance: float = 0.01
    migrate_pages: str = "off"
    monitor: bool = False
    threshold: float | None = None  # percent (with monitor; DEFAULT_THRESHOLD when not given)
    patience: int | None = None  # intervals below the threshold before a re-probe (with monitor; DEFAULT_PATIENCE)
    recheck: int | None = None  # intervals between measurements of the runner-up (with monitor; DEFAULT_RECHECK; 0: never)
    log: str | None = None
    restore: bool = False
    probe: str = "repin"  # repin: the running program moved to each candidate; restart: a run of its own per probe

    def __post_init__(self) -> None:
        self.validate()

    @property
    def warmup_seconds(self) -> float:
        return self.interval / 2 if self.warmup is None else self.warmup

    @property
    def init_seconds(self) -> float:
        return self.warmup_seconds if self.init is None else self.init

    @property
    def monitor_threshold(self) -> float:
        return DEFAULT_THRESHOLD if self.threshold is None else self.threshold

    @property
    def monitor_patience(self) -> int:
        return DEFAULT_PATIENCE if self.patience is None else self.patience

    @property
    def monitor_recheck(self) -> int:
        return DEFAULT_RECHECK if self.recheck is None else self.recheck

    @property
    def restarts(self) -> bool:
        """Whether each probe is a run of its own, pinned on its candidate from the program's start."""
        return self.probe == "restart"

    @property
    def adaptive(self) -> bool:
        return self.rounds == "auto"

    @property
    def round_limit(self) -> int:
        return self.max_rounds if self.adaptive else int(self.rounds)

    def validate(self) -> None:
        """Refuse what cannot work, with one line saying what to give instead."""
        for name, value, low in (("-T/--interval", self.interval, 0.0), ("-W/--warmup", self.warmup, 0.0), ("-i/--init", self.init, 0.0)):
            if value is None:
                continue
            if (
                not isinstance(value, (int, float))
                or math.isnan(value)
                or value < low
                or value > MAX_SECONDS
                or (name.startswith("-t") and value <= 0)
            ):
                what = "a positive number of seconds" if name.startswith("-t") else "a number of seconds, 0 or more"
                raise UsageError(f"{name} must be {what}, at most one week (got {value})")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"-n/--threads must be at least 1 (got {self.threads})")
        if not 2 <= self.windows <= 1000:
            raise UsageError(f"--windows must be between 2 and 1000 sub-windows per probe (got {self.windows}): the verdict needs at least 2")
        if self.interval / self.windows < 0.005:
            raise UsageError(
                f"sub-windows of {self.interval / self.windows * 1000:.2g} ms are too short to measure: raise --interval or lower --windows"
            )
        rounds = str(self.rounds)
        if rounds != "auto" and not (rounds.isdigit() and 1 <= int(rounds) <= 100):
            raise UsageError(f"--rounds must be auto or a number of rounds from 1 to 100 (got {self.rounds!r})")
        self.rounds = rounds
        if not 1 <= self.max_rounds <= 100:
            raise UsageError(f"--max-rounds must be between 1 and 100 (got {self.max_rounds})")
        if not 0 < self.alpha < 0.5:
            raise UsageError(f"--alpha must be between 0 and 0.5, e.g. 0.05 (got {self.alpha})")
        if not 0 <= self.tolerance < 1:
            raise UsageError(f"--tolerance must be a fraction between 0 and 1, e.g. 0.01 for 1% (got {self.tolerance})")
        if self.migrate_pages not in MIGRATE_MODES:
            raise UsageError(f"unknown --migrate-pages {self.migrate_pages!r}: use off, process, attached or accessed")
        if self.metric is not None:
            if not self.metric.strip():
                raise UsageError(
                    "--metric is empty: name a metric (instructions, cycles, heartbeat, stdout:REGEX, task-clock or a perf "
                    "event; pinlab autopin --list-metrics), or leave --metric out for the best one available"
                )
            if self.metric.strip().startswith("stdout:") and not self.metric.strip()[len("stdout:") :]:
                raise UsageError(
                    "--metric stdout: needs a regular expression after 'stdout:', the lines that mark a unit of work (e.g. stdout:^iteration)"
                )
        for name, value in (("--threshold", self.threshold), ("--patience", self.patience), ("--recheck", self.recheck)):
            if value is not None and not self.monitor:
                raise UsageError(f"{name} applies to --monitor (a re-probe when the rate drops after the choice): add --monitor, or leave {name} out")
        if not 0 < self.monitor_threshold < 100:
            raise UsageError(f"--threshold must be a percentage between 0 and 100 (got {self.threshold})")
        if not 1 <= self.monitor_patience <= 1000:
            raise UsageError(f"--patience must be between 1 and 1000 intervals (got {self.patience})")
        if isinstance(self.monitor_recheck, bool) or not isinstance(self.monitor_recheck, int) or not 0 <= self.monitor_recheck <= 100000:
            raise UsageError(f"--recheck must be a number of intervals from 0 (never) to 100000 (got {self.recheck})")
        if not 1 <= self.max_candidates <= 1000:
            raise UsageError(f"--max-candidates must be between 1 and 1000 (got {self.max_candidates})")
        if self.probe not in PROBE_MODES:
            raise UsageError(f"unknown --probe {self.probe!r}: use repin (move the running program) or restart (a run of its own per probe)")
        if self.restarts:
            for given, name in (
                (self.monitor, "--monitor"),
                (self.migrate_pages != "off", f"--migrate-pages {self.migrate_pages}"),
                (self.restore, "--restore"),
            ):
                if given:
                    raise UsageError(
                        f"{name} acts on the running program after a re-pin; --probe restart measures each candidate in a run of its own "
                        f"and keeps the last run where it started: leave {name.split()[0]} out, or use --probe repin"
                    )
            if self.metric is not None and self.metric.strip().startswith("stdout:"):
                raise UsageError(
                    "--metric stdout:REGEX counts the output of the one run it passes on; --probe restart drops its probes' output: "
                    "make the program beat (pinlab_heartbeat.h) or use --probe repin"
                )
        if self.graph is not None and not self.strategies:
            raise UsageError("--graph gives candidates through graph strategies: add --strategies lpgp,treematch (or others) with it")
        if self.strategies is not None and self.candidates not in ("auto", None):
            raise UsageError('give candidates one way: --candidates auto, --candidates "0,1;0,2" or --strategies compact,scatter')
