"""Where a placement sits, in words and in numbers: packages, NUMA nodes, shared caches, SMT, kinds of core.

Candidates need a name a user understands at a glance ("1 package, shared L2"), a longer
description with the thread counts per domain, and a measure of how different two placements
are, so that the most different ones are probed first.
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pinlab.topology.levels import Level, cores_in, levels
from pinlab.topology.model import Topology

_LEVELS: weakref.WeakKeyDictionary[Topology, tuple[list[Level], dict[int, int]]] = weakref.WeakKeyDictionary()


def _machine(topo: Topology) -> tuple[list[Level], dict[int, int]]:
    """The levels of a machine and the allowed cores of each of their objects, computed once per topology."""
    known = _LEVELS.get(topo)
    if known is None:
        found = levels(topo)
        known = _LEVELS[topo] = (found, {id(obj): len(cores_in(topo, obj)) for level in found for obj in level.objects})
    return known


@dataclass(frozen=True)
class Shape:
    """How many threads each used domain of each level holds, and the kinds of core used."""

    loads: tuple[tuple[Level, tuple[int, ...]], ...]  # per level: threads per used object, in tree order
    sizes: tuple[tuple[int, ...], ...]  # per level: allowed cores of each used object, in tree order
    smt_machine: bool
    kinds: tuple[str, ...]  # short names of the kinds of core used, on a hybrid machine

    def level(self, kind: str) -> tuple[int, ...] | None:
        return next((load for level, load in self.loads if level.kind == kind), None)

    @property
    def smt_shared(self) -> bool:
        cores = self.level("Core") or ()
        return any(count > 1 for count in cores)

    def features(self) -> list[float]:
        """Numbers that locate the placement among others: domains used per level (log scale), and SMT use."""
        values = [math.log2(len(load)) for _, load in self.loads]
        values.append(2.0 if self.smt_shared else 0.0)
        values.append(float(len(self.kinds)))
        return values

    def name(self) -> str:
        """A short name: domains used of the big levels, threads per shared cache, SMT, kinds of core:
        ``2 packages, 1 thread per L2``, ``1 package, 2 NUMA nodes, 4 threads per L3, SMT siblings``."""
        parts = []
        for level, load in self.loads:
            if level.kind == "Core":
                continue
            parts.append(_per(level.kind, load) if level.shared_cache else level.words(len(load)))
        if self.smt_shared:
            parts.append("SMT siblings")
        if self.kinds:
            parts.append("+".join(self.kinds) + "-cores")
        return ", ".join(parts) or "1 core"

    def describe(self) -> str:
        """Every level with its threads per domain, e.g. ``2 packages (2+2), 4 L2 caches (1 each), no SMT sharing``."""
        parts = []
        for level, load in self.loads:
            if level.kind == "Core" and not self.smt_machine:
                continue
            if level.kind == "Core":
                parts.append(f"{level.words(len(load))} ({_counts(load)})" if self.smt_shared else f"{level.words(len(load))}, no SMT sharing")
            else:
                parts.append(f"{level.words(len(load))} ({_counts(load)})")
        if self.kinds:
            parts.append("+".join(self.kinds) + "-cores")
        return ", ".join(parts) or "one domain, nothing shared to tell apart"


def _counts(load: Sequence[int]) -> str:
    if len(set(load)) == 1:
        return f"{load[0]} thread{'s' if load[0] > 1 else ''} each" if len(load) > 1 else f"{load[0]} thread{'s' if load[0] > 1 else ''}"
    return "+".join(map(str, load))


def _per(kind: str, load: Sequence[int]) -> str:
    """``2 threads per L2``, ``1-2 threads per L3``."""
    low, high = min(load), max(load)
    count = str(low) if low == high else f"{low}-{high}"
    return f"{count} thread{'s' if high > 1 else ''} per {kind}"


def kind_names(topo: Topology) -> dict[int, str]:
    """Short names of each PU's kind of core on a hybrid machine: P and E with two kinds, hwloc's names otherwise."""
    kinds = sorted(topo.cpu_kinds, key=lambda k: k.efficiency)
    if len(kinds) < 2:
        return {}
    names = ["E", "P"] if len(kinds) == 2 else [k.name for k in kinds]
    return {cpu: name for kind, name in zip(kinds, names) for cpu in kind.cpus}


def shape(topo: Topology, cpus: Sequence[int]) -> Shape:
    """The shape of a placement on a machine."""
    chosen = Counter(cpus)
    machine_levels, cores = _machine(topo)
    loads, sizes = [], []
    for level in machine_levels:
        used = [(obj, sum(chosen[c] for c in obj.cpus & chosen.keys())) for obj in level.objects]
        used = [(obj, n) for obj, n in used if n]
        loads.append((level, tuple(n for _, n in used)))
        sizes.append(tuple(cores[id(obj)] for obj, _ in used))
    smt_machine = any(len(core.cpus & topo.allowed_cpus) > 1 for core in topo.cores)
    names = kind_names(topo)
    used_kinds = tuple(sorted({names[c] for c in chosen if c in names}, key=lambda n: (n != "P", n)))
    return Shape(tuple(loads), tuple(sizes), smt_machine, used_kinds)
