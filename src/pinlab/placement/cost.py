"""The cost of a placement for an affinity graph: how far apart the threads that share data sit.

cost(placement) = sum over pairs of threads (i < j) of weight(i, j) * distance(cpu_i, cpu_j).

The distance between two CPUs comes from the deepest level of the topology they share, on this
scale (a relative latency, not a time; chosen so that each step outward costs more than the one
before and a trip off the package is twice a trip through a shared L3)::

    same PU                         0
    same core (SMT siblings)        1
    shared L1 or L2 cache           2
    shared L3 (or deeper: L4)       4   (a die or group where no cache of level 3 or more is shared)
    same die or group inside a node 5   (above the L3: two CCDs of one EPYC NUMA quadrant)
    same NUMA node inside a package 6   (sub-NUMA clusters; a node above packages adds nothing)
    same package                    7
    elsewhere on the machine        8

When the topology carries a NUMA latency matrix (``topology.distances``), the distance between
CPUs of different NUMA nodes a and b is multiplied by ``d(a, b) / d(a, a)`` (ACPI SLIT values
are relative to a node's own 10, so a remote node at 21 makes the distance 2.1 times larger).

When the topology carries core-to-core latencies measured on the machine (``pinlab calibrate``,
``topology.cpu_latency``), they replace the tree's distances between the CPUs they cover: the
measured nanoseconds are rescaled so that their mean over the covered pairs equals the tree
distances' mean there (pairs with a CPU the measurement left out keep the tree's distance, on the
same scale). On a virtual machine whose tree is flat, the measurement is what tells the vCPUs
that share a cache from the others.

Distances are kept in a table over every PU, computed once per topology with numpy (a few
comparisons of per-PU ancestor keys, fast for 1024 CPUs); measured core-to-core latencies, when
the topology has them, overwrite the pairs they cover in that same table (above).
"""

from __future__ import annotations

import statistics
import weakref
from typing import Sequence

from pinlab.placement import strategies
from pinlab.topology.model import Topology, TopoObject

#: The distance scale (see the module docstring), from the closest to the furthest.
SCALE = {"pu": 0.0, "core": 1.0, "l2": 2.0, "l3": 4.0, "die": 5.0, "numa": 6.0, "package": 7.0, "machine": 8.0}

_TABLES: "weakref.WeakKeyDictionary[Topology, DistanceTable]" = weakref.WeakKeyDictionary()


class DistanceTable:
    """CPU-to-CPU distances of one topology: ``matrix[index[a], index[b]]`` for PU OS indexes a, b."""

    def __init__(self, topo: Topology) -> None:
        import numpy as np

        pus = topo.pus
        self.cpus = [pu.os_index for pu in pus]
        self.index = {cpu: i for i, cpu in enumerate(self.cpus)}
        keys = [_keys(topo, pu) for pu in pus]
        m = np.full((len(pus), len(pus)), SCALE["machine"], dtype=np.float64)
        # From the furthest level to the closest: a closer shared level overrides a further one.
        for level in ("package", "numa", "die", "l3", "l2", "core", "pu"):
            column = np.array([k[level] for k in keys], dtype=np.int64)
            same = (column[:, None] == column[None, :]) & (column[:, None] >= 0)
            m[same] = SCALE[level]
        if topo.distances is not None and len(topo.distances.nodes) > 1:
            m *= _numa_factor(topo, pus, np)
        if topo.cpu_latency is not None:
            _measured(topo, self.cpus, m, np)
        self.matrix = m

    def distance(self, a: int, b: int) -> float:
        return float(self.matrix[self.index[a], self.index[b]])

    def submatrix(self, cpus: Sequence[int]):
        """Distances between the listed CPUs (rows and columns in the list's order)."""
        import numpy as np

        idx = np.fromiter((self.index[c] for c in cpus), dtype=np.int64, count=len(cpus))
        return self.matrix[np.ix_(idx, idx)]


def _keys(topo: Topology, pu: TopoObject) -> dict[str, int]:
    """For each level of the scale, an id of this PU's object at that level (-1: none).

    Without packages in the topology, the NUMA node is the only level above the caches.

    Two PUs are at most that far apart when their ids are equal. The L3 class takes the
    outermost cache of level 3 or more below the package, and the L2 class the outermost L1/L2
    data cache: sharing a deeper one implies sharing that one. A Die or Group stands for the L3
    only where no such cache lies below it (a cluster of cores without one); above that cache it
    is a boundary of its own, the "die" class, when it splits the PU's NUMA node (hwloc's Group
    of two L3s per EPYC NUMA quadrant). One that is the node itself, or holds several nodes, adds
    nothing the NUMA and package classes do not already say.
    """
    keys = {"pu": id(pu), "core": id(topo.core_of(pu)), "l2": -1, "l3": -1, "die": -1, "package": -1, "numa": -1}
    node = topo.node_by_os.get(min(pu.nodes)) if pu.nodes else None
    big_cache = False  # a cache of level >= 3 seen on the way up
    obj = pu.parent
    while obj is not None:
        if obj.type == "Package":
            keys["package"] = id(obj)
            # A NUMA node counts as a level below the package only when it lies inside it
            # (sub-NUMA clusters, NPS4); a node holding several packages brings nothing closer.
            if node is not None and node.cpus <= obj.cpus:
                keys["numa"] = node.os_index
            break
        if obj.is_data_cache and (obj.cache_level or 0) <= 2:
            keys["l2"] = id(obj)
        elif obj.is_data_cache and (obj.cache_level or 0) >= 3:
            keys["l3"] = id(obj)
            big_cache = True
        elif obj.type in ("Die", "Group"):
            if not big_cache:
                if node is None or obj.cpus <= node.cpus:
                    keys["l3"] = id(obj)
            elif keys["die"] == -1 and (node is None or obj.cpus < node.cpus):
                keys["die"] = id(obj)
        obj = obj.parent
    if keys["package"] == -1 and node is not None:
        keys["numa"] = node.os_index
    return keys


def _numa_factor(topo: Topology, pus: list[TopoObject], np):
    """Per pair of PUs, d(node_a, node_b) / d(node_a, node_a) from the NUMA latency matrix."""
    dist = topo.distances
    d = np.asarray(dist.matrix, dtype=np.float64)
    pos = {node: i for i, node in enumerate(dist.nodes)}
    local = np.diag(d).copy()
    local[local <= 0] = 1.0
    ratio = d / local[:, None]
    node = np.array([pos.get(min(pu.nodes), -1) if pu.nodes else -1 for pu in pus], dtype=np.int64)
    known = node >= 0
    factor = np.ones((len(pus), len(pus)))
    sub = np.ix_(known, known)
    factor[sub] = ratio[np.ix_(node[known], node[known])]
    return factor


def distance_table(topo: Topology) -> DistanceTable:
    """The topology's distance table, computed on first use and kept while the topology lives."""
    table = _TABLES.get(topo)
    if table is None:
        table = _TABLES[topo] = DistanceTable(topo)
    return table


def cpu_distance(topo: Topology, a: int, b: int) -> float:
    """The distance between CPUs (PU OS indexes) ``a`` and ``b`` on the module's scale."""
    return distance_table(topo).distance(a, b)


def placement_cost(topo: Topology, weights, cpus: Sequence[int]) -> float:
    """sum over i < j of weights[i][j] * distance(cpus[i], cpus[j]); ``weights`` a matrix or AffinityGraph."""
    import numpy as np

    w = weights.as_array() if hasattr(weights, "as_array") else np.asarray(weights, dtype=np.float64)
    if len(cpus) != w.shape[0]:
        raise ValueError(f"{len(cpus)} CPUs for a graph of {w.shape[0]} threads")
    d = distance_table(topo).submatrix(cpus)
    return float((w * d).sum() / 2)


def compare(placement, graph, *, seeds: int = 5) -> dict:
    """The cost of ``placement`` beside compact, scatter and random (the median of ``seeds`` seeds).

    Returns ``{"costs": {name: cost}, "best": name}``; the placement's own entry is its strategy
    name (``explicit`` for CPUs given by hand). The baselines use the placement's smt choice.
    """
    topo, n, smt = placement.topology, placement.threads, placement.smt
    graph.check_threads(n)
    costs: dict[str, float] = {}
    if placement.cpus is not None:
        costs[placement.strategy] = placement_cost(topo, graph, placement.cpus)
    for name, fn in (("compact", strategies.compact), ("scatter", strategies.scatter)):
        if name not in costs:
            costs[name] = placement_cost(topo, graph, fn(topo, n, smt, placement.oversubscribe))
    costs["random"] = statistics.median(
        placement_cost(topo, graph, strategies.random(topo, n, seed, smt, placement.oversubscribe)) for seed in range(seeds)
    )
    best = min(costs, key=lambda k: costs[k])
    return {"costs": costs, "best": best, "random_seeds": seeds}


def format_comparison(result: dict) -> str:
    """The comparison as a small table, the lowest cost marked with '*'."""
    costs = result["costs"]
    width = max(len(k) for k in costs)
    lowest = min(costs.values())
    lines = [f"{'placement':<{width}}  {'cost':>14}  vs lowest"]
    for name, cost in costs.items():
        label = name + (" (median of %d seeds)" % result["random_seeds"] if name == "random" else "")
        ratio = f"{cost / lowest:.2f}x" if lowest > 0 else ("1.00x" if cost == 0 else "inf")
        mark = " *" if cost == lowest else ""
        lines.append(f"{name:<{width}}  {cost:>14.6g}  {ratio}{mark}" + (f"   ({label[len(name) + 2 : -1]})" if name == "random" else ""))
    return "\n".join(lines)


def _measured(topo: Topology, cpus: list[int], m, np) -> None:
    """Overwrite ``m``'s pairs of measured CPUs with the measured latencies, rescaled to the tree's units."""
    latency = topo.cpu_latency
    rows = [i for i, cpu in enumerate(cpus) if cpu in set(latency.cpus)]
    if len(rows) < 2:
        return
    where = {cpu: k for k, cpu in enumerate(latency.cpus)}
    take = np.array([where[cpus[i]] for i in rows])
    measured = np.asarray(latency.matrix, dtype=np.float64)[np.ix_(take, take)]
    covered = np.ix_(rows, rows)
    off = ~np.eye(len(rows), dtype=bool)
    tree_mean, measured_mean = m[covered][off].mean(), measured[off].mean()
    if measured_mean <= 0:
        return
    scaled = measured * (tree_mean / measured_mean)
    np.fill_diagonal(scaled, 0.0)
    m[covered] = scaled
