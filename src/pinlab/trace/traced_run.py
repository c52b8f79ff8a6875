"""Running a program under a tracer through pinlab's launcher (shared by the pages and sampled methods).

The program is started by :func:`pinlab.launch.runner.run` with the preload library active, so
that the run record names every thread by its creation index (0 = main thread), which is how an
affinity graph numbers threads. The preload library is only loaded for a pinned run: the threads
are pinned, in creation order, to the CPUs this process may use (wrapping when there are more
threads than CPUs), which is what ``pinlab run -s none`` would let the scheduler decide anyway
on a machine the tracer serialises. The program's output and exit status pass through untouched.
"""

from __future__ import annotations

import os
import shutil

from pinlab.errors import UsageError
from pinlab.launch.record import RunRecord
from pinlab.launch.runner import LaunchSpec, ProgramNotExecutable, ProgramNotFound, preload_blocker, resolve_program, run
from pinlab.measure.linux import allowed_cpus
from pinlab.trace.common import ENV_WINDOW, TraceRequest, check_window
from pinlab.trace.limits import check_threads


def check_request(request: TraceRequest) -> None:
    """Refuse what no method can trace: no program, a thread count below 1 or above this machine's bound (see limits)."""
    if not request.argv:
        raise UsageError("no program to trace: pinlab trace -n THREADS -o FILE -- PROGRAM [ARGS...]")
    if request.threads < 1:
        raise UsageError(f"cannot trace {request.threads} threads: give -n 1 or more")
    check_threads(request.threads)
    request.after = check_window(request.after)


def program_path(request: TraceRequest) -> str:
    """The executable the request names, or a UsageError saying why it cannot be run."""
    env = os.environ if request.env is None else request.env
    try:
        return resolve_program(request.argv[0], env.get("PATH", os.defpath))
    except (ProgramNotFound, ProgramNotExecutable) as exc:
        raise UsageError(f"cannot trace {exc}") from None


def preload_problem(request: TraceRequest, method: str) -> str | None:
    """Why a tracer loaded with LD_PRELOAD cannot see this program (static, setuid), or None."""
    try:
        path = program_path(request)
    except UsageError as exc:
        return str(exc)
    blocker = preload_blocker(path)
    if blocker is not None:
        return (
            f"the {method} method cannot trace {request.argv[0]}: it is {blocker}, so its threads cannot be "
            f"told apart; rebuild it dynamically linked, or use --method exact"
        )
    return None


def run_traced(request: TraceRequest, extra_env: dict[str, str], *, preload: str | None = None, controller=None) -> RunRecord:
    """Run the request's program with ``extra_env`` (and ``preload`` in LD_PRELOAD after pinlab's own)."""
    check_request(request)
    env = dict(os.environ if request.env is None else request.env)
    env.setdefault("OMP_NUM_THREADS", str(request.threads))
    env.update(extra_env)
    if request.after is not None:
        env[ENV_WINDOW] = request.after
    if preload:
        env["LD_PRELOAD"] = " ".join(p for p in (preload, env.get("LD_PRELOAD", "")) if p)
    spec = LaunchSpec(
        argv=list(request.argv),
        cpus=sorted(allowed_cpus()),
        threads=request.threads,
        overflow="wrap",
        sample_ms=None,
        env=env,
        controller=controller,
        stdout=request.stdout,
    )
    return run(spec)  # ProgramNotFound / ProgramNotExecutable pass on: 127 / 126, as with pinlab run


def thread_indexes(record: RunRecord) -> dict[int, int]:
    """tid -> creation index of the program's own process (0 = main thread), from the run record."""
    return {t.tid: t.index for t in record.threads if t.pid == record.pid and t.index is not None and t.index >= 0}


def which(tool: str, request: TraceRequest) -> str | None:
    env = os.environ if request.env is None else request.env
    return shutil.which(tool, path=env.get("PATH", os.defpath))
