"""Tracing a program to measure its affinity graph: ``pinlab trace`` (methods exact, sampled, pages).

Each method is a module of this package with ``unavailable(request) -> str | None`` and
``trace(request) -> TraceResult`` (see :mod:`pinlab.trace.common`); this module picks one,
runs it, times the same program untraced for the slowdown, and stores how the graph was measured.

``auto`` picks, in order: ``exact`` when the program was built with ``pinlab cc`` (every access
counted: the truth, at a compiled-in cost), ``sampled`` when the machine has memory-sampling
hardware (unmodified binaries, small cost), else ``pages`` (unmodified binaries, no hardware
needed). A method asked for by name that cannot work here is refused in one line saying why.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.graph.model import BINARY_SUFFIX, MATRIX_SUFFIXES
from pinlab.launch.runner import LaunchSpec, ProgramNotExecutable, ProgramNotFound, resolve_program
from pinlab.launch.runner import run as launch
from pinlab.measure.linux import allowed_cpus
from pinlab.outputs import check_writable
from pinlab.trace.common import TraceRequest, TraceResult, check_window
from pinlab.trace.exact import instrumented
from pinlab.trace.limits import check_threads

METHODS = ("exact", "sampled", "pages")
CHOICES = ("auto", *METHODS)
# Method settings (TraceRequest.options) and the one method each belongs to.
OPTION_METHOD = {"period_ms": "pages", "min_bytes": "pages", "max_pages": "pages", "heap": "pages", "sample_period": "sampled"}
_OTHER = {"exact": "pages", "sampled": "pages", "pages": "exact (rebuild with pinlab cc)"}


@dataclass
class TraceOutcome:
    result: TraceResult
    method: str
    baseline_seconds: float | None  # the untraced run, None with baseline=False
    slowdown: float | None
    written: bool = False  # the graph is in the output file
    interrupted: int | None = None  # the stopping signal (SIGINT for Ctrl-C) that ended the trace or its untraced run


def method_module(name: str):
    """The module of method ``name``. A missing module is a broken install (not the user's doing):
    its ImportError propagates."""
    if name not in METHODS:
        raise UsageError(f"unknown tracing method {name!r}: choose one of {', '.join(CHOICES)}")
    return importlib.import_module(f"pinlab.trace.{name}")


def check_request(request: TraceRequest) -> None:
    """Refuse what no method can trace: no program, fewer than one thread, more than this machine can (see limits)."""
    if not request.argv:
        raise UsageError("no program given: pinlab trace -n THREADS -o FILE -- PROGRAM [ARGS...]")
    if request.threads < 1:
        raise UsageError(f"-n must be at least 1 thread (got {request.threads})")
    check_threads(request.threads)
    request.after = check_window(request.after)


def check_output(path: str | Path) -> None:
    """Refuse, before the program runs, a graph file that could not be written."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"-o {path} is a directory: give a file name ending in .json (or .csv for a matrix, .npz compact)")
    if path.suffix.lower() not in (".json", BINARY_SUFFIX, *MATRIX_SUFFIXES):
        raise UsageError(
            f"-o {path}: the graph file must end in .json, {BINARY_SUFFIX} for the compact form, or {', '.join(MATRIX_SUFFIXES)} for a bare matrix"
        )
    check_writable(path, "the graph")


def choose_method(request: TraceRequest, method: str = "auto") -> str:
    """The method that will trace ``request``: the one named, if it can work here, or the best one available."""
    if method not in CHOICES:
        raise UsageError(f"unknown tracing method {method!r}: choose one of {', '.join(CHOICES)}")
    if method != "auto":
        why = method_module(method).unavailable(request)
        if why is not None:
            hint = "" if "--method" in why else f"; try --method {_OTHER[method]}"
            raise UsageError(f"the {method} tracing method is not available: {why}{hint}")
        return method
    reasons = []
    for name in METHODS:
        why = method_module(name).unavailable(request)
        if why is None:
            return name
        reasons.append(f"{name}: {why}")
    raise UsageError("no tracing method can trace this program here (" + "; ".join(reasons) + ")")


def check_original(original: str | None, method: str, request: TraceRequest) -> str | None:
    """The executable ``--original`` names, checked: it is for the exact method only (the other
    methods trace the original program itself) and must be a build made without ``pinlab cc``."""
    if original is None:
        return None
    if method != "exact":
        raise UsageError(
            f"--original is for --method exact (a program built with pinlab cc): the {method} method traces "
            f"the original program itself, so its slowdown is already measured against it; drop --original"
        )
    env = os.environ if request.env is None else request.env
    try:
        path = resolve_program(original, env.get("PATH", os.defpath))
    except (ProgramNotFound, ProgramNotExecutable) as exc:
        raise UsageError(f"--original {exc}: give the program built without pinlab cc") from None
    if instrumented(path):
        raise UsageError(f"--original {original} was built with pinlab cc too: give the same program built without it, the one whose speed matters")
    return path


def run_untraced(request: TraceRequest) -> tuple[float, int, int | None]:
    """The program's wall time, exit status and the stopping signal pinlab received meanwhile (None
    mostly), untraced, through the same launcher and placement as the exact method (one thread per
    allowed CPU, the rest unpinned); its output is discarded."""
    with open(os.devnull, "wb") as sink:
        spec = LaunchSpec(
            argv=list(request.argv),
            cpus=sorted(allowed_cpus()),
            threads=request.threads,
            overflow="unpinned",
            env=None if request.env is None else dict(request.env),
            sample_ms=None,
            stdout=sink.fileno(),
            stderr=sink.fileno(),
        )
        record = launch(spec)
    return record.wall_seconds, record.exit_status, record.interrupted


def trace_program(
    request: TraceRequest, method: str = "auto", *, baseline: bool = True, output: str | Path | None = None, original: str | None = None
) -> TraceOutcome:
    """Trace ``request`` with ``method`` (auto: see the module's docstring) and, with ``baseline``,
    run it once more untraced for the slowdown; the graph is written to ``output`` when given.

    The slowdown is always against the original program. The exact method traces a build made
    with ``pinlab cc``, whose instrumentation alone costs many times the counting (a call per
    access, no vectorisation): its baseline is ``original`` (the program built without pinlab cc,
    run with the same arguments), and without it no slowdown is measured, rather than one
    against the instrumented build.

    The traced run's output and exit status are the program's (the caller passes the status on).
    """
    check_request(request)
    if output is not None:
        check_output(output)
    env = os.environ if request.env is None else request.env
    resolve_program(request.argv[0], env.get("PATH", os.defpath))  # not found: 127, cannot execute: 126, as pinlab run
    name = choose_method(request, method)
    for key in request.options:
        if OPTION_METHOD.get(key) != name:
            raise UsageError(
                f"{key.replace('_', '-')} is a setting of --method {OPTION_METHOD.get(key, '?')}, "
                f"but the program is traced with {name}; drop it or choose that method"
            )
    if original is not None and not baseline:
        raise UsageError("--original names the program to time for the slowdown, which --no-baseline turns off: drop one of them")
    original_path = check_original(original, name, request)
    untraced = request if original_path is None else replace(request, argv=[original_path, *request.argv[1:]])
    if baseline and name == "exact" and original_path is None:
        baseline = False
        no_original = (
            "no slowdown measured: the exact method traces a build made with pinlab cc, slower than the original "
            "however it runs; give --original PROGRAM (the same program built without pinlab cc) to measure it"
        )
    else:
        no_original = None
    result = method_module(name).trace(request)
    interrupted = result.interrupted
    baseline_seconds = slowdown = None
    if no_original and interrupted is None:
        result.warnings.append(no_original)
    if interrupted is not None:
        # Ctrl-C stops everything: no untraced run, and no graph of a run cut short.
        where = f" to {output}" if output is not None else ""
        result.warnings.append(f"interrupted by {signal.Signals(interrupted).name}: the program was stopped, no graph was written{where}")
    elif baseline:
        seconds, status, stopped = run_untraced(untraced)
        if stopped is not None:
            interrupted = stopped
            result.warnings.append(f"interrupted by {signal.Signals(stopped).name} during the untraced run: no slowdown measured")
        else:
            baseline_seconds = seconds
            if status != result.exit_status:
                result.warnings.append(f"the untraced run ended with status {status}, the traced one with {result.exit_status}")
            if baseline_seconds > 0:
                slowdown = round(result.wall_seconds / baseline_seconds, 3)
    measured = result.graph.measured
    measured.setdefault("method", name)
    measured.setdefault("argv", list(request.argv))
    measured.setdefault("program", list(request.argv))
    measured.setdefault("threads", request.threads)
    measured.setdefault("after", request.after)
    measured.setdefault("date", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    measured.setdefault("traced_seconds", round(result.wall_seconds, 6))
    measured["baseline_seconds"] = baseline_seconds
    measured["baseline_argv"] = list(untraced.argv) if baseline_seconds is not None else None
    measured["slowdown"] = slowdown
    written = False
    if output is not None and result.interrupted is None:
        if sum(result.graph.volume or []) > 0:
            result.graph.save(output)
            written = True
        else:
            result.warnings.append(f"nothing was counted, so no graph was written to {output}")
    return TraceOutcome(result=result, method=name, baseline_seconds=baseline_seconds, slowdown=slowdown, written=written, interrupted=interrupted)
