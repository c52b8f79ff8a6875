"""Reading an autopin log back into the event dataclasses, checking every field on the way.

The report (``pinlab autopin-report``) and the tests read logs through :func:`read_log` only,
so what a log must hold is checked in one place. A log is written while the program runs, and
autopin may be killed mid-line: an unusable *last* line is dropped with a warning (kept in
:attr:`AutopinLog.warnings`) so that everything measured before still shows. Anything else that
is wrong (a line that is not JSON, no ``start`` event first, a version this pinlab does not
know, a field of the wrong type) is a :class:`~pinlab.errors.UsageError` naming the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pinlab.autopin.log.events import (
    _HINT,
    SUPPORTED_VERSIONS,
    AutopinLog,
    Candidate,
    Choice,
    Failure,
    MetricChange,
    Migration,
    MigrationAccessed,
    MigrationAttached,
    Probe,
    Rate,
    Recheck,
    Reprobe,
    RunnerUp,
    Start,
    Summary,
)
from pinlab.errors import UsageError


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

    def need_number(self, name: str) -> float:
        """A number the event cannot do without."""
        value = self.number(name, required=True)
        assert value is not None  # required: refused when absent
        return value

    def need_integer(self, name: str) -> int:
        """A whole number the event cannot do without."""
        value = self.integer(name, required=True)
        assert value is not None  # required: refused when absent
        return value

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

    def indexes(self, name: str) -> tuple[int, ...]:
        value = self._get(name, False) or []
        if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            raise self._bad(name, "a list of candidate indexes")
        return tuple(value)

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
        metric=f.text("metric"),
        metric_unit=f.text("metric_unit"),
        metric_notice=f.text("metric_notice"),
        topology=f.raw("topology"),
        params=params,
        candidates=tuple(candidates),
        version=version,
        extra=f.extra(),
    )


def _span(f: _Fields, what: str) -> tuple[float, float]:
    """A measurement's ``start`` and ``end``, refused when it ends before it starts."""
    begin, end = f.need_number("start"), f.need_number("end")
    if end < begin:
        raise UsageError(f"{f.where}: the {what} ends (end {end:g}) before it starts (start {begin:g}); {_HINT}")
    return begin, end


def _probe(f: _Fields, line: int, start: Start) -> Probe:
    index = f.need_integer("candidate")
    known = _candidate(f, index, start)
    rates = f.mapping("rates")
    for tid, rate in rates.items():
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
            raise f._bad("rates", "an object of tid -> rate")
    begin, end = _span(f, "probe")
    windows, lengths = f.numbers("windows"), f.numbers("window_seconds")
    if lengths and (len(lengths) != len(windows) or min(lengths) < 0):
        raise f._bad("window_seconds", f"a list of {len(windows)} lengths in seconds, one for each of windows")
    return Probe(
        line=line,
        t=f.need_number("t"),
        candidate=index,
        name=f.text("name") or known.name,
        cpus=f.cpus("cpus") or known.cpus,
        round=f.integer("round"),
        repinned_at=f.number("repinned_at"),
        start=begin,
        end=end,
        rates={str(k): (None if v is None else float(v)) for k, v in rates.items()},
        mean=f.number("mean"),
        windows=windows,
        window_seconds=lengths,
        threads=f.raw("threads"),
        partial=bool(f.flag("partial")),
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
    index = f.need_integer("candidate")
    known = _candidate(f, index, start)
    runner = f.raw("runner_up")
    runner_up = None
    if runner is not None:
        if not isinstance(runner, dict):
            raise f._bad("runner_up", "an object or null")
        r = _Fields(runner, f"{f.where}, runner_up")
        r_index = r.need_integer("candidate")
        r_known = _candidate(r, r_index, start)
        runner_up = RunnerUp(candidate=r_index, name=r.text("name") or r_known.name, cpus=r.cpus("cpus") or r_known.cpus, rate=r.number("rate"))
    equivalent, within = f.indexes("equivalent"), f.indexes("within_tolerance")
    return Choice(
        line=line,
        t=f.need_number("t"),
        candidate=index,
        name=f.text("name") or known.name,
        cpus=f.cpus("cpus") or known.cpus,
        rate=f.number("rate"),
        runner_up=runner_up,
        p_value=f.number("p_value"),
        effect=f.number("effect"),
        decided=f.flag("decided"),
        equivalent=equivalent,
        within_tolerance=within,
        verdict=f.text("verdict"),
        rounds=f.integer("rounds"),
        probing_seconds=f.number("probing_seconds"),
        extra=f.extra(),
    )


def _rate(f: _Fields, line: int, start: Start) -> Rate:
    return Rate(
        line=line,
        t=f.need_number("t"),
        start=f.need_number("start"),
        end=f.need_number("end"),
        rate=f.number("rate"),
        candidate=f.integer("candidate"),
        reference=f.number("reference"),
        extra=f.extra(),
    )


def _reprobe(f: _Fields, line: int, start: Start) -> Reprobe:
    return Reprobe(
        line=line,
        t=f.need_number("t"),
        why=f.text("why"),
        rate=f.number("rate"),
        reference=f.number("reference"),
        intervals=f.integer("intervals"),
        extra=f.extra(),
    )


def _metric_change(f: _Fields, line: int, start: Start) -> MetricChange:
    metric = f.text("metric")
    if not metric:
        raise f._bad("metric", "a metric name")
    return MetricChange(
        line=line,
        t=f.need_number("t"),
        metric=metric,
        metric_unit=f.text("metric_unit"),
        metric_notice=f.text("metric_notice"),
        previous=f.text("previous"),
        extra=f.extra(),
    )


def _recheck(f: _Fields, line: int, start: Start) -> Recheck:
    index = f.need_integer("candidate")
    known = _candidate(f, index, start)
    begin, end = _span(f, "recheck")
    return Recheck(
        line=line,
        t=f.need_number("t"),
        candidate=index,
        name=f.text("name") or known.name,
        cpus=f.cpus("cpus") or known.cpus,
        repinned_at=f.need_number("repinned_at"),
        start=begin,
        end=end,
        rate=f.number("rate"),
        against=f.number("against"),
        extra=f.extra(),
    )


def _migrate(f: _Fields, line: int, start: Start) -> Migration:
    return Migration(
        line=line,
        t=f.need_number("t"),
        from_nodes=f.raw("from_nodes"),
        to_nodes=f.raw("to_nodes"),
        pages_before=f.mapping("pages_before"),
        pages_after=f.mapping("pages_after"),
        not_moved=f.integer("not_moved"),
        seconds=f.number("seconds"),
        extra=f.extra(),
    )


def _migrate_attached(f: _Fields, line: int, start: Start) -> MigrationAttached:
    return MigrationAttached(
        line=line,
        t=f.need_number("t"),
        regions=f.integer("regions"),
        bytes=f.integer("bytes"),
        pages_on_node=f.integer("pages_on_node"),
        not_moved=f.integer("not_moved"),
        seconds=f.number("seconds"),
        extra=f.extra(),
    )


def _migrate_accessed(f: _Fields, line: int, start: Start) -> MigrationAccessed:
    return MigrationAccessed(
        line=line,
        t=f.need_number("t"),
        pages=f.integer("pages"),
        pages_on_node=f.integer("pages_on_node"),
        not_moved=f.integer("not_moved"),
        seconds=f.number("seconds"),
        extra=f.extra(),
    )


def _failure(f: _Fields, line: int, start: Start) -> Failure:
    return Failure(line=line, t=f.need_number("t"), text=f.text("text"), error=f.text("error"), extra=f.extra())


def _summary(f: _Fields, line: int, start: Start) -> Summary:
    final = f.raw("final")
    if final is not None and not isinstance(final, dict):
        raise f._bad("final", "an object or null")
    statistics = f.raw("statistics")
    if statistics is not None and not isinstance(statistics, dict):
        raise f._bad("statistics", "an object or null")
    return Summary(
        line=line,
        t=f.need_number("t"),
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
        statistics=statistics,
        extra=f.extra(),
    )


_READERS = {
    Probe.KIND: _probe,
    Choice.KIND: _choice,
    Rate.KIND: _rate,
    Reprobe.KIND: _reprobe,
    MetricChange.KIND: _metric_change,
    Recheck.KIND: _recheck,
    Migration.KIND: _migrate,
    MigrationAttached.KIND: _migrate_attached,
    MigrationAccessed.KIND: _migrate_accessed,
    Failure.KIND: _failure,
    Summary.KIND: _summary,
}


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
