"""When two placements are "the same" on a machine: a canonical form under the tree's symmetry.

Two placements are equivalent when an automorphism of the topology tree maps one onto the other:
swapping the two packages of a symmetric machine, two L2 pairs, two cores, two hardware threads
of a core. Probing both would measure the same thing twice (the autopin study, section 4.3,
probes only one placement per class for this reason).

The canonical form is the classic one for rooted labelled trees (Aho, Hopcroft and Ullman): an
object's form is its label, how many threads sit below it, and the *sorted* forms of its
children. Two placements have equal forms exactly when a label-preserving automorphism of the
tree maps one to the other; this holds on any tree, regular or not. The label is the object's
kind (``Package``, ``L2``, ``Group1``...), its cache size, how many NUMA nodes hang off it, and
for a PU its kind of core (hybrid machines) and whether this process may use it.

Limits, where the tree is not the whole machine:

- NUMA distances are not in the label: on a machine whose nodes are not all equally far apart
  (the HyperTransport square of ``opteron-4x4``: 1 or 2 hops), two placements the tree calls
  equivalent may differ in their remote-access cost.
- Differences hwloc does not record (a core clocked higher, a die nearer the I/O) are invisible.
- The order of threads is ignored: a placement is a set of CPUs here (which worker sits where
  only matters to a program whose workers differ).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Hashable, Iterable

from pinlab.topology.model import Topology, TopoObject

# Forms of subtrees that hold no thread, per topology (they do not depend on the placement).
_EMPTY: weakref.WeakKeyDictionary[Topology, dict[int, tuple]] = weakref.WeakKeyDictionary()


def _efficiencies(topo: Topology) -> dict[int, int]:
    """Each PU's kind of core as hwloc ranks it (0 = least powerful); -1 on a machine of one kind."""
    if len(topo.cpu_kinds) < 2:
        return {}
    return {cpu: kind.efficiency for kind in topo.cpu_kinds for cpu in kind.cpus}


def _label(obj: TopoObject, topo: Topology, efficiency: dict[int, int]) -> tuple:
    if obj.type == "PU":
        return ("PU", 0, 0, efficiency.get(obj.os_index, -1), int(obj.os_index in topo.allowed_cpus))
    return (obj.kind, int(obj.attributes.get("cache_size", 0)), len(obj.memory_children), -1, 1)


def _empty_forms(topo: Topology) -> dict[int, tuple]:
    """The form of every object's subtree with no thread in it, computed once per topology."""
    forms = _EMPTY.get(topo)
    if forms is None:
        forms = {}
        efficiency = _efficiencies(topo)

        def build(obj: TopoObject) -> tuple:
            form = (_label(obj, topo, efficiency), 0, tuple(sorted(build(child) for child in obj.children)))
            forms[id(obj)] = form
            return form

        build(topo.root)
        _EMPTY[topo] = forms
    return forms


def structure(topo: Topology, obj: TopoObject) -> tuple:
    """The form of ``obj``'s subtree alone: two objects with equal structures are interchangeable."""
    return _empty_forms(topo)[id(obj)]


class Signature:
    """A placement's canonical form, hashed once (the form is a nested tuple as large as the tree,
    and candidates are looked up by signature many times)."""

    __slots__ = ("form", "_hash")

    def __init__(self, form: tuple) -> None:
        self.form = form
        self._hash = hash(form)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and self._hash == other._hash and self.form == other.form

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"<Signature {self._hash & 0xFFFFFFFF:08x}: {self.form[1]} threads>"


def signature(topo: Topology, cpus: Iterable[int]) -> Hashable:
    """The placement's class under the machine's symmetry: equal for two placements exactly when
    an automorphism of the topology tree (keeping kinds, cache sizes, NUMA attachments, kinds of
    core and allowed CPUs) maps one onto the other. Thread order does not matter; a CPU given
    twice counts twice."""
    load = Counter(cpus)
    empty = _empty_forms(topo)
    efficiency = _efficiencies(topo)
    chosen = frozenset(load)

    def form(obj: TopoObject) -> tuple:
        if not obj.cpus & chosen:
            return empty[id(obj)]
        if obj.type == "PU":
            return (_label(obj, topo, efficiency), load[obj.os_index], ())
        children = tuple(sorted(form(child) for child in obj.children))
        return (_label(obj, topo, efficiency), sum(child[1] for child in children), children)

    return Signature(form(topo.root))


def away_from(topo: Topology, cpus: list[int], avoid: int) -> list[int]:
    """An equivalent placement (same signature) that leaves ``avoid``'s core free, when one exists
    by moving a single subtree: the lowest object holding that core whose sibling of the same
    structure holds no thread takes its threads over. Otherwise ``cpus`` unchanged."""
    if avoid not in cpus or avoid not in topo.pu_by_os:
        return cpus
    chosen = set(cpus)
    obj: TopoObject | None = topo.core_of(topo.pu(avoid))
    while obj is not None and obj.parent is not None:
        form = structure(topo, obj)
        twin = next((s for s in obj.parent.children if s is not obj and not s.cpus & chosen and structure(topo, s) == form), None)
        if twin is not None:
            mapping = _isomorphism(topo, obj, twin)
            return [mapping.get(cpu, cpu) for cpu in cpus]
        obj = obj.parent
    return cpus


def _isomorphism(topo: Topology, a: TopoObject, b: TopoObject) -> dict[int, int]:
    """PU -> PU of a mapping between two subtrees of equal structure, matching children by structure in tree order."""
    if a.type == "PU":
        return {a.os_index: b.os_index}
    mapping: dict[int, int] = {}
    free = list(b.children)
    for child in a.children:
        form = structure(topo, child)
        match = next(other for other in free if structure(topo, other) == form)
        free.remove(match)
        mapping.update(_isomorphism(topo, child, match))
    return mapping
