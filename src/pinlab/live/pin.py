"""Re-pinning the threads of a running program: thread i of a selection gets plan CPU i.

The program is never stopped or signalled: each thread's affinity is set with
sched_setaffinity on its tid, and the kernel moves it at its next scheduling point. Threads
end whenever they like, also while being re-pinned: such a thread is reported, not an error.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.measure.linux import check_cpus
from pinlab.measure.threads import LiveThread, check_process, process_threads, workers
from pinlab.placement import make_placement
from pinlab.topology import load_topology
from pinlab.words import plural

#: The thread selections ``pinlab pin --select`` names (besides a list of tids).
SELECTIONS = ("workers", "all")


def pin_threads(assignments: dict[int, Iterable[int]], pid: int | None = None) -> dict[int, bool]:
    """Set each thread's affinity: tid -> True if pinned, False if it had ended.

    With ``pid``, a tid that is no longer a thread of that process counts as ended (and is not
    touched: the kernel may have given the number to a new thread elsewhere). No permission is
    a UsageError, as is a set of CPUs the thread can never run on (offline, or outside its
    cgroup's cpuset).
    """
    done: dict[int, bool] = {}
    for tid, cpus in assignments.items():
        wanted = frozenset(cpus)
        if not wanted:
            raise UsageError(f"no CPU given for thread {tid}: give at least one CPU")
        if pid is not None and not os.path.exists(f"/proc/{pid}/task/{tid}"):
            done[tid] = False
            continue
        try:
            os.sched_setaffinity(tid, wanted)
        except ProcessLookupError:
            done[tid] = False
            continue
        except PermissionError:
            raise UsageError(
                f"cannot re-pin thread {tid}: it belongs to another user; pinlab can only re-pin your own "
                "processes (or run as root, or with CAP_SYS_NICE)"
            ) from None
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise UsageError(
                    f"cannot pin thread {tid} on CPUs {format_cpulist(wanted)}: none of them is online and allowed "
                    "for it (its cgroup cpuset); choose CPUs from its mask (pinlab ps shows it)"
                ) from None
            raise
        done[tid] = True
    return done


def parse_tids(text: str) -> list[int]:
    """``1234,1240`` -> [1234, 1240], in the order given (that order is the plan's)."""
    tids = []
    for word in text.split(","):
        word = word.strip()
        if not (word.isascii() and word.isdigit()) or int(word) <= 0:
            raise UsageError(f"--threads {text!r}: expected workers, all, or thread ids separated by commas (1234,1240)")
        if int(word) in tids:
            raise UsageError(f"--threads {text!r}: thread {word} is named twice")
        tids.append(int(word))
    return tids


def select_threads(pid: int, which: str | list[int] = "workers") -> list[LiveThread]:
    """The threads of ``pid`` a re-pin acts on, in plan order: ``workers`` (main and workers in
    creation order, see :func:`pinlab.measure.threads.workers`), ``all`` (every thread, as
    :func:`process_threads` orders them), or thread ids (a list, or ``"1234,1240"``), which must
    all be threads of that process."""
    threads = process_threads(pid)
    if not threads:
        raise UsageError(f"no process {pid}: it has ended")
    if which == "workers":
        return workers(threads)
    if which == "all":
        return threads
    tids = parse_tids(which) if isinstance(which, str) else list(which)
    by_tid = {t.tid: t for t in threads}
    for tid in tids:
        if tid not in by_tid:
            shown = ",".join(str(t.tid) for t in threads[:8]) + (",..." if len(threads) > 8 else "")
            raise UsageError(f"{tid} is not a thread of process {pid} (its threads: {shown}; see pinlab ps {pid})")
    if not tids:
        raise UsageError("--threads: no thread given")
    return [by_tid[tid] for tid in tids]


@dataclass
class Repin:
    """What a re-pin did: ``cpus`` tid -> the CPU it was pinned to, ``ended`` the selected threads
    that ended before their turn, ``notices`` one line each (a plan wrapped round)."""

    pid: int
    threads: list[LiveThread]
    cpus: dict[int, int] = field(default_factory=dict)
    ended: list[int] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def repin(pid: int, plan: list[int], threads: str | list[int] = "workers") -> Repin:
    """Pin the selected threads of ``pid`` (see :func:`select_threads`): the i-th gets plan CPU i."""
    check_process(pid)
    return apply_plan(pid, select_threads(pid, threads), plan)


def apply_plan(pid: int, selected: list[LiveThread], plan: list[int]) -> Repin:
    """Pin ``selected`` (threads of ``pid``, in plan order): the i-th gets plan CPU i.

    More threads than plan CPUs wrap round-robin (thread i gets CPU i mod len(plan)) with a
    notice, as ``pinlab run --overflow wrap`` does for threads past the end of a plan: refusing
    would leave a running program that created a thread meanwhile not re-pinned at all.
    The plan's CPUs must exist and be allowed to pinlab (checked as ``pinlab run -c`` does).
    """
    if not plan:
        raise UsageError("empty plan: give at least one CPU")
    check_cpus(plan)
    result = Repin(pid, list(selected))
    if len(selected) > len(plan):
        result.notices.append(
            f"{plural(len(selected), 'thread')} on a plan of {plural(len(plan), 'CPU')} ({','.join(map(str, plan))}): "
            f"thread i gets plan CPU i mod {len(plan)}, so some threads share a CPU"
        )
    wanted = {t.tid: plan[i % len(plan)] for i, t in enumerate(selected)}
    for tid, pinned in pin_threads({tid: (cpu,) for tid, cpu in wanted.items()}, pid=pid).items():
        if pinned:
            result.cpus[tid] = wanted[tid]
        else:
            result.ended.append(tid)
    return result


def plan_cpus(
    count: int,
    *,
    strategy: str | None = None,
    threads: int | None = None,
    cpus: str | None = None,
    smt: bool = False,
    oversubscribe: bool = False,
    seed: int | None = None,
) -> list[int]:
    """The plan a re-pin of ``count`` threads follows, from a strategy or a CPU list/expression
    on this machine, as ``pinlab place`` computes it: a strategy places ``threads`` threads
    (default ``count``); a CPU list gives its CPUs (the first ``threads`` with -n)."""
    if cpus is None and strategy is not None and threads is None:
        threads = max(count, 1)
    placement = make_placement(load_topology("this"), strategy=strategy, threads=threads, cpus=cpus, smt=smt, oversubscribe=oversubscribe, seed=seed)
    if placement.cpus is None:
        raise UsageError(
            f"strategy {placement.strategy} pins nothing: to let the threads run anywhere again, pin them to every CPU (-c with the whole list)"
        )
    return list(placement.cpus)
