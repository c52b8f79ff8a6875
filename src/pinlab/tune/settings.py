"""The winner of a tune written as settings to paste, in the tools users already run.

Each line sets what the placement needs and nothing else: the OpenMP variables only for a
program whose threads an OpenMP runtime started (``KMP_AFFINITY`` too for LLVM's and Intel's,
which read it), ``taskset`` and ``numactl`` for the CPUs as a set (the threads then move within
it), ``likwid-pin`` and ``pinlab run`` for one CPU per thread in creation order, and ``srun`` for
a job step. The operating system's placement is written as leaving the threads unpinned.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from pinlab.cpuset import format_cpulist
from pinlab.doctor.libraries import identify
from pinlab.placement.exports import export
from pinlab.placement.plan import Placement

#: OpenMP runtimes by the file their threads start in: GNU's reads OMP_*; LLVM's and Intel's
#: read KMP_AFFINITY too (which wins over OMP_PLACES there).
GNU, LLVM = "libgomp", "libomp"


def openmp_runtime(start_libraries: Iterable[str | None]) -> str | None:
    """The OpenMP runtime that started threads of the program (libgomp or libomp), None if none did."""
    names = {lib.name for path in start_libraries if (lib := identify(path)) is not None and lib.openmp}
    return LLVM if LLVM in names else GNU if GNU in names else None


def _mask(cpus: Sequence[int]) -> str:
    return hex(sum(1 << c for c in set(cpus)))


#: numactl's option for each memory policy a tune races (``interleave:0-1`` -> ``--interleave=0-1``).
_NUMACTL = {"interleave": "--interleave", "bind": "--membind"}


def settings(
    placement: Placement, program: Sequence[str], runtime: str | None, plan_file: str | None = None, mem: str | None = None
) -> dict[str, str]:
    """Tool -> the lines that apply ``placement`` to ``program`` (a dict in the order to show),
    with the memory policy ``mem`` (a ``--mem`` word such as ``interleave:0-1``; None: first touch).

    A memory policy is kept across ``exec``, so the tools that cannot set one (taskset,
    likwid-pin, srun, an OpenMP program's environment) run the program under ``numactl`` with it."""
    command = shlex.join(program)
    n = placement.threads
    lines: dict[str, str] = {}
    kind, _, nodes = (mem or "").partition(":")
    policy = f"{_NUMACTL[kind]}={nodes} " if mem else ""  # numactl's option for the memory policy
    under = f"numactl {policy}" if mem else ""  # before the program, for the tools that set no memory policy
    if runtime is not None:
        lines["openmp"] = export(placement, "omp") + (f"\n{under}{command}" if mem else "")
        if runtime == LLVM:
            lines["kmp"] = export(placement, "kmp")
    if placement.cpus is None:
        lines["taskset"] = f"{export(placement, 'taskset')} {under}{command}"
        if mem:
            lines["numactl"] = f"{under}{command}"
        lines["srun"] = f"srun --ntasks=1 --cpus-per-task={n} --cpu-bind=none {under}{command}"
        lines["pinlab"] = f"pinlab run -s none -n {n}{f' --mem {mem}' if mem else ''} -- {command}"
        return lines
    cpus = placement.cpus
    lines["taskset"] = f"taskset -c {format_cpulist(cpus)} {under}{command}  # the CPUs as a set: the threads may move within it"
    lines["numactl"] = f"numactl --physcpubind={format_cpulist(cpus)} {policy}{command}  # the same set, numactl's way"
    lines["likwid"] = f"{export(placement, 'likwid')} {under}{command}"
    lines["srun"] = f"srun --ntasks=1 --cpus-per-task={len(set(cpus))} --cpu-bind=mask_cpu:{_mask(cpus)} {under}{command}"
    if plan_file is not None:
        lines["pinlab"] = f"pinlab run --plan {shlex.quote(plan_file)} -- {command}"
    else:
        oversubscribe = " --oversubscribe" if len(set(cpus)) < len(cpus) else ""
        lines["pinlab"] = f"pinlab run -c {','.join(map(str, cpus))}{oversubscribe}{f' --mem {mem}' if mem else ''} -- {command}"
    return lines
