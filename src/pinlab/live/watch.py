"""Looking at a running process again and again: what changed since the last look.

A :class:`Watcher` keeps the previous look at each thread (by tid and start time, so a tid the
kernel reused is a new thread), and reports the migrations and CPU time since then; at the first
look, and for a thread new since the last one, that is since the thread started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pinlab.errors import UsageError
from pinlab.measure.threads import LiveThread, pages_per_node, process_threads, roles_known
from pinlab.memory.memmap import check_interval
from pinlab.outputs import check_picture

#: The version of the JSON object a look is written as (``pinlab ps --json``).
JSON_FORMAT_VERSION = 1


@dataclass
class Look:
    """One look at a process: its threads now, and per tid what happened since the last look."""

    pid: int
    command: str
    time: float  # seconds since the epoch
    interval: float | None  # seconds since the previous look, None at the first
    threads: list[LiveThread]
    new_migrations: dict[int, int | None] = field(default_factory=dict)
    new_cpu_seconds: dict[int, float] = field(default_factory=dict)
    pages_per_node: dict[int, int] = field(default_factory=dict)

    @property
    def roles_known(self) -> bool:
        return roles_known(self.threads)

    def to_json(self) -> dict:
        """The object ``pinlab ps --json`` prints for this look (keys documented in the README)."""
        return {
            "pinlab_ps": JSON_FORMAT_VERSION,
            "pid": self.pid,
            "command": self.command,
            "time": round(self.time, 6),
            "interval": None if self.interval is None else round(self.interval, 6),
            "roles_known": self.roles_known,
            "pages_per_node": {str(node): pages for node, pages in sorted(self.pages_per_node.items())},
            "threads": [
                {
                    "number": i,
                    "tid": t.tid,
                    "name": t.name,
                    "role": t.role,
                    "index": t.index,
                    "slot": t.slot,
                    "planned": t.planned,
                    "cpu": t.cpu,
                    "mask": sorted(t.mask),
                    "state": t.state,
                    "migrations": t.migrations,
                    "new_migrations": self.new_migrations.get(t.tid),
                    "cpu_seconds": round(t.cpu_seconds, 3),
                    "new_cpu_seconds": round(self.new_cpu_seconds.get(t.tid, 0.0), 3),
                }
                for i, t in enumerate(self.threads)
            ],
        }


class Watcher:
    """Successive looks at one process; :meth:`look` returns None once it has ended."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._previous: dict[tuple[int, int], LiveThread] = {}
        self._last_time: float | None = None
        self._main_start: int | None = None

    def look(self) -> Look | None:
        now = time.time()
        threads = process_threads(self.pid)
        alive = [t for t in threads if t.state != "Z"]
        main = next((t for t in threads if t.tid == self.pid), None)
        if not alive or main is None or (self._main_start is not None and main.start_ticks != self._main_start):
            return None  # ended (or only its zombie is left, or the pid now names another process)
        self._main_start = main.start_ticks
        look = Look(
            self.pid, main.name, now, None if self._last_time is None else now - self._last_time, threads, pages_per_node=pages_per_node(self.pid)
        )
        seen = {}
        for t in threads:
            key = (t.tid, t.start_ticks)
            before = self._previous.get(key)
            if t.migrations is None:
                look.new_migrations[t.tid] = None
            else:
                look.new_migrations[t.tid] = t.migrations - ((before.migrations or 0) if before is not None else 0)
            look.new_cpu_seconds[t.tid] = t.cpu_seconds - (before.cpu_seconds if before is not None else 0.0)
            seen[key] = t
        self._previous, self._last_time = seen, now
        return look


@dataclass(frozen=True)
class WatchRequest:
    """What ``pinlab ps`` is asked to show: processes (none: those under ``pinlab run``), how
    often to look again (None: once), and a picture of where one process's threads are.

    Checked when made, before any process is looked at, so that a bad interval or picture path
    is refused the same way from the command line and from Python.
    """

    pids: tuple[int, ...] = ()
    every: float | None = None
    picture: str | None = None

    def __post_init__(self) -> None:
        if self.every is not None:
            check_interval(self.every)
        if self.picture:
            if len(self.pids) != 1:
                raise UsageError("--picture draws one process: give exactly one PID")
            check_picture(self.picture)
