"""The ``pages`` tracing method: which threads touch which pages, for unmodified binaries, in software.

Machines without memory-sampling hardware (virtual machines like this one) and programs that
cannot be recompiled still share data through pages. This method loads
``libpinlab-pagetrace.so`` (native/tracer/pinlab_pagetrace.c) into the program with LD_PRELOAD,
next to pinlab's preload library, which tells threads apart by creation order. Every ``period_ms``
(default 10) a timer signal starts a round that removes all access from the program's large
private anonymous mappings; the first thread to touch such a page in the round faults, the
tracer's SIGSEGV handler records (thread, page) and gives the page back. After many rounds each
page has been attributed to the threads that use it, and :func:`graph_from_counts` turns the
counts (rounds in which a thread touched a page first) into the affinity graph at page granularity.
It is the idea of the kernel page-sharing detectors of SPCD, done from user space.

Limits, honestly:

- page granularity (4 KiB): threads using different cache lines of one page count as sharers;
  the ``exact`` method sees cache lines;
- only the first thread to touch a page in a round is seen; sharing shows over many rounds, so
  a program that runs for less than a few dozen periods gives a thin graph (lower ``period_ms``).
  The thread that runs a round is on a CPU as it ends, so where threads take turns on CPUs (more
  threads than CPUs, a busy machine) it would be first on every page it reaches: the rounds go to
  the program's threads in turn (``rounds_handed_on`` in the result counts those handed on);
- only unnamed private read-write mappings of at least ``min_bytes`` (default 64 KiB) are
  watched: malloc's blocks above its mmap threshold (128 KiB by default) and mmaps. malloc's main
  heap, where the main thread's smaller blocks go, is watched only with ``heap`` (``--heap``), as
  it holds libc's own buffers: the standard streams' are left open, but others (fopen'd files,
  opendir) and mutexes on protected heap pages meet the EFAULT hazard below. Stacks, globals and
  libraries' data are never watched. When no two threads were seen on a page the result says so
  and why, rather than leave an all-zero graph unexplained;
- when every pair of threads has most of its page accesses in common, the graph may be
  page-level false sharing (each thread's own slots spread over common pages): the result says
  so and points to the exact method, which counts cache lines;
- system calls made inside libc (a printf flushing its buffer) or other libraries are not
  interposed: should a round protect their buffer in between, the kernel returns EFAULT to them;
  the same holds for futex waits inside glibc. The calls a program makes itself with its buffers
  (read, write, pread/pwrite, readv/writev, recv*/send*, fread/fwrite) are safe, and so are its own
  SIGSEGV handlers, its crashes and its mprotect/munmap/mremap/madvise/mmap calls. While a call
  with one buffer (read, write, pread/pwrite, recv, send, fread/fwrite) is in flight the rounds
  leave that buffer's pages alone and go on, so a thread waiting in a read on a pipe or a socket
  does not stop the trace; a call with several buffers (readv/writev, sendmsg/recvmsg,
  sendto/recvfrom), thread creation and mapping changes hold every round back until they
  return: the result counts those expiries (``rounds_skipped``) and says when the rounds covered
  only part of the run;
- overhead: one fault (a few microseconds) per page touched per round, up to ``max_pages`` pages a
  round; programs streaming through large arrays slow down most (see the README's figures).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.native import NATIVE_DIR, native_path
from pinlab.trace.common import TraceRequest, TraceResult, graph_from_counts, window_unopened
from pinlab.trace.traced_run import check_request, preload_problem, run_traced, thread_indexes

LIBRARY = "libpinlab-pagetrace.so"
HEADER = "pinlab-pagetrace"
DEFAULTS = {"period_ms": 10, "min_bytes": 65536, "max_pages": 65536}
# All-to-all: every pair of the threads doing at least 1/ACTIVE of the most's accesses has this
# share of the lighter one's accesses in common.
ALL_TO_ALL = 0.5
ACTIVE = 10
#: The first round later than this share of the traced time: the graph is of the run's end only.
LATE = 0.5


def unavailable(request: TraceRequest) -> str | None:
    """Why the pages method cannot trace this program here (no library, static or setuid program), or None."""
    if not (NATIVE_DIR / LIBRARY).exists():
        return f"the pages method needs {LIBRARY}, missing from {NATIVE_DIR}: reinstall pinlab (make install), or use --method exact"
    if os.uname().sysname != "Linux":
        return "the pages method needs Linux (mprotect rounds and /proc/self/maps); use --method exact"
    return preload_problem(request, "pages")


def options(request: TraceRequest) -> dict[str, int]:
    """The method's settings from ``request.options`` (period_ms, min_bytes, max_pages, heap), checked."""
    chosen = dict(DEFAULTS, heap=0)
    for key, value in request.options.items():
        if key == "heap":
            if not isinstance(value, bool):
                raise UsageError(f"pages method: heap must be true or false, not {value!r}")
            chosen["heap"] = int(value)
            continue
        if key not in DEFAULTS:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"pages method: {key} must be a whole number of at least 1, not {value!r}")
        chosen[key] = value
    if chosen["period_ms"] > 3_600_000:
        raise UsageError(f"pages method: period_ms {chosen['period_ms']} is more than an hour; use a few milliseconds")
    return chosen


def held_back(header: dict[str, int]) -> str | None:
    """Why a graph covers part of the run only, or None: the first round came late (after
    :data:`LATE` of the traced time), or more timer expiries found a call in flight than ran a round."""
    opened, traced = header.get("opened_ns", 0) / 1e9, header.get("ns", 0) / 1e9
    rounds, skipped = header.get("rounds", 0), header.get("skipped_in_flight", 0)
    late = traced > 0 and opened > LATE * traced
    if not late and skipped <= rounds:
        return None
    parts = [f"the first protection round came {opened:.3g} s into the {traced:.3g} s traced"] if late else []
    if skipped:
        parts.append(
            f"{skipped} of {skipped + rounds} timer expiries found a call in flight that holds every round back "
            "(readv/writev, sendmsg/recvmsg, sendto/recvfrom, thread creation, a mapping change) and ran no round"
        )
    return "; ".join(parts) + ": the graph shows only the part of the run the rounds covered; trace again or a longer run"


def parse_counts(text: str, source: str = "page trace") -> tuple[dict[str, int], dict[int, dict[int, int]]]:
    """The header fields and ``counts[tid][page number]`` of a pagetrace file (format in the C file)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(HEADER + " "):
        raise UsageError(f"{source} is not a pinlab page trace (no '{HEADER}' header); was the tracer loaded?")
    words = lines[0].split()
    if words[1] != "1":
        raise UsageError(f"{source} is page trace format {words[1]}; this pinlab reads format 1")
    header = {k: int(v) for k, v in (w.split("=", 1) for w in words[2:] if "=" in w)}
    counts: dict[int, dict[int, int]] = {}
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split()
        if len(parts) != 3:
            raise UsageError(f"{source} line {number}: expected 'TID PAGE COUNT', got {line!r}")
        tid, page, count = int(parts[0]), int(parts[1], 16), int(parts[2])
        counts.setdefault(tid, {})[page] = count
    return header, counts


def sharing_warnings(graph, settings: dict[str, int]) -> list[str]:
    """What a page-granularity graph cannot tell by itself: that no sharing was seen, and where the
    method did not look; or that everyone shares with everyone, which pages alone cannot tell
    from threads using their own slots of common pages."""
    if graph.threads < 2:
        return []
    seen = [i for i, volume in enumerate(graph.volume) if volume > 0]
    if graph.empty:
        where = (
            "anonymous mappings of at least {0} bytes and malloc's main heap"
            if settings["heap"]
            else "anonymous mappings of at least {0} bytes (mmaps, malloc's blocks above its mmap threshold, 128 KiB by "
            "default), not malloc's main heap"
        ).format(settings["min_bytes"])
        heap = "" if settings["heap"] else "trace malloc's heap too with --heap, or "
        return [
            f"no two threads were seen touching one page, so the graph has no weight at all: the pages method watched only "
            f"{where}; data shared in smaller blocks, globals or on stacks is not seen. If the threads share such data, "
            f"{heap}use --method exact (rebuild with pinlab cc), which sees every access"
        ]
    # How much of the lighter thread's page accesses each pair has in common, among the threads
    # that did a fair part of the work (a main thread that only initialised the data is left out):
    # near 1 for every pair when all threads touch all the pages, whatever the scheduler let each do.
    top = max(graph.volume)
    active = [i for i in seen if graph.volume[i] * ACTIVE >= top]
    overlap = min((graph.weight(i, j) / min(graph.volume[i], graph.volume[j]) for a, i in enumerate(active) for j in active[a + 1 :]), default=0.0)
    if len(active) >= 3 and overlap >= ALL_TO_ALL:
        named = ", ".join(map(str, active[:10])) + (" ..." if len(active) > 10 else "")
        return [
            f"every pair of the {len(active)} threads {named} has at least {int(overlap * 100)}% of its page accesses in common: "
            f"either they all share the same data, or each uses its own part of common pages (page-level false sharing, "
            f"such as per-thread slots or counters packed in one array), which pages alone cannot tell apart; "
            f"use --method exact (rebuild with pinlab cc), which counts cache lines"
        ]
    return []


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(x, 1)


def trace(request: TraceRequest) -> TraceResult:
    """Run the program once under the page tracer and return its page-granularity affinity graph."""
    check_request(request)
    why = unavailable(request)
    if why is not None:
        raise UsageError(why)
    settings = options(request)

    library = str(native_path(LIBRARY))
    with tempfile.TemporaryDirectory(prefix="pinlab-pagetrace-") as directory:
        env = {
            "PINLAB_TRACE_DIR": directory,
            "PINLAB_PAGETRACE_PERIOD_MS": str(settings["period_ms"]),
            "PINLAB_PAGETRACE_MIN_BYTES": str(settings["min_bytes"]),
            "PINLAB_PAGETRACE_MAX_PAGES": str(settings["max_pages"]),
            "PINLAB_PAGETRACE_HEAP": str(settings["heap"]),
        }
        record = run_traced(request, env, preload=library)
        out = Path(directory) / f"pagetrace-{record.pid}.txt"
        text = out.read_text() if out.exists() else None
    warnings = list(record.warnings)
    header: dict[str, int] = {}
    by_index: dict[int, dict[int, int]] = {}
    if text is None:
        warnings.append(
            "the page tracer wrote nothing: the program ended without running its exit handlers "
            "(killed by a signal or _exit) or never loaded the tracer; the graph is empty"
        )
    else:
        header, by_tid = parse_counts(text, str(out))
        indexes = thread_indexes(record)
        for tid, pages in by_tid.items():
            index = indexes.get(tid)
            if index is None:
                continue  # a thread the preload library did not see (another process)
            by_index.setdefault(index, {}).update(pages)
        if header.get("lost"):
            warnings.append(f"the page tracer's table was full: {header['lost']} faults were not counted")
        if request.after is not None and "opened_ns" not in header:
            warnings.append(window_unopened(request.after))
        elif request.after is None and (why := held_back(header)):
            warnings.append(why)
        elif header.get("rounds", 0) < 10:
            warnings.append(
                f"only {header.get('rounds', 0)} protection rounds ran: the graph is thin; "
                f"lower period_ms (now {settings['period_ms']}) or trace a longer run"
            )
    units = len({page for pages in by_index.values() for page in pages})
    measured = {
        "method": "pages",
        "argv": list(request.argv),
        "threads": request.threads,
        "sample_period_ms": settings["period_ms"],
        "rounds": header.get("rounds", 0),
        "rounds_handed_on": header.get("handed", 0),
        "rounds_skipped": {"busy": header.get("skipped_busy", 0), "in_flight": header.get("skipped_in_flight", 0)},
        "faults": header.get("faults", 0),
        "units_seen": units,
        "traced_seconds": round(header.get("ns", 0) / 1e9, 6),
        "wall_seconds": record.wall_seconds,
        "min_bytes": settings["min_bytes"],
        "max_pages": settings["max_pages"],
        "heap": bool(settings["heap"]),
        "after": request.after,
        "window_opened_seconds": round(header["opened_ns"] / 1e9, 6) if "opened_ns" in header else None,
    }
    graph = graph_from_counts(
        by_index, request.threads, granularity="page", unit_bytes=header.get("page", os.sysconf("SC_PAGE_SIZE")), measured=measured
    )
    unseen = [index for index, volume in enumerate(graph.volume) if volume == 0]
    if text is not None and unseen and len(unseen) < request.threads:  # none seen: sharing_warnings says why
        named = ", ".join(map(str, unseen[:10])) + (f" and {len(unseen) - 10} more" if len(unseen) > 10 else "")
        warnings.append(
            f"thread(s) {named} of the {request.threads} were never seen first on a traced "
            "page, so their rows are empty: they ran too little for the rounds to catch them, use no large "
            "anonymous memory, or were never started; trace a longer run or lower period_ms"
        )
    if text is not None and (request.after is None or "opened_ns" in header):
        warnings += sharing_warnings(graph, settings)
    return TraceResult(
        graph=graph, exit_status=record.exit_status, wall_seconds=record.wall_seconds, warnings=warnings, interrupted=record.interrupted
    )
