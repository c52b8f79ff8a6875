"""TreeMatch-style mapping: group threads level by level from the cores up, by each level's arity.

Given the tree of the chosen units (``pinlab.graph.mapping.Tree``), the threads are first grouped
into sets that fit the lowest objects (two per L2 shared by two cores, six per L3 shared by six),
keeping the heaviest affinity inside groups. Each group then becomes one vertex of a smaller graph
(weights summed between groups), and those vertices are grouped by the next level's arity, up to
the top. Every group is built to the size of the object it will occupy, so the result is a thread
for every unit.

Grouping one level:

- every parent holds two children of equal size (the common case of pairs): an exact
  maximum-weight matching, the heaviest pairs going to the parents;
- otherwise (arity 3, 4, 8 or more, or children of different sizes on irregular trees): greedy
  growth (a parent starts from the free group with the largest weight to the other free groups,
  then takes, while it has room, the free group that fits a free child slot and adds the most
  weight to it), followed by swaps of equal-size groups between parents while a swap raises the
  weight inside parents (pinlab.graph.partition.refine).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinlab.graph.mapping import Tree


def treematch(w, tree: "Tree", *, passes: int = 2) -> list[int]:
    """The thread on every unit position of ``tree`` (a permutation of range(n))."""
    import numpy as np

    n = len(tree.units)
    # Bottom-up list of levels: each a list of (start, end) ranges; the leaves are the units.
    bottom_up = [[(i, i + 1) for i in range(n)]] + list(reversed(tree.levels)) + [[(0, n)]]
    groups = [[t] for t in range(n)]  # thread lists, one per range of the current level, aligned
    coarse = np.asarray(w, dtype=np.float64)
    rows, cols = np.nonzero(coarse)
    values = coarse[rows, cols]
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
        # (one bincount over the non-zero weights).
        k = len(parent_level)
        group_of = np.asarray(owner)[group_of]
        coarse = np.bincount(group_of[rows] * k + group_of[cols], weights=values, minlength=k * k).reshape(k, k)
        np.fill_diagonal(coarse, 0.0)
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


def _group(c, sizes: list[int], slots: list[list[int]], passes: int) -> list[int]:
    """The parent of every group: parent p gets groups whose sizes are exactly ``slots[p]``."""
    import numpy as np

    m = len(sizes)
    if len(slots) == 1:
        return [0] * m
    if all(len(s) <= 2 for s in slots) and len(set(sizes)) == 1:
        return _by_matching(c, slots)
    owner = np.full(m, -1, dtype=np.int64)
    sizes_a = np.asarray(sizes)
    free = np.ones(m, dtype=bool)
    total = c.sum(axis=1)
    uniform = len(set(sizes)) == 1
    # The largest parents first: a lone core must not take the best-connected thread of a cluster.
    for p in sorted(range(len(slots)), key=lambda p: (-sum(slots[p]), p)):
        want = sorted(slots[p], reverse=True)
        remaining = {s: want.count(s) for s in set(want)}
        eligible = free & (sizes_a == want[0])
        seed = int(np.argmax(np.where(eligible, total, -np.inf)))
        owner[seed] = p
        free[seed] = False
        remaining[sizes_a[seed]] -= 1
        pull = c[seed].copy()
        while any(remaining.values()):
            fits = free if uniform else free & np.isin(sizes_a, [s for s, k in remaining.items() if k > 0])
            g = int(np.argmax(np.where(fits, pull, -np.inf)))
            owner[g] = p
            free[g] = False
            remaining[sizes_a[g]] -= 1
            pull += c[g]
    from pinlab.graph.partition import refine

    return refine(c, owner, sizes_a, passes=passes).tolist()


def _by_matching(c, slots: list[list[int]]) -> list[int]:
    """Groups of equal size into parents of one or two: the heaviest matched pairs into the pairs."""
    import numpy as np

    from pinlab.graph.mapping import pair_threads

    pairs = pair_threads(c)
    pairs.sort(key=lambda p: -c[p[0], p[1]] if len(p) == 2 else 1.0)
    twos = [p for p, s in enumerate(slots) if len(s) == 2]
    ones = [p for p, s in enumerate(slots) if len(s) == 1]
    owner = np.full(c.shape[0], -1, dtype=np.int64)
    whole = [p for p in pairs if len(p) == 2]
    for pair, parent in zip(whole, twos):
        owner[pair] = parent
    alone = [g for p in whole[len(twos):] for g in p] + [g for p in pairs if len(p) == 1 for g in p]
    free = ones + [q for q in twos[len(whole):] for _ in range(2)]
    for g, parent in zip(alone, free):
        owner[g] = parent
    return owner.tolist()
