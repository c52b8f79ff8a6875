"""The tree of the units a graph strategy uses, and pairs of threads on it.

Step 1 of :mod:`pinlab.placement.mapping` (which units, :func:`choose_units`), the levels of the
topology that split them (:func:`unit_tree`), the pair level and its two-unit slots, and pairs of
threads by maximum-weight matching (:func:`pair_threads`): shared by the pair strategies in
:mod:`pinlab.placement.mapping` and by :mod:`pinlab.placement.treematch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pinlab.errors import UsageError
from pinlab.graph.kernels import heaviest, unique
from pinlab.graph.matching import max_weight_matching, max_weight_matching_edges
from pinlab.placement.strategies import GRAPH_STRATEGIES
from pinlab.placement.units import capacities, no_room, share, units_under
from pinlab.topology.model import Topology
from pinlab.words import plural


# -- the tree of the chosen units ---------------------------------------------------------------------
@dataclass
class Tree:
    """Units (CPU OS indexes, logical order) and the levels that split them, coarsest first.

    ``levels[l]`` is a list of groups, each a contiguous range (start, end) of unit positions;
    every group of a level lies inside one group of the level before. ``names[l]`` lists the
    kinds that split the units that way (Package and L3 when each package has one L3).
    """

    units: list[int]
    levels: list[list[tuple[int, int]]]
    names: list[list[str]]


def socket_domains(topo: Topology) -> list[frozenset[int]]:
    """CPU sets of the 'sockets' that --domains counts: packages, else NUMA nodes, else the machine."""
    if len(topo.packages) > 1:
        return [p.cpus for p in topo.packages]
    if len(topo.numa_nodes) > 1:
        return [n.cpus for n in topo.numa_nodes if n.cpus]
    return [topo.root.cpus]


def choose_units(
    topo: Topology,
    n: int,
    *,
    smt: bool = False,
    domains: int | None = None,
    spread: bool = False,
    pairs_whole: bool = False,
    whole_sockets: bool = False,
) -> list[int]:
    """The units the threads will use (step 1 of the module's docstring), in logical order.

    With ``whole_sockets``, every unit of the chosen sockets (as many as the threads or more):
    the strategy then decides how many threads each socket takes."""
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    sockets = [[u for u in units if u in cpus] for cpus in socket_domains(topo)]
    sockets = [s for s in sockets if s]
    kind = "cores" if not smt else "hardware threads (PUs)"
    if domains is not None:
        if domains < 1 or domains > len(sockets):
            raise UsageError(
                f"--domains {domains}: this machine has {plural(len(sockets), 'socket')} (or NUMA nodes) with allowed "
                f"{kind}; give a number from 1 to {len(sockets)}"
            )
        chosen = sockets[:domains]
    elif spread:
        chosen = sockets
    else:
        chosen, room = [], 0
        for s in sockets:
            if room >= n:
                break
            chosen.append(s)
            room += len(s)
    room = sum(len(s) for s in chosen)
    if n > room:
        where = f" on {len(chosen)} sockets" if domains is not None else ""
        raise no_room(topo, n, room, smt, where=where, oversubscribe=False, more="more --domains" if domains is not None else "")
    if whole_sockets:
        picked = {u for s in chosen for u in s}
        return [u for u in units if u in picked]
    if pairs_whole and (domains is None or n // 2 >= len(chosen)):
        counts = (
            [2 * c for c in share(n // 2, [len(s) // 2 for s in chosen])]
            if sum(len(s) // 2 for s in chosen) >= n // 2
            else share(n, [len(s) for s in chosen])
        )
        if sum(counts) < n:  # the odd thread: the first socket with room
            for i, s in enumerate(chosen):
                if counts[i] < len(s):
                    counts[i] += 1
                    break
    else:
        counts = share(n, [len(s) for s in chosen])
    picked = {u for s, c in zip(chosen, counts) for u in s[:c]}
    return [u for u in units if u in picked]


def graph_fits(
    topo: Topology, strategy: str, graph_threads: int, *, threads: int | None = None, smt: bool = False, domains: int | None = None, source: str = ""
) -> None:
    """Refuse, from a graph's thread count alone, what the placement would refuse after reading it:
    another count than ``threads`` asked for, or (graph strategies) more threads than the cores.

    For :func:`pinlab.graph.model.load_graph`'s ``expect``, before thousands of weights are read.
    """
    if threads is not None and threads != graph_threads:
        raise UsageError(
            f"graph {source} has {graph_threads} threads but {threads} were asked for: "
            f"trace again with -n {threads}, or ask for {graph_threads} threads"
        )
    if strategy in GRAPH_STRATEGIES:
        choose_units(topo, graph_threads, smt=smt, domains=domains, whole_sockets=True)


def unit_tree(topo: Topology, units: Sequence[int], smt: bool = False) -> Tree:
    """The levels of the topology that split ``units`` (see :class:`Tree`), NUMA nodes included where they nest."""
    keyed: dict[str, list[object]] = {}
    for cpu in units:
        pu = topo.pu(cpu)
        obj = pu.parent if smt else topo.core_of(pu).parent
        while obj is not None and obj.parent is not None:
            keyed.setdefault(obj.kind, []).append(id(obj))
            obj = obj.parent
        keyed.setdefault("NUMANode", []).append(min(pu.nodes) if pu.nodes else -1)
    candidates = []
    for name, keys in keyed.items():
        if len(keys) != len(units):
            continue  # a level not above every unit (a cache only some cores have): not a level of this tree
        groups = _runs(keys)
        if groups is not None and 1 < len(groups) < len(units):
            candidates.append((len(groups), name, groups))
    candidates.sort(key=lambda c: c[0])
    levels: list[list[tuple[int, int]]] = []
    names: list[list[str]] = []
    for count, name, groups in candidates:
        if levels and groups == levels[-1]:
            names[-1].append(name)  # the same split under another name (one L3 per package)
            continue
        if levels and not _nests(groups, levels[-1]):
            continue
        levels.append(groups)
        names.append([name])
    return Tree(units=list(units), levels=levels, names=names)


def _runs(keys: list[object]) -> list[tuple[int, int]] | None:
    """Contiguous runs of equal keys, or None when a key comes back after another (not a tree level)."""
    runs: list[tuple[int, int]] = []
    seen: set[object] = set()
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            if keys[start] in seen:
                return None
            seen.add(keys[start])
            runs.append((start, i))
            start = i
    return runs


def _nests(inner: list[tuple[int, int]], outer: list[tuple[int, int]]) -> bool:
    bounds = {b for g in outer for b in g}
    inner_bounds = {b for g in inner for b in g}
    return bounds <= inner_bounds


# -- pairs --------------------------------------------------------------------------------------------
#: A graph with more pairs of weight than this many per thread is matched on each thread's
#: MATCH_NEIGHBOURS heaviest pairs (exact on that graph): the blossom algorithm on a dense graph
#: of 1024 threads takes 1.9 s, on the 16 heaviest pairs of each thread 0.1 s, and on random
#: dense graphs the matching's weight was the same. Its time grows with threads x pairs, so
#: above LARGE_MATCH_THREADS threads each thread gives its MATCH_NEIGHBOURS_LARGE heaviest pairs
#: (1024 threads: 45 ms instead of 100; on random dense graphs of 1024 and 4096 threads the
#: matching weighed within 0.001% of the one on 16 pairs). Threads that such a matching leaves
#: alone are matched again among themselves, on their heaviest pairs in that set, until none or
#: one is left.
DENSE_PAIRS_PER_THREAD = 64
MATCH_NEIGHBOURS = 16
LARGE_MATCH_THREADS = 512
MATCH_NEIGHBOURS_LARGE = 6


def pair_threads(w, threads: Sequence[int] | None = None) -> list[list[int]]:
    """Pairs by maximum-weight matching, leftovers paired in order; an odd thread alone last."""
    import numpy as np

    everyone = threads is None or list(threads) == list(range(w.shape[0]))
    threads = list(range(w.shape[0])) if threads is None else list(threads)
    pairs: list[list[int]] = []
    todo = threads
    while len(todo) > 1:
        n = len(todo)
        sub = w if everyone and todo is threads else w[np.ix_(todo, todo)]
        k = MATCH_NEIGHBOURS if n <= LARGE_MATCH_THREADS else MATCH_NEIGHBOURS_LARGE
        restricted = n > 2 * k and np.count_nonzero(sub) > n * DENSE_PAIRS_PER_THREAD
        if restricted:
            found = max_weight_matching_edges(n, _heaviest_pairs(sub, k))
        else:
            found = max_weight_matching(sub)
        pairs += [[todo[a], todo[b]] for a, b in found]
        used = {t for a, b in found for t in (todo[a], todo[b])}
        rest = [t for t in todo if t not in used]
        if not restricted or not found:
            break
        todo = rest  # left alone by the matching on each thread's heaviest pairs: matched again among themselves
    used = {t for p in pairs for t in p}
    rest = [t for t in threads if t not in used]
    pairs += [rest[i : i + 2] for i in range(0, len(rest), 2)]
    return pairs


def _heaviest_pairs(w, k: int):
    """The pairs (i, j, weight), i < j, that are among the k heaviest of one of their two threads."""
    import numpy as np

    n = w.shape[0]
    nonzero = np.count_nonzero(w)
    if nonzero * 4 > n * n:  # dense: one pass over every row (in C) beats sorting the entries
        rows = np.repeat(np.arange(n), k)
        cols = heaviest(w, k).ravel().astype(np.int64)
        keep = cols >= 0
    else:
        rows, cols = np.nonzero(w)
        values = w[rows, cols]
        order = np.lexsort((-values, rows))  # by thread, heaviest first
        rows, cols = rows[order], cols[order]
        keep = np.arange(rows.size) - np.searchsorted(rows, np.arange(n))[rows] < k
    keep &= rows != cols
    low, high = np.minimum(rows[keep], cols[keep]), np.maximum(rows[keep], cols[keep])
    key = unique(low * n + high)
    low, high = key // n, key % n
    return np.column_stack((low, high, w[low, high]))


def pair_level(topo: Topology, smt: bool) -> str | None:
    """The smallest data cache (or the core, with smt) that two or more units share, by kind; None if none."""
    cap = capacities(topo, smt)
    best: tuple[int, str] | None = None
    for kind, objs in topo.by_kind.items():
        obj = objs[0]
        if not (obj.is_data_cache or (smt and obj.type == "Core")):
            continue
        shared = [cap[id(o)] for o in objs if cap[id(o)] >= 2]
        if shared and (best is None or max(shared) < best[0] or (max(shared) == best[0] and obj.depth > _depth(topo, best[1]))):
            best = (max(shared), kind)
    return None if best is None else best[1]


def _depth(topo: Topology, kind: str) -> int:
    return topo.by_kind[kind][0].depth


def pair_slots(topo: Topology, tree: Tree, smt: bool, within: tuple[int, int] | None = None, kind: str | None | bool = False) -> list[list[int]]:
    """Unit positions cut into slots of two inside each pair-level object (a single where odd).

    ``kind`` is the pair level when the caller already knows it (False: find it here)."""
    if kind is False:
        kind = pair_level(topo, smt)
    start, end = within or (0, len(tree.units))
    groups = [(start, end)]
    if kind is None and tree.levels:  # no shared cache: pairs inside the smallest objects of the tree
        groups = [(max(a, start), min(b, end)) for a, b in tree.levels[-1] if a < end and b > start]
    if kind is not None:
        keys = []
        for cpu in tree.units[start:end]:
            obj = topo.pu(cpu).ancestor(kind) if kind != "Core" else topo.core_of(topo.pu(cpu))
            keys.append(id(obj) if obj is not None else -cpu - 1)
        runs = _runs(keys) or [(i, i + 1) for i in range(len(keys))]
        groups = [(start + a, start + b) for a, b in runs]
    slots = []
    for a, b in groups:
        slots += [list(range(i, min(i + 2, b))) for i in range(a, b, 2)]
    return slots


def pairs_on_slots(w, pairs: list[list[int]], slots: list[list[int]]) -> dict[int, int]:
    """Thread -> unit position: pairs on two-unit slots in order; what does not fit goes one by one.

    When there are fewer two-unit slots than pairs (cores with a private L2 beside clusters
    sharing one), the heaviest pairs keep the shared slots and the others are split.
    """
    twos = [s for s in slots if len(s) == 2]
    ones = [s[0] for s in slots if len(s) == 1]
    whole = [p for p in pairs if len(p) == 2]
    if len(whole) > len(twos):
        keep = set(sorted(range(len(whole)), key=lambda i: -w[whole[i][0], whole[i][1]])[: len(twos)])
        whole = [whole[i] for i in sorted(keep)] + [whole[i] for i in range(len(whole)) if i not in keep]
    alone = [t for p in pairs if len(p) == 1 for t in p]
    where: dict[int, int] = {}
    for pair, slot in zip(whole, twos):
        where[pair[0]], where[pair[1]] = slot
    alone = [t for p in whole[len(twos) :] for t in p] + alone
    free = ones + [u for s in twos[len(whole) :] for u in s]
    for t, u in zip(alone, free):
        where[t] = u
    return where
