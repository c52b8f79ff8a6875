"""Placement from an affinity graph: the strategies of [mazouz2011hpcs] (section 3.2) and treematch.

Every strategy is a pure function (topology, graph, threads, options) -> CPUs, thread i on
``cpus[i]``. Units are cores (their first allowed PU) by default, PUs with ``smt``.

Two steps, shared by all strategies:

1. **Which units.** The sockets (packages; NUMA nodes on a one-package machine with several
   nodes): with ``domains=K`` the first K, as the LPGP(4, 8, 16 sockets) variants of [mazouz2011hpcs] do;
   without it, every socket for ``lp-scatter`` and the fewest that hold the threads for the
   others. ``lp-compact`` and ``lp-scatter`` divide the threads over them by capacity (pairs kept
   whole), each socket's threads on its first units in logical order. ``gp``, ``lpgp``, ``gplp``
   and ``treematch`` get every unit of the chosen sockets, the spare ones taken by stand-in
   threads that share nothing, so the graph decides how many threads each socket holds (a clique
   of 8 and one of 4 on two 8-core sockets: 8 + 4, where a division by capacity gives 6 + 6); with
   ``domains=K``, should that leave one of the K sockets empty, the division by capacity is used.
2. **Which thread on which unit**, by the strategy, on the tree of the chosen units (packages,
   NUMA nodes, dies, caches, cores: every level of the topology that splits them):

- ``lp-compact`` / ``lp-scatter``: pairs of threads by a maximum-weight matching (the exact
  optimum; on a dense graph of many threads, the exact optimum over each thread's 16 heaviest
  pairs, 6 above 512 threads, see DENSE_PAIRS_PER_THREAD; threads the matching leaves alone are
  matched again among themselves, and those still alone paired in order), each pair on two units of the
  *pair level*: the smallest data cache shared by two or more units (the core itself with smt).
  Pairs take the pair slots in order: compactly, or for lp-scatter spread over sockets by step 1.
- ``gp``: a k-way partition (METIS, sizes made exact) into the objects of one level (``level=``,
  default the packages the threads use, else the coarsest level that splits the chosen units).
- ``lpgp``: pairs first, then the pairs partitioned over sockets (a pair counts two).
- ``gplp``: partition over sockets first (its matching is the pair level of the step below).

  Inside each part, gp, lpgp and gplp arrange the part's threads by treematch over the levels
  below it (NUMA nodes, L3s, shared L2s: a matching where they hold two): on epyc's 256 PUs,
  pairs on pair slots in order ignored its L3s and NUMA quadrants and cost 1.3 x treematch's.
- ``treematch``: bottom-up over every level of the tree: threads are grouped by the arity of the
  lowest level (exact matching for arity 2; greedy growth by affinity then swaps for more),
  groups become the vertices of a smaller graph, grouped by the next level's arity, and so on
  to the top; then each group lands on its object.

``lpgp``, ``gplp`` and ``treematch`` end, on graphs up to POLISH_MAX_THREADS threads, with a
swap pass on the cost model (:func:`polish`): two threads exchange units while that lowers
``pinlab.placement.cost``'s cost, which mends what one level's choice cost another.

When no level has two units sharing a data cache (one core per L2 and no L3 shared), the pair
level falls back to consecutive units in logical order inside the smallest object of the tree
that holds several (the package, usually): pairs are still formed and kept on neighbouring
cores, which the cost model counts as close only through the package and NUMA node.
"""

from __future__ import annotations

import re
from typing import Sequence

from pinlab.errors import UsageError
from pinlab.graph.kernels import Weights, group_sums
from pinlab.graph.partition import partition, repair
from pinlab.placement.cost import distance_table
from pinlab.placement.strategies import GRAPH_STRATEGIES
from pinlab.placement.tree import Tree, choose_units, pair_slots, pair_threads, pairs_on_slots, socket_domains, unit_tree
from pinlab.placement.treematch import treematch
from pinlab.placement.units import no_room, units_under
from pinlab.topology.model import Topology


# -- the strategies -----------------------------------------------------------------------------------
def _matrix(graph, n: int):
    import numpy as np

    if hasattr(graph, "check_threads"):
        graph.check_threads(n)
        w = graph.as_array()
    else:
        w = np.asarray(graph, dtype=np.float64)
        if w.shape != (n, n):
            raise UsageError(f"the graph has {w.shape[0]} threads but {n} were asked for")
    if np.count_nonzero(w > 0) == np.count_nonzero(np.diagonal(w) > 0):  # nothing off the diagonal (no triangle copied)
        raise UsageError("the graph has no weight between any two threads: nothing to place by; use compact or scatter")
    return w


def map_threads(
    topo: Topology, strategy: str, graph, threads: int, *, smt: bool = False, domains: int | None = None, level: str | None = None, seed: int = 0
) -> list[int]:
    """CPU of every thread (thread i on the result's [i]) by a graph strategy of the module's docstring."""
    if strategy not in GRAPH_STRATEGIES:
        raise UsageError(f"unknown graph strategy {strategy!r}: choose one of {', '.join(GRAPH_STRATEGIES)}")
    if threads < 1:
        raise UsageError(f"THREADS must be at least 1 (got {threads})")
    w = _matrix(graph, threads)
    if level is not None and strategy != "gp":
        raise UsageError(f"--level chooses the parts of gp; strategy {strategy} has its own levels: leave --level out")
    if strategy == "lp-compact":
        units = choose_units(topo, threads, smt=smt, domains=domains) if domains is not None else _compact_units(topo, threads, smt)
    elif strategy == "lp-scatter":
        units = choose_units(topo, threads, smt=smt, domains=domains, spread=True, pairs_whole=True)
    else:
        # Every unit of the chosen sockets, the graph deciding how many threads each socket
        # takes: a clique of 8 and one of 4 on two 8-core sockets go 8 + 4, not 6 + 6.
        units = choose_units(topo, threads, smt=smt, domains=domains, whole_sockets=True)
        cpus = _map(topo, strategy, w, units, smt, level, seed)
        if domains is None or _sockets_used(topo, cpus) == domains:
            return cpus
        # --domains K promises K sockets: when the graph's own split leaves one empty, the
        # threads are divided over the K sockets by capacity instead.
        units = choose_units(topo, threads, smt=smt, domains=domains)
    return _map(topo, strategy, w, units, smt, level, seed)


def _sockets_used(topo: Topology, cpus: Sequence[int]) -> int:
    return sum(1 for s in socket_domains(topo) if s & set(cpus))


def _map(topo: Topology, strategy: str, w, units: list[int], smt: bool, level: str | None, seed: int) -> list[int]:
    """The CPUs of the threads of ``w`` on ``units`` (as many or more; the spare units stay free).

    Spare units are given to stand-in threads that share nothing (the weight matrix padded with
    zeros), so every strategy sees a full machine; the stand-ins' CPUs are dropped at the end.
    """
    import numpy as np

    threads = w.shape[0]
    if len(units) > threads:
        padded = np.zeros((len(units), len(units)))
        padded[:threads, :threads] = w
        w = padded
    tree = unit_tree(topo, units, smt)
    if strategy in ("lp-compact", "lp-scatter"):
        slots = pair_slots(topo, tree, smt)
        if strategy == "lp-scatter":
            slots = _interleave_by_socket(tree, slots)
        position = pairs_on_slots(w, pair_threads(w), slots)
    elif strategy == "gp":
        position = _gp(w, tree, _level_index(tree, level), seed)
    elif strategy in ("lpgp", "gplp"):
        position = _two_level(w, tree, strategy, seed)
    else:
        order = treematch(w, tree)
        position = {t: i for i, t in enumerate(order)}
    if strategy in ("lpgp", "gplp", "treematch") and threads <= POLISH_MAX_THREADS and len(units) <= POLISH_MAX_UNITS:
        order = [0] * len(units)
        for t, pos in position.items():
            order[pos] = t
        position = {t: i for i, t in enumerate(polish(topo, w, tree.units, order, movers=threads))}
    cpus = [tree.units[position[t]] for t in range(threads)]
    assert len(set(cpus)) == threads
    return cpus


#: Graphs up to this many threads get the final swap pass (it costs O(threads x units^2) per pass),
#: on up to this many units (the spare units of the chosen sockets count).
POLISH_MAX_THREADS = 128
POLISH_MAX_UNITS = 512


def polish(topo: Topology, w, units: Sequence[int], order: list[int], passes: int = 4, movers: int | None = None) -> list[int]:
    """Exchange two threads' units while that lowers the cost model's cost (a final local search).

    ``order[p]`` is the thread on ``units[p]``. Only threads below ``movers`` (all by default)
    start an exchange; the others are stand-ins for spare units, which share nothing. For thread u, the gain of swapping with every v is
    computed at once: with A the weights and B the distances between the threads' units,
    delta(v) = (B A_u)_v + (A B_u)_v - A_u.B_u - (A.B)_v + 2 A_uv B_uv (negative: cheaper).
    """
    import numpy as np

    n = len(order)
    table = distance_table(topo)
    pos_cpu = [units[p] for p in range(n)]
    thread_cpu = [0] * n
    for p, t in enumerate(order):
        thread_cpu[t] = pos_cpu[p]
    a = np.asarray(w, dtype=np.float64)
    b = table.submatrix(thread_cpu)
    cpu_of = list(thread_cpu)
    scale = max(1.0, float(np.abs(a).max()))
    for _ in range(passes):
        improved = False
        rowdot = (a * b).sum(axis=1)
        for u in range(n if movers is None else movers):
            delta = b @ a[u] + a @ b[u] - a[u] @ b[u] - rowdot + 2 * a[u] * b[u]
            delta[u] = 0.0
            v = int(np.argmin(delta))
            if delta[v] >= -1e-9 * scale:
                continue
            cpu_of[u], cpu_of[v] = cpu_of[v], cpu_of[u]
            b[[u, v]] = b[[v, u]]
            b[:, [u, v]] = b[:, [v, u]]
            rowdot = (a * b).sum(axis=1)
            improved = True
        if not improved:
            break
    at = {cpu: p for p, cpu in enumerate(pos_cpu)}
    result = [0] * n
    for t, cpu in enumerate(cpu_of):
        result[at[cpu]] = t
    return result


def _compact_units(topo: Topology, n: int, smt: bool) -> list[int]:
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    if n > len(units):
        raise no_room(topo, n, len(units), smt, oversubscribe=False)
    return units[:n]


def _interleave_by_socket(tree: Tree, slots: list[list[int]]) -> list[list[int]]:
    """Slots taken one socket after another in turn, so successive pairs go to different sockets."""
    top = tree.levels[0] if tree.levels else [(0, len(tree.units))]
    per = [[s for s in slots if a <= s[0] < b] for a, b in top]
    out = []
    for i in range(max(len(p) for p in per)):
        out += [p[i] for p in per if i < len(p)]
    return out


def _level_index(tree: Tree, level: str | None) -> int | None:
    """The tree level that gp partitions into: ``level`` by name (package, numa, l3, l2, die...), or the top."""
    if level is None:
        return _socket_level(tree)
    want = level.strip().lower()
    aliases = {"socket": "package", "numa": "numanode", "node": "numanode"}
    want = aliases.get(want, want)
    if not _LEVEL_NAME.fullmatch(want):
        raise UsageError(f"--level {level}: not a level name; give package (socket), die, numa (node), group, l1..l5 (a cache) or core")
    for i, kinds in enumerate(tree.names):
        if any(name.lower() == want or name.lower() == want + "d" for name in kinds):
            return i
    present = ", ".join("/".join(k.lower() for k in kinds) for kinds in tree.names) or "none (the threads fit in one object of every level)"
    raise UsageError(f"--level {level}: the chosen cores are not split at that level; levels here: {present}")


_LEVEL_NAME = re.compile(r"package|die|numanode|group|core|l[1-5][di]?")


def _socket_level(tree: Tree) -> int | None:
    """The level of packages when it splits the chosen units, else the coarsest level (None: no level)."""
    for i, kinds in enumerate(tree.names):
        if "Package" in kinds:
            return i
    return 0 if tree.levels else None


def _gp(w, tree: Tree, index: int | None, seed: int) -> dict[int, int]:
    groups = tree.levels[index] if index is not None else [(0, len(tree.units))]
    parts = partition(w, [b - a for a, b in groups], seed=seed)
    return _inside(w, tree, groups, parts)


def _two_level(w, tree: Tree, strategy: str, seed: int) -> dict[int, int]:
    """lpgp and gplp: sockets by partition (of pairs, or of threads), treematch inside each."""
    import numpy as np

    n = w.shape[0]
    index = _socket_level(tree)
    sockets = tree.levels[index] if index is not None else [(0, len(tree.units))]
    sizes = [b - a for a, b in sockets]
    if strategy == "lpgp" and len(sockets) > 1:
        pairs = pair_threads(w)
        pair_of = np.empty(n, dtype=np.int64)
        for i, p in enumerate(pairs):
            pair_of[p] = i
        k = len(pairs)
        threads = Weights(w)  # found once, for the pairs' graph and the repair
        coarse = group_sums(threads, pair_of, k, row_label=pair_of, kr=k)  # the pairs' graph
        np.fill_diagonal(coarse, 0.0)
        vsize = [len(p) for p in pairs]
        coarse_parts = partition(coarse, sizes, vsize=vsize, seed=seed)
        parts = np.empty(n, dtype=np.int64)
        for p, part in zip(pairs, coarse_parts):
            parts[p] = part
        parts = _exact(threads, parts, sizes)
    else:
        parts = np.asarray(partition(w, sizes, seed=seed))
    return _inside(w, tree, sockets, parts)


def _inside(w, tree: Tree, groups: list[tuple[int, int]], parts) -> dict[int, int]:
    """Thread -> unit position, the threads of part p on the units of ``groups[p]``, arranged by
    treematch over the levels inside that group (NUMA nodes, L3s, shared L2s, cores), so that
    what the partition chose is not undone by an arrangement blind to the levels below it."""
    import numpy as np

    parts = np.asarray(parts)
    position: dict[int, int] = {}
    for p, (a, b) in enumerate(groups):
        members = np.flatnonzero(parts == p)
        assert members.size == b - a, "the partition fills every part exactly"
        levels = []
        for level in tree.levels:
            inner = [(x - a, y - a) for x, y in level if a <= x and y <= b]
            if 1 < len(inner) < b - a and (not levels or inner != levels[-1]):
                levels.append(inner)
        sub = Tree(units=tree.units[a:b], levels=levels, names=[[] for _ in levels])
        order = treematch(w[np.ix_(members, members)], sub)
        for i, local in enumerate(order):
            position[int(members[local])] = a + i
    return position


def _exact(w, parts, sizes: list[int]):
    """Thread-level repair after a partition of pairs (a pair may have to be split to fit);
    ``w``: the threads' weights (a pinlab.graph.kernels.Weights)."""
    import numpy as np

    return repair(w, parts, sizes, np.ones(w.n, dtype=np.int64))
