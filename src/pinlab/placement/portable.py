"""A placement written relative to the machine's tree, so that it means the same on another numbering.

CPU numbers belong to one machine: Intel servers number a core's two hardware threads N apart
(0 and 56), AMD's and ARM's next to each other, BIOS settings and kernels renumber packages, and
a Slurm job gets other CPUs than the last one. A placement right on one node given as CPUs is
wrong on the next. So a plan also carries its *slots*: for each thread, its place in the tree as
ranks, read from the top:

- the levels are those that told placements apart where the plan was made
  (:func:`pinlab.topology.levels.levels`: packages, dies, NUMA nodes, shared caches, cores),
  then the hardware thread within its core;
- a thread's rank at a level is that of its object among the allowed objects of that kind
  inside the thread's domain at the level above, in hwloc's logical order (``[1, 0, 2, 0]``:
  package 1, its first L3, the third core in that L3, the core's first hardware thread).

Ranks count only the CPUs this process may use, so a plan made in one Slurm allocation resolves
in another. Resolving the slots on the machine where they were written gives back the plan's
CPUs; on another machine they give the placement of the same shape (same number of packages,
caches and cores used, the same threads sharing them) or a one-line reason why it cannot hold:
a level the machine lacks, or fewer objects than the plan needs in some domain. hwloc groups are
left out: their meaning changes from one machine to the next.

On a machine with several kinds of core (hybrid: performance and efficiency cores) each thread
also has its *kind*, ranked from the most powerful (0), and its ranks count only the cores of
that kind: P-cores and E-cores often share a cache, and are numbered in either order, so the
third core of an L3 is a P-core on one machine and an E-core on the next. Resolved on a machine
of fewer kinds, a thread of kind 0 takes any core (all are the most powerful there); one of a
kind the machine lacks cannot hold. NUMA distances are not part of the description.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.topology.levels import NOUNS, levels
from pinlab.topology.model import Topology, TopoObject

#: The level below the cores: the hardware thread of its core.
PU = "PU"


def _noun(kind: str, count: int) -> str:
    singular, plural = NOUNS.get(kind, (f"{kind} cache", f"{kind} caches"))
    return singular if count == 1 else plural


def _level_name(kind: str) -> str:
    """A cache level by its number alone (``L2d`` and ``L2`` are the same level on two machines)."""
    return kind[:2] if kind.startswith("L") and kind[1:2].isdigit() else kind


def _objects(topo: Topology, name: str) -> list[TopoObject]:
    """The allowed objects of a level in tree order, one per set of CPUs (NUMA nodes over the same
    CPUs, DDR and HBM of one quadrant, are one domain); the PUs stand for cores where hwloc gives none."""
    if name == "Core":
        found = topo.cores or topo.pus
    elif name.startswith("L") and name[1:].isdigit():
        kinds = [kind for kind in topo.data_caches() if _level_name(kind) == name]
        found = [o for kind in kinds for o in topo.objects(kind)]
        if len(kinds) > 1:
            first = {pu.os_index: pu.logical_index for pu in topo.pus}
            found.sort(key=lambda o: min((first[c] for c in o.cpus if c in first), default=0))
    else:
        found = topo.objects(name)
    seen: set[frozenset[int]] = set()
    kept = []
    for obj in found:
        cpus = obj.cpus & topo.allowed_cpus
        if cpus and cpus not in seen:
            seen.add(cpus)
            kept.append(obj)
    return kept


class _Domains:
    """The objects of each level inside a domain, found through each CPU's owner at that level and
    remembered per domain: every thread of a domain asks the same question."""

    def __init__(self, topo: Topology, names: Sequence[str]) -> None:
        self.objects = {name: _objects(topo, name) for name in names}
        self.owner = {name: {cpu: i for i, obj in enumerate(found) for cpu in obj.cpus & topo.allowed_cpus} for name, found in self.objects.items()}
        self.known: dict[tuple[str, frozenset[int]], list[TopoObject]] = {}

    def inside(self, name: str, cpus: frozenset[int]) -> list[TopoObject]:
        key = (name, cpus)
        if key not in self.known:
            owner = self.owner[name]
            self.known[key] = [self.objects[name][i] for i in sorted({owner[c] for c in cpus if c in owner})]
        return self.known[key]


#: Each topology's levels and their domains, worked out once (a study writes a run's plan per run).
_KNOWN: weakref.WeakKeyDictionary[Topology, dict[tuple[str, ...], _Domains]] = weakref.WeakKeyDictionary()


def _domains(topo: Topology, names: Sequence[str]) -> _Domains:
    per_topology = _KNOWN.setdefault(topo, {})
    if tuple(names) not in per_topology:
        per_topology[tuple(names)] = _Domains(topo, names)
    return per_topology[tuple(names)]


_NAMES: weakref.WeakKeyDictionary[Topology, list[str]] = weakref.WeakKeyDictionary()


def level_names(topo: Topology) -> list[str]:
    """The levels a placement on ``topo`` is written in, from the top, ending with cores and PUs."""
    if topo not in _NAMES:
        names = [_level_name(level.kind) for level in levels(topo) if not level.kind.startswith("Group") and level.kind != "Core"]
        _NAMES[topo] = names + ["Core", PU]
    return list(_NAMES[topo])


def kinds_of_core(topo: Topology) -> list[frozenset[int]]:
    """The allowed CPUs of each kind of core, the most powerful first; empty on a machine whose
    allowed CPUs are all of one kind."""
    kinds = [kind.cpus & topo.allowed_cpus for kind in sorted(topo.cpu_kinds, key=lambda kind: -kind.efficiency)]
    kinds = [cpus for cpus in kinds if cpus]
    return kinds if len(kinds) > 1 else []


def describe(topo: Topology, cpus: Sequence[int]) -> dict[str, Any]:
    """The portable description of a placement (one CPU per thread) on ``topo``: its levels, each
    thread's slot (and kind of core, on a hybrid machine), and the same in words."""
    names = level_names(topo)
    domains = _domains(topo, names)
    kinds = kinds_of_core(topo)
    slots, ranks = [], []
    for cpu in cpus:
        if cpu not in topo.allowed_cpus:
            raise UsageError(f"CPU {cpu} is not among the CPUs this placement may use ({format_cpulist(topo.allowed_cpus)})")
        inside, slot = topo.allowed_cpus, []
        if kinds:
            ranks.append(next(k for k, of_kind in enumerate(kinds) if cpu in of_kind))
            inside = kinds[ranks[-1]]
        for name in names:
            candidates = domains.inside(name, inside)
            rank = next(i for i, o in enumerate(candidates) if cpu in o.cpus)
            slot.append(rank)
            inside = inside & candidates[rank].cpus
        slots.append(slot)
    description: dict[str, Any] = {"levels": names, "slots": slots}
    if kinds:
        description["kinds"] = ranks
    description["words"] = words(names, slots, ranks or None)
    return description


def words(names: Sequence[str], slots: Sequence[Sequence[int]], kinds: Sequence[int] | None = None) -> str:
    """``4 threads: 2 packages (2 threads each), 4 cores (1 thread each), 1 hardware thread per core``
    (and, with ``kinds``, ``; by kind of core, the most powerful first: 3, 1 threads``)."""
    parts = []
    for depth, name in enumerate(names):
        used = Counter(tuple(slot[: depth + 1]) for slot in slots)
        if name == PU:
            per_core = Counter(key[:depth] for key in used)
            parts.append(f"{_spread(sorted(per_core.values()), 'hardware thread')} per core")
            if max(used.values()) > 1:
                parts.append(f"{_spread(sorted(used.values()), 'thread')} per hardware thread")
            continue
        loads = sorted(used.values())
        each = _spread(loads, "thread") + (" each" if len(loads) > 1 else "")
        parts.append(f"{len(used)} {_noun(name, len(used))} ({each})")
    threads = len(slots)
    text = f"{threads} thread{'s' if threads > 1 else ''}: " + ", ".join(parts)
    if kinds:
        per_kind = Counter(kinds)
        counts = [per_kind.get(k, 0) for k in range(max(kinds) + 1)]
        text += f"; by kind of core, the most powerful first: {', '.join(map(str, counts))} thread{'s' if max(counts) > 1 else ''}"
    return text


def _spread(counts: Sequence[int], noun: str) -> str:
    """``2 threads``, ``1-2 threads`` (counts sorted)."""
    low, high = counts[0], counts[-1]
    return f"{low if low == high else f'{low}-{high}'} {noun}{'s' if high > 1 else ''}"


def resolve(topo: Topology, description: dict[str, Any], source: str = "the plan") -> list[int]:
    """The CPUs the description's slots designate on ``topo``, one per thread; a UsageError in one
    line when the placement cannot hold there (a level the machine lacks, too few objects)."""
    names, slots = _checked(description, source)
    wanted = _checked_kinds(description, len(slots), source)
    domains = _domains(topo, names)
    kinds = kinds_of_core(topo) or [topo.allowed_cpus]
    if wanted is not None and max(wanted) >= len(kinds):
        thread = wanted.index(max(wanted))
        raise UsageError(
            f"{source} puts thread {thread} on the kind of core ranked {max(wanted) + 1} by power, and this machine ({topo.name}) has "
            f"{len(kinds)} kind{'s' if len(kinds) > 1 else ''} of core it may use: the placement cannot hold here; tune or place again on this machine"
        )
    for name in names:
        if not domains.owner[name]:
            raise UsageError(
                f"{source} places threads by {_noun(name, 2)}, and this machine ({topo.name}) has none it may use: "
                "the placement cannot hold here; tune or place again on this machine"
            )
    cpus = []
    for thread, slot in enumerate(slots):
        inside, path = (kinds[wanted[thread]] if wanted is not None else topo.allowed_cpus), list[str]()
        for name, rank in zip(names, slot):
            candidates = domains.inside(name, inside)
            if rank >= len(candidates):
                where = f" in {' '.join(path)}" if path else ""
                raise UsageError(
                    f"{source} puts thread {thread} on {_noun(name, 1)} #{rank}{where}, and this machine ({topo.name}) has "
                    f"{len(candidates)} {_noun(name, len(candidates))}{' there' if path else ''}: the placement cannot hold here; tune or place again on this machine"
                )
            path.append(f"{_noun(name, 1)} #{rank}")
            inside = inside & candidates[rank].cpus
        cpus.append(min(inside))
    return cpus


def _checked_kinds(description: dict[str, Any], threads: int, source: str) -> list[int] | None:
    """The description's kind of core per thread (None: written on a machine of one kind), checked."""
    kinds = description.get("kinds")
    if kinds is None:
        return None
    if not (isinstance(kinds, list) and len(kinds) == threads and all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in kinds)):
        raise UsageError(
            f"{source}: 'portable' 'kinds' needs one rank of kind of core per thread ({threads}); write it again with pinlab tune -o or pinlab place -f json"
        )
    return kinds


def _checked(description: Any, source: str) -> tuple[list[str], list[list[int]]]:
    """The description's levels and slots, or a one-line UsageError saying what is wrong."""
    names = description.get("levels") if isinstance(description, dict) else None
    slots = description.get("slots") if isinstance(description, dict) else None
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise UsageError(f"{source}: 'portable' needs 'levels', a list of level names; write it again with pinlab tune -o or pinlab place -f json")
    if not (
        isinstance(slots, list)
        and slots
        and all(
            isinstance(slot, list) and len(slot) == len(names) and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in slot)
            for slot in slots
        )
    ):
        raise UsageError(
            f"{source}: 'portable' needs 'slots', one list of {len(names)} ranks per thread; write it again with pinlab tune -o or pinlab place -f json"
        )
    return names, slots
