"""How many threads ``pinlab trace`` may be asked for on this machine, checked before the program runs.

Two things bound ``-n``, both read from the machine at the time of the trace:

- the kernel: no process can have more threads than ``kernel.threads-max``, and every thread
  takes a pid below ``kernel.pid_max`` (plus ``RLIMIT_NPROC`` for a user other than root);
- memory: an affinity graph is a dense thread x thread matrix, held in pinlab's memory while the
  counts become the graph and the graph becomes its file, at about ``BYTES_PER_PAIR`` bytes a
  pair of threads; the graph of ``n`` threads must fit in the memory available now
  (``MemAvailable``), or pinlab grows after the program has run until the machine swaps or kills it.

Asking for more is refused in one line naming the bound and where it comes from.
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path

from pinlab.errors import UsageError

# Peak bytes of pinlab trace per weight of the graph it writes: the list of weights (8 bytes a
# slot), its JSON copy (8), the number objects of a measured graph (24-32) and the file's text
# (a few bytes a number, twice while it is joined).
BYTES_PER_PAIR = 64
PROC = Path("/proc")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def available_memory(proc: Path = PROC) -> int | None:
    """MemAvailable in bytes, or None where /proc/meminfo does not say."""
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def thread_limit(proc: Path = PROC) -> tuple[int, str]:
    """The most threads a trace may be asked for here, and a few words saying what sets it."""
    bounds: list[tuple[int, str]] = []
    threads_max = _read_int(proc / "sys/kernel/threads-max")
    if threads_max:
        bounds.append((threads_max, f"the kernel allows {threads_max} threads (kernel.threads-max)"))
    pid_max = _read_int(proc / "sys/kernel/pid_max")
    if pid_max:
        bounds.append((pid_max, f"the kernel has {pid_max} pids for all threads (kernel.pid_max)"))
    if os.geteuid() != 0:
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY:
            bounds.append((soft, f"this user may have {soft} threads (ulimit -u)"))
    memory = available_memory(proc)
    if memory:
        most = math.isqrt(memory // BYTES_PER_PAIR)
        bounds.append(
            (most, f"the graph of more threads, {BYTES_PER_PAIR} bytes a pair, would not fit in the {memory / 2**30:.1f} GiB of memory available now")
        )
    if not bounds:
        return 2**31 - 1, "nothing on this machine says otherwise"
    return min(bounds)


def check_threads(threads: int) -> None:
    """Refuse a thread count below 1 or above :func:`thread_limit` in one line."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise UsageError(f"-n must be a whole number of threads (got {threads!r})")
    if threads < 1:
        raise UsageError(f"-n must be at least 1 thread (got {threads})")
    most, why = thread_limit()
    if threads > most:
        raise UsageError(f"-n {threads} is more threads than this machine can trace: at most {most}, since {why}; trace fewer threads")
