"""The levels that tell placements apart on a machine: packages, dies, NUMA nodes, groups, shared caches, cores.

A level is a way of cutting the CPUs this process may use into domains. Placements are told
apart, named and written relative to the machine by the levels where it has more than one
domain; two kinds that cut the machine the same way (an L3 per package) are one level, and a
cache private to each core is the core level itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinlab.topology.model import Topology, TopoObject

#: The words for the objects of each kind that has its own (caches and groups are named apart).
NOUNS = {
    "Package": ("package", "packages"),
    "NUMANode": ("NUMA node", "NUMA nodes"),
    "Die": ("die", "dies"),
    "Core": ("core", "cores"),
    "PU": ("hardware thread", "hardware threads"),
}


@dataclass(frozen=True)
class Level:
    """One way of cutting the machine into domains (packages, NUMA nodes, L3 caches, cores)."""

    kind: str
    objects: tuple[TopoObject, ...]  # the allowed objects of this kind
    shared_cache: bool  # a cache that serves more than one core

    def words(self, count: int) -> str:
        """``2 packages``, ``1 L3 cache``, ``4 groups``."""
        if self.shared_cache:
            singular, plural = f"{self.kind} cache", f"{self.kind} caches"
        else:
            singular, plural = NOUNS.get(self.kind, ("group", "groups"))
        return f"{count} {singular if count == 1 else plural}"

    @property
    def noun(self) -> str:
        """``package``, ``NUMA node``, ``L3``, ``group``."""
        return self.kind if self.shared_cache else NOUNS.get(self.kind, ("group",))[0]


def levels(topo: Topology) -> list[Level]:
    """The machine's levels that can tell placements apart, largest domains first.

    A level appears when this process may use more than one of its objects, and only once when
    two kinds cut the machine the same way (an L3 per package, a group per NUMA node). Caches
    private to a core are left to the core level.
    """
    allowed = topo.allowed_cpus
    found: list[Level] = []
    seen: set[frozenset[frozenset[int]]] = set()
    kinds = ["Package", "Die", "NUMANode"] + [k for k in topo.kinds() if k.startswith("Group")] + topo.data_caches() + ["Core"]
    for kind in kinds:
        objects = tuple(o for o in topo.objects(kind) if o.cpus & allowed)
        if kind != "Core" and len(objects) < 2:
            continue
        if not objects:
            continue
        if objects[0].is_cache and all(len(cores_in(topo, o)) < 2 for o in objects):
            continue
        cut = frozenset(o.cpus & allowed for o in objects)
        if cut in seen:
            continue
        seen.add(cut)
        found.append(Level(kind, objects, shared_cache=objects[0].is_cache))
    return sorted(found, key=lambda level: (len(level.objects), kinds.index(level.kind)))


def cores_in(topo: Topology, obj: TopoObject) -> set[int]:
    """The allowed cores below ``obj`` (PUs where the topology has no cores)."""
    cores = topo.cores or topo.pus
    return {id(core) for core in cores if core.cpus & obj.cpus & topo.allowed_cpus}
