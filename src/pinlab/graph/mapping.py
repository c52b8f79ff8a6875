"""Placement from an affinity graph: the strategies of seed 000 (section 3.2) and treematch.

Every strategy is a pure function (topology, graph, threads, options) -> CPUs, thread i on
``cpus[i]``. Units are cores (their first allowed PU) by default, PUs with ``smt``.

Two steps, shared by all strategies:

1. **Which units.** The sockets (packages; NUMA nodes on a one-package machine with several
   nodes): with ``domains=K`` the first K, as the seed's LPGP(4, 8, 16 sockets) variants do;
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
from dataclasses import dataclass
from typing import Sequence

from pinlab.errors import UsageError
from pinlab.placement.strategies import GRAPH_STRATEGIES, _capacities, share, smt_would_help, units_under
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


def _socket_domains(topo: Topology) -> list[frozenset[int]]:
    """CPU sets of the 'sockets' that --domains counts: packages, else NUMA nodes, else the machine."""
    if len(topo.packages) > 1:
        return [p.cpus for p in topo.packages]
    if len(topo.numa_nodes) > 1:
        return [n.cpus for n in topo.numa_nodes if n.cpus]
    return [topo.root.cpus]


def choose_units(topo: Topology, n: int, *, smt: bool = False, domains: int | None = None, spread: bool = False,
                 pairs_whole: bool = False, whole_sockets: bool = False) -> list[int]:
    """The units the threads will use (step 1 of the module's docstring), in logical order.

    With ``whole_sockets``, every unit of the chosen sockets (as many as the threads or more):
    the strategy then decides how many threads each socket takes."""
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    sockets = [[u for u in units if u in cpus] for cpus in _socket_domains(topo)]
    sockets = [s for s in sockets if s]
    kind = "cores" if not smt else "hardware threads (PUs)"
    if domains is not None:
        if domains < 1 or domains > len(sockets):
            raise UsageError(f"--domains {domains}: this machine has {plural(len(sockets), 'socket')} (or NUMA nodes) with allowed "
                             f"{kind}; give a number from 1 to {len(sockets)}")
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
        raise UsageError(f"{n} threads but only {room} {kind} are available{where}; use fewer threads"
                         + (", more --domains" if domains is not None else "") + (", or --smt" if smt_would_help(topo, smt) else ""))
    if whole_sockets:
        picked = {u for s in chosen for u in s}
        return [u for u in units if u in picked]
    if pairs_whole and (domains is None or n // 2 >= len(chosen)):
        counts = [2 * c for c in share(n // 2, [len(s) // 2 for s in chosen])] if sum(len(s) // 2 for s in chosen) >= n // 2 \
            else share(n, [len(s) for s in chosen])
        if sum(counts) < n:  # the odd thread: the first socket with room
            for i, s in enumerate(chosen):
                if counts[i] < len(s):
                    counts[i] += 1
                    break
    else:
        counts = share(n, [len(s) for s in chosen])
    picked = {u for s, c in zip(chosen, counts) for u in s[:c]}
    return [u for u in units if u in picked]


def graph_fits(topo: Topology, strategy: str, graph_threads: int, *, threads: int | None = None, smt: bool = False,
               domains: int | None = None, source: str = "") -> None:
    """Refuse, from a graph's thread count alone, what the placement would refuse after reading it:
    another count than ``threads`` asked for, or (graph strategies) more threads than the cores.

    For :func:`pinlab.graph.model.load_graph`'s ``expect``, before thousands of weights are read.
    """
    if threads is not None and threads != graph_threads:
        raise UsageError(f"graph {source} has {graph_threads} threads but {threads} were asked for: "
                         f"trace again with -n {threads}, or ask for {graph_threads} threads")
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

    from pinlab.graph.matching import max_weight_matching, max_weight_matching_edges

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
    pairs += [rest[i:i + 2] for i in range(0, len(rest), 2)]
    return pairs


def _heaviest_pairs(w, k: int):
    """The pairs (i, j, weight), i < j, that are among the k heaviest of one of their two threads."""
    import numpy as np

    from pinlab.graph.kernels import unique

    n = w.shape[0]
    nonzero = np.count_nonzero(w)
    if nonzero * 4 > n * n:  # dense: one pass over every row (in C) beats sorting the entries
        from pinlab.graph.kernels import heaviest

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
    cap = _capacities(topo, smt)
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


def _slots(topo: Topology, tree: Tree, smt: bool, within: tuple[int, int] | None = None,
           kind: str | None | bool = False) -> list[list[int]]:
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


def _pairs_on_slots(w, pairs: list[list[int]], slots: list[list[int]]) -> dict[int, int]:
    """Thread -> unit position: pairs on two-unit slots in order; what does not fit goes one by one.

    When there are fewer two-unit slots than pairs (cores with a private L2 beside clusters
    sharing one), the heaviest pairs keep the shared slots and the others are split.
    """
    twos = [s for s in slots if len(s) == 2]
    ones = [s[0] for s in slots if len(s) == 1]
    whole = [p for p in pairs if len(p) == 2]
    if len(whole) > len(twos):
        keep = set(sorted(range(len(whole)), key=lambda i: -w[whole[i][0], whole[i][1]])[:len(twos)])
        whole = [whole[i] for i in sorted(keep)] + [whole[i] for i in range(len(whole)) if i not in keep]
    alone = [t for p in pairs if len(p) == 1 for t in p]
    where: dict[int, int] = {}
    for pair, slot in zip(whole, twos):
        where[pair[0]], where[pair[1]] = slot
    alone = [t for p in whole[len(twos):] for t in p] + alone
    free = ones + [u for s in twos[len(whole):] for u in s]
    for t, u in zip(alone, free):
        where[t] = u
    return where


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


def map_threads(topo: Topology, strategy: str, graph, threads: int, *, smt: bool = False, domains: int | None = None,
                level: str | None = None, seed: int = 0) -> list[int]:
    """CPU of every thread (thread i on the result's [i]) by a graph strategy of the module's docstring."""
    if strategy not in GRAPH_STRATEGIES:
        raise UsageError(f"unknown graph strategy {strategy!r}: choose one of {', '.join(GRAPH_STRATEGIES)}")
    if threads < 1:
        raise UsageError(f"THREADS must be at least 1 (got {threads})")
    w = _matrix(graph, threads)
    if level is not None and strategy != "gp":
        raise UsageError(f"--level chooses the parts of gp; strategy {strategy} has its own levels: leave --level out")
    if strategy == "lp-compact":
        units = choose_units(topo, threads, smt=smt, domains=domains) if domains is not None else \
            _compact_units(topo, threads, smt)
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
    return sum(1 for s in _socket_domains(topo) if s & set(cpus))


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
        slots = _slots(topo, tree, smt)
        if strategy == "lp-scatter":
            slots = _interleave_by_socket(tree, slots)
        position = _pairs_on_slots(w, pair_threads(w), slots)
    elif strategy == "gp":
        position = _gp(w, tree, _level_index(tree, level), seed)
    elif strategy in ("lpgp", "gplp"):
        position = _two_level(w, tree, strategy, seed)
    else:
        from pinlab.graph.treematch import treematch

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

    from pinlab.placement.cost import distance_table

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
        kind = "cores" if not smt else "hardware threads (PUs)"
        raise UsageError(f"{n} threads but only {len(units)} {kind} are available; use fewer threads"
                         + (", or --smt" if smt_would_help(topo, smt) else ""))
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
        raise UsageError(f"--level {level}: not a level name; give package (socket), die, numa (node), group, "
                         f"l1..l5 (a cache) or core")
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
    from pinlab.graph.partition import partition

    groups = tree.levels[index] if index is not None else [(0, len(tree.units))]
    parts = partition(w, [b - a for a, b in groups], seed=seed)
    return _inside(w, tree, groups, parts)


def _two_level(w, tree: Tree, strategy: str, seed: int) -> dict[int, int]:
    """lpgp and gplp: sockets by partition (of pairs, or of threads), treematch inside each."""
    import numpy as np

    from pinlab.graph.kernels import Weights, group_sums
    from pinlab.graph.partition import partition

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

    from pinlab.graph.treematch import treematch

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

    from pinlab.graph.partition import _repair

    return _repair(w, parts, sizes, np.ones(w.n, dtype=np.int64))
