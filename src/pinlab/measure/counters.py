"""Performance counters of a whole program, every thread included, with ``perf_event_open``.

How a program's counts are taken (the way ``perf stat`` does it, without a fork of our own):
each event is opened on pinlab's launching thread, disabled, with ``inherit`` (every task it
creates from then on gets a copy, and so does every thread those create) and ``enable_on_exec``
(a copy starts counting when its task executes the program). pinlab's own thread never
executes anything, so it counts nothing; the program counts from its first instruction, and
when its tasks exit their counts are added to the event pinlab holds, read after the wait.

Event names are those of ``perf list``: the generic hardware events (``cycles``,
``instructions``, ``cache-misses``...), the software events (``task-clock``,
``context-switches``, ``cpu-migrations``, ``page-faults``...), the hardware cache events
(``LLC-load-misses``, ``L1-dcache-loads``, ``dTLB-load-misses``, ``node-load-misses``...), any
event a PMU names in sysfs (``mem-loads`` or ``cpu/mem-loads/``), a PMU with terms
(``cpu/event=0x3c,umask=0x00/``) and raw events (``r013c``).

Counts are scaled for multiplexing (value x time enabled / time running), as perf does, and the
share of time an event really ran is kept so a report can say when it was estimated.
"""

from __future__ import annotations

import ctypes
import errno as errnos
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from pinlab.errors import UsageError

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_RAW = 0, 1, 3, 4
HARDWARE = {
    "cycles": 0,
    "cpu-cycles": 0,
    "instructions": 1,
    "cache-references": 2,
    "cache-misses": 3,
    "branches": 4,
    "branch-instructions": 4,
    "branch-misses": 5,
    "bus-cycles": 6,
    "stalled-cycles-frontend": 7,
    "stalled-cycles-backend": 8,
    "ref-cycles": 9,
}
SOFTWARE = {
    "cpu-clock": 0,
    "task-clock": 1,
    "page-faults": 2,
    "faults": 2,
    "context-switches": 3,
    "cs": 3,
    "cpu-migrations": 4,
    "migrations": 4,
    "minor-faults": 5,
    "major-faults": 6,
    "alignment-faults": 7,
    "emulation-faults": 8,
}
_CACHES = {"L1-dcache": 0, "L1-icache": 1, "LLC": 2, "dTLB": 3, "iTLB": 4, "branch": 5, "node": 6}
_CACHE_OPS = {"load": 0, "store": 1, "prefetch": 2}
# perf's spelling: loads, stores, prefetches; load-misses, store-misses, prefetch-misses.
_CACHE_EVENT = re.compile(r"^(L1-dcache|L1-icache|LLC|dTLB|iTLB|branch|node)-(load|store|prefetch)((?<=prefetch)es|(?<!prefetch)s|-misses)$")

#: What ``--counters default`` asks for: the hardware events of [ribeiro2012] and the software ones every Linux has.
DEFAULT = ("cycles", "instructions", "cache-misses", "task-clock", "context-switches", "cpu-migrations", "page-faults")

_PMUS = Path("/sys/bus/event_source/devices")
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5
_DISABLED, _INHERIT, _EXCLUDE_KERNEL, _EXCLUDE_HV, _ENABLE_ON_EXEC = 1 << 0, 1 << 1, 1 << 5, 1 << 6, 1 << 12
_READ_TIMES = 1 | 2  # PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
PERF_FLAG_FD_CLOEXEC = 8
_SYSCALL_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_UNAVAILABLE = (errnos.ENOENT, errnos.EOPNOTSUPP, errnos.ENODEV, errnos.ENOSYS, errnos.EINVAL)


@dataclass(frozen=True)
class Event:
    """One countable event: its name as the user wrote it and what perf_event_open needs."""

    name: str
    type: int
    config: int = 0
    config1: int = 0
    config2: int = 0

    @property
    def software(self) -> bool:
        return self.type == PERF_TYPE_SOFTWARE


# --------------------------------------------------------------------------- names


def _pmu_format(pmu: Path) -> dict[str, list[tuple[str, int, int]]]:
    """term -> [(config field, first bit, last bit)] from a PMU's sysfs ``format`` directory."""
    fields: dict[str, list[tuple[str, int, int]]] = {}
    directory = pmu / "format"
    if not directory.is_dir():
        return fields
    for entry in directory.iterdir():
        field, _, bits = entry.read_text().strip().partition(":")
        for part in bits.split(","):
            first, _, last = part.partition("-")
            fields.setdefault(entry.name, []).append((field, int(first), int(last or first)))
    return fields


def _pmu_terms(name: str, pmu: Path, terms: str) -> Event:
    """An event from ``term=value,...`` terms in the PMU's own format (``event=0x3c,umask=0``)."""
    formats = _pmu_format(pmu)
    configs = {"config": 0, "config1": 0, "config2": 0}
    for term in filter(None, (t.strip() for t in terms.split(","))):
        key, _, value = term.partition("=")
        if key not in formats:
            known = ", ".join(sorted(formats)) or "none"
            raise UsageError(f"counter {name!r}: PMU {pmu.name} has no term {key!r} (its terms: {known})")
        try:
            number = int(value, 0) if value else 1
        except ValueError:
            raise UsageError(f"counter {name!r}: {value!r} is not a number (for {key})") from None
        shift = 0
        for field, first, last in formats[key]:  # a term may be split over several bit ranges
            width = last - first + 1
            configs[field] = configs.get(field, 0) | (((number >> shift) & ((1 << width) - 1)) << first)
            shift += width
    return Event(name, int((pmu / "type").read_text()), configs["config"], configs["config1"], configs["config2"])


def _sysfs_event(name: str, pmu_name: str | None, event: str) -> Event | None:
    """An event a PMU names in /sys/bus/event_source/devices/PMU/events (e.g. ``mem-loads``)."""
    pmus = [_PMUS / pmu_name] if pmu_name else sorted(_PMUS.glob("*")) if _PMUS.is_dir() else []
    for pmu in pmus:
        path = pmu / "events" / event
        if path.is_file():
            return _pmu_terms(name, pmu, path.read_text().strip())
    return None


def parse_event(name: str) -> Event:
    """The event for a name of ``perf list``; unknown names are a UsageError."""
    text = name.strip()
    if text in HARDWARE:
        return Event(text, PERF_TYPE_HARDWARE, HARDWARE[text])
    if text in SOFTWARE:
        return Event(text, PERF_TYPE_SOFTWARE, SOFTWARE[text])
    cache = _CACHE_EVENT.match(text)
    if cache:
        result = 1 if cache.group(3) == "-misses" else 0
        return Event(text, PERF_TYPE_HW_CACHE, _CACHES[cache.group(1)] | _CACHE_OPS[cache.group(2)] << 8 | result << 16)
    raw = re.fullmatch(r"r([0-9a-fA-F]+)", text)
    if raw:
        return Event(text, PERF_TYPE_RAW, int(raw.group(1), 16))
    pmu = re.fullmatch(r"([A-Za-z0-9_.-]+)/([^/]*)/", text)
    if pmu:
        if not (_PMUS / pmu.group(1) / "type").is_file():
            known = ", ".join(p.name for p in sorted(_PMUS.glob("*"))) if _PMUS.is_dir() else "none"
            raise UsageError(f"counter {name!r}: no PMU {pmu.group(1)!r} on this machine (PMUs: {known})")
        named = _sysfs_event(text, pmu.group(1), pmu.group(2)) if "=" not in pmu.group(2) else None
        return named or _pmu_terms(text, _PMUS / pmu.group(1), pmu.group(2))
    named = _sysfs_event(text, None, text) if re.fullmatch(r"[A-Za-z0-9_.-]+", text) else None
    if named is not None:
        return named
    raise UsageError(
        f"unknown counter {name!r}: use a name of `perf list` such as {', '.join(DEFAULT)}, "
        "LLC-load-misses, a PMU event (cpu/event=0x3c/) or a raw event (r013c)"
    )


def parse_events(text: str | None) -> tuple[Event, ...]:
    """``--counters`` value: comma-separated names, ``default`` for :data:`DEFAULT`; duplicates dropped."""
    if text is None:
        return ()
    parts = _split(text)
    if not parts:
        raise UsageError(f"--counters {text!r} names no event: give perf list names such as cycles,instructions, or default")
    names: list[str] = []
    for part in parts:
        names.extend(DEFAULT if part == "default" else [part])
    return tuple(parse_event(n) for n in dict.fromkeys(names))


def _split(text: str) -> list[str]:
    """Split on commas that are not inside a PMU's ``/.../`` terms."""
    parts, depth, current = [], False, ""
    for char in text:
        if char == "/":
            depth = not depth
        if char == "," and not depth:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


# --------------------------------------------------------------------------- opening and reading

_libc: ctypes.CDLL | None = None


def _open(event: Event, flags: int, pid: int = 0) -> int:
    """perf_event_open(attr, pid (0: this thread; a tid: that thread), cpu=-1, group=-1); raises OSError."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    number = _SYSCALL_PERF_EVENT_OPEN.get(os.uname().machine)
    if number is None:
        raise OSError(errnos.ENOSYS, f"perf_event_open: unknown system call number on {os.uname().machine}")
    attr = bytearray(_ATTR_SIZE)
    struct.pack_into("=IIQQQQQ", attr, 0, event.type, _ATTR_SIZE, event.config, 0, 0, _READ_TIMES, flags)
    struct.pack_into("=QQ", attr, 56, event.config1, event.config2)
    buffer = (ctypes.c_char * _ATTR_SIZE).from_buffer(attr)
    fd = _libc.syscall(number, buffer, ctypes.c_int(pid), -1, -1, ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


def paranoid() -> int | None:
    """/proc/sys/kernel/perf_event_paranoid (None where it cannot be read)."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Availability:
    """Which of the asked events can be counted here, and the notices to show about the others."""

    usable: tuple[Event, ...]
    notices: list[str]
    user_only: bool  # kernel events excluded (perf_event_paranoid)


def probe(events: tuple[Event, ...]) -> Availability:
    """Open each event once on this thread to learn whether it can be counted for a program.

    Events this machine cannot count (a VM without a virtual PMU has no hardware events) are
    left out with a notice; if none is left, that is a UsageError. When the kernel refuses
    kernel-side counting (``perf_event_paranoid`` >= 2 without CAP_PERFMON), events count user
    space only, with a notice.
    """
    usable: list[Event] = []
    missing: list[str] = []
    user_only = False
    refused: list[str] = []
    for event in events:
        for exclude in (0, _EXCLUDE_KERNEL | _EXCLUDE_HV) if not user_only else (_EXCLUDE_KERNEL | _EXCLUDE_HV,):
            try:
                os.close(_open(event, _DISABLED | _INHERIT | _ENABLE_ON_EXEC | exclude))
            except OSError as exc:
                if exc.errno in (errnos.EACCES, errnos.EPERM) and not exclude:
                    continue  # try again counting user space only
                if exc.errno in (errnos.EACCES, errnos.EPERM):
                    refused.append(event.name)
                elif exc.errno in _UNAVAILABLE:
                    missing.append(event.name)
                else:
                    raise UsageError(f"counter {event.name}: perf_event_open failed ({exc.strerror})") from None
                break
            user_only = user_only or bool(exclude)
            usable.append(event)
            break
    notices = []
    hardware_missing = any(e.name in missing and not e.software for e in events)
    why = (
        "this machine has no hardware performance counters (a virtual machine without a virtual PMU?)"
        if hardware_missing and all(e.software for e in usable)
        else "this machine's kernel or CPU does not offer them"
    )
    if missing and usable:
        notices.append(f"counters {', '.join(missing)} cannot be counted: {why}; counting {', '.join(e.name for e in usable)} only")
    if refused:
        notices.append(
            f"counters {', '.join(refused)} refused by the kernel (perf_event_paranoid = {paranoid()}): "
            "as root, `sysctl kernel.perf_event_paranoid=1` allows them"
        )
    if user_only:
        notices.append(
            f"counters count user space only (perf_event_paranoid = {paranoid()}); "
            "as root, `sysctl kernel.perf_event_paranoid=1` counts the kernel side too"
        )
    if events and not usable:
        reasons = ([why] if missing else []) + [n for n in notices if "refused" in n]
        raise UsageError(
            f"none of the counters asked for ({', '.join(e.name for e in events)}) can be counted here: "
            f"{'; '.join(reasons)}; software counters ({', '.join(n for n in DEFAULT if n in SOFTWARE)}) can be"
        )
    return Availability(tuple(usable), notices, user_only)


def open_thread(event: Event, tid: int, user_only: bool = False) -> int:
    """A counter of one thread (``tid``), counting from now, not inherited by the threads it creates.

    Raises OSError (ESRCH: the thread is gone; EACCES: refused, see :func:`paranoid`).
    """
    return _open(event, _EXCLUDE_KERNEL | _EXCLUDE_HV if user_only else 0, pid=tid)


def read_scaled(fd: int) -> tuple[int, int, int]:
    """(value scaled for multiplexing, time enabled, time running) of an open counter, as perf does."""
    value, enabled, running = struct.unpack("=QQQ", os.read(fd, 24))
    return (value if running in (0, enabled) else round(value * enabled / running)), enabled, running


class ProgramCounters:
    """Counters opened on the launching thread for the next program it starts (see the module doc).

    Open them just before the spawn, on the thread that spawns, and :meth:`read` them after the
    program was waited for; always :meth:`close` them.
    """

    def __init__(self, events: tuple[Event, ...], user_only: bool = False) -> None:
        self.events = events
        self.fds: list[int] = []
        flags = _DISABLED | _INHERIT | _ENABLE_ON_EXEC | (_EXCLUDE_KERNEL | _EXCLUDE_HV if user_only else 0)
        try:
            for event in events:
                self.fds.append(_open(event, flags))
        except OSError as exc:
            self.close()
            raise UsageError(f"counter {event.name}: perf_event_open failed ({exc.strerror})") from None

    def read(self) -> dict[str, dict[str, float]]:
        """event -> value (scaled for multiplexing), enabled_ns, running_ns."""
        counts = {}
        for event, fd in zip(self.events, self.fds):
            scaled, enabled, running = read_scaled(fd)
            counts[event.name] = {"value": scaled, "enabled_ns": enabled, "running_ns": running}
        return counts

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
