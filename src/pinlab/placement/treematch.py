"""TreeMatch-style mapping: group threads level by level from the cores up, by each level's arity.

Given the tree of the chosen units (``pinlab.placement.tree.Tree``), the threads are first grouped
into sets that fit the lowest objects (two per L2 shared by two cores, six per L3 shared by six),
keeping the heaviest affinity inside groups. Each group then becomes one vertex of a smaller graph
(weights summed between groups), and those vertices are grouped by the next level's arity, up to
the top. Every group is built to the size of the object it will occupy, so the result is a thread
for every unit.

Grouping one level:

- every parent holds two children of equal size (the common case of pairs): an exact
  maximum-weight matching, the heaviest pairs going to the parents;
- groups of one size into parents of one arity (3, 4, 8 or more), when there are at most
  EXACT_MAX ways to do it (8 groups into 2 x 4: 35 ways; 12 into 3 x 4: 5,775): every way is
  tried and the one with the most weight inside parents kept. A greedy choice at such a level is
  a bisection heuristic, and on an 8-stage pipeline over two 4-core sockets it cut the pipeline
  in three places where one is enough;
- otherwise (more groups, or children of different sizes on irregular trees): greedy growth (a
  parent starts from a free group with a large weight to the other free groups, then takes,
  while it has room, the free group that fits a free child slot and adds the most weight to it),
  followed by swaps of equal-size groups between parents while a swap raises the weight inside
  parents (pinlab.graph.partition.refine); from several starting groups when there are few
  groups (RESTART_MAX), the best kept.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

from pinlab.graph.kernels import Weights, group_sums, grow, inside_weight, refine
from pinlab.placement.tree import Tree, pair_threads

#: A level is grouped exactly (every way tried) when it has at most this many ways to group.
EXACT_MAX = 20_000
#: Up to this many groups at a level, greedy growth starts from several groups (one per start).
RESTART_MAX = 64
#: How many starting groups greedy growth tries at such a level.
RESTARTS = 8


def treematch(w, tree: "Tree", *, passes: int = 2) -> list[int]:
    """The thread on every unit position of ``tree`` (a permutation of range(n))."""
    import numpy as np

    n = len(tree.units)
    # Bottom-up list of levels: each a list of (start, end) ranges; the leaves are the units.
    bottom_up = [[(i, i + 1) for i in range(n)]] + list(reversed(tree.levels)) + [[(0, n)]]
    groups = [[t] for t in range(n)]  # thread lists, one per range of the current level, aligned
    threads = Weights(w)  # the threads' weights, dense or as CSR, found once
    coarse = threads
    group_of = np.arange(n)  # every thread's group at the current level
    for child_level, parent_level in zip(bottom_up, bottom_up[1:]):
        slots = _children(child_level, parent_level)
        sizes = [len(g) for g in groups]
        owner = _group(coarse, sizes, [[c[1] - c[0] for c in s] for s in slots], passes)
        by_parent: list[list[int]] = [[] for _ in parent_level]
        for g, p in enumerate(owner):
            by_parent[p].append(g)
        new_groups = []
        for members, parent_slots in zip(by_parent, slots):
            ordered: list[int] = []
            for a, b in parent_slots:
                g = next(g for g in members if sizes[g] == b - a)
                members.remove(g)
                ordered += groups[g]
            new_groups.append(ordered)
        # The next level's graph: the threads' weights summed by the parent each now belongs to
        # (one pass over the threads' weights, in C).
        k = len(parent_level)
        group_of = np.asarray(owner)[group_of]
        matrix = group_sums(threads, group_of, k, row_label=group_of, kr=k)
        np.fill_diagonal(matrix, 0.0)
        coarse = Weights(matrix)
        groups = new_groups
    return groups[0]


def _children(child_level, parent_level):
    """The child ranges inside each parent range (both lists in order, children nested)."""
    out, i = [], 0
    for a, b in parent_level:
        inside = []
        while i < len(child_level) and child_level[i][1] <= b:
            if child_level[i][0] >= a:
                inside.append(child_level[i])
            i += 1
        out.append(inside)
    return out


def _group(g, sizes: list[int], slots: list[list[int]], passes: int) -> list[int]:
    """The parent of every group: parent p gets groups whose sizes are exactly ``slots[p]``.

    ``g``: the groups' weights (pinlab.graph.kernels.Weights)."""
    import numpy as np

    c = g.matrix
    m = len(sizes)
    if len(slots) == 1:
        return [0] * m
    if all(len(s) <= 2 for s in slots) and len(set(sizes)) == 1:
        return _by_matching(c, slots)
    arity = {len(s) for s in slots}
    if len(set(sizes)) == 1 and len(arity) == 1 and _ways(m, len(slots), arity.pop()) <= EXACT_MAX:
        return _exhaustive(c, len(slots), len(slots[0]))

    sizes_a = np.asarray(sizes)
    if m > RESTART_MAX:  # one start: the group with the most weight (which growth starts from anyway)
        return _grow(g, sizes_a, slots, None, -1, passes)
    total = c.sum(axis=1)
    starts = [int(x) for x in np.argsort(-total, kind="stable")[:RESTARTS]]
    best = None
    for first in starts:
        owner = _grow(g, sizes_a, slots, total, first, passes)
        score = inside_weight(g, owner)
        if best is None or score > best[0] + 1e-12 * max(1.0, abs(score)):
            best = (score, owner)
    return best[1]


def _grow(g, sizes_a, slots: list[list[int]], total, first: int, passes: int) -> list[int]:
    """Greedy growth (the first parent from group ``first`` when it fits), then swaps.

    Groups of one size (always so at the lowest level) grow in C (pinlab.graph.kernels.grow:
    a parent's room counted in groups); groups of several sizes here."""
    import numpy as np

    c = g.matrix
    m = len(sizes_a)
    # The largest parents first: a lone core must not take the best-connected thread of a cluster.
    order = sorted(range(len(slots)), key=lambda p: (-sum(slots[p]), p))
    if len(set(sizes_a.tolist())) == 1:
        owner = grow(g, [len(s) for s in slots], order, first=first)
        return refine(g, owner, sizes_a, passes=passes).tolist()
    if total is None:
        total = c.sum(axis=1)
    owner = np.full(m, -1, dtype=np.int64)
    free = np.ones(m, dtype=bool)
    for rank, p in enumerate(order):
        want = sorted(slots[p], reverse=True)
        remaining = {s: want.count(s) for s in set(want)}
        eligible = free & (sizes_a == want[0])
        seed = first if rank == 0 and first >= 0 and eligible[first] else int(np.argmax(np.where(eligible, total, -np.inf)))
        owner[seed] = p
        free[seed] = False
        remaining[sizes_a[seed]] -= 1
        pull = c[seed].copy()
        while any(remaining.values()):
            fits = free & np.isin(sizes_a, [s for s, k in remaining.items() if k > 0])
            x = int(np.argmax(np.where(fits, pull, -np.inf)))
            owner[x] = p
            free[x] = False
            remaining[sizes_a[x]] -= 1
            pull += c[x]
    return refine(g, owner, sizes_a, passes=passes).tolist()


def _ways(m: int, parents: int, arity: int) -> int:
    """The number of ways to split m groups into ``parents`` unordered sets of ``arity``."""
    if parents * arity != m:
        return EXACT_MAX + 1
    ways, left = 1, m
    for _ in range(parents):
        ways *= comb(left - 1, arity - 1)  # the lowest free group's companions
        left -= arity
    return ways


def _exhaustive(c, parents: int, arity: int) -> list[int]:
    """The grouping of ``parents * arity`` groups into sets of ``arity`` with the most weight inside.

    Each way is made once: a set always holds the lowest-numbered free group, and sets are numbered
    in that order (the parents are alike, so their order does not matter)."""
    m = parents * arity
    rows = [[float(x) for x in row] for row in c]
    best: list = [-1.0, None]
    chosen: list[tuple[int, ...]] = []

    def search(free: tuple[int, ...], score: float) -> None:
        if not free:
            if score > best[0]:
                best[0], best[1] = score, list(chosen)
            return
        head, rest = free[0], free[1:]
        for mates in combinations(rest, arity - 1):
            members = (head, *mates)
            inside = sum(rows[a][b] for i, a in enumerate(members) for b in members[i + 1 :])
            chosen.append(members)
            search(tuple(g for g in rest if g not in mates), score + inside)
            chosen.pop()

    search(tuple(range(m)), 0.0)
    owner = [0] * m
    for p, members in enumerate(best[1]):
        for g in members:
            owner[g] = p
    return owner


def _by_matching(c, slots: list[list[int]]) -> list[int]:
    """Groups of equal size into parents of one or two: the heaviest matched pairs into the pairs."""
    import numpy as np

    pairs = pair_threads(c)
    pairs.sort(key=lambda p: -c[p[0], p[1]] if len(p) == 2 else 1.0)
    twos = [p for p, s in enumerate(slots) if len(s) == 2]
    ones = [p for p, s in enumerate(slots) if len(s) == 1]
    owner = np.full(c.shape[0], -1, dtype=np.int64)
    whole = [p for p in pairs if len(p) == 2]
    for pair, parent in zip(whole, twos):
        owner[pair] = parent
    alone = [g for p in whole[len(twos) :] for g in p] + [g for p in pairs if len(p) == 1 for g in p]
    free = ones + [q for q in twos[len(whole) :] for _ in range(2)]
    for g, parent in zip(alone, free):
        owner[g] = parent
    return owner.tolist()
