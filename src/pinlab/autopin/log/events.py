"""The autopin log's events: one dataclass per kind, the version, and how a line is written.

What each field means is said in :mod:`pinlab.autopin.log`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar

#: The version the controller writes in its ``start`` event.
LOG_FORMAT_VERSION = 1

#: Versions of the log format this reader understands (a log without ``version`` is version 1).
SUPPORTED_VERSIONS = (LOG_FORMAT_VERSION,)

_HINT = "give a log written by `pinlab autopin --log FILE`"


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: dataclasses as objects, tuples as lists, NaN and infinities as
    null (JSON has none: an effect over a rate of 0 is written as null)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class _Event:
    """What every event does: become its JSON object. ``line`` (where a reader found it) is not
    written; ``extra`` (fields a later pinlab wrote) is written back as it was read. The fields
    in ``OMITTED`` are left out when None or false, as the controller always did (a ``rate``
    has a ``reference`` only with ``--monitor``)."""

    KIND: ClassVar[str]
    OMITTED: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"event": self.KIND}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in ("line", "extra") or (f.name in self.OMITTED and (value is None or value is False)):
                continue
            data[f.name] = _plain(value)
        for key, value in getattr(self, "extra").items():
            data.setdefault(key, value)
        return data


def event_line(event: _Event) -> str:
    """One line of the log (without its newline): the event as strict JSON."""
    return json.dumps(event.to_json(), allow_nan=False)


@dataclass(frozen=True)
class Candidate:
    """A candidate pinning: its index in the log, its name and its CPUs in worker order."""

    index: int
    name: str
    cpus: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Start(_Event):
    """What was run and how: the ``start`` event. ``metric`` and its unit and notice are None when
    the run ended before autopin chose a metric."""

    KIND = "start"
    OMITTED = ("metric", "metric_unit", "metric_notice")

    t: float
    version: int = LOG_FORMAT_VERSION
    mode: str
    argv: tuple[str, ...] | None
    pid: int | None
    threads: int | None
    metric: str | None = None
    metric_unit: str | None = None
    metric_notice: str | None = None
    topology: Any
    params: dict[str, Any]
    candidates: tuple[Candidate, ...]
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)

    def candidate(self, index: int) -> Candidate:
        return next(c for c in self.candidates if c.index == index)

    @property
    def metric_label(self) -> str:
        """How reports name the metric (a log of a run that ended before one was chosen has none)."""
        return self.metric or "unknown metric"


@dataclass(frozen=True, kw_only=True)
class Probe(_Event):
    """One candidate measured once (one window, split into sub-windows)."""

    KIND = "probe"
    OMITTED = ("partial",)

    t: float
    candidate: int
    name: str
    cpus: tuple[int, ...]
    round: int | None
    repinned_at: float | None
    start: float
    end: float
    rates: dict[str, float | None]
    mean: float | None
    windows: tuple[float, ...]
    threads: Any
    partial: bool = False
    window_seconds: tuple[float, ...] = ()  # the sub-windows' lengths (absent from older logs)
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def samples(self) -> tuple[float, ...]:
        """The rates the verdict is computed from: the sub-windows', else the window's mean alone."""
        if self.windows:
            return self.windows
        if self.mean is not None:
            return (self.mean,)
        values = [v for v in self.rates.values() if v is not None]
        return (sum(values) / len(values),) if values else ()

    @property
    def weights(self) -> tuple[float, ...]:
        """How much each of :attr:`samples` counts in the candidate's rate: the sub-windows'
        lengths where the log has them (its rate is then the work over the time), else 1 each."""
        samples = self.samples
        if self.windows and len(self.window_seconds) == len(self.windows):
            return self.window_seconds
        return (1.0,) * len(samples)


@dataclass(frozen=True, kw_only=True)
class Migration(_Event):
    """Pages moved after a re-pin that changed NUMA nodes."""

    KIND = "migrate"

    t: float
    from_nodes: Any
    to_nodes: Any
    pages_before: dict[str, int]
    pages_after: dict[str, int]
    not_moved: int | None = None
    seconds: float | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MigrationAttached(_Event):
    """The regions the program attached to its workers, moved with them after a re-pin."""

    KIND = "migrate_attached"

    t: float
    regions: int | None
    bytes: int | None
    pages_on_node: int | None
    not_moved: int | None
    seconds: float | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MigrationAccessed(_Event):
    """The pages each worker mostly accessed (page tracer), moved with it after a re-pin."""

    KIND = "migrate_accessed"

    t: float
    pages: int | None
    pages_on_node: int | None
    not_moved: int | None
    seconds: float | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunnerUp:
    candidate: int
    name: str
    cpus: tuple[int, ...]
    rate: float | None


@dataclass(frozen=True, kw_only=True)
class Choice(_Event):
    """The candidate kept at the end of a search, and how sure that is."""

    KIND = "choice"

    t: float
    candidate: int
    name: str
    cpus: tuple[int, ...]
    rate: float | None
    runner_up: RunnerUp | None
    p_value: float | None
    effect: float | None
    decided: bool | None
    equivalent: tuple[int, ...]
    within_tolerance: tuple[int, ...] = ()
    verdict: str | None
    rounds: int | None
    probing_seconds: float | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Rate(_Event):
    """The rate over one interval after a choice; ``reference`` only with ``--monitor``."""

    KIND = "rate"
    OMITTED = ("reference",)

    t: float
    start: float
    end: float
    rate: float | None
    candidate: int | None
    reference: float | None = None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Reprobe(_Event):
    """A new search started because the rate fell (a phase change)."""

    KIND = "reprobe"

    t: float
    why: str | None
    rate: float | None
    reference: float | None
    intervals: int | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MetricChange(_Event):
    """The metric changed during the run: the program's threads began beating through the
    heartbeat after the initialisation, when autopin had chosen task-clock for want of beats. What
    was measured before does not compare with what follows: a new search starts here."""

    KIND = "metric"

    t: float
    metric: str
    metric_unit: str | None
    metric_notice: str | None
    previous: str | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Recheck(_Event):
    """With --monitor, the runner-up measured once while the choice is kept (a phase change may
    have made it the better one while the choice's own rate did not drop)."""

    KIND = "recheck"

    t: float
    candidate: int
    name: str
    cpus: tuple[int, ...]
    repinned_at: float
    start: float
    end: float
    rate: float | None
    against: float | None  # the choice's rate over the intervals just before
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Failure(_Event):
    """autopin stopped probing because something failed; the program ran on where it was."""

    KIND = "error"

    t: float
    text: str | None
    error: str | None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Summary(_Event):
    """How the run ended."""

    KIND = "summary"

    t: float
    exit_status: int | None
    signal: int | None
    wall_seconds: float | None
    probing_seconds: float | None
    choices: int | None
    final: dict[str, Any] | None
    ended_during_init: bool = False
    ended_during_probing: bool
    interrupted: bool
    restored: bool
    # Where the verdict's statistics were loaded ("beside" the program on "cpus" no candidate uses,
    # "before" it started, or "already" in the process) and the "seconds" and "cpu_seconds" the
    # import took (null while unfinished); None with one candidate, or in an older log.
    statistics: dict[str, Any] | None = None
    line: int = field(default=0, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AutopinLog:
    """A whole log: the start, every event in file order, and the events by kind."""

    path: str
    start: Start
    events: tuple[Any, ...]
    warnings: tuple[str, ...] = ()
    other: tuple[dict[str, Any], ...] = ()

    def _of(self, kind) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def probes(self) -> list[Probe]:
        return self._of(Probe)

    @property
    def choices(self) -> list[Choice]:
        return self._of(Choice)

    @property
    def rates(self) -> list[Rate]:
        return self._of(Rate)

    @property
    def reprobes(self) -> list[Reprobe]:
        return self._of(Reprobe)

    @property
    def metric_changes(self) -> list[MetricChange]:
        return self._of(MetricChange)

    def unit_at(self, t: float) -> str:
        """The unit of the metric in effect at ``t``: the start's, or that of the last change
        before ``t`` (the metric's name where it has no unit)."""
        unit = self.start.metric_unit or self.start.metric_label
        for change in self.metric_changes:
            if change.t <= t:
                unit = change.metric_unit or change.metric
        return unit

    @property
    def migrations(self) -> list[Migration]:
        return self._of(Migration)

    @property
    def summary(self) -> Summary | None:
        found = self._of(Summary)
        return found[-1] if found else None

    @property
    def end_time(self) -> float:
        """The last time the log speaks of: the summary's wall time, else its last event's."""
        times = [self.start.t]
        for e in self.events:
            times.append(e.t)
            end = getattr(e, "end", None)
            if end is not None:
                times.append(end)
        summary = self.summary
        if summary is not None and summary.wall_seconds is not None:
            times.append(summary.wall_seconds)
        return max(times)


def finite(value: float | None) -> bool:
    """Whether ``value`` is a number to show (not None, NaN or infinite)."""
    return value is not None and math.isfinite(value)
