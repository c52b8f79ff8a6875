"""What every tracing method shares: the request, the result, and counts -> affinity graph.

A method (``exact``, ``sampled``, ``pages``) runs the program once under its tracer and
collects, for each thread (by creation index: 0 = main thread, as in a placement), how many
accesses it made to each memory unit (a cache line or a page, by its number = address // unit
size). :func:`graph_from_counts` turns those counts into the affinity graph of [mazouz2011hpcs]:

    weight(i, j) = sum over the units u touched by both i and j of min(count_i(u), count_j(u))

[mazouz2011hpcs]'s "number of common accesses to common cache lines, accessed by both threads", read as
the accesses the two threads have in common on each line: the smaller of the two counts. (The
sum of both counts would make a thread that reads another's data once, to initialise or check
it, look almost as close to it as the threads that work on that data all along: on the pairs
workload the main thread's final check of every group gave it half the weight of a real pair;
with the smaller count it is below a thousandth.) ``volume[i]`` is the sum of thread i's counts
over all units. Each method module provides::

    unavailable(request: TraceRequest) -> str | None   # why it cannot trace here, or None
    trace(request: TraceRequest) -> TraceResult
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from pinlab.errors import UsageError
from pinlab.graph.model import AffinityGraph


@dataclass
class TraceRequest:
    """One program to trace for ``threads`` threads (OMP_NUM_THREADS is set to it when unset)."""

    argv: list[str]
    threads: int
    env: dict[str, str] | None = None  # the program's environment (default: pinlab's own)
    options: dict[str, Any] = field(default_factory=dict)  # method-specific (sample period...)
    after: str | None = None  # the window: count from SECONDS after the start, "parallel" or "mark" (see check_window)
    stdout: int | None = None  # the program's standard output, a file descriptor (default: pinlab's own)


WINDOW_WORDS = ("parallel", "mark")
ENV_WINDOW = "PINLAB_TRACE_START"  # read by both tracer libraries


def check_window(after: str | None) -> str | None:
    """The window setting, checked and written as the tracer libraries read it; None: the whole run.

    A whole-run graph of a program whose main thread initialises its data alone is that
    initialisation's; a window leaves it out: SECONDS after the program starts, ``parallel`` from
    its first thread creation (an OpenMP program's first parallel region), ``mark`` from its call
    to ``pinlab_trace_start()``.
    """
    if after is None:
        return None
    text = str(after).strip()
    if text in WINDOW_WORDS:
        return text
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or not 0 <= seconds <= 1e6:
        raise UsageError(
            f"--after {after!r}: give SECONDS after the program starts (0 to 1000000), 'parallel' (from its first "
            f"thread creation: an OpenMP program's first parallel region) or 'mark' (from its call to pinlab_trace_start())"
        )
    return f"{seconds:g}"


def window_unopened(after: str) -> str:
    """Why a window that never opened counted nothing."""
    why = {
        "parallel": "the program never created a thread",
        "mark": "the program never called pinlab_trace_start() (declare it weak and call it where its parallel phase starts)",
    }
    return f"counting never started (--after {after}): " + why.get(after, f"the program ended before {after} s")


@dataclass
class TraceResult:
    graph: AffinityGraph
    exit_status: int  # the program's, unchanged by the tracer (128 + signal when killed)
    wall_seconds: float  # the traced run
    warnings: list[str] = field(default_factory=list)
    interrupted: int | None = None  # the stopping signal (Ctrl-C: SIGINT) pinlab received while the program ran


def graph_from_counts(
    counts: Mapping[int, Mapping[int, int | float]], threads: int, *, granularity: str, unit_bytes: int | None, measured: dict[str, Any] | None = None
) -> AffinityGraph:
    """The affinity graph of per-thread access counts ``counts[thread index][unit] = accesses``.

    Threads with an index outside ``0..threads-1`` (helpers the runtime started beyond the team)
    are left out; threads that never appear have a zero row. The work is proportional to the
    number of (thread, unit) pairs: each unit's threads are gathered once.
    """
    by_unit: dict[int, list[tuple[int, float]]] = {}
    volume = [0.0] * threads
    for index, units in counts.items():
        if not 0 <= index < threads:
            continue
        for unit, count in units.items():
            if count > 0:
                by_unit.setdefault(unit, []).append((index, float(count)))
                volume[index] += count
    weights = [[0.0] * threads for _ in range(threads)]
    for sharers in by_unit.values():
        if len(sharers) < 2:
            continue
        for a in range(len(sharers)):
            i, ci = sharers[a]
            for b in range(a + 1, len(sharers)):
                j, cj = sharers[b]
                common = min(ci, cj)
                weights[i][j] += common
                weights[j][i] += common
    return AffinityGraph(
        weights=weights, volume=volume, granularity=granularity, unit_bytes=unit_bytes, measured=dict(measured or {}), source="trace"
    )
