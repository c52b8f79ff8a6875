"""The placements a tune races: the operating system's, and autopin's structurally different ones.

autopin's generator (:func:`pinlab.autopin.candidates.auto_candidates`) gives one placement per
class of the machine's symmetry, the most different first: compact, scatter, fewer or more
packages, NUMA nodes and caches, SMT siblings. A tune races them as a study does, each as its
CPUs (``cpus:LIST``) with autopin's name for it, beside ``none`` (the threads left to the
operating system, the baseline every gain is measured against). With as many threads as CPUs,
every placement that gives each thread its own CPU is one class on a symmetric machine: the
race is then between pinning and not pinning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pinlab.autopin.candidates import auto_candidates
from pinlab.autopin.symmetry import away_from
from pinlab.cpuset import format_cpulist
from pinlab.placement import make_placement
from pinlab.placement.strategies import GRAPH_STRATEGIES
from pinlab.study.plan import EXPLICIT
from pinlab.topology.model import Topology

#: The baseline: no pinning, the threads left to the operating system.
OS_DEFAULT = "none"
OS_DEFAULT_LABEL = "the operating system's placement (no pinning)"
#: Linux's default memory policy: a page goes to the node of the CPU that first touches it.
FIRST_TOUCH = "first-touch"
#: The memory policies a plan file can carry, over the NUMA nodes of its threads' CPUs.
PLAN_POLICIES = ("interleave", "bind")


@dataclass(frozen=True)
class TuneCandidate:
    """A placement of the race: as a study stores it (``none`` or ``cpus:LIST``), its name, and
    its memory policy (a study's ``--mem`` word)."""

    placement: str
    label: str
    cpus: tuple[int, ...] | None
    mem: str = FIRST_TOUCH
    twin: bool = False  # the same shape as another candidate, on other CPUs


def tune_candidates(topo: Topology, threads: int, max_candidates: int = 6) -> list[TuneCandidate]:
    """The operating system's placement, then up to ``max_candidates`` pinned ones: autopin's
    candidates for ``threads`` threads, a place kept for two threads per CPU (threads that share
    data, or wait on each other, may run faster on half the CPUs); then each one's twin on other
    CPUs, while there is room.

    The twins are there because the machine is symmetric only when nothing else runs on it: a
    placement and its twin have the same shape but not the same neighbours, and a co-runner, an
    interrupt-heavy CPU or a daemon makes one of them the better choice.
    """
    pinned: dict[tuple[int, ...], tuple[str, bool]] = {}  # CPUs -> name, and whether a twin

    def add(cpus, label: str, twin: bool = False) -> None:
        if len(pinned) < max_candidates and tuple(cpus) not in pinned:
            pinned[tuple(cpus)] = (label, twin)

    for candidate in auto_candidates(topo, threads, max_candidates=max_candidates, doubled=True):
        add(candidate.cpus, "1 thread" if candidate.name.startswith("1 thread, every core alike") else candidate.name)
    for cpus, (label, _) in list(pinned.items()):
        twin = tuple(cpus)
        for cpu in sorted(set(cpus)):
            twin = tuple(away_from(topo, list(twin), cpu)) if cpu in twin else twin
        if set(twin) != set(cpus):
            add(twin, f"{label} (twin)", twin=True)
    found = [TuneCandidate(OS_DEFAULT, OS_DEFAULT_LABEL, None)]
    return found + [TuneCandidate(EXPLICIT + ",".join(map(str, cpus)), label, cpus, twin=twin) for cpus, (label, twin) in pinned.items()]


def threads_nodes(topo: Topology, cpus: tuple[int, ...] | None) -> list[int]:
    """The NUMA nodes of the threads' CPUs that this process may use (every such node of the
    allowed CPUs for threads left unpinned)."""
    chosen = topo.allowed_cpus if cpus is None else set(cpus)
    return sorted({node for cpu in chosen for node in topo.pu(cpu).nodes} & topo.allowed_nodes)


def memory_candidates(topo: Topology, candidates: list[TuneCandidate]) -> list[TuneCandidate]:
    """The memory policies worth racing beside first touch, for each placement: its memory
    interleaved over its threads' nodes when they are several (spreads the bandwidth when one
    thread touches data that all use), and bound to its threads' nodes when they are not all the
    machine's (keeps pages off nodes it does not run on, where first touch would spill). None on a
    machine of one NUMA node: there is nothing to choose."""
    every = threads_nodes(topo, None)
    if len(every) < 2:
        return []
    found = []
    for candidate in (c for c in candidates if not c.twin):  # a twin differs by its neighbours, not its memory
        used = threads_nodes(topo, candidate.cpus)
        if len(used) > 1:
            found.append(replace(candidate, mem=f"interleave:{format_cpulist(used)}"))
        if candidate.cpus is not None and set(used) < set(every):
            found.append(replace(candidate, mem=f"bind:{format_cpulist(used)}"))
    return found


def with_graph(topo: Topology, threads: int, graph, candidates: list[TuneCandidate]) -> list[TuneCandidate]:
    """``candidates`` and the graph strategies' placements (:mod:`pinlab.placement.mapping`) of the
    program's affinity graph, each placement once: one that is already a candidate gives it its
    name too (``compact = lpgp``) rather than racing twice."""
    found = list(candidates)
    where = {c.cpus: i for i, c in enumerate(found) if c.cpus is not None}
    for strategy in GRAPH_STRATEGIES:
        cpus = tuple(make_placement(topo, strategy=strategy, threads=threads, graph=graph).cpus or ())
        if cpus in where:
            named = found[where[cpus]]
            found[where[cpus]] = replace(named, label=f"{named.label} = {strategy}")
        else:
            where[cpus] = len(found)
            found.append(TuneCandidate(EXPLICIT + ",".join(map(str, cpus)), f"{strategy} (graph)", cpus))
    return found
