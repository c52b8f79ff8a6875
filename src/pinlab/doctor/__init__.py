"""``pinlab doctor``: what is wrong with where a program's threads and memory are, and the fix.

The doctor watches processes over a window (:mod:`pinlab.doctor.observe`: every thread's state,
CPU, mask and CPU time, about every 100 ms), runs its checks on what it saw
(:mod:`pinlab.doctor.checks`: pools by library, oversubscription, two OpenMP runtimes, the
environment, threads piled on one CPU) and returns a :class:`Report` of :class:`Finding` objects,
each with its evidence and the exact lines that fix it. It can also start the program itself,
through ``pinlab run``'s launcher (:mod:`pinlab.doctor.launched`).

``pinlab.doctor(pid)`` is this package called as a function (so that ``import pinlab.doctor``,
which makes ``pinlab.doctor`` this package, keeps ``pinlab.doctor(pid)`` working).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any

from pinlab.doctor.findings import SEVERITIES, Finding, ProcessSummary, Report
from pinlab.doctor.libraries import loaded_pools
from pinlab.doctor.observe import ProcessObservation, machine_topology, observe
from pinlab.doctor.request import DEFAULT_SECONDS, DoctorRequest, request
from pinlab.measure import linux

__all__ = ["DoctorRequest", "Finding", "Report", "SEVERITIES", "doctor", "examine", "summary"]


def summary(obs: ProcessObservation) -> ProcessSummary:
    return ProcessSummary(
        pid=obs.pid,
        command=obs.command or obs.command_line(),
        threads=len(obs.last_threads()),
        allowed=sorted(obs.allowed),
        samples=len(obs.samples),
        ended=obs.ended,
        pools=loaded_pools(obs.files),
    )


def report(observations: list[ProcessObservation], seconds: float, exit_status: int | None = None) -> Report:
    """The report on what was observed (``seconds``: from the first sample to the last), every
    process's findings in process order."""
    # Imported once the watching is done: the checks (and the launcher, below) are most of the
    # doctor's start-up, which the watched program would otherwise share its CPUs with.
    from pinlab.doctor.checks import diagnose

    # hwloc (an lstopo run) only where the kernel shows something for the SMT and hybrid checks.
    if any(o.topology is None for o in observations) and not linux.cores_all_alike():
        machine = machine_topology()
        for o in observations:
            o.topology = o.topology or machine
    return Report([summary(o) for o in observations], seconds, [f for o in observations for f in diagnose(o)], exit_status)


def examine(req: DoctorRequest) -> Report:
    """Run a checked request: look at its processes, or start its program and look at it.

    A program that cannot be started raises :class:`~pinlab.launch.ProgramNotFound` or
    :class:`~pinlab.launch.ProgramNotExecutable`, as :func:`pinlab.run` does.
    """
    if req.pids:
        observed = observe(list(req.pids), req.seconds)
        return report(observed, max((o.seconds for o in observed), default=0.0))
    from pinlab.doctor.launched import launch_spec, run_observed

    spec, controller = launch_spec(list(req.argv), req.seconds, req.strategy, req.cpus, req.threads)
    record, observation = run_observed(spec, controller)
    seen = [observation] if observation is not None and observation.samples else []
    for o in seen:  # what the preload library recorded: the program's own mask changes, pinlab's plan
        o.affinity_calls = list(record.affinity_calls)
        o.planned = {t.tid: t.planned_cpu for t in record.threads if t.planned_cpu is not None}
        o.plan_cpus = frozenset((record.plan or {}).get("cpus") or ())
    return report(seen, max((o.seconds for o in seen), default=0.0), record.exit_status)


def doctor(pids: int | Sequence[int] | None = None, seconds: float = DEFAULT_SECONDS, **options: Any) -> Report:
    """Look at process ``pids`` (one PID or several; ``os.getpid()`` works) for ``seconds`` and say
    what is wrong with where their threads are; or, with ``argv=[PROGRAM, ARGS...]`` (and
    optionally ``strategy``, ``cpus``, ``threads`` as ``pinlab run`` takes them), start the
    program, look at it, and return once it has ended (``Report.exit_status`` is its status).

    Raises :class:`~pinlab.errors.UsageError` for what ``pinlab doctor`` refuses, in its words.
    """
    return examine(request(pids, seconds, **options))


class _CallableModule(types.ModuleType):
    """This package, callable as :func:`doctor`."""

    def __call__(self, pids: int | Sequence[int] | None = None, seconds: float = DEFAULT_SECONDS, **options: Any) -> Report:
        return doctor(pids, seconds, **options)


sys.modules[__name__].__class__ = _CallableModule
