"""Structurally different placements, found by walking the topology tree from the root.

At every object holding threads, one decision: over how many of its children they spread, the
fewest that can hold them (*pack*), the most (*spread*), or, where the two are far apart, one
count in between that divides the threads evenly (*middle*: 2 of 4 packages for 4 threads); the threads are then shared over
the chosen children by capacity (:func:`pinlab.placement.units.share`, hwloc_distrib's
rule). Where an object's children differ (P-cores beside E-core clusters, packages of different
sizes) a second decision says which class of child is used first. One *policy* fixes these
decisions per kind of object (every package decides alike, every L3 alike), which keeps the
placements regular and their number small: pack everywhere is compact, spread everywhere is
scatter, and the mixtures are "one package, separate L2s", "two NUMA nodes, shared L3", ...

Policies are enumerated by re-running the walk: a run takes the first option at every decision
not fixed yet and reports which ones it met, and the enumeration branches on the first of them.
Only decisions that some object actually faces are branched on, so a thread count that leaves
a level no choice costs nothing there.

On irregular trees (cores disabled, a cgroup leaving parts of packages, hybrid processors) the
decisions still apply per kind of object, so objects of one kind that differ share one choice:
the number of options a decision has is the largest any of its objects met, an object with
fewer options takes "spread" for a missing "middle" and counts the class choice modulo its own
classes. The set found is then a sample of the structurally different placements, not all of
them; duplicates under the tree's symmetry are removed afterwards (:mod:`pinlab.autopin.symmetry`).

Among children of one class the walk prefers those away from CPU 0, which the OS uses most (the
autopin study avoids core #0 for the same reason), then tree order: the result is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from pinlab.autopin.symmetry import structure
from pinlab.placement.units import share
from pinlab.topology.model import Topology, TopoObject

AVOID = 0  # the CPU the OS keeps busiest
COUNT_OPTIONS = ("pack", "spread", "middle")


@dataclass
class _Children:
    """An object's children that can take a thread, with their classes in the default order."""

    usable: list[TopoObject]  # tree order
    class_of: dict[int, int]  # id(child) -> index into classes
    classes: int  # how many classes: most powerful kind of core first, then the largest


class Explorer:
    """Placements of ``threads`` threads, one per unit: a core (its PU away from CPU 0) or, with ``smt``, a PU."""

    def __init__(self, topo: Topology, smt: bool) -> None:
        self.topo = topo
        self.smt = smt
        self.cap: dict[int, int] = {}
        self.unit: dict[int, int] = {}  # id(unit object) -> the PU a thread gets there
        self._children: dict[int, _Children] = {}
        self._all_units: dict[int, list[int]] = {}
        self._orders: dict[tuple[int, int], list[TopoObject]] = {}
        self._efficiency = {cpu: kind.efficiency for kind in topo.cpu_kinds for cpu in kind.cpus}
        self._count(topo.root)

    # -- units and capacities ------------------------------------------------------------
    def _is_unit(self, obj: TopoObject) -> bool:
        return obj.type == "PU" or (obj.type == "Core" and not self.smt)

    def _count(self, obj: TopoObject) -> int:
        if self._is_unit(obj):
            pus = [cpu for cpu in _pus_under(obj) if cpu in self.topo.allowed_cpus]
            if pus:
                self.unit[id(obj)] = next((cpu for cpu in pus if cpu != AVOID), pus[0])
            total = 1 if pus else 0
            for child in obj.children:  # the PUs under a core still need capacities for the forms
                self._count(child)
        else:
            total = sum(self._count(child) for child in obj.children)
        self.cap[id(obj)] = total
        return total

    @property
    def capacity(self) -> int:
        return self.cap[id(self.topo.root)]

    def _units(self, obj: TopoObject) -> list[int]:
        """Every unit below ``obj`` in tree order (what a full object holds)."""
        found = self._all_units.get(id(obj))
        if found is None:
            if self._is_unit(obj):
                found = [self.unit[id(obj)]] if id(obj) in self.unit else []
            else:
                found = [cpu for child in obj.children for cpu in self._units(child)]
            self._all_units[id(obj)] = found
        return found

    def _children_of(self, obj: TopoObject) -> _Children:
        found = self._children.get(id(obj))
        if found is None:
            usable = [child for child in obj.children if self.cap[id(child)] > 0]
            forms: dict[tuple, list[TopoObject]] = {}
            for child in usable:
                forms.setdefault(structure(self.topo, child), []).append(child)
            groups = list(forms.values())  # first appearance in tree order breaks ties below
            groups.sort(key=lambda g: (-self._power(g[0]), -self.cap[id(g[0])]))
            class_of = {id(child): index for index, group in enumerate(groups) for child in group}
            found = self._children[id(obj)] = _Children(usable, class_of, len(groups))
        return found

    def _power(self, obj: TopoObject) -> int:
        return max((self._efficiency.get(cpu, -1) for cpu in obj.cpus & self.topo.allowed_cpus), default=-1)

    # -- one walk ------------------------------------------------------------------------
    def place(self, threads: int, policy: dict[tuple[str, str], int]) -> tuple[list[int], dict[tuple[str, str], int]]:
        """The placement a policy gives, and the decisions it met that the policy does not fix
        (key -> number of options, in the order met)."""
        met: dict[tuple[str, str], int] = {}
        return self._place(self.topo.root, threads, policy, met), met

    def _decide(self, key: tuple[str, str], options: int, policy: dict, met: dict) -> int:
        if key in policy:
            return policy[key]
        met[key] = max(met.get(key, 0), options)
        return 0

    def _place(self, obj: TopoObject, n: int, policy: dict, met: dict) -> list[int]:
        if n == 0:
            return []
        if n == self.cap[id(obj)]:
            return self._units(obj)
        info = self._children_of(obj)
        if len(info.usable) == 1:
            return self._place(info.usable[0], n, policy, met)
        first = 0
        if info.classes > 1:
            first = self._decide((obj.kind, "class"), info.classes, policy, met) % info.classes
        order = self._orders.get((id(obj), first))
        if order is None:  # the chosen class first, then the others in their order; away from CPU 0; tree order
            order = self._orders[id(obj), first] = sorted(
                info.usable, key=lambda c: (info.class_of[id(c)] != first, info.class_of[id(c)], AVOID in c.cpus)
            )
        caps = [self.cap[id(c)] for c in order]
        counts = _child_counts(n, caps)
        if len(counts) > 1:
            choice = self._decide((obj.kind, "count"), len(counts), policy, met)
            k = counts[choice if choice < len(counts) else 1]  # no middle here: spread
        else:
            k = counts[0]
        chosen = order[:k]
        threads = dict(zip((id(c) for c in chosen), share(n, caps[:k])))
        return [cpu for child in info.usable for cpu in self._place(child, threads.get(id(child), 0), policy, met)]

    # -- every policy --------------------------------------------------------------------
    def explore(self, threads: int) -> Iterator[list[int]]:
        """The placement of every policy that matters for this thread count (duplicates included)."""
        stack: list[dict[tuple[str, str], int]] = [{}]
        while stack:
            policy = stack.pop()
            cpus, met = self.place(threads, policy)
            if not met:
                yield cpus
                continue
            key, options = next(iter(met.items()))
            stack.extend({**policy, key: option} for option in reversed(range(options)))


def _child_counts(n: int, caps: list[int]) -> list[int]:
    """How many children (a prefix of ``caps``) the threads may use: fewest, most, and a middle
    count when one between them divides the threads evenly (the one nearest their geometric
    mean), in COUNT_OPTIONS' order; one entry when there is no choice."""
    fewest, total = 0, 0
    while total < n:
        total += caps[fewest]
        fewest += 1
    most = min(n, len(caps))
    if fewest == most:
        return [fewest]
    between = [k for k in range(fewest + 1, most) if n % k == 0]
    if not between:
        return [fewest, most]
    mean = math.sqrt(fewest * most)
    return [fewest, most, min(between, key=lambda k: (abs(math.log(k / mean)), k))]


def _pus_under(obj: TopoObject) -> list[int]:
    return [o.os_index for o in obj.walk() if o.type == "PU"]
