"""Groups of CPUs revealed by a measured latency matrix, added to the tree as hwloc Group objects.

A virtual machine's hwloc tree is often flat (every vCPU a core of one package, no shared cache
below the package), while its vCPUs really run on host cores that share an L2, an L3 or a socket.
``pinlab calibrate`` measures how long a cache line takes between every pair of CPUs; here that
matrix is turned back into a hierarchy, so that every strategy that follows the tree (compact,
scatter, the graph strategies) follows the machine as measured.

The method:

1. **Levels.** The distinct latencies are found by sorting the off-diagonal values and cutting
   where one value is more than :data:`LEVEL_JUMP` times the one before (a jump of more than 30%).
   Latencies of one level (the same cache, the same socket) differ by noise of a few percent to
   tens of percent between neighbours in sorted order, while the levels of real machines differ
   by factors of 1.5 to 3 (SMT siblings ~10 ns, same L3 ~30-50 ns, other socket ~100-200 ns).
2. **Groups per level.** Below each cut, CPUs joined by a latency under the cut form groups
   (connected components). A level whose groups are not cliques (A near B, B near C, but A far from
   C) is not a hierarchy and is left out, with a note.
3. **Into the tree,** finest level first. A group that the tree already has (some object holds
   exactly those measured CPUs) adds nothing. Otherwise, below the lowest object holding the whole
   group, the children holding its CPUs are moved into a new ``Group`` object, provided none of them
   holds CPUs outside the group (a group that cuts through an object the tree has contradicts it:
   left out, with a note).
"""

from __future__ import annotations

from pinlab.cpuset import format_cpulist
from pinlab.topology.model import CpuLatency, Topology, TopoObject

#: Two latencies belong to different levels when the larger exceeds the smaller, its neighbour in
#: sorted order, by more than this factor.
LEVEL_JUMP = 1.3
#: Subtype and info name of the Group objects added here (hwloc's Group objects carry a subtype).
SUBTYPE = "Measured"


def latency_levels(latency: CpuLatency) -> list[list[float]]:
    """The off-diagonal latencies split into levels, smallest first (each a sorted list of values)."""
    n = len(latency.cpus)
    values = sorted(latency.matrix[i][j] for i in range(n) for j in range(i + 1, n))
    levels: list[list[float]] = []
    for value in values:
        if levels and value <= levels[-1][-1] * LEVEL_JUMP:
            levels[-1].append(value)
        else:
            levels.append([value])
    return levels


def _components(cpus: list[int], near) -> list[frozenset[int]]:
    """Connected components of the CPUs, two CPUs joined when ``near(i, j)`` (by position)."""
    seen: set[int] = set()
    groups = []
    for start in range(len(cpus)):
        if start in seen:
            continue
        stack, members = [start], set()
        seen.add(start)
        while stack:
            i = stack.pop()
            members.add(i)
            for j in range(len(cpus)):
                if j not in seen and near(i, j):
                    seen.add(j)
                    stack.append(j)
        groups.append(frozenset(members))
    return groups


def measured_partitions(latency: CpuLatency) -> tuple[list[list[frozenset[int]]], list[str]]:
    """For each level cut, finest first, the groups of CPUs (OS indexes) closer than the cut; and notes."""
    levels = latency_levels(latency)
    cpus, matrix = latency.cpus, latency.matrix
    partitions, notes = [], []
    for level in levels[:-1]:
        cut = level[-1]

        def near(i: int, j: int, cut: float = cut) -> bool:
            return matrix[i][j] <= cut

        groups = _components(cpus, near)
        if any(not near(i, j) for g in groups for i in g for j in g if i != j):
            notes.append(f"measured latencies up to {cut:.1f} ns do not form groups (A near B and B near C, but A far from C): level left out")
            continue
        partitions.append([frozenset(cpus[i] for i in g) for g in groups])
    return partitions, notes


def _lowest_holder(root: TopoObject, cpus: frozenset[int]) -> TopoObject:
    obj = root
    while True:
        inside = next((c for c in obj.children if cpus <= c.cpus), None)
        if inside is None:
            return obj
        obj = inside


def apply_measured_groups(root: TopoObject, latency: CpuLatency) -> list[str]:
    """Insert Group objects for the groups the matrix shows and the tree lacks; returns what was done.

    ``root``'s tree is changed in place (before a :class:`Topology` indexes it); depths are renumbered.
    """
    measured = frozenset(latency.cpus) & root.cpus
    if len(measured) < 2:
        return []
    partitions, notes = measured_partitions(latency)
    next_depth = 1 + max((int(o.attributes.get("group_depth", -1)) for o in root.walk() if o.type == "Group"), default=-1)
    for level, groups in enumerate(partitions):
        added = []
        for group in groups:
            group &= measured
            if len(group) < 2 or group == measured:
                continue
            if any(obj.cpus & measured == group for obj in root.walk()):
                continue
            holder = _lowest_holder(root, group)
            members = [c for c in holder.children if c.cpus & group]
            if any(c.cpus & measured - group for c in members):
                notes.append(f"measured group of CPUs {_cpulist(group)} cuts through the tree's {members[0].kind} objects: left out")
                continue
            _insert_group(holder, members, next_depth, level)
            added.append(group)
        if added:
            notes.append(
                f"measured grouping: added Group{next_depth} objects for CPUs "
                + " | ".join(_cpulist(g) for g in added)
                + f" (latency level {level + 1})"
            )
            next_depth += 1
    _renumber_depths(root)
    return notes


def _insert_group(holder: TopoObject, members: list[TopoObject], group_depth: int, level: int) -> None:
    position = holder.children.index(members[0])
    group = TopoObject(
        type="Group", attributes={"group_depth": group_depth, "subtype": SUBTYPE}, infos={"PinlabMeasuredLevel": str(level + 1)}, parent=holder
    )
    group.children = members
    group.cpus = frozenset().union(*(m.cpus for m in members))
    group.nodes = frozenset().union(*(m.nodes for m in members))
    for member in members:
        member.parent = group
    holder.children = [c for c in holder.children if c not in members]
    holder.children.insert(min(position, len(holder.children)), group)


def _renumber_depths(root: TopoObject) -> None:
    stack = [(root, 0)]
    while stack:
        obj, depth = stack.pop()
        obj.depth = depth
        for node in obj.memory_children:
            node.depth = depth + 1
        stack.extend((child, depth + 1) for child in obj.children)


def _cpulist(cpus: frozenset[int]) -> str:
    return format_cpulist(cpus)


def measured_latency(topo: Topology, a: int, b: int) -> float | None:
    """Measured one-way latency in ns between PUs ``a`` and ``b`` (OS indexes), or None.

    None when the topology carries no measured matrix or the matrix leaves out either CPU; the
    cost model then falls back to distances from the tree. ``a == b`` gives 0.
    """
    if topo.cpu_latency is None:
        return None
    if a == b:
        return 0.0 if a in topo.cpu_latency.cpus else None
    return topo.cpu_latency.between(a, b)
