"""Watching processes over a window: every thread's state, CPU, mask and CPU time, every ~100 ms.

What the doctor judges is what the threads did, not one snapshot: a pool that is idle most of
the time costs nothing, a pool whose threads are all runnable at once on fewer CPUs costs a lot.
So each process is sampled as ``pinlab ps --watch`` looks at it (:func:`pinlab.measure.threads.process_threads`),
and what does not change while it runs (its environment, the files it maps, the CPUs it may be
given) is read once, at the first sample.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pinlab.cpuset import parse_cpulist
from pinlab.doctor.libraries import loaded_pools, mapped_files, python_file
from pinlab.errors import UsageError
from pinlab.measure import linux
from pinlab.measure.events import AffinityCall
from pinlab.measure.roles import events_path
from pinlab.measure.stacks import StacksUnreadable, start_libraries, waiting_in
from pinlab.measure.threads import LiveThread, pages_per_node, process_threads
from pinlab.topology.model import Topology
from pinlab.topology.sources import load_whole

#: Looks at a thread's stack before its start library is given up as unknown (a thread just
#: created may not have reached its start routine yet).
STACK_TRIES = 3

#: Seconds between samples: often enough to see how many threads are runnable at once, rarely
#: enough that reading /proc stays a small share of one CPU.
SAMPLE_INTERVAL = 0.1


@dataclass
class Sample:
    """The threads of a process at one moment (``time``: seconds since the window opened)."""

    time: float
    threads: list[LiveThread]


@dataclass
class ProcessObservation:
    """One process over the window: its samples, and what is read once (environment, mapped
    files, the CPUs it may use and may be given)."""

    pid: int
    command: str
    argv: list[str]
    environ: dict[str, str] | None  # None when not ours to read
    files: list[str]
    available: frozenset[int]  # the CPUs its cgroup (or, without one, the machine) offers
    samples: list[Sample] = field(default_factory=list)
    ended: bool = False  # ended during the window
    pages_per_node: dict[int, int] = field(default_factory=dict)  # resident pages per NUMA node, at the last refresh
    cpu_nodes: dict[int, int] = field(default_factory=dict)  # CPU -> its NUMA node on this machine
    thp: str | None = None  # the system's transparent huge page mode (always, madvise, never)
    huge_kib: int | None = None  # anonymous memory in transparent huge pages (KiB), at the last refresh
    thp_disabled: bool = False  # the process turned them off for itself (prctl PR_SET_THP_DISABLE)
    topology: Topology | None = None  # this machine's cores and kinds of core (None: hwloc could not say)
    # Under pinlab's launcher: the program's own affinity calls, and the CPU pinlab's plan gave each thread.
    affinity_calls: list[AffinityCall] = field(default_factory=list)
    planned: dict[int, int] = field(default_factory=dict)  # tid -> planned CPU
    plan_cpus: frozenset[int] = frozenset()  # the CPUs of pinlab's plan (empty: not placed by pinlab)
    # Outside pinlab's launcher each thread's start library is read from its stack; False when
    # the process's memory was not ours to read (pools are then sized by their variables).
    stacks_readable: bool = True
    # Python threads seen blocked inside a library (a BLAS library's lock, an OpenMP barrier):
    # tid -> the files they were seen waiting in.
    waited_in: dict[int, set[str]] = field(default_factory=dict)

    @property
    def allowed(self) -> frozenset[int]:
        """The CPUs the process may run on, as it was started.

        ``pinlab run`` records the program's original mask (``PINLAB_ALLOWED``); an OpenMP runtime
        asked to bind its threads narrows every mask itself, so the process's own mask is then
        no longer known and what its cgroup offers is taken; otherwise the CPUs its threads may
        run on at the last sample (the union of their masks), as taskset or a batch system set them.
        """
        env = self.environ or {}
        if env.get("PINLAB_ALLOWED"):
            try:
                return frozenset(parse_cpulist(env["PINLAB_ALLOWED"]))
            except Exception:  # a malformed value: fall back to the masks
                pass
        if binding_requested(env):
            return self.available
        union: set[int] = set()
        for sample in self.samples[-1:]:  # the last: a wrapper (taskset) may have narrowed the first
            for thread in sample.threads:
                union |= thread.mask
        return frozenset(union) or self.available

    @property
    def seconds(self) -> float:
        return self.samples[-1].time - self.samples[0].time if len(self.samples) > 1 else 0.0

    def cpu_seconds(self) -> dict[int, float]:
        """tid -> CPU seconds it used during the window (first to last sample it was seen in)."""
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        for sample in self.samples:
            for thread in sample.threads:
                first.setdefault(thread.tid, thread.cpu_seconds)
                last[thread.tid] = thread.cpu_seconds
        return {tid: max(0.0, last[tid] - first[tid]) for tid in last}

    def last_threads(self) -> dict[int, LiveThread]:
        """Every thread seen in the window, as it was when last seen."""
        found: dict[int, LiveThread] = {}
        for sample in self.samples:
            for thread in sample.threads:
                found[thread.tid] = thread
        return found

    def command_line(self) -> str:
        """The process's command line, quoted for a shell (its name when it has none)."""
        return shlex.join(self.argv) if self.argv else self.command


#: OpenMP variables that ask the runtime to bind its threads to CPUs.
BINDING_VARIABLES = ("OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def binding_requested(env: dict[str, str]) -> bool:
    """Whether the environment asks an OpenMP runtime to bind its threads."""
    bind = env.get("OMP_PROC_BIND", "").strip().lower()
    kmp = env.get("KMP_AFFINITY", "").strip().lower()
    return (
        bool(env.get("OMP_PLACES", "").strip())
        or (bind != "" and bind != "false")
        or bool(env.get("GOMP_CPU_AFFINITY", "").strip())
        or (kmp != "" and "disabled" not in kmp and "none" not in kmp)
    )


def read_environ(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for entry in data.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def read_argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [os.fsdecode(a) for a in data.split(b"\0")[:-1]]


def available_cpus(pid: int) -> frozenset[int]:
    """The CPUs process ``pid``'s cgroup offers it (cgroup v2 ``cpuset.cpus.effective``), else
    every present CPU: what a placement may use, whatever mask the process has now."""
    present = linux.present_cpus()
    try:
        group = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        path = next(line.split(":", 2)[2] for line in group if line.startswith("0::"))
        text = (Path("/sys/fs/cgroup") / path.lstrip("/") / "cpuset.cpus.effective").read_text().strip()
        if text:
            return frozenset(parse_cpulist(text)) & present or present
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return present


def huge_pages(pid: int) -> tuple[int | None, bool]:
    """KiB of the process's anonymous memory in transparent huge pages (None: not readable), and
    whether it turned them off for itself (``THP_enabled: 0`` in its status)."""
    huge = None
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("AnonHugePages:"):
                huge = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    disabled = False
    try:
        disabled = any(line.split() == ["THP_enabled:", "0"] for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except OSError:
        pass
    return huge, disabled


def machine_topology() -> Topology | None:
    """This machine's cores, hardware threads and kinds of core, whole (not narrowed to any
    process's mask): what the SMT and hybrid checks compare the threads' CPUs with. None when
    hwloc is not there to say: those checks then say nothing."""
    try:
        return load_whole()
    except UsageError:
        return None


class ProcessSampler:
    """Samples one process until it ends; :meth:`sample` returns False once it has."""

    def __init__(self, pid: int, events: str | None = None, start: float | None = None, argv: list[str] | None = None) -> None:
        """``argv``: the command line the program was started with, when the caller started it
        (its fixes then repeat what the user typed, wrappers such as taskset included)."""
        self.start = time.monotonic() if start is None else start
        self.events = events if events is not None else events_path(pid)
        self.argv_given = argv is not None
        self._started_by: dict[tuple[int, int], str | None] = {}  # (tid, start ticks) -> its start library
        self._stack_looks: dict[tuple[int, int], int] = {}
        self._pools_found: dict[str, str] = {}
        self._pools_for = -1  # the number of files _pools_found was worked out from
        self.observation = ProcessObservation(
            pid=pid,
            command="",
            argv=list(argv) if argv is not None else read_argv(pid),
            environ=read_environ(pid),
            files=mapped_files(pid),
            available=available_cpus(pid),
            cpu_nodes=linux.node_of_cpus(),
            thp=linux.thp_mode(),
        )

    def sample(self) -> bool:
        obs = self.observation
        if obs.ended:
            return False
        now = time.monotonic() - self.start
        threads = [t for t in process_threads(obs.pid, events=self.events, migrations=False) if t.state not in ("Z", "X")]
        if not threads:
            obs.ended = True
            return False
        obs.command = next((t.name for t in threads if t.tid == obs.pid), threads[0].name)
        threads = self._with_start_libraries(threads)
        self._note_waits(threads)
        if not self._pools():
            # A program just started may still be in the loader (or in taskset, env, a shell) for
            # longer than three samples on a busy machine: look for its pool libraries at every
            # sample until one is there (reading the mappings costs about a tenth of a millisecond).
            for path in mapped_files(obs.pid):
                if path not in obs.files:
                    obs.files.append(path)
        if len(obs.samples) < 3 or len(obs.samples) % 10 == 0:
            # A program that executes another (taskset, env, a shell script) is that one now, and
            # libraries loaded later (the loader's, dlopen, Python imports) are found within a second.
            if not self.argv_given:
                obs.argv = read_argv(obs.pid) or obs.argv
            obs.environ = read_environ(obs.pid) or obs.environ
            obs.pages_per_node = pages_per_node(obs.pid) or obs.pages_per_node
            huge, disabled = huge_pages(obs.pid)
            obs.huge_kib = obs.huge_kib if huge is None else huge
            obs.thp_disabled = disabled
            for path in mapped_files(obs.pid):
                if path not in obs.files:
                    obs.files.append(path)
        obs.samples.append(Sample(round(now, 6), threads))
        return True

    def _pools(self) -> dict[str, str]:
        """The pool libraries the process maps, worked out again only when its list of files grew."""
        files = self.observation.files
        if self._pools_for != len(files):
            self._pools_found, self._pools_for = loaded_pools(files), len(files)
        return self._pools_found

    def _note_waits(self, threads: list[LiveThread]) -> None:
        """Where the blocked Python threads wait, when the process has a pool library and several
        Python threads: one waiting inside the library calls it, busy or not in the window."""
        obs = self.observation
        python = [t.tid for t in threads if t.tid != obs.pid and python_file(t.library)]
        if len(python) < 2 or not obs.stacks_readable or not self._pools():
            return
        blocked = [t.tid for t in threads if t.tid in python and t.state in ("S", "D")]
        try:
            for tid, path in waiting_in(obs.pid, blocked).items():
                obs.waited_in.setdefault(tid, set()).add(path)
        except StacksUnreadable:
            obs.stacks_readable = False

    def _with_start_libraries(self, threads: list[LiveThread]) -> list[LiveThread]:
        """The threads, each with its start library: from pinlab run's record where it has one,
        else read from its stack (once found; a few looks before it is given up)."""
        obs = self.observation
        key = {t.tid: (t.tid, t.start_ticks) for t in threads}
        unknown = [
            t.tid
            for t in threads
            if t.library is None
            and t.tid != obs.pid
            and self._started_by.get(key[t.tid]) is None
            and self._stack_looks.get(key[t.tid], 0) < STACK_TRIES
        ]
        if unknown and obs.stacks_readable:
            try:
                found = start_libraries(obs.pid, unknown)
            except StacksUnreadable:
                obs.stacks_readable = False
                found = {}
            for tid in unknown:
                self._stack_looks[key[tid]] = self._stack_looks.get(key[tid], 0) + 1
                if found.get(tid):
                    self._started_by[key[tid]] = found[tid]
        return [replace(t, library=self._started_by[key[t.tid]]) if t.library is None and self._started_by.get(key[t.tid]) else t for t in threads]


def observe(pids: list[int], seconds: float, interval: float = SAMPLE_INTERVAL) -> list[ProcessObservation]:
    """Sample every process of ``pids`` each ``interval`` for ``seconds`` (or until all have ended, or
    Ctrl-C), and at least twice each process that lives on."""
    start = time.monotonic()
    samplers = [ProcessSampler(pid, start=start) for pid in pids]
    deadline = start + seconds
    try:
        while True:
            live = [s.sample() for s in samplers]
            now = time.monotonic()
            # A window needs two samples of each live process to say anything (CPU time is a
            # difference): on a busy machine the first look alone may outlast a short window.
            if not any(live) or (now >= deadline and all(len(s.observation.samples) >= 2 for s, alive in zip(samplers, live) if alive)):
                break
            time.sleep(max(0.0, min(interval, deadline - now)))
    except KeyboardInterrupt:  # Ctrl-C closes the window early: what was seen is reported
        pass
    return [s.observation for s in samplers]
