"""The exact tracing method: every access of a program built with ``pinlab cc``, counted per cache line.

The program's own loads, stores and atomics call libpinlab-trace.so (see :mod:`pinlab.trace.cc`
and native/tracer/pinlab_trace_rt.c), which counts them per thread and 64-byte line while
``PINLAB_TRACE_DIR`` is set and writes one ``<tid>.lines`` file per thread at its end. The run goes
through pinlab's launcher with the preload library active (its event ring gives each tid its
creation index, 0 = main thread, the numbering of placements); threads go one per allowed CPU in
order, those beyond the CPUs unpinned, so a team larger than the machine can be traced.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.launch.runner import LaunchSpec
from pinlab.launch.runner import run as launch
from pinlab.measure.linux import allowed_cpus
from pinlab.trace.cc import TRACE_LIBRARY
from pinlab.trace.common import ENV_WINDOW, TraceRequest, TraceResult, graph_from_counts, window_unopened
from pinlab.trace.elf import needed_libraries
from pinlab.trace.traced_run import check_request

MAGIC = b"PLTRACE1"
HEADER_WORDS = 8  # magic, pid, tid, line bytes, entries, accesses, table bytes, missed


def instrumented(program: str) -> bool:
    """Whether the executable was linked against pinlab's tracer runtime (built with ``pinlab cc``)."""
    return TRACE_LIBRARY in (needed_libraries(program) or [])


def _program(request: TraceRequest) -> str | None:
    env = os.environ if request.env is None else request.env
    name = request.argv[0]
    return name if "/" in name else shutil.which(name, path=env.get("PATH", os.defpath))


def unavailable(request: TraceRequest) -> str | None:
    """Why the exact method cannot trace this program, or None."""
    program = _program(request)
    if program is None or not os.path.isfile(program):
        return f"{request.argv[0]} is not an executable file it can inspect"
    if not instrumented(program):
        return (
            f"{program} was not built with pinlab cc (it does not load {TRACE_LIBRARY}); rebuild it with "
            "pinlab cc -- gcc ... (or pinlab cflags / pinlab ldflags in its Makefile)"
        )
    return None


def read_counts(path: str | Path) -> tuple[dict[str, int], dict[int, int]]:
    """One ``<tid>.lines`` file: its header (pid, tid, line_bytes, accesses, table_bytes, missed) and {line: count}."""
    data = Path(path).read_bytes()
    if len(data) < HEADER_WORDS * 8 or data[:8] != MAGIC:
        raise ValueError(f"{path} is not a pinlab trace file")
    words = array("Q")
    words.frombytes(data[8 : HEADER_WORDS * 8])
    if sys.byteorder != "little":
        words.byteswap()
    pid, tid, line_bytes, entries, accesses, table_bytes, missed = words
    body = array("Q")
    body.frombytes(data[HEADER_WORDS * 8 : HEADER_WORDS * 8 + entries * 16])
    if len(body) != 2 * entries:
        raise ValueError(f"{path} is cut short ({len(body) // 2} of {entries} entries)")
    if sys.byteorder != "little":
        body.byteswap()
    counts = {line: count for line, count in zip(body[0::2], body[1::2]) if count}
    header = {"pid": pid, "tid": tid, "line_bytes": line_bytes, "accesses": accesses, "table_bytes": table_bytes, "missed": missed}
    return header, counts


def trace(request: TraceRequest) -> TraceResult:
    """Run the program once under the exact tracer and build its affinity graph (cache lines)."""
    check_request(request)
    why = unavailable(request)
    if why is not None:
        raise UsageError(f"the exact method cannot trace here: {why}")
    warnings: list[str] = []
    env = dict(os.environ if request.env is None else request.env)
    with tempfile.TemporaryDirectory(prefix="pinlab-trace-") as directory:
        env["PINLAB_TRACE_DIR"] = directory
        if request.after is not None:
            env[ENV_WINDOW] = request.after
        spec = LaunchSpec(
            argv=list(request.argv),
            cpus=sorted(allowed_cpus()),
            threads=request.threads,
            overflow="unpinned",
            env=env,
            sample_ms=None,
            stdout=request.stdout,
        )
        started = time.monotonic()
        record = launch(spec)
        elapsed = time.monotonic() - started
        warnings += record.warnings
        index_of = {t.tid: t.index for t in record.threads if t.pid == record.pid and t.index is not None}
        counts: dict[int, dict[int, int]] = {}
        totals = {"accesses": 0, "table_bytes": 0, "missed": 0, "files": 0}
        line_bytes, unknown = 64, []
        for path in sorted(Path(directory).glob("*.lines")):
            header, lines = read_counts(path)
            if header["pid"] != record.pid:
                continue  # a process the program started: its own threads, not the program's team
            line_bytes = header["line_bytes"]
            totals["files"] += 1
            for key in ("accesses", "table_bytes", "missed"):
                totals[key] += header[key]
            index = index_of.get(header["tid"])
            if index is None:
                unknown.append(header["tid"])
                continue
            counts[index] = lines
    if unknown:
        warnings.append(f"{len(unknown)} traced thread(s) (tid {', '.join(map(str, unknown[:5]))}) were not seen starting; left out of the graph")
    if totals["missed"]:
        warnings.append(f"{totals['missed']} accesses to new lines were not counted (the tracer ran out of memory)")
    if not counts and request.after is not None and record.signal is None:
        warnings.append(window_unopened(request.after))
    elif not counts:
        warnings.append("the program wrote no trace: it ended by _exit or a signal before any thread finished, or it ran no instrumented code")
    helpers = sorted(i for i in counts if i >= request.threads)
    if helpers:
        warnings.append(f"threads {', '.join(map(str, helpers))} are beyond the {request.threads} asked for (-n): left out of the graph")
    measured = {
        "method": "exact",
        "argv": list(request.argv),
        "threads": request.threads,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "granularity": "line",
        "traced_seconds": round(elapsed, 6),
        "units_seen": len({line for lines in counts.values() for line in lines}),
        "accesses": totals["accesses"],
        "threads_traced": len(counts),
        "tracer_memory_bytes": totals["table_bytes"],
        "exit_status": record.exit_status,
        "after": request.after,
    }
    graph = graph_from_counts(counts, request.threads, granularity="line", unit_bytes=line_bytes, measured=measured)
    return TraceResult(graph=graph, exit_status=record.exit_status, wall_seconds=elapsed, warnings=warnings, interrupted=record.interrupted)
