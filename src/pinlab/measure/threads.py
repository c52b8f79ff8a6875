"""The threads of a running process, read from /proc: where each runs, may run, and what it is.

Everything here is a snapshot of a process that keeps running while it is read: a thread that
ends between the listing of /proc/PID/task and the reading of its files is left out without a
word, as ``ps`` does. Roles come from the event ring of ``pinlab run`` (see
:mod:`pinlab.measure.roles`); for any other process the main thread is ``main`` and the others
``unknown``.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field

from pinlab.errors import UsageError
from pinlab.measure import linux
from pinlab.measure.roles import events_path, roles_from_events

#: Clock ticks per second, the unit of utime and stime in /proc/PID/task/TID/stat.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class LiveThread:
    """One thread of a running process as it is now.

    ``role`` is main, worker, helper or nested as the preload library of ``pinlab run`` decided
    it at creation (by the library its start routine lives in), or unknown; ``index`` is its
    creation index (0 = main thread) and ``slot`` its plan slot, None when not known. ``cpu``
    is the CPU it last ran on, ``mask`` the CPUs it may run on, ``migrations`` the kernel's count
    of its moves between CPUs since it started (None where the kernel does not show it) and
    ``cpu_seconds`` its user + system time.
    """

    tid: int
    pid: int
    name: str
    role: str
    index: int | None
    slot: int | None
    cpu: int
    mask: frozenset[int]
    migrations: int | None
    cpu_seconds: float
    state: str
    planned: int | None = None  # the CPU its plan slot gave it at creation (pinlab run), None if none
    start_ticks: int = field(default=0, repr=False)  # when it started (ticks since boot): tells a reused tid apart
    library: str | None = None  # the file its start routine lives in (pinlab run's preload library records it), None if not known


@dataclass(frozen=True)
class _TaskStat:
    name: str
    state: str
    ticks: int  # utime + stime
    start_ticks: int
    cpu: int


def _task_stat(pid: int, tid: int | str) -> _TaskStat | None:
    """The fields of /proc/PID/task/TID/stat pinlab uses, None once the thread has ended."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: it ends at the last ')'.
    close = data.rfind(b")")
    fields = data[close + 2 :].split()
    if len(fields) < 37:
        return None
    name = data[data.find(b"(") + 1 : close].decode("utf-8", "replace")
    return _TaskStat(name, fields[0].decode(), int(fields[11]) + int(fields[12]), int(fields[19]), int(fields[36]))


def _status(pid: int) -> dict[str, str] | None:
    """/proc/PID/status as a dict, None when there is no such process (or thread)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
            return dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    except OSError:
        return None


def _owner(status: dict[str, str]) -> str:
    uid = int(status.get("Uid", "-1").split()[0])
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _ended(pid: int, status: dict[str, str]) -> bool:
    """A zombie whose only task left is its main thread: the program has ended, its parent has
    not collected it yet. (A main thread that called pthread_exit is a zombie too while the
    other threads run: that process is alive.)"""
    if not status.get("State", "").startswith("Z"):
        return False
    try:
        return os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except OSError:
        return True


def check_process(pid: int, *, repin: bool = True) -> None:
    """Raise a one-line UsageError unless ``pid`` is a live process pinlab may look at (and, with
    ``repin``, re-pin).

    Whether it is ours is found by doing what re-pinning needs: setting its main thread's
    affinity to the mask it already has (allowed to its owner, root and CAP_SYS_NICE), which
    changes nothing. Anyone may look at any process's threads; only their roles (from its
    environment) stay unknown when it is not ours.
    """
    if pid <= 0:
        raise UsageError(f"no process {pid}: process ids are positive numbers")
    status = _status(pid)
    if status is None or _ended(pid, status):
        raise UsageError(f"no process {pid}: it has ended or never existed (see ps -e)")
    tgid = int(status.get("Tgid", pid))
    if tgid != pid:
        raise UsageError(f"{pid} is a thread of process {tgid}, not a process: give the process id ({tgid})")
    if _kernel_thread(pid):
        raise UsageError(
            f"process {pid} ({status.get('Name', '?')}) is a kernel thread: pinlab looks at and re-pins programs, not the kernel's own threads"
        )
    if not repin:
        return
    try:
        os.sched_setaffinity(pid, os.sched_getaffinity(pid))
    except PermissionError:
        raise UsageError(
            f"process {pid} belongs to user {_owner(status)}: pinlab can only re-pin your own processes (or run as root, or with CAP_SYS_NICE)"
        ) from None
    except ProcessLookupError:
        raise UsageError(f"no process {pid}: it has ended") from None
    except OSError as exc:  # EINVAL: a thread whose affinity cannot change (PF_NO_SETAFFINITY)
        raise UsageError(f"process {pid} cannot be re-pinned: {exc.strerror}") from None


#: PF_KTHREAD in the flags of /proc/PID/stat (field 9): a kernel thread.
_PF_KTHREAD = 0x00200000


def _process_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].split()


def _kernel_thread(pid: int) -> bool:
    fields = _process_stat(pid)
    return fields is not None and len(fields) > 6 and bool(int(fields[6]) & _PF_KTHREAD)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (not ended, not a zombie waiting to be reaped)."""
    fields = _process_stat(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def process_threads(pid: int, events: str | None = "environ", migrations: bool = True) -> list[LiveThread]:
    """Every thread of process ``pid`` now: main first, then in creation order where ``pinlab run``
    recorded it, else by tid. Empty once the process has ended.

    ``events`` is the event ring to take the roles from; by default the one named in the
    process's environment (``PINLAB_EVENTS``); a caller that started the program passes its own
    (or None), which saves reading the environment at every look. ``migrations=False`` leaves
    each thread's migration count out (None), which saves reading one more file per thread for
    a caller that samples often and has no use for it.
    """
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []
    path = events_path(pid) if events == "environ" else events
    roles = roles_from_events(path) if path else {}
    threads = []
    for tid in tids:
        stat = _task_stat(pid, tid)
        mask = linux.thread_mask(tid) if stat is not None else None
        if stat is None or mask is None:
            continue  # ended while we read
        known = roles.get(tid)
        if known is not None and known["pid"] != pid:
            known = None
        threads.append(
            LiveThread(
                tid=tid,
                pid=pid,
                name=stat.name,
                role=known["role"] if known else ("main" if tid == pid else "unknown"),
                index=known["index"] if known else None,
                slot=known["slot"] if known else None,
                cpu=stat.cpu,
                mask=mask,
                migrations=linux.task_migrations(pid, tid) if migrations else None,
                cpu_seconds=stat.ticks / CLOCK_TICKS,
                state=stat.state,
                planned=known["planned"] if known else None,
                start_ticks=stat.start_ticks,
                library=known.get("library") if known else None,
            )
        )
    threads.sort(key=lambda t: (t.tid != pid, t.index is None, t.index or 0, t.tid))
    return threads


def roles_known(threads: list[LiveThread]) -> bool:
    """Whether ``pinlab run``'s preload library recorded these threads (so roles mean something)."""
    return any(t.index is not None for t in threads)


def workers(threads: list[LiveThread]) -> list[LiveThread]:
    """The threads a plan places: the main thread and the workers, in creation order (thread i
    gets plan CPU i, as under ``pinlab run``); helpers and nested threads are left where they are.

    When the roles are unknown (a process not started by ``pinlab run``), every thread is taken,
    in tid order: Linux hands out tids in increasing order, so that is creation order unless the
    tids wrapped round.
    """
    if not roles_known(threads):
        return sorted(threads, key=lambda t: t.tid)
    chosen = [t for t in threads if t.role in ("main", "worker")]
    return sorted(chosen, key=lambda t: (t.role != "main", t.index if t.index is not None else 1 << 62, t.tid))


def pages_per_node(pid: int) -> dict[int, int]:
    """Pages of the process on each NUMA node (from /proc/PID/numa_maps); empty when the kernel
    does not show them (no NUMA support) or they are not ours to read."""
    try:
        with open(f"/proc/{pid}/numa_maps", encoding="utf-8", errors="replace") as maps:
            return linux.numa_pages(maps.read())
    except OSError:
        return {}
