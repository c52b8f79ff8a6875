"""Start a program with every thread pinned from its first instruction, and record what happened.

pinlab spawns ``pinlab-exec`` (posix_spawn), which forks and executes the program and reports its
pid, exit status and rusage on a pipe (so its max RSS is its own, see native/launch). The CPU of
the plan's slot 0 (the main thread), the memory policy, personality and THP setting are in force
from the start (see :mod:`pinlab.launch.spawn`), and the preload library in ``LD_PRELOAD`` pins
every thread the program creates as it is created. The parent forwards signals, samples where each thread runs from /proc, and waits.

The preload library is told the plan through ``PINLAB_*`` environment variables, written by
:func:`build_environment` (autopin adds ``PINLAB_LIVE_PLAN``) and documented, each with its
values, where the library reads them: the comment at the top of native/preload/pinlab_preload.c
(tests/test_repository.py keeps that list, the names the library reads and the names written
here the same).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import signal
import stat
import time
from dataclasses import dataclass, field
from typing import Protocol

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import ProgramNotExecutable, ProgramNotFound, UsageError
from pinlab.launch import controls, memory, openmp
from pinlab.launch.record import RunRecord, ThreadRecord, mask_set
from pinlab.launch.spawn import spawn
from pinlab.measure import linux, shared_files
from pinlab.measure.counters import Availability, ProgramCounters
from pinlab.measure.events import RING_CAPACITY, RING_HEADER, RING_MAGIC, affinity_call, event_fields, since_start
from pinlab.measure.events import event_lines as _event_lines
from pinlab.measure.shared_files import shared_directory
from pinlab.memory.autonuma import balancing
from pinlab.memory.weights import weights_set
from pinlab.native import native_path
from pinlab.ranks.launch import RankPlan

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent (Ctrl-C at a terminal), not kill()
OVERFLOW_MODES = ("wrap", "unpinned", "error")
CHILDREN_MODES = ("next", "inherit", "unpinned")


@dataclass
class LaunchSpec:
    """Everything `pinlab run` needs; ``cpus`` is None for an unpinned run."""

    argv: list[str]
    cpus: list[int] | None = None
    threads: int | None = None
    plan: dict | None = None
    mem: memory.MemPolicy = field(default_factory=lambda: memory.MemPolicy("first-touch"))
    overflow: str = "wrap"
    children: str = "next"  # what processes the program starts get: next (slots), inherit, unpinned
    skip: tuple[int, ...] = ()
    nested_domains: list[frozenset[int]] | None = None
    follow_nodes: list[int] | None = None
    no_aslr: bool = False
    clean_env: bool = False
    thp: str | None = None
    sample_ms: float | None = 100.0
    env: dict[str, str] | None = None
    timeout: float | None = None  # seconds; the program is killed (SIGKILL) past it
    stdout: int | None = None  # file descriptors for the program's output (default: pinlab's own)
    stderr: int | None = None
    counters: Availability | None = None  # performance counters to read for the program (pinlab.measure.counters)
    controller: Controller | None = None  # acts on the running program from the wait loop (autopin, --balance)
    # Unpinned, with the preload library loaded to record the threads' start libraries and the
    # program's own affinity calls, pinning nothing (pinlab doctor without a placement).
    observe: bool = False
    numa_balancing: bool | None = None  # True: the kernel's automatic NUMA balancing on for the run (-s autonuma)
    balance: float | None = None  # seconds between looks of --balance, as recorded (its controller does the work); None: off
    balance_data: str = "attached"  # what moves with stolen threads: attached (API) data, or also the pages they mostly accessed
    rank: dict | None = None  # MPI rank context and its domain (pinlab.ranks.launch): recorded
    rank_plan: RankPlan | None = None  # that context's plan, whose notices and summary the command line prints
    domain_cpus: frozenset[int] | None = None  # an unpinned run is kept on these CPUs (its rank's domain)
    notices: list[str] = field(default_factory=list)  # what the user should know before it starts (a plan resolved here)


class Controller(Protocol):
    """Something that acts on the program while pinlab waits for it: autopin re-pins its threads,
    ``--balance`` moves threads and data between nodes, the sampled tracer reads counters.

    The runner is handed one (``LaunchSpec.controller``) and knows nothing else of it. Called on
    pinlab's waiting thread: :meth:`before_start` just before the program starts (it returns the
    program's environment with what the controller needs there, and may add warnings), then
    :meth:`started` once the program runs (its pid and the event ring the preload library writes,
    None when unpinned), :meth:`step` whenever ``time.monotonic()`` reaches :meth:`wake_at`, and
    :meth:`after_run` once the run has ended, however it ended (it writes its part of the record and
    releases what it holds). Signals stay pinlab's: a Ctrl-C ends the program and the wait as in
    any run. :class:`ControllerBase` gives the hooks a controller does not need.
    """

    def before_start(self, env: dict[str, str], program: str, blocker: str | None, warnings: list[str]) -> dict[str, str]: ...

    def started(self, pid: int, events: str | None) -> None: ...

    def wake_at(self) -> float: ...

    def step(self) -> None: ...

    def after_run(self, record: RunRecord) -> None: ...


class ControllerBase:
    """A :class:`Controller` that needs nothing in the environment, never wakes and writes nothing."""

    def before_start(self, env: dict[str, str], program: str, blocker: str | None, warnings: list[str]) -> dict[str, str]:
        return env

    def started(self, pid: int, events: str | None) -> None:
        pass

    def wake_at(self) -> float:
        return math.inf

    def step(self) -> None:
        pass

    def after_run(self, record: RunRecord) -> None:
        pass


def resolve_program(name: str, path: str | None) -> str:
    """The executable ``name`` designates, as execvp would find it; errors as env(1) reports them."""
    if "/" in name:
        candidate = name
    else:
        found = shutil.which(name, path=path)
        if found is None:
            raise ProgramNotFound(f"{name}: command not found")
        candidate = found
    if not os.path.exists(candidate):
        raise ProgramNotFound(f"{name}: no such file")
    if os.path.isdir(candidate) or not os.access(candidate, os.X_OK):
        raise ProgramNotExecutable(f"{name}: permission denied (not an executable file)")
    return candidate


def preload_blocker(path: str) -> str | None:
    """Why the dynamic loader would not run the preload library for this program, or None.

    A statically linked program has no loader at all; a setuid/setgid program whose owner is
    not us runs in secure-execution mode, where the loader ignores LD_PRELOAD.
    """
    try:
        info = os.stat(path)
        with open(path, "rb") as exe:
            head = exe.read(64)
            if head[:4] != b"\x7fELF":
                return None  # a script: its interpreter is dynamically linked
            if (info.st_mode & stat.S_ISUID and info.st_uid != os.getuid()) or (info.st_mode & stat.S_ISGID and info.st_gid != os.getgid()):
                return "setuid/setgid (the loader ignores LD_PRELOAD)"
            little = head[5] == 1
            order = "little" if little else "big"
            if head[4] == 2:
                phoff, phentsize, phnum = int.from_bytes(head[32:40], order), int.from_bytes(head[54:56], order), int.from_bytes(head[56:58], order)
            else:
                phoff, phentsize, phnum = int.from_bytes(head[28:32], order), int.from_bytes(head[42:44], order), int.from_bytes(head[44:46], order)
            exe.seek(phoff)
            table = exe.read(phentsize * phnum)
    except OSError:
        return None
    PT_INTERP = 3
    if all(int.from_bytes(table[i * phentsize : i * phentsize + 4], order) != PT_INTERP for i in range(phnum)):
        return "statically linked (no dynamic loader to run the preload library)"
    return None


def _preload_library() -> str:
    return str(native_path("libpinlab-preload.so"))


def _openmp_environment(spec: LaunchSpec, env: dict[str, str]) -> dict[str, str]:
    """OpenMP variables so the runtime agrees with the plan and does not re-bind threads elsewhere.

    The preload library pins every thread at its creation, so the runtime's own binding stays
    off: a runtime asked to bind as well moves the threads pinlab placed (libomp re-binds its
    workers after they start). libgomp binds nothing unless OMP_PROC_BIND, OMP_PLACES or
    GOMP_CPU_AFFINITY ask it to; libomp needs KMP_AFFINITY=disabled (OMP_PROC_BIND=false as well
    would only make it print a warning).
    """
    extra: dict[str, str] = {}
    if "OMP_NUM_THREADS" not in env and spec.threads:
        # The team size the plan asks for, whatever the runtime would derive from the CPUs it sees.
        extra["OMP_NUM_THREADS"] = str(spec.threads)
    if "KMP_AFFINITY" not in env:
        extra["KMP_AFFINITY"] = "disabled"
    return extra


def build_environment(spec: LaunchSpec, events: str | None, blocker: str | None, warnings: list[str]) -> dict[str, str]:
    env = dict(os.environ if spec.env is None else spec.env)
    # The user's OpenMP variables are kept; say which ones fight the plan (see pinlab.launch.openmp).
    warnings.extend(openmp.disagreements(env, spec.threads, pinned=spec.cpus is not None and blocker is None, overflow=spec.overflow))
    env.update(controls.thp_environment(spec.thp))
    if spec.cpus is None and spec.threads and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(spec.threads)  # unpinned ('none'), but with the thread count asked for
    if spec.cpus is None and spec.observe and blocker is None:
        env["LD_PRELOAD"] = " ".join(p for p in (_preload_library(), env.get("LD_PRELOAD", "")) if p)
        env["PINLAB_OBSERVE"] = "1"
        if events:
            env["PINLAB_EVENTS"] = events
    if spec.cpus is not None and blocker is None:
        allowed = frozenset(os.sched_getaffinity(0))
        env.update(_openmp_environment(spec, env))
        env["LD_PRELOAD"] = " ".join(p for p in (_preload_library(), env.get("LD_PRELOAD", "")) if p)
        env["PINLAB_CPUS"] = ",".join(map(str, spec.cpus))
        env["PINLAB_OVERFLOW"] = spec.overflow
        env["PINLAB_CHILDREN"] = spec.children
        env["PINLAB_ALLOWED"] = format_cpulist(allowed)
        if spec.skip:
            env["PINLAB_SKIP"] = ",".join(map(str, spec.skip))
        if spec.nested_domains is not None:
            env["PINLAB_NESTED"] = "inherit"
            env["PINLAB_DOMAINS"] = ";".join(format_cpulist(d) for d in spec.nested_domains)
        if spec.follow_nodes is not None:
            env["PINLAB_MEM_FOLLOW"] = ",".join(map(str, spec.follow_nodes))
        if events:
            env["PINLAB_EVENTS"] = events
    if spec.clean_env:
        env = controls.clean_environment(env)
    return env


def _new_events_file() -> str:
    """A new, private event ring: header (magic, capacity, used, dropped) and sparse room for lines.

    (Not tempfile, which costs an import of random on the launch path.)
    """
    directory = shared_directory()
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise UsageError(f"cannot create the thread event file in {directory} (PINLAB_EVENTS_DIR, /dev/shm or TMPDIR): not a writable directory")

    try:
        path, fd = shared_files.create(directory, "events")  # held until the run ends: removed at the next start if pinlab is killed
    except OSError as exc:
        raise UsageError(f"cannot create a file for thread events in {directory}: {exc.strerror or exc}") from None
    try:
        os.write(fd, RING_MAGIC + RING_CAPACITY.to_bytes(8, "little") + bytes(16))
        os.ftruncate(fd, RING_HEADER + RING_CAPACITY)
    except BaseException:
        shared_files.release(path)
        raise
    return path


def _read_events(path: str, record: RunRecord, start_ns: int) -> None:
    """Fill the record's threads, pages, affinity calls and warnings from the preload library's event file.

    ``start_ns`` is the monotonic clock when the run started: a thread's ``t`` (that clock at its
    first instruction) becomes its ``start_time`` on the samples' time base, rounded up to the
    microsecond (the samples' times are rounded down).
    """
    try:
        lines = _event_lines(path, record.warnings)
    except OSError:
        return
    by_tid = {t.tid: t for t in record.threads}
    pages: dict[int, int] = {}
    for line in lines:
        kind, fields = event_fields(line)
        if kind == "thread" and "tid" in fields:
            tid = int(fields["tid"])
            thread = by_tid.get(tid) or ThreadRecord(tid=tid, pid=int(fields.get("pid", 0)))
            thread.index = int(fields.get("index", -1))
            thread.role = fields.get("role", "unknown")
            thread.slot = int(fields["slot"]) if fields.get("slot", "-1") != "-1" else None
            thread.planned_cpu = int(fields["planned"]) if fields.get("planned", "-1") != "-1" else None
            thread.cpu_at_start = int(fields["cpu"]) if "cpu" in fields else None
            thread.mask_at_start = fields.get("mask")
            thread.creator_tid = int(fields["creator"]) if fields.get("creator", "0") != "0" else None
            thread.start_library = None if fields.get("lib") in (None, "-") else fields["lib"]
            thread.planned_start_mask = fields.get("wide")
            thread.start_time = since_start(fields.get("t"), start_ns)
            if tid not in by_tid:
                by_tid[tid] = thread
                record.threads.append(thread)
        elif kind == "pages" and int(fields.get("pid", -1)) == record.pid:
            for key, value in fields.items():
                if key.startswith("N") and key[1:].isdigit():
                    pages[int(key[1:])] = int(value)
            record.pages_per_node = pages
        elif kind == "narrow" and "tid" in fields and int(fields["tid"]) in by_tid:
            thread = by_tid[int(fields["tid"])]
            thread.narrowed_at = since_start(fields.get("ns"), start_ns)
            thread.narrowed_to = int(fields["cpu"]) if "cpu" in fields else None
        elif kind == "warning":
            record.warnings.append(fields.get("text", "").replace("_", " "))
        elif kind == "affinity" and (call := affinity_call(fields, start_ns)) is not None:
            record.affinity_calls.append(call)
    record.threads.sort(key=lambda t: (t.pid != record.pid, t.index if t.index is not None else 1 << 30, t.tid))
    kernel_baselines(record.threads)


def kernel_baselines(threads: list[ThreadRecord]) -> None:
    """Set, where it is known, how many migrations the kernel counts for each created thread's
    initial placement (a process's main thread is born pinned, with a count of 0: see ThreadRecord).

    A thread created by a thread pinned to one CPU is born on that CPU and cannot leave it until
    glibc applies the new thread's own affinity, just before it starts: ``se.nr_migrations`` then
    counts one move if that CPU is not in the new mask, none if the new mask is that CPU alone, and
    at most one for a wider mask (the wake-up may place it elsewhere). A thread created by a
    thread free to run on several CPUs may be moved by the scheduler before its affinity is
    applied: unknown (None; the record then counts from the first sample after it started).
    """
    # A main thread started on the plan's CPUs creates its threads once narrowed to its own.
    masks = {t.tid: frozenset({t.narrowed_to}) if t.narrowed_to is not None else mask_set(t.mask_at_start) for t in threads}
    for thread in threads:
        if thread.index is None or thread.index == 0:
            continue
        creator, own = masks.get(thread.creator_tid or -1), masks.get(thread.tid)
        if creator is None or len(creator) != 1:
            thread.kernel_baseline = None
        elif own is not None and own == creator:
            thread.kernel_baseline = 0
        else:
            thread.kernel_baseline = 1


class _Sampler:
    """Where each thread of the program is, every ``sample_ms`` (from /proc): the CPU it last ran
    on, its affinity mask and the kernel's count of its migrations (the last two kept only when
    they change, see :class:`ThreadRecord`)."""

    def __init__(self, pid: int, record: RunRecord, start_ns: int) -> None:
        self.pid, self.record, self.start_ns = pid, record, start_ns
        self.threads: dict[int, ThreadRecord] = {}

    def sample(self) -> None:
        # Taken before reading, rounded down to the microsecond: every read below is at or after it
        # (a thread's start time is rounded up, so that a sample never seems to follow a start it preceded).
        now = (time.monotonic_ns() - self.start_ns) // 1000 / 1e6
        for tid, cpu in linux.task_cpus(self.pid).items():
            mask = linux.thread_mask(tid)
            if mask is None:
                continue  # the thread ended since /proc listed it
            thread = self.threads.get(tid)
            if thread is None:
                thread = self.threads[tid] = ThreadRecord(tid=tid, pid=self.pid)
                self.record.threads.append(thread)
            index = len(thread.sample_times)
            thread.sample_times.append(now)
            thread.sample_cpus.append(cpu)
            if not thread.masks_seen or thread.masks_seen[-1][1] != mask:
                thread.masks_seen.append((index, mask))
            migrations = linux.task_migrations(self.pid, tid)
            if migrations is not None:
                thread.kernel_migrations = migrations
                if not thread.kernel_seen or thread.kernel_seen[-1][1] != migrations:
                    thread.kernel_seen.append((index, migrations))


def run(spec: LaunchSpec) -> RunRecord:
    """Run the program as the spec says and return its record (the program's output passes through)."""
    if not spec.argv:
        raise UsageError("no program given: pinlab run [OPTIONS] -- PROGRAM [ARGS...]")
    if spec.overflow not in OVERFLOW_MODES:
        raise UsageError(f"unknown --overflow {spec.overflow!r}: use wrap, unpinned or error")
    if spec.children not in CHILDREN_MODES:
        raise UsageError(f"unknown --children {spec.children!r}: use next, inherit or unpinned")
    base_env = os.environ if spec.env is None else spec.env
    program = resolve_program(spec.argv[0], base_env.get("PATH", os.defpath))
    options = {
        "mem": str(spec.mem),
        "overflow": spec.overflow,
        "children": spec.children,
        "skip": list(spec.skip),
        "nested": spec.nested_domains is not None,
        "no_aslr": spec.no_aslr,
        "clean_env": spec.clean_env,
        "thp": spec.thp,
        "sample_ms": spec.sample_ms,
    }
    if spec.balance is not None:
        options["balance"] = spec.balance
        options["balance_data"] = spec.balance_data
    if spec.rank is not None:
        options["rank"] = spec.rank
    if spec.counters is not None:
        options["counters"] = [e.name for e in spec.counters.usable]
        options["counters_user_only"] = spec.counters.user_only
    record = RunRecord(argv=list(spec.argv), plan=spec.plan, options=options, started_at=time.time(), sample_ms=spec.sample_ms)
    recorded = spec.cpus is not None or spec.observe  # the preload library is loaded
    blocker = preload_blocker(program) if recorded else None
    mask: frozenset[int] | None = frozenset(spec.domain_cpus) if spec.domain_cpus else None
    if spec.cpus is not None:
        # The main thread starts on all the plan's CPUs, so that runtimes sizing their pools from
        # the mask see them; the preload library narrows it to slot 0's CPU as it creates its
        # first thread (see native/preload).
        mask = frozenset(spec.cpus)
        if blocker is not None:  # threads cannot be pinned one by one: the whole program stays on the plan's CPUs
            record.warnings.append(
                f"{program} is {blocker}: its threads cannot be pinned one by one; the whole program is restricted to CPUs {format_cpulist(mask)}"
            )
    events = _new_events_file() if spec.cpus is not None or (spec.observe and blocker is None) else None
    controller = spec.controller
    try:
        env = build_environment(spec, events, blocker, record.warnings)
        if controller is not None:
            env = controller.before_start(env, program, blocker, record.warnings)

        with balancing(spec.numa_balancing) as state, _interleave_weights(spec.mem):
            record.numa_balancing = state
            if "why" in state:
                record.warnings.append(f"automatic NUMA balancing could not be switched {'on' if spec.numa_balancing else 'off'}: {state['why']}")
            return _run_and_wait(spec, program, env, mask, record, events)
    finally:
        if controller is not None:
            controller.after_run(record)
        if events:
            shared_files.release(events)


def _interleave_weights(policy: memory.MemPolicy):
    """The system's interleave weights set for a weighted-interleave run (nothing for other policies)."""
    if policy.weights is None:
        return contextlib.nullcontext()

    return weights_set(policy.nodes, policy.weights)


@dataclass
class _Usage:
    """The program's resource usage as pinlab-exec reports it (the fields of struct rusage used)."""

    ru_utime: float
    ru_stime: float
    ru_maxrss: int
    ru_nvcsw: int
    ru_nivcsw: int


def _start(spec: LaunchSpec, program: str, env: dict[str, str], mask, mem_mode, mem_nodes, sigmask) -> tuple[int, int, int]:
    """Start the program through pinlab-exec (see native/launch); returns (helper pid, program pid, report pipe)."""
    read_end, write_end = os.pipe()
    try:
        os.set_inheritable(write_end, True)
        helper_path = str(native_path("pinlab-exec"))
        try:
            helper = spawn(
                helper_path,
                [helper_path, str(write_end), str(os.getpid()), program, *spec.argv],
                env,
                cpus=mask,
                mem_mode=mem_mode,
                mem_nodes=mem_nodes,
                no_aslr=spec.no_aslr,
                no_thp=spec.thp == "never",
                sigmask=sigmask,
                stdout=spec.stdout,
                stderr=spec.stderr,
            )
        except OSError as exc:  # setting the CPU, policy or personality failed, or pinlab-exec is broken
            raise UsageError(f"could not prepare the program: {exc.strerror or exc}") from None
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    first = _read_line(read_end)
    kind, _, value = first.partition(" ")
    if kind != "pid":
        os.waitpid(helper, 0)
        os.close(read_end)
        code = int(value) if kind == "error" and value.strip().isdigit() else errno.EIO
        if code == errno.ENOENT:
            raise ProgramNotFound(f"{spec.argv[0]}: no such file")
        if code == errno.EACCES:
            raise ProgramNotExecutable(f"{spec.argv[0]}: permission denied")
        raise ProgramNotExecutable(f"{spec.argv[0]}: cannot execute: {os.strerror(code)}")  # ENOEXEC and friends
    return helper, int(value), read_end


def _read_line(fd: int) -> str:
    """One line from the report pipe, read byte by byte (what follows stays in the pipe)."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            byte = os.read(fd, 1)
        except InterruptedError:
            continue
        if not byte:
            break
        data += byte
    return data.decode("ascii", "replace").strip()


def _program_end(reports: int) -> tuple[int, _Usage]:
    """The program's wait status and usage, once pinlab-exec has ended."""
    try:
        words = _read_line(reports).split()
    finally:
        os.close(reports)
    if len(words) != 7 or words[0] != "status":
        # pinlab-exec was killed before it could report (kill -9 of the whole group): so was the program.
        return signal.SIGKILL, _Usage(0.0, 0.0, 0, 0, 0)
    status, utime, stime, maxrss, nvcsw, nivcsw = (int(w) for w in words[1:])
    return status, _Usage(utime / 1e6, stime / 1e6, maxrss, nvcsw, nivcsw)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _run_and_wait(spec: LaunchSpec, program: str, env: dict[str, str], mask, record: RunRecord, events: str | None) -> RunRecord:
    waited = set(FORWARDED) | {signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    start_ns = time.monotonic_ns()
    start = start_ns / 1e9  # time.monotonic()'s clock
    try:
        mem_mode, mem_nodes = spec.mem.mode, spec.mem.nodes
        if spec.follow_nodes is not None and spec.cpus:
            mem_mode, mem_nodes = memory.MPOL_BIND, (spec.follow_nodes[0],)  # the main thread's node; the preload binds the others
        # Opened on this thread, just before the spawn: the program inherits them (see measure.counters).
        group = None
        if spec.counters:
            group = ProgramCounters(spec.counters.usable, spec.counters.user_only)
        try:
            helper, pid, reports = _start(spec, program, env, mask, mem_mode, mem_nodes, old_mask)
        except BaseException:
            if group is not None:
                group.close()
            raise
        record.pid = pid
        sampler = _Sampler(pid, record, start_ns) if spec.sample_ms else None
        timeout = spec.sample_ms / 1000 if spec.sample_ms else None
        deadline = start + spec.timeout if spec.timeout else None
        controller = spec.controller
        if controller is not None:
            controller.started(pid, events)
        status = rusage = None
        next_sample = time.monotonic()
        while status is None:
            now = time.monotonic()
            if sampler is not None and now >= next_sample:
                sampler.sample()
                next_sample = now + timeout
            if controller is not None and time.monotonic() >= controller.wake_at():
                controller.step()
            wait = max(0.001, next_sample - time.monotonic()) if sampler is not None else None
            if controller is not None and controller.wake_at() != math.inf:  # inf: it has nothing more to do
                until = max(0.001, controller.wake_at() - time.monotonic())
                wait = until if wait is None else min(wait, until)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 and not record.timed_out:
                    record.timed_out = True
                    _kill(pid, signal.SIGKILL)
                wait = max(0.001, min(left, wait) if wait else left)
            # At least every half second: a SIGCHLD may be taken, and lost, by another thread of this
            # process that does not block it (a library's thread pool, when pinlab runs in-process);
            # the program's end is then seen by the waitpid below (a run once hung here).
            info = signal.sigtimedwait(waited, min(wait, 0.5) if wait else 0.5)
            if info is not None and info.si_signo in STOPPING:
                record.interrupted = info.si_signo  # a caller running many programs (a study) stops after this one
            if info is not None and info.si_signo != signal.SIGCHLD and info.si_code != SI_KERNEL:
                _kill(pid, info.si_signo)  # sent to pinlab by a process: pass it on
            if os.waitpid(helper, os.WNOHANG)[0] == helper:
                status, rusage = _program_end(reports)
        if group is not None:
            record.counters = group.read()
            group.close()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    record.wall_seconds = round(time.monotonic() - start, 6)
    record.user_seconds, record.system_seconds = rusage.ru_utime, rusage.ru_stime
    record.max_rss_kib = rusage.ru_maxrss
    record.voluntary_context_switches, record.involuntary_context_switches = rusage.ru_nvcsw, rusage.ru_nivcsw
    if os.WIFSIGNALED(status):
        record.signal = os.WTERMSIG(status)
        record.exit_status = 128 + record.signal
    else:
        record.exit_status = os.WEXITSTATUS(status)
    if events:
        _read_events(events, record, start_ns)
    # A libomp process that was killed leaves its registration in /dev/shm: the program's, not ours
    # to keep. Its processes are known by the threads the preload library reported.
    shared_files.remove_openmp_registrations({pid, *(t.pid for t in record.threads)})
    if events:
        wrapped = record.wrapped_slots(len(spec.cpus)) if spec.cpus and spec.overflow == "wrap" else None
        if wrapped:
            record.warnings.append(wrapped)
    return record


def parse_skip(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    values = parse_cpulist(text, what="--skip list")
    if 0 in values:
        raise UsageError("--skip counts created threads from 1 (0 is the main thread, which is always pinned)")
    return tuple(values)
