"""What really happened in one run: threads, where they ran over time, times, exit status, pages."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure.events import AffinityCall
from pinlab.outputs import read_json_file
from pinlab.version import __version__
from pinlab.words import plural

#: The version of the run record (key ``pinlab_run``): fields are only added within a version.
RECORD_FORMAT_VERSION = 1

#: Fields every run record has, with the JSON types a reader may rely on.
_RECORD_FIELDS: dict[str, tuple[type, ...]] = {
    "argv": (list,),
    "threads": (list,),
    "processes": (list,),
    "exit_status": (int,),
    "wall_seconds": (int, float),
    "migrations": (int,),
    "warnings": (list,),
}

_RECORD_HINT = "give a file written by `pinlab run --record FILE.json`"


@dataclass
class ThreadRecord:
    """One thread of the program. ``index`` is its creation index (0 = main thread).

    Times (``start_time``, ``sample_times``, the times in ``mask_changes`` and ``off_plan``) are
    seconds since pinlab started the program, all on the monotonic clock.
    """

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
    start_time: float | None = None  # when the thread ran its first instruction (from the preload library)
    # Raw observations of the sampler, kept only when they change: (sample index, value). Not in the JSON.
    masks_seen: list[tuple[int, frozenset[int]]] = field(default_factory=list, repr=False)
    kernel_seen: list[tuple[int, int]] = field(default_factory=list, repr=False)
    kernel_baseline: int | None = field(default=None, repr=False)  # kernel migrations the initial placement explains, if known

    def _after_start(self) -> list[int]:
        """Indexes of the samples surely taken after the thread's first instruction.

        A sample taken while glibc is still creating a thread shows its creator's CPU and mask (the
        thread's own affinity is applied just before it runs), so it says nothing about the
        thread. The preload library stamps each thread's first instruction; a sample whose
        timestamp (taken before /proc is read) is not earlier came after it. A process's main
        thread the library never saw (an unpinned run) exists from its fork, before any sample:
        all count. For any other thread the library never saw, the first sample is the doubtful
        one and is left out.
        """
        if self.start_time is not None:
            return [i for i, t in enumerate(self.sample_times) if t >= self.start_time]
        if self.tid == self.pid:
            return list(range(len(self.sample_times)))
        return list(range(1, len(self.sample_times)))

    @staticmethod
    def _value_at(changes: list[tuple[int, Any]], index: int) -> Any:
        """The value a change list (sample index, value) holds at sample ``index`` (None before the first)."""
        value = None
        for at, seen in changes:
            if at > index:
                break
            value = seen
        return value

    def _start_mask(self) -> frozenset[int] | None:
        return mask_set(self.mask_at_start)

    def _wide(self) -> frozenset[int] | None:
        """The plan's CPUs a main thread started on (see ``planned_start_mask``), else None."""
        return mask_set(self.planned_start_mask)

    def _placed(self) -> list[int]:
        """Indexes of the samples taken once the thread was in its final place: for a main thread
        started on the plan's CPUs, those after it was narrowed to its own (none if never was)."""
        after = self._after_start()
        if self._wide() is None:
            return after
        if self.narrowed_at is None:
            return []
        return [i for i in after if self.sample_times[i] >= self.narrowed_at]

    def _allowed_at(self, i: int) -> frozenset[int]:
        """Where the plan lets the thread be at sample ``i``: its CPU, or, for a main thread not yet
        narrowed (or narrowed between the sample's timestamp and its reading), the plan's CPUs."""
        wide = self._wide()
        if wide is not None and (self.narrowed_at is None or self.sample_times[i] < self.narrowed_at):
            return wide
        return frozenset({self.planned_cpu})

    def _kernel_start(self) -> int | None:
        """The kernel's migration count that the thread's initial placement explains.

        ``kernel_baseline`` when the runner knows it (see :func:`pinlab.launch.runner.kernel_baselines`);
        none for a process's main thread; otherwise the count at the first sample taken after the thread started, so that only later
        migrations are held against it (a lower bound, never a false alarm).
        """
        if self._wide() is not None:  # moves among the plan's CPUs and the narrowing are its placement
            placed = self._placed()
            return self._value_at(self.kernel_seen, placed[0]) if placed else None
        if self.kernel_baseline is not None:
            return self.kernel_baseline
        if self.tid == self.pid:
            return 0  # a process's main thread: the kernel's count starts at its fork, and it is born where it may run
        after = self._after_start()
        return self._value_at(self.kernel_seen, after[0]) if after else None

    def _kernel_after_placement(self) -> int | None:
        start = self._kernel_start()
        if self.kernel_migrations is None or start is None:
            return None
        return max(0, self.kernel_migrations - start)

    @property
    def migrations(self) -> int:
        """CPU changes of the thread after its initial placement (a lower bound of the real count).

        The larger of two counts: the changes seen from its CPU at its first instruction through
        the samples taken after it, and the kernel's own count (``se.nr_migrations``, last read)
        less the initial move. A thread moved away between two samples and back is only in the
        kernel's count; one that ran on another CPU from its first sample on moved at least once.
        """
        wide = self._wide() is not None
        cpus = [self.cpu_at_start] if self.start_time is not None and self.cpu_at_start is not None and not wide else []
        cpus += [self.sample_cpus[i] for i in (self._placed() if wide else self._after_start())]
        seen = sum(1 for a, b in zip(cpus, cpus[1:]) if a != b)
        return max(seen, self._kernel_after_placement() or 0)

    @property
    def mask_changes(self) -> list[dict[str, Any]]:
        """Each affinity mask seen after the thread started that differs from the one before it
        (from its mask at its first instruction on): when it was seen, and the mask (a CPU list)."""
        changes: list[dict[str, Any]] = []
        current = self._start_mask() if self.start_time is not None else None
        for i in self._after_start():
            mask = self._value_at(self.masks_seen, i)
            if mask is None:
                continue
            narrowing = current is not None and current == self._wide() and self.narrowed_to is not None and mask == {self.narrowed_to}
            if current is not None and mask != current and not narrowing:
                changes.append({"time": self.sample_times[i], "mask": format_cpulist(mask)})
            current = mask
        return changes

    @property
    def off_plan(self) -> dict[str, Any] | None:
        """The first observation that contradicts the thread's plan CPU, or None.

        Checked in time order: its mask at its first instruction, then every sample taken after
        it started (the mask the thread had, the CPU it last ran on, and the kernel's migration
        count beyond the initial move). ``time`` is when it was seen, ``seen`` what.
        """
        planned = self.planned_cpu
        if planned is None or planned < 0:
            return None
        start_mask, kernel_start = self._start_mask(), self._kernel_start()
        if start_mask is not None and start_mask != (self._wide() or {planned}):
            return {"time": self.start_time, "seen": f"its mask at its first instruction was {_cpus_text(start_mask)}"}
        if self.narrowed_to is not None and self.narrowed_to != planned:
            return {"time": self.narrowed_at, "seen": f"it was narrowed to CPU {self.narrowed_to}"}
        placed = set(self._placed())
        for i in self._after_start():
            mask = self._value_at(self.masks_seen, i)
            count = self._value_at(self.kernel_seen, i)
            allowed = self._allowed_at(i)  # a main thread not yet narrowed may already be, by the time /proc is read
            if mask is not None and mask not in (allowed, {planned}):
                seen = f"its mask was {_cpus_text(mask)}"
            elif self.sample_cpus[i] not in allowed:
                seen = f"it ran on CPU {self.sample_cpus[i]}"
            elif i in placed and count is not None and kernel_start is not None and count > kernel_start:
                seen = f"the kernel counted {plural(count - kernel_start, 'migration')} after its initial placement"
            else:
                continue
            return {"time": self.sample_times[i], "seen": seen}
        return None

    @property
    def pinned_as_planned(self) -> bool | None:
        """True only if the thread's mask at its first instruction was its plan CPU (for the first
        process's main thread: the plan's CPUs, then narrowed to its own) and nothing seen later
        (sampled mask and CPU, kernel migrations after the initial placement) contradicts it;
        None for a thread without a plan CPU (helpers, unpinned runs) or without a mask at start."""
        if self.planned_cpu is None or self.planned_cpu < 0 or self.mask_at_start is None:
            return None
        return self._start_mask() is not None and self.off_plan is None  # off_plan checks the mask at start too

    def name(self) -> str:
        """How messages name the thread: its creation index, tid, role and plan slot."""
        if self.role == "main":
            what = "main thread"
        elif self.role == "worker" and self.slot is not None:
            what = f"worker slot {self.slot}"
        else:
            what = self.role
        head = f"thread {self.index}" if self.index is not None else "a thread"
        return f"{head} (tid {self.tid}, {what})"

    def departure(self) -> str | None:
        """One phrase for the summary when the thread's mask changed after its creation or it left
        its plan CPU, naming it and saying when that was seen; None otherwise."""
        changes = self.mask_changes
        if changes:
            first = changes[0]
            text = (
                f"{self.name()} was re-bound to {_cpus_text(frozenset(parse_cpulist(first['mask'])))} after creation (seen at {first['time']:.3f} s)"
            )
            if len(changes) > 1:
                text += f", then {plural(len(changes) - 1, 'more time')}"
            return text
        off = self.off_plan
        if off is not None:
            when = f" (seen at {off['time']:.3f} s)" if off["time"] is not None else ""
            return f"{self.name()} left its planned CPU {self.planned_cpu}: {off['seen']}{when}"
        return None


def mask_set(text: str | None) -> frozenset[int] | None:
    """A mask as the preload library writes it (a CPU list; '-' when unreadable) as a set; None
    when there is none or it is not a CPU list (a very long mask is cut at the end of its line)."""
    if not text or text == "-":
        return None
    try:
        return frozenset(parse_cpulist(text))
    except UsageError:
        return None


def _cpus_text(cpus: frozenset[int]) -> str:
    """'CPU 3' or 'CPUs 0-3', as the summary says it."""
    return f"{'CPU' if len(cpus) == 1 else 'CPUs'} {format_cpulist(cpus)}"


#: Threads the summary names one by one; the others are counted (the record has them all).
NAMED_DEPARTURES = 3


def _departures_text(threads: list[ThreadRecord]) -> str:
    """The summary's part naming each thread that was re-bound or left its plan CPU."""
    departures = [text for text in (t.departure() for t in threads) if text]
    if not departures:
        return ""
    text = "; " + "; ".join(departures[:NAMED_DEPARTURES])
    if len(departures) > NAMED_DEPARTURES:
        text += f"; and {plural(len(departures) - NAMED_DEPARTURES, 'more thread')} (see --record)"
    return text


#: Libraries the summary names for the program's affinity calls; the record has them all.
NAMED_CALLERS = 3


def _affinity_calls_text(calls: list[AffinityCall]) -> str:
    """The summary's clause on the program's own affinity calls (whoever re-bound a thread), with
    the objects that made them by file name, most calls first; empty when there were none."""
    if not calls:
        return ""
    counts: dict[str, int] = {}
    for call in calls:
        name = os.path.basename(call.library) if call.library else "?"
        counts[name] = counts.get(name, 0) + 1
    names = sorted(counts, key=lambda n: -counts[n])
    shown = ", ".join(names[:NAMED_CALLERS]) + (", ..." if len(names) > NAMED_CALLERS else "")
    return f"; {plural(len(calls), 'affinity call')} by the program ({shown})"


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
    numa_balancing: dict | None = None  # kernel.numa_balancing the run ran under (pinlab.memory.autonuma.balancing)
    balance: list[dict] | None = None  # --balance's steals (pinlab.memory.balance.Steal.to_json); None without --balance
    affinity_calls: list[AffinityCall] = field(default_factory=list)  # the program's own mask changes, in the order made

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

    def wrapped_slots(self, plan_cpus: int) -> str | None:
        """A warning when the process pinlab started created no thread and ran the program as a
        child (a wrapper script that forks instead of exec'ing: it holds slot 0, the program's
        threads come one slot later) and so the program's threads took plan slots past the plan's
        end, sharing its CPUs round-robin; None otherwise (a program that simply starts more
        threads than the plan has CPUs is told about by the OpenMP checks, or chose to)."""
        threaded = {t.pid for t in self.threads if t.role != "main"}  # processes that created threads
        if not threaded or self.pid in threaded:
            return None
        wrapped = [t for t in self.threads if t.slot is not None and t.slot >= plan_cpus and t.pid in threaded]
        if not wrapped:
            return None
        first = next((t for t in self.threads if t.pid == self.pid), None)
        program = os.path.basename(first.start_library or "") if first is not None else ""
        return (
            f"{plural(len(wrapped), 'thread')} of {plural(len({t.pid for t in wrapped}), 'process', 'processes')} took plan slots "
            f"past the plan's {plural(plan_cpus, 'CPU')} and share its CPUs round-robin (--overflow wrap): the process pinlab "
            f"started ({program or 'pid ' + str(self.pid)}) created no thread and holds slot 0 while "
            f"{plural(len(threaded), 'process', 'processes')} it started created the threads; if it is a wrapper script, "
            'let it exec the program (exec prog "$@") so that the program holds slot 0, or plan one more CPU'
        )

    def to_json(self) -> dict[str, Any]:
        threads = []
        for t in self.threads:
            data = asdict(t)
            del data["masks_seen"], data["kernel_seen"], data["kernel_baseline"]  # raw observations: their meaning is in the fields below
            data["migrations"] = t.migrations
            data["pinned_as_planned"] = t.pinned_as_planned
            data["mask_changes"] = t.mask_changes
            data["off_plan"] = t.off_plan
            threads.append(data)
        return {
            "pinlab_run": RECORD_FORMAT_VERSION,
            "pinlab_version": __version__,
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
            "numa_balancing": self.numa_balancing,
            "balance": self.balance,
            "affinity_calls": [call.to_json() for call in self.affinity_calls],
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
        stolen = {tid for steal in self.balance or [] for tid in steal["tids"]}  # moved by pinlab itself (--balance)
        if pinned:
            wrong = [t for t in pinned if t.pinned_as_planned is False and t.tid not in stolen]
            planned = {t.planned_cpu for t in pinned}
            cpus = f"{'CPU' if len(planned) == 1 else 'CPUs'} {format_cpulist(planned)}"
            processes = {t.pid for t in pinned}
            where = f" (in {plural(len(processes), 'process')})" if len(processes) > 1 else ""
            text += f"; {plural(len(pinned), 'thread')}{where} pinned on {cpus}"
            if wrong:
                text += f", {len(wrong)} NOT on {'its' if len(wrong) == 1 else 'their'} planned CPU"
            if stolen:
                text += f", {len(stolen & {t.tid for t in pinned})} moved by --balance's steals"
        elif self.plan is None:
            text += "; not pinned"
        if self.sample_ms:
            text += f"; {plural(self.migrations, 'migration')} seen"
        text += _departures_text([t for t in self.threads if t.tid not in stolen])
        text += _affinity_calls_text(self.affinity_calls)
        if self.counters:
            text += "; " + ", ".join(_count_text(name, count["value"]) for name, count in self.counters.items())
        if self.balance is not None:
            text += f"; --balance: {plural(len(self.balance), 'steal')}"
        return text


def write_record(record: RunRecord, path: str) -> None:
    """Write the record as JSON atomically (a crash never leaves half a file)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(record.to_json(), out, indent=1)
        out.write("\n")
    os.replace(tmp, path)


def check_record_json(data: Any, source: str = "run record") -> dict[str, Any]:
    """``data`` if it is a run record this pinlab reads, else a one-line UsageError saying what is
    wrong: the version, then the fields every record has (a later version may add others)."""
    if not isinstance(data, dict) or "pinlab_run" not in data:
        raise UsageError(f"{source} is not a pinlab run record (no 'pinlab_run' field); {_RECORD_HINT}")
    version = data["pinlab_run"]
    if version != RECORD_FORMAT_VERSION:
        raise UsageError(
            f"{source} is a run record of format {version!r}; this pinlab reads format {RECORD_FORMAT_VERSION}: {_RECORD_HINT} with this pinlab"
        )
    for name, types in _RECORD_FIELDS.items():
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join("a list" if t is list else "a whole number" if t is int else "a number" for t in types)
            raise UsageError(f"{source}: field {name!r} should be {wanted}, not {json.dumps(value)[:40]}; {_RECORD_HINT}")
    return data


def read_record(path: str) -> dict[str, Any]:
    """The run record in the file ``path``, checked (:func:`check_record_json`)."""
    return check_record_json(read_json_file(path, "run record", _RECORD_HINT), f"run record {path!r}")
