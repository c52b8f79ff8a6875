"""Built-in workloads: native OpenMP programs with known behaviour, shipped with pinlab.

Each is a separate executable (``pinlab workload path NAME``) so that it can also run under
any other tool (taskset, likwid-pin, perf). Each validates its own results, exits 1 when they
are wrong and 2 on bad input, and prints one JSON object with ``--json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinlab.errors import UsageError
from pinlab.launch import plan_spec
from pinlab.launch.runner import LaunchSpec
from pinlab.native import native_path


@dataclass(frozen=True)
class Workload:
    name: str
    executable: str
    kind: str
    summary: str
    example: str


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "stream",
            "pinlab-stream",
            "memory-bound",
            "STREAM's copy, scale, add and triad kernels, parallel first-touch initialisation; best/avg/min/max MB/s per kernel",
            "pinlab workload run stream -n 4 -- --size 20M --ntimes 10",
        ),
        Workload(
            "nested-stream",
            "pinlab-nested-stream",
            "memory-bound, nested",
            "one OpenMP team per NUMA node (or --teams), each on vectors its own threads initialised; triad MB/s per team",
            "pinlab workload run nested-stream -n 8 -- --teams 2",
        ),
        Workload(
            "twisted-stream",
            "pinlab-twisted-stream",
            "memory-bound, phased",
            "two phases: in phase 2 each team works on the next team's vectors; triad MB/s per phase and team",
            "pinlab workload run twisted-stream -n 8 -- --teams 2",
        ),
        Workload(
            "imbalanced-stream",
            "pinlab-imbalanced-stream",
            "memory-bound, imbalanced",
            "teams with different amounts of work (15,15,30,1 triad repetitions), two threads per core; time per team and overall",
            "pinlab workload run imbalanced-stream -- --teams 4",
        ),
        Workload(
            "mb",
            "pinlab-mb",
            "cache-bound",
            "the mb_N_M micro-benchmark (tab[i*M+k]++ over N rows of M int64, repeated); --sweep runs the family at a constant working set per thread",
            "pinlab workload run mb -n 2 -- --sweep --reps 100",
        ),
        Workload(
            "primes",
            "pinlab-primes",
            "CPU-bound",
            "counts primes below --limit by trial division (dynamic schedule), checked against a sieve",
            "pinlab workload run primes -n 2 -- --limit 2000000",
        ),
        Workload(
            "pairs",
            "pinlab-pairs",
            "sharing in known groups",
            "threads 2k and 2k+1 (or groups of --groups) share one array, nothing else is shared: a ground truth for affinity graphs",
            "pinlab workload run pairs -n 4 -- --groups 2",
        ),
    )
}


def workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}: choose one of {', '.join(WORKLOADS)} (see `pinlab workload list`)") from None


def workload_path(name: str) -> str:
    """The executable of a built-in workload."""
    return str(native_path(workload(name).executable))


def workload_argv(name: str, threads: int | None = None, args: tuple[str, ...] | list[str] = (), json: bool = False) -> list[str]:
    """The command line that runs a workload with a thread count and its own options."""
    if threads is not None and threads < 1:
        raise UsageError(f"THREADS must be at least 1 (got {threads})")
    argv = [workload_path(name)]
    if threads is not None:
        argv += ["--threads", str(threads)]
    if json:
        argv.append("--json")
    return argv + list(args)


def workload_spec(
    name: str,
    threads: int | None = None,
    args: tuple[str, ...] | list[str] = (),
    *,
    json: bool = False,
    strategy: str | None = None,
    cpus: str | None = None,
) -> LaunchSpec:
    """What the launcher runs for ``pinlab workload run``: the workload, pinned by ``strategy``
    or on ``cpus`` when given, unpinned otherwise (through the launcher all the same, so that
    signals are forwarded and nothing is orphaned).

    A strategy needs the thread count, which the workload's own options cannot give it: the
    placement is made before the workload starts.
    """
    argv = workload_argv(name, threads, args, json=json)
    if strategy is not None and threads is None:
        raise UsageError(f"running {name} with strategy {strategy} needs a thread count: add -n THREADS")
    return plan_spec(argv, strategy=strategy, threads=threads, cpus=cpus, sample_ms=None)
