"""What autopin measures: the rate of a metric per worker thread over a window.

The autopin study counts retired instructions per thread with hardware counters. pinlab does so
where the machine has a PMU (:class:`PerfMetric`, any event of ``perf list``), and otherwise uses
fallbacks that are tested on machines without one: the program's own report of its work
(:class:`HeartbeatMetric`, see :mod:`pinlab.heartbeat`), lines of its output matching a pattern
(:class:`StdoutMetric`), and, as a last resort, each thread's CPU time (:class:`TaskClockMetric`).

A metric gives cumulative values (:class:`Reading`); :func:`rates` turns two readings into
per-thread rates and the mean rate per worker thread. The controller hands every read the
current worker tids: threads that appeared or ended between two readings are left out of that
window, never an error.

Choice (:func:`choose_metric`): with no name (``auto``), ``instructions`` where a hardware counter
opens, else the heartbeat when the program beat, else ``task-clock`` with a warning. A metric
named explicitly is insisted on: if it cannot be measured here that is a UsageError saying why
(no PMU, or which kernel setting refuses it), never a silent substitute.
"""

from __future__ import annotations

import errno as errnos
import math
import os
import re
import threading
import time
from dataclasses import dataclass

from pinlab.errors import UsageError
from pinlab.heartbeat import Heartbeat
from pinlab.measure import counters
from pinlab.measure.counters import Event

#: The metrics that are not perf events, for ``--list-metrics`` and messages.
SPECIAL = (
    ("heartbeat", "units of work the program reports per thread (pinlab_heartbeat.h, pinlab.heartbeat.beat) through PINLAB_HEARTBEAT"),
    ("stdout:REGEX", "lines of the program's output matching REGEX (program-wide)"),
    ("task-clock", "CPU time of each thread (/proc): CPU share, not useful work; the last resort"),
)
_KNOWN = "instructions, cycles, heartbeat, stdout:REGEX, task-clock or a perf event (pinlab autopin --list-metrics)"


@dataclass(frozen=True)
class Reading:
    """Cumulative values of a metric at one moment (monotonic seconds)."""

    time: float
    per_thread: dict[int, float] | None  # tid -> value; None for a program-wide metric
    total: float


class Metric:
    """One way of measuring progress: cumulative values, per thread or for the whole program."""

    name: str = ""
    unit: str = ""
    per_thread: bool = True
    notice: str = ""

    def read(self, tids: list[int]) -> Reading:
        raise NotImplementedError

    def nothing_seen(self) -> str | None:
        """Why this metric may have counted nothing so far, when it can tell (None: it cannot)."""
        return None

    def distrust(self) -> str | None:
        """Why this metric's rates cannot rank the candidates for this program, when it saw a
        reason (None: none seen)."""
        return None

    def close(self) -> None:
        """Release what the metric holds (counters, files); reading after it is not allowed."""

    def __enter__(self) -> Metric:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def rates(before: Reading, after: Reading, workers: int) -> tuple[dict[int, float], float]:
    """Per-thread rates (units per second) and the mean rate per worker thread between two readings.

    Per-thread metrics: only the tids present in both readings count (threads that ended or
    appeared are dropped); the mean is over those threads, NaN when there is none. Program-wide
    metrics: no per-thread rates, and the mean is delta total / seconds / ``workers``.
    """
    seconds = after.time - before.time
    if seconds <= 0:
        raise ValueError(f"readings out of order or at the same time ({before.time} then {after.time})")
    if before.per_thread is not None and after.per_thread is not None:
        per = {tid: (value - before.per_thread[tid]) / seconds for tid, value in after.per_thread.items() if tid in before.per_thread}
        return per, (sum(per.values()) / len(per) if per else math.nan)
    if workers < 1:
        raise ValueError(f"workers must be at least 1 (got {workers})")
    return {}, (after.total - before.total) / seconds / workers


# --------------------------------------------------------------------------- perf events


def _refusal(event: Event, code: int) -> str:
    """Why perf_event_open refused or could not count ``event``, with what to do about it."""
    if code in (errnos.EACCES, errnos.EPERM):
        level = counters.paranoid()
        fix = (
            "as root, `sysctl kernel.perf_event_paranoid=2` lets users count their own threads, or give pinlab CAP_PERFMON"
            if level is None or level > 2
            else "the program may belong to another user or be protected: run pinlab as its owner or with CAP_PERFMON"
        )
        return f"the kernel refuses counters (perf_event_paranoid = {level}): {fix}"
    if code in counters._UNAVAILABLE:
        if event.software:
            return f"this kernel does not offer {event.name}"
        return "this machine has no hardware performance counters"
    return f"perf_event_open failed for {event.name} ({os.strerror(code)})"


def event_available(event: Event) -> tuple[bool, bool, str]:
    """(can count, user space only, why not) for ``event`` on a thread of our own."""
    for user_only in (False, True):
        try:
            os.close(counters.open_thread(event, 0, user_only))
            return True, user_only, ""
        except OSError as exc:
            if exc.errno in (errnos.EACCES, errnos.EPERM) and not user_only:
                continue  # paranoid >= 2 refuses kernel counting: try user space only
            return False, user_only, _refusal(event, exc.errno)
    raise AssertionError("unreachable")


class PerfMetric(Metric):
    """A perf event counted on each worker thread: one counter per tid, opened when the tid first
    shows up, closed when it is gone; values scaled for multiplexing."""

    per_thread = True

    def __init__(self, event: Event | str, notice: str | None = None) -> None:
        self.event = counters.parse_event(event) if isinstance(event, str) else event
        ok, self.user_only, why = event_available(self.event)
        if not ok:
            hint = " (a virtual machine without a virtual PMU?)" if why.endswith("counters") else ""
            raise UsageError(f"--metric {self.event.name}: {why}{hint}; use --metric heartbeat, stdout:REGEX or task-clock")
        self.name = self.event.name
        self.unit = "ns" if self.name in ("task-clock", "cpu-clock") else self.name
        scope = " (user space only: perf_event_paranoid)" if self.user_only else ""
        self.notice = notice or f"metric: {self.name}{scope} (perf event counted on each worker thread)"
        self._fds: dict[int, int] = {}

    def _open(self, tid: int) -> int | None:
        try:
            return counters.open_thread(self.event, tid, self.user_only)
        except OSError as exc:
            if exc.errno == errnos.ESRCH:
                return None  # the thread ended before we could watch it
            raise UsageError(f"--metric {self.name} on thread {tid}: {_refusal(self.event, exc.errno)}") from None

    def read(self, tids: list[int]) -> Reading:
        wanted = set(tids)
        for tid in [t for t in self._fds if t not in wanted]:
            os.close(self._fds.pop(tid))
        for tid in tids:
            if tid not in self._fds:
                fd = self._open(tid)
                if fd is not None:
                    self._fds[tid] = fd
        now = time.monotonic()
        values = {tid: float(counters.read_scaled(fd)[0]) for tid, fd in self._fds.items()}
        return Reading(now, values, sum(values.values()))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


# --------------------------------------------------------------------------- heartbeat


class HeartbeatMetric(Metric):
    """Units of work each thread reported through the heartbeat file (a thread not yet seen: 0)."""

    name, unit, per_thread = "heartbeat", "beats", True

    def __init__(self, path: str, notice: str | None = None) -> None:
        self.path = path
        self._heartbeat = Heartbeat(path)
        self.notice = notice or "metric: heartbeat (the program reports its work through PINLAB_HEARTBEAT)"

    def read(self, tids: list[int]) -> Reading:
        now = time.monotonic()
        counts = self._heartbeat.read()
        return Reading(now, {tid: float(counts.get(tid, 0)) for tid in tids}, float(self._heartbeat.total()))

    def close(self) -> None:
        self._heartbeat.close()


# --------------------------------------------------------------------------- output lines

_LINE_LIMIT = 1 << 20  # longest line matched; the rest of a longer line is not looked at


class StdoutMetric(Metric):
    """Lines of the program's output matching a regular expression (program-wide).

    :meth:`tee` copies the program's output to ours unchanged while counting. A program whose
    stdout is a pipe buffers it (4 KiB blocks with C stdio): lines then arrive in bursts, so let it
    flush each line (``stdbuf -oL``, ``fflush``) for steady rates.
    """

    name, unit, per_thread = "stdout", "matches", False

    def __init__(self, pattern: str, notice: str | None = None) -> None:
        try:
            self.regex = re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--metric stdout:{pattern}: not a regular expression ({exc})") from None
        self.name = f"stdout:{pattern}"
        self.notice = notice or f"metric: lines of the program's output matching {pattern!r} (program-wide)"
        self.count = 0
        self.lines = 0  # complete lines read, matching or not
        self.bytes = 0
        self._thread: threading.Thread | None = None

    def tee(self, read_fd: int, write_fd: int) -> threading.Thread:
        """Start a daemon thread copying ``read_fd`` to ``write_fd`` byte for byte until end of file,
        counting matching lines; it closes ``read_fd`` at the end. Output we cannot write (our
        stdout closed) is still read and counted, so the program never blocks on its pipe."""
        self._thread = threading.Thread(target=self._copy, args=(read_fd, write_fd), name="pinlab-stdout-tee", daemon=True)
        self._thread.start()
        return self._thread

    def _copy(self, read_fd: int, write_fd: int) -> None:
        pending = b""
        writing = True
        try:
            while True:
                data = os.read(read_fd, 65536)
                if not data:
                    break
                self.bytes += len(data)
                if writing:
                    writing = _write_all(write_fd, data)
                *lines, pending = (pending + data).split(b"\n")
                self._count(lines)
                pending = pending[:_LINE_LIMIT]
            if pending:
                self._count([pending])  # the last line, ended by the end of the output
        finally:
            os.close(read_fd)

    def _count(self, lines: list[bytes]) -> None:
        search = self.regex.search
        self.lines += len(lines)
        self.count += sum(1 for line in lines if search(line[:_LINE_LIMIT].decode("utf-8", "replace")))

    def nothing_seen(self) -> str | None:
        if self.count:
            return None
        if not self.bytes:
            return (
                "no output has come from the program yet: its output is a pipe here, which C stdio and Python fill in blocks "
                "of 4-8 KiB before writing; make it write each line as it is done: stdbuf -oL PROGRAM (C stdio), "
                "PYTHONUNBUFFERED=1 or python3 -u (Python), fflush(stdout) after each line"
            )
        if not self.lines:
            return f"{self.bytes} bytes of output came without a line end: the program's lines must end with a newline"
        return f"{self.lines} lines of output came, none matching {self.regex.pattern!r}: check the regular expression"

    def read(self, tids: list[int]) -> Reading:
        return Reading(time.monotonic(), None, float(self.count))

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def _write_all(fd: int, data: bytes) -> bool:
    """Write every byte; False when the other end is gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except (BrokenPipeError, OSError):
            return False
    return True


# --------------------------------------------------------------------------- CPU time


class TaskClockMetric(Metric):
    """CPU time of each thread, from /proc/TID/task/TID/schedstat (stat's utime+stime where the
    kernel has no schedstat). A thread that spins looks busy on any CPU: this measures CPU share,
    not useful work."""

    name, unit, per_thread = "task-clock", "CPU seconds", True
    WARNING = (
        "it measures each thread's share of CPU time, not useful work (a thread that spins or "
        "waits actively looks as fast on any CPU): make the program beat (pinlab_heartbeat.h) "
        "or use --metric stdout:REGEX"
    )

    #: A thread waits by sched_yield (OpenBLAS's pool between calls, MPI progress threads) when,
    #: over the readings so far, at least this share of its CPU time was spent in the kernel (alone
    #: on its CPU each yield returns at once: the loop is almost all system calls) with fewer page
    #: faults than YIELD_MOST_FAULTS per second of that kernel time (first-touching memory is
    #: kernel time too, thousands of faults per millisecond; a yield loop has none) ...
    YIELD_KERNEL_SHARE, YIELD_MOST_FAULTS = 0.3, 1000
    #: ... or it was preempted (nonvoluntary switches: a yield that gives the CPU away is one) at
    #: least this many times per second of CPU time (beside a runnable thread every yield gives
    #: way after a few microseconds; a thread that computes is preempted at most once per time
    #: slice, about a thousand times per CPU second; wake-ups from sleeping are voluntary).
    YIELD_PREEMPTED_PER_CPU_SECOND = 20_000
    #: The least CPU time (seconds) and preemptions a thread needs for either rule to judge it.
    YIELD_MIN_CPU, YIELD_MIN_PREEMPTED = 0.2, 100
    #: A yield loop alone on its CPU for part of the time and beside a runnable thread for the rest
    #: (the load moved) has too little CPU time for the first rule and too much for the second's
    #: rate: the kernel share then judges it from this much CPU time when it was also preempted
    #: YIELD_MIN_PREEMPTED times (a computing thread in system calls blocks, it is not preempted).
    YIELD_MIN_CPU_PREEMPTED = 0.1

    def __init__(self, notice: str | None = None) -> None:
        self.notice = notice or f"metric: task-clock; warning: {self.WARNING}"
        self._schedstat = _schedstat_seconds(os.getpid()) is not None
        self._tick = os.sysconf("SC_CLK_TCK")
        self._first: dict[int, ThreadTimes] = {}  # each worker's times when first read, and last
        self._last: dict[int, ThreadTimes] = {}

    def _times(self, tid: int) -> ThreadTimes | None:
        try:
            with open(f"/proc/{tid}/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # minflt, majflt, utime, stime (fields 10, 12, 14, 15 of proc(5))
            faults, user, system = int(fields[7]) + int(fields[9]), int(fields[11]), int(fields[12])
        except (OSError, IndexError, ValueError):
            return None
        cpu = _schedstat_seconds(tid) if self._schedstat else None
        return ThreadTimes((user + system) / self._tick if cpu is None else cpu, _preempted(tid), user, system, faults)

    def read(self, tids: list[int]) -> Reading:
        now = time.monotonic()
        values = {}
        for tid in tids:
            times = self._times(tid)
            if times is None:
                continue
            values[tid] = times.cpu
            self._first.setdefault(tid, times)
            self._last[tid] = times
        return Reading(now, values, sum(values.values()))

    def yield_waiters(self) -> dict[int, str]:
        """The threads read so far that wait by sched_yield, each with what shows it."""
        found = {}
        for tid, last in self._last.items():
            first = self._first[tid]
            cpu, user, system = last.cpu - first.cpu, last.user - first.user, last.system - first.system
            faults = last.faults - first.faults
            preempted = None if last.preempted is None or first.preempted is None else last.preempted - first.preempted
            often = preempted is not None and preempted >= self.YIELD_MIN_PREEMPTED
            if (
                (cpu >= self.YIELD_MIN_CPU or (often and cpu >= self.YIELD_MIN_CPU_PREEMPTED))
                and user + system > 0
                and system / (user + system) >= self.YIELD_KERNEL_SHARE
                and faults < self.YIELD_MOST_FAULTS * max(system / self._tick, 1 / self._tick)
            ):
                found[tid] = f"{system / (user + system):.0%} of its CPU time in the kernel, {faults} page faults" + (
                    f", preempted {preempted} times" if cpu < self.YIELD_MIN_CPU else ""
                )
            elif preempted is not None and cpu > 0:
                if often and preempted / cpu >= self.YIELD_PREEMPTED_PER_CPU_SECOND:
                    found[tid] = f"preempted {preempted} times in {cpu * 1000:.3g} ms of CPU time"
        return found

    def distrust(self) -> str | None:
        found = self.yield_waiters()
        if not found:
            return None
        shown = "; ".join(f"thread {tid}: {why}" for tid, why in sorted(found.items())[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        return (
            f"{len(found)} worker thread{'s' if len(found) > 1 else ''} wait{'' if len(found) > 1 else 's'} by sched_yield, as OpenBLAS's "
            f"pool and MPI progress threads do ({shown}{more}): task-clock counts that waiting as work, so it cannot tell which "
            "candidate is faster; make the program beat (pinlab_heartbeat.h) or use --metric stdout:REGEX"
        )


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's CPU time (seconds), preemptions (None where /proc has no count), user and
    system time (ticks) and page faults."""

    cpu: float
    preempted: int | None
    user: int
    system: int
    faults: int = 0


def _schedstat_seconds(tid: int) -> float | None:
    """Time on CPU of thread ``tid`` in seconds (first field of schedstat, ns); None when gone."""
    try:
        with open(f"/proc/{tid}/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _preempted(tid: int) -> int | None:
    """Thread ``tid``'s nonvoluntary context switches (its status file), None when unknown."""
    try:
        with open(f"/proc/{tid}/task/{tid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"nonvoluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return None


# --------------------------------------------------------------------------- choosing


def choose_metric(name: str | None, *, heartbeat_path: str | None, heartbeat_seen: bool) -> Metric:
    """The metric for ``--metric NAME`` (None or ``auto``: the best one available), with its notice."""
    text = (name or "auto").strip()
    if text == "auto":
        return _automatic(heartbeat_path, heartbeat_seen)
    if text == "heartbeat":
        if not heartbeat_path:
            raise UsageError(
                "--metric heartbeat: the program has no PINLAB_HEARTBEAT: start it under autopin, or "
                "`export PINLAB_HEARTBEAT=/dev/shm/NAME` before starting it, and make it beat (pinlab_heartbeat.h)"
            )
        later = "" if heartbeat_seen else "; it has not beaten yet"
        return HeartbeatMetric(heartbeat_path, notice=f"metric: heartbeat (asked for; the program reports its work through PINLAB_HEARTBEAT{later})")
    if text.startswith("stdout:"):
        return StdoutMetric(text[len("stdout:") :])
    if text == "task-clock":
        return TaskClockMetric(notice=f"metric: task-clock (asked for); warning: {TaskClockMetric.WARNING}")
    try:
        event = counters.parse_event(text)
    except UsageError:
        raise UsageError(f"unknown metric {text!r}: use {_KNOWN}") from None
    return PerfMetric(event, notice=f"metric: {event.name} (asked for; perf event counted on each worker thread)")


def _automatic(heartbeat_path: str | None, heartbeat_seen: bool) -> Metric:
    """instructions, else the heartbeat if the program beat, else task-clock; the notice says why."""
    instructions = counters.parse_event("instructions")
    ok, user_only, why = event_available(instructions)
    if ok:
        scope = ", user space only (perf_event_paranoid)" if user_only else ""
        return PerfMetric(instructions, notice=f"metric: instructions (hardware counter of each worker thread{scope}, as in the autopin study)")
    if heartbeat_path and heartbeat_seen:
        return HeartbeatMetric(heartbeat_path, notice=f"metric: heartbeat ({why}; the program reports its work through PINLAB_HEARTBEAT)")
    silent = (
        "and no thread of the program had beaten through PINLAB_HEARTBEAT by the end of the initialisation: "
        "one that beats later wants a longer -i, or --metric heartbeat"
        if heartbeat_path
        else "and the program reports no heartbeat"
    )
    return TaskClockMetric(notice=f"metric: task-clock ({why}, {silent}); warning: {TaskClockMetric.WARNING}")


def _perf_names() -> list[tuple[str, str]]:
    """(name, description) of every perf event pinlab can name, aliases left out."""
    names: list[tuple[str, str]] = []
    seen: set[int] = set()
    for event, config in counters.HARDWARE.items():
        if config not in seen:
            seen.add(config)
            names.append((event, "hardware event"))
    seen = set()
    for event, config in counters.SOFTWARE.items():
        if config not in seen and event != "task-clock":  # task-clock is listed as the CPU-time metric
            seen.add(config)
            names.append((event, "software event"))
    for cache in counters._CACHES:
        for op in counters._CACHE_OPS:
            for result in ("es" if op == "prefetch" else "s", "-misses"):
                names.append((f"{cache}-{op}{result}", "hardware cache event"))
    pmus = counters._PMUS
    for events in sorted(pmus.glob("*/events")) if pmus.is_dir() else []:
        for entry in sorted(events.iterdir()):
            if "." not in entry.name:  # .scale and .unit files describe an event, they are not one
                names.append((f"{events.parent.name}/{entry.name}/", f"event of the {events.parent.name} PMU"))
    return names


def list_metrics() -> list[tuple[str, str, bool]]:
    """(name, description, available here) of every metric, for ``pinlab autopin --list-metrics``."""
    result = []
    for name, description in _perf_names():
        try:
            ok = event_available(counters.parse_event(name))[0]
        except (UsageError, OSError, ValueError):
            ok = False
        result.append((name, description, ok))
    result.extend((name, description, True) for name, description in SPECIAL)
    return result
