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

from dataclasses import dataclass

from pinlab.autopin.candidates import auto_candidates
from pinlab.autopin.symmetry import away_from
from pinlab.study.plan import EXPLICIT
from pinlab.topology.model import Topology

#: The baseline: no pinning, the threads left to the operating system.
OS_DEFAULT = "none"
OS_DEFAULT_LABEL = "the operating system's placement (no pinning)"


@dataclass(frozen=True)
class TuneCandidate:
    """A placement of the race: as a study stores it (``none`` or ``cpus:LIST``), and its name."""

    placement: str
    label: str
    cpus: tuple[int, ...] | None


def tune_candidates(topo: Topology, threads: int, max_candidates: int = 6) -> list[TuneCandidate]:
    """The operating system's placement, then up to ``max_candidates`` pinned ones: autopin's
    candidates for ``threads`` threads; then, while there is room, two threads per CPU (threads
    that share data, or wait on each other, may run faster on half the CPUs: autopin never tries
    it); then each one's twin on other CPUs.

    The twins are there because the machine is symmetric only when nothing else runs on it: a
    placement and its twin have the same shape but not the same neighbours, and a co-runner, an
    interrupt-heavy CPU or a daemon makes one of them the better choice.
    """
    pinned: dict[tuple[int, ...], str] = {}

    def add(cpus, label: str) -> None:
        if len(pinned) < max_candidates and tuple(cpus) not in pinned:
            pinned[tuple(cpus)] = label

    room = max_candidates - 1 if threads > 1 and max_candidates > 1 else max_candidates  # one left for two threads per CPU
    for candidate in auto_candidates(topo, threads, max_candidates=room):
        add(candidate.cpus, "1 thread" if candidate.name.startswith("1 thread, every core alike") else candidate.name)
    if threads > 1:
        half = list(pinned)[0][: (threads + 1) // 2]  # the first candidate's first CPUs (compact's), two threads on each
        add([half[i // 2] for i in range(threads)], "2 threads per CPU")
    for cpus, label in list(pinned.items()):
        twin = tuple(cpus)
        for cpu in sorted(set(cpus)):
            twin = tuple(away_from(topo, list(twin), cpu)) if cpu in twin else twin
        if set(twin) != set(cpus):
            add(twin, f"{label} (twin)")
    found = [TuneCandidate(OS_DEFAULT, OS_DEFAULT_LABEL, None)]
    return found + [TuneCandidate(EXPLICIT + ",".join(map(str, cpus)), label, cpus) for cpus, label in pinned.items()]
