"""Reading an autopin log back: the JSON lines of :mod:`pinlab.autopin.log` as typed records.

The report (``pinlab autopin-report``) and the tests read logs through :func:`read_log` only,
so what a log must hold is checked in one place. A log is written while the program runs, and
autopin may be killed mid-line: an unusable *last* line is dropped with a warning (kept in
:attr:`AutopinLog.warnings`) so that everything measured before still shows. Anything else that
is wrong (a line that is not JSON, no ``start`` event first, a version this pinlab does not
know, a field of the wrong type) is a :class:`~pinlab.errors.UsageError` naming the line.

Later pinlabs may add fields and events: unknown fields are kept in each record's ``extra`` and
unknown events in :attr:`AutopinLog.other`, never refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinlab.errors import UsageError

__all__ = [
    "AutopinLog",
    "Candidate",
    "Start",
    "Probe",
    "Migration",
    "Choice",
    "RunnerUp",
    "Rate",
    "Reprobe",
    "Summary",
    "read_log",
    "parse_log",
    "finite",
    "SUPPORTED_VERSIONS",
]

#: Versions of the log format this reader understands (a log without ``version`` is version 1).
SUPPORTED_VERSIONS = (1,)

_HINT = "give a log written by `pinlab autopin --log FILE`"


@dataclass(frozen=True)
class Candidate:
    """A candidate pinning: its index in the log, its name and its CPUs in worker order."""

    index: int
    name: str
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class Start:
    """What was run and how: the ``start`` event."""

    t: float
    mode: str
    argv: tuple[str, ...] | None
    pid: int | None
    threads: int | None
    metric: str
    metric_unit: str | None
    metric_notice: str | None
    topology: Any
    params: dict[str, Any]
    candidates: tuple[Candidate, ...]
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def candidate(self, index: int) -> Candidate:
        return next(c for c in self.candidates if c.index == index)


@dataclass(frozen=True)
class Probe:
    """One candidate measured once (one window, split into sub-windows)."""

    line: int
    t: float
    candidate: int
    name: str
    cpus: tuple[int, ...]
    round: int | None
    repinned_at: float | None
    start: float
    end: float
    rates: dict[str, float]
    mean: float | None
    windows: tuple[float, ...]
    threads: Any
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


@dataclass(frozen=True)
class Migration:
    """Pages moved after a re-pin that changed NUMA nodes."""

    line: int
    t: float
    from_nodes: Any
    to_nodes: Any
    pages_before: dict[str, int]
    pages_after: dict[str, int]
    seconds: float | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunnerUp:
    candidate: int
    name: str
    cpus: tuple[int, ...]
    rate: float | None


@dataclass(frozen=True)
class Choice:
    """The candidate kept at the end of a search, and how sure that is."""

    line: int
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
    verdict: str | None
    rounds: int | None
    probing_seconds: float | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rate:
    """The rate over one interval after a choice."""

    line: int
    t: float
    start: float
    end: float
    rate: float | None
    candidate: int | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reprobe:
    """A new search started because the rate fell (a phase change)."""

    line: int
    t: float
    why: str | None
    rate: float | None
    reference: float | None
    intervals: int | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """How the run ended."""

    line: int
    t: float
    exit_status: int | None
    signal: int | None
    wall_seconds: float | None
    probing_seconds: float | None
    choices: int | None
    final: dict[str, Any] | None
    ended_during_probing: bool
    interrupted: bool
    restored: bool
    extra: dict[str, Any] = field(default_factory=dict)
    ended_during_init: bool = False


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


# -- reading fields --------------------------------------------------------------------------------
class _Fields:
    """The fields of one event, read with their types checked; what is not read is ``extra``."""

    def __init__(self, obj: dict[str, Any], where: str) -> None:
        self.obj, self.where, self.used = obj, where, {"event"}

    def _bad(self, name: str, wanted: str) -> UsageError:
        return UsageError(f"{self.where}: field {name!r} should be {wanted}, not {json.dumps(self.obj[name])[:40]}; {_HINT}")

    def _get(self, name: str, required: bool):
        self.used.add(name)
        if name not in self.obj or self.obj[name] is None:
            if required:
                raise UsageError(f"{self.where}: the {self.obj.get('event')!r} event has no {name!r} field; {_HINT}")
            return None
        return self.obj[name]

    def number(self, name: str, required: bool = False) -> float | None:
        value = self._get(name, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(name, "a number")
        return float(value)

    def integer(self, name: str, required: bool = False) -> int | None:
        value = self._get(name, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise self._bad(name, "a whole number")
        return int(value)

    def text(self, name: str, required: bool = False) -> str | None:
        value = self._get(name, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        return value

    def flag(self, name: str) -> bool | None:
        value = self._get(name, False)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._bad(name, "true or false")
        return value

    def cpus(self, name: str, required: bool = False) -> tuple[int, ...]:
        value = self._get(name, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value):
            raise self._bad(name, "a list of CPU numbers")
        return tuple(value)

    def numbers(self, name: str) -> tuple[float, ...]:
        value = self._get(name, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            raise self._bad(name, "a list of numbers")
        return tuple(float(x) for x in value)

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._get(name, False)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(name, "an object")
        return dict(value)

    def raw(self, name: str):
        return self._get(name, False)

    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.obj.items() if k not in self.used}


def _start(f: _Fields) -> Start:
    version = f.integer("version")
    version = 1 if version is None else version
    if version not in SUPPORTED_VERSIONS:
        raise UsageError(
            f"{f.where}: log format version {version} is newer than this pinlab reads "
            f"({', '.join(map(str, SUPPORTED_VERSIONS))}): report it with the pinlab that wrote it, or upgrade pinlab"
        )
    listed = f.raw("candidates")
    if not isinstance(listed, list) or not listed:
        raise UsageError(f"{f.where}: the start event lists no candidates (field 'candidates'); {_HINT}")
    candidates = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict):
            raise UsageError(f"{f.where}: candidate {i} of the start event is not an object; {_HINT}")
        c = _Fields(item, f"{f.where}, candidate {i}")
        index = c.integer("index")
        candidates.append(Candidate(index=i if index is None else index, name=c.text("name") or f"candidate {i}", cpus=c.cpus("cpus", required=True)))
    if len({c.index for c in candidates}) != len(candidates):
        raise UsageError(f"{f.where}: two candidates of the start event have the same index; {_HINT}")
    argv = f.raw("argv")
    params = f.mapping("params")
    return Start(
        t=f.number("t") or 0.0,
        mode=f.text("mode") or ("attach" if f.obj.get("pid") is not None else "launch"),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else None,
        pid=f.integer("pid"),
        threads=f.integer("threads"),
        metric=f.text("metric") or "unknown metric",
        metric_unit=f.text("metric_unit"),
        metric_notice=f.text("metric_notice"),
        topology=f.raw("topology"),
        params=params,
        candidates=tuple(candidates),
        version=version,
        extra=f.extra(),
    )


def _probe(f: _Fields, line: int, start: Start) -> Probe:
    index = f.integer("candidate", required=True)
    known = _candidate(f, index, start)
    rates = f.mapping("rates")
    for tid, rate in rates.items():
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
            raise f._bad("rates", "an object of tid -> rate")
    begin, end = f.number("start", required=True), f.number("end", required=True)
    if end < begin:
        raise UsageError(f"{f.where}: the probe ends (end {end:g}) before it starts (start {begin:g}); {_HINT}")
    return Probe(
        line=line,
        t=f.number("t", required=True),
        candidate=index,
        name=f.text("name") or known.name,
        cpus=f.cpus("cpus") or known.cpus,
        round=f.integer("round"),
        repinned_at=f.number("repinned_at"),
        start=begin,
        end=end,
        rates={str(k): (None if v is None else float(v)) for k, v in rates.items()},
        mean=f.number("mean"),
        windows=f.numbers("windows"),
        threads=f.raw("threads"),
        extra=f.extra(),
    )


def _candidate(f: _Fields, index: int, start: Start) -> Candidate:
    try:
        return start.candidate(index)
    except StopIteration:
        raise UsageError(
            f"{f.where}: candidate {index} is not one of the start event's candidates ({', '.join(str(c.index) for c in start.candidates)}); {_HINT}"
        ) from None


def _choice(f: _Fields, line: int, start: Start) -> Choice:
    index = f.integer("candidate", required=True)
    known = _candidate(f, index, start)
    runner = f.raw("runner_up")
    runner_up = None
    if runner is not None:
        if not isinstance(runner, dict):
            raise f._bad("runner_up", "an object or null")
        r = _Fields(runner, f"{f.where}, runner_up")
        r_index = r.integer("candidate", required=True)
        r_known = _candidate(r, r_index, start)
        runner_up = RunnerUp(candidate=r_index, name=r.text("name") or r_known.name, cpus=r.cpus("cpus") or r_known.cpus, rate=r.number("rate"))
    equivalent = f.raw("equivalent") or []
    if not isinstance(equivalent, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in equivalent):
        raise f._bad("equivalent", "a list of candidate indexes")
    return Choice(
        line=line,
        t=f.number("t", required=True),
        candidate=index,
        name=f.text("name") or known.name,
        cpus=f.cpus("cpus") or known.cpus,
        rate=f.number("rate"),
        runner_up=runner_up,
        p_value=f.number("p_value"),
        effect=f.number("effect"),
        decided=f.flag("decided"),
        equivalent=tuple(equivalent),
        verdict=f.text("verdict"),
        rounds=f.integer("rounds"),
        probing_seconds=f.number("probing_seconds"),
        extra=f.extra(),
    )


def _rate(f: _Fields, line: int, start: Start) -> Rate:
    return Rate(
        line=line,
        t=f.number("t", required=True),
        start=f.number("start", required=True),
        end=f.number("end", required=True),
        rate=f.number("rate"),
        candidate=f.integer("candidate"),
        extra=f.extra(),
    )


def _reprobe(f: _Fields, line: int, start: Start) -> Reprobe:
    return Reprobe(
        line=line,
        t=f.number("t", required=True),
        why=f.text("why"),
        rate=f.number("rate"),
        reference=f.number("reference"),
        intervals=f.integer("intervals"),
        extra=f.extra(),
    )


def _migrate(f: _Fields, line: int, start: Start) -> Migration:
    return Migration(
        line=line,
        t=f.number("t", required=True),
        from_nodes=f.raw("from_nodes"),
        to_nodes=f.raw("to_nodes"),
        pages_before=f.mapping("pages_before"),
        pages_after=f.mapping("pages_after"),
        seconds=f.number("seconds"),
        extra=f.extra(),
    )


def _summary(f: _Fields, line: int, start: Start) -> Summary:
    final = f.raw("final")
    if final is not None and not isinstance(final, dict):
        raise f._bad("final", "an object or null")
    return Summary(
        line=line,
        t=f.number("t", required=True),
        exit_status=f.integer("exit_status"),
        signal=f.integer("signal"),
        wall_seconds=f.number("wall_seconds"),
        probing_seconds=f.number("probing_seconds"),
        choices=f.integer("choices"),
        final=final,
        ended_during_probing=bool(f.flag("ended_during_probing")),
        interrupted=bool(f.flag("interrupted")),
        restored=bool(f.flag("restored")),
        ended_during_init=bool(f.flag("ended_during_init")),
        extra=f.extra(),
    )


_READERS = {"probe": _probe, "choice": _choice, "rate": _rate, "reprobe": _reprobe, "migrate": _migrate, "summary": _summary}


# -- reading lines --------------------------------------------------------------------------------
def _decode(text: str) -> dict[str, Any] | None:
    """The event on one line, or None when the line is not a JSON object with an ``event`` string."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj


def parse_log(lines: list[str], source: str = "log") -> AutopinLog:
    """The log whose lines are ``lines`` (without their newlines); ``source`` names it in messages."""
    numbered = [(i + 1, text) for i, text in enumerate(lines) if text.strip()]
    if not numbered:
        raise UsageError(f"autopin log {source} is empty: autopin wrote nothing to it (was it stopped before it started?); {_HINT}")
    warnings: list[str] = []
    last_no = numbered[-1][0]
    decoded = []
    for no, text in numbered:
        obj = _decode(text)
        if obj is None:
            if no == last_no and len(numbered) > 1:
                warnings.append(f"the last line ({no}) of {source} is incomplete or garbled, as when autopin is killed while writing: it is left out")
                continue
            what = "is not valid JSON" if not _is_json(text) else "is not a JSON object with an 'event' field"
            raise UsageError(f"line {no} of {source} {what}: this is not an autopin log, or it was damaged; {_HINT}")
        decoded.append((no, obj))
    first_no, first = decoded[0]
    if first["event"] != "start":
        raise UsageError(
            f"line {first_no} of {source} is a {first['event']!r} event, but an autopin log begins with its "
            f"'start' event: the beginning of the log is missing; {_HINT}"
        )
    start = _start(_Fields(first, f"line {first_no} of {source}"))
    events, other = [], []
    for no, obj in decoded[1:]:
        where = f"line {no} of {source}"
        if obj["event"] == "start":
            raise UsageError(
                f"{where} is a second 'start' event: the file holds more than one autopin run; "
                f"give each run its own --log file, or split this one at line {no}"
            )
        reader = _READERS.get(obj["event"])
        if reader is None:
            other.append(obj)  # an event of a later pinlab: kept, not shown
            continue
        events.append(reader(_Fields(obj, where), no, start))
    return AutopinLog(path=source, start=start, events=tuple(events), warnings=tuple(warnings), other=tuple(other))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def read_log(path: str | Path) -> AutopinLog:
    """The autopin log in the file ``path`` (see :func:`parse_log` for what is refused)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no autopin log at {str(path)!r}: give the file written by `pinlab autopin --log FILE`") from None
    except IsADirectoryError:
        raise UsageError(f"{str(path)!r} is a directory, not an autopin log: give the file written by `pinlab autopin --log FILE`") from None
    except OSError as exc:
        raise UsageError(f"cannot read the autopin log {str(path)!r}: {exc.strerror or exc}") from None
    text = data.decode("utf-8", errors="replace")  # a killed writer may cut a character in two: the last line only
    return parse_log(text.split("\n"), source=str(path))


def finite(value: float | None) -> bool:
    """Whether ``value`` is a number to show (not None, NaN or infinite)."""
    return value is not None and math.isfinite(value)
