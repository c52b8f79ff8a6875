"""What really happened in one run: threads, where they ran over time, times, exit status, pages."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from pinlab.topology.cpuset import format_cpulist
from pinlab.words import plural

RECORD_FORMAT_VERSION = 1


@dataclass
class ThreadRecord:
    """One thread of the program. ``index`` is its creation index (0 = main thread)."""

    tid: int
    pid: int
    index: int | None = None
    role: str = "unknown"  # main, worker, helper, nested, or unknown (never reported by the preload library)
    slot: int | None = None
    planned_cpu: int | None = None
    cpu_at_start: int | None = None
    mask_at_start: str | None = None
    creator_tid: int | None = None
    start_library: str | None = None
    # The first process's main thread starts on all the plan's CPUs (so that runtimes sizing
    # their pools from the mask see them) and is narrowed to its CPU as it creates its first thread.
    planned_start_mask: str | None = None  # that set, as a CPU list; None for every other thread
    narrowed_to: int | None = None
    narrowed_at: float | None = None  # seconds after the start
    sample_times: list[float] = field(default_factory=list)
    sample_cpus: list[int] = field(default_factory=list)
    kernel_migrations: int | None = None

    @property
    def migrations(self) -> int:
        """CPU changes seen between consecutive samples (a lower bound of the real count)."""
        return sum(1 for a, b in zip(self.sample_cpus, self.sample_cpus[1:]) if a != b)

    @property
    def pinned_as_planned(self) -> bool | None:
        if self.planned_cpu is None or self.planned_cpu < 0 or self.mask_at_start is None:
            return None
        if self.planned_start_mask is not None:  # the main thread: the plan's CPUs, then its own
            return self.mask_at_start == self.planned_start_mask and self.narrowed_to in (None, self.planned_cpu)
        return self.mask_at_start == str(self.planned_cpu)


def _count_text(name: str, value: float) -> str:
    """A count as perf stat shows it: clocks (nanoseconds) in milliseconds, others with separators."""
    if name in ("task-clock", "cpu-clock"):
        return f"{name} {value / 1e6:,.1f} ms"
    return f"{name} {value:,.0f}"


@dataclass
class RunRecord:
    """The record of one ``pinlab run``; :meth:`to_json` is the ``--record`` file."""

    argv: list[str]
    plan: dict[str, Any] | None
    options: dict[str, Any]
    started_at: float
    wall_seconds: float = 0.0
    user_seconds: float = 0.0
    system_seconds: float = 0.0
    max_rss_kib: int = 0
    voluntary_context_switches: int = 0
    involuntary_context_switches: int = 0
    exit_status: int = 0
    signal: int | None = None
    pid: int | None = None
    threads: list[ThreadRecord] = field(default_factory=list)
    pages_per_node: dict[int, int] | None = None
    warnings: list[str] = field(default_factory=list)
    sample_ms: float | None = None
    timed_out: bool = False
    counters: dict[str, dict[str, float]] | None = None  # event -> value, enabled_ns, running_ns (see measure.counters)
    interrupted: int | None = None  # a stopping signal (INT, TERM, HUP, QUIT) pinlab received while the program ran

    @property
    def migrations(self) -> int:
        return sum(t.migrations for t in self.threads)

    def processes(self) -> list[dict[str, Any]]:
        """The program's processes apart from its threads: each pid with its main thread's slot and
        planned CPU (None for a process left unpinned) and how many of its threads were recorded."""
        found: dict[int, dict[str, Any]] = {}
        for t in self.threads:
            entry = found.setdefault(t.pid, {"pid": t.pid, "first": t.pid == self.pid, "slot": None, "planned_cpu": None, "threads": 0})
            entry["threads"] += 1
            if t.role == "main":
                entry["slot"], entry["planned_cpu"] = t.slot, t.planned_cpu
        return list(found.values())

    def to_json(self) -> dict[str, Any]:
        threads = []
        for t in self.threads:
            data = asdict(t)
            data["migrations"] = t.migrations
            data["pinned_as_planned"] = t.pinned_as_planned
            threads.append(data)
        return {
            "pinlab_run": RECORD_FORMAT_VERSION,
            "argv": self.argv,
            "plan": self.plan,
            "options": self.options,
            "started_at": self.started_at,
            "pid": self.pid,
            "wall_seconds": self.wall_seconds,
            "user_seconds": self.user_seconds,
            "system_seconds": self.system_seconds,
            "max_rss_kib": self.max_rss_kib,
            "voluntary_context_switches": self.voluntary_context_switches,
            "involuntary_context_switches": self.involuntary_context_switches,
            "exit_status": self.exit_status,
            "signal": self.signal,
            "sample_ms": self.sample_ms,
            "timed_out": self.timed_out,
            "interrupted": self.interrupted,
            "migrations": self.migrations,
            "counters": self.counters,
            "threads": threads,
            "processes": self.processes(),
            "pages_per_node": None if self.pages_per_node is None else {str(k): v for k, v in sorted(self.pages_per_node.items())},
            "warnings": self.warnings,
        }

    def summary(self) -> str:
        """The one line ``pinlab run`` prints on stderr."""
        program = os.path.basename(self.argv[0]) if self.argv else "program"
        if self.signal is not None:
            ending = f"was killed by signal {self.signal} (exit status {self.exit_status})"
        else:
            ending = f"exited with status {self.exit_status}"
        text = f"pinlab: {program} {ending} after {self.wall_seconds:.3f} s (user {self.user_seconds:.3f} s, sys {self.system_seconds:.3f} s)"
        pinned = [t for t in self.threads if t.planned_cpu is not None and t.planned_cpu >= 0]
        if pinned:
            wrong = [t for t in pinned if t.pinned_as_planned is False]
            planned = {t.planned_cpu for t in pinned}
            cpus = f"{'CPU' if len(planned) == 1 else 'CPUs'} {format_cpulist(planned)}"
            processes = {t.pid for t in pinned}
            where = f" (in {plural(len(processes), 'process')})" if len(processes) > 1 else ""
            text += f"; {plural(len(pinned), 'thread')}{where} pinned on {cpus}"
            if wrong:
                text += f", {len(wrong)} NOT on {'its' if len(wrong) == 1 else 'their'} planned CPU"
        elif self.plan is None:
            text += "; not pinned"
        if self.sample_ms:
            text += f"; {plural(self.migrations, 'migration')} seen"
        if self.counters:
            text += "; " + ", ".join(_count_text(name, count["value"]) for name, count in self.counters.items())
        return text
