"""What the checks share: which threads were busy in the window, and how evidence and fixes are written.

A thread counts as busy by the CPU time it used over the window, against one CPU and against the
busiest thread (so that a machine loaded by other programs, which gives every thread less, does
not hide a pool); evidence names threads by tid, name and start library, and a fix repeats the
process's own command line with the variables that change.
"""

from __future__ import annotations

import os
import shlex

from pinlab.doctor.libraries import identify
from pinlab.doctor.observe import ProcessObservation
from pinlab.measure.events import AffinityCall
from pinlab.measure.threads import LiveThread

#: A thread is busy in the window when it used this share of one CPU, or this share of what the
#: busiest thread used (whichever is less), and at least the minimum share of a CPU.
BUSY_SHARE = 0.1
RELATIVE_BUSY = 0.25
MIN_BUSY_SHARE = 0.02
#: ... or when it was runnable (on a CPU or waiting for one) in this share of the samples it was
#: seen in, at least MIN_RUNNABLE_SAMPLES of them: on a machine loaded far past its CPUs a spinning
#: thread may get less than the minimum share, yet it wants a CPU all the time.
RUNNABLE_SHARE = 0.5
MIN_RUNNABLE_SAMPLES = 3


def thread_entry(t: LiveThread) -> dict:
    entry: dict = {"tid": t.tid, "name": t.name}
    lib = identify(t.library)
    if t.library:
        entry["library"] = lib.name if lib is not None else os.path.basename(t.library)
    return entry


def call_entry(c: AffinityCall) -> dict:
    """One of the program's affinity calls, as evidence."""
    return {"t": c.t, "tid": c.tid, "target_tid": c.target_tid, "call": c.call, "library": c.library, "old": c.old, "new": c.new}


def thread_count(value: str | None) -> int | None:
    """A thread-count variable's value (the first of a comma list, as OpenMP reads nested levels)."""
    if value is None:
        return None
    try:
        return int(value.split(",")[0].strip())
    except ValueError:
        return None


def with_env(obs: ProcessObservation, settings: dict[str, str], unset: tuple[str, ...] = ()) -> str:
    """The process's command line with ``settings`` in its environment (and ``unset`` removed)."""
    prefix = ["env", *[f"-u{name}" for name in unset]] if unset else []
    return shlex.join([*prefix, *(f"{k}={v}" for k, v in settings.items()), *obs.argv]) if obs.argv else obs.command


def busy_threads(obs: ProcessObservation) -> list[LiveThread]:
    """Threads busy during the window (see :data:`BUSY_SHARE`), by tid."""
    seconds = obs.seconds
    if seconds <= 0:
        return []
    used = obs.cpu_seconds()
    last = obs.last_threads()
    # Beside the busiest thread as well as absolutely: on a machine loaded by other programs every
    # thread gets less CPU, and a thread at a quarter of the busiest still wants a CPU of its own.
    floor = max(MIN_BUSY_SHARE * seconds, min(BUSY_SHARE * seconds, RELATIVE_BUSY * max(used.values(), default=0.0)))
    seen: dict[int, int] = {}
    runnable: dict[int, int] = {}
    for sample in obs.samples:
        for t in sample.threads:
            seen[t.tid] = seen.get(t.tid, 0) + 1
            runnable[t.tid] = runnable.get(t.tid, 0) + (t.state == "R")
    wanting = {tid for tid, n in seen.items() if n >= MIN_RUNNABLE_SAMPLES and runnable[tid] >= RUNNABLE_SHARE * n}
    return sorted((last[tid] for tid, s in used.items() if (s >= floor and s > 0) or tid in wanting), key=lambda t: t.tid)
