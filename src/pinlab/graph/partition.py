"""k-way partitioning of an affinity graph into parts of exactly given sizes.

The goal is the largest total weight inside parts (the smallest cut). METIS (through pymetis)
finds a good partition but balances part sizes only approximately, while a part here is a set of
cores: a part one thread too big would put two threads on a core. So METIS's answer is repaired
(vertices moved from over-full to under-full parts, the move that loses the least weight first)
and then improved by a short pass of swaps between parts, which keep sizes exact.

Vertices may carry a size (``vsize``: a pair of threads counts 2); then part sizes count size.
"""
from __future__ import annotations

from typing import Sequence

#: METIS takes integer edge weights; float weights are scaled so that the largest is this.
_INT_SCALE = 1_000_000


def partition(weights, sizes: Sequence[int], *, vsize: Sequence[int] | None = None, seed: int = 0,
              passes: int = 3) -> list[int]:
    """The part of every vertex: part p holds vertices whose sizes add up to ``sizes[p]``.

    ``weights`` is a symmetric non-negative matrix (anything numpy takes). Parts of size 0 get
    nothing; with one non-empty part, or no edge at all, any exact split is optimal and METIS is
    not called. With vertex sizes other than 1, an exact split may be impossible (sizes 2 into
    parts of 3): some parts are then left over or under by the odd vertex, for the caller to
    settle (lpgp splits a pair); a ValueError says when the sizes cannot add up.
    """
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[0]
    vs = np.ones(n, dtype=np.int64) if vsize is None else np.asarray(vsize, dtype=np.int64)
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != int(vs.sum()):
        raise ValueError(f"part sizes {sizes} do not add up to the graph's {int(vs.sum())}")
    live = [p for p, s in enumerate(sizes) if s > 0]
    if len(live) <= 1 or n == 0:
        return [live[0] if live else 0] * n
    live_sizes = [sizes[p] for p in live]
    best = None
    # Two starts, each repaired and improved, the better kept: METIS's, and greedy growth (which
    # gets unequal sizes right where METIS may give a big group's place to a smaller part).
    edges = _edges(w)  # the non-zero entries, found once (every pass sums over them)
    for start in (_initial(w, live_sizes, vs, seed, edges), _grow(w, live_sizes, vs)):
        parts = refine(w, _repair(w, start, live_sizes, vs, edges), vs, passes=passes, edges=edges)
        score = float(edges[2][parts[edges[0]] == parts[edges[1]]].sum())
        if best is None or score > best[0]:
            best = (score, parts)
    parts = best[1]
    mapping = np.array(live, dtype=np.int64)
    return mapping[parts].tolist()


def _edges(w):
    """(rows, cols, values) of the non-zero entries of ``w``."""
    import numpy as np

    rows, cols = np.nonzero(w)
    return rows, cols, w[rows, cols]


def _initial(w, sizes: list[int], vs, seed: int, edges=None):
    """METIS's partition into len(sizes) parts with target fractions sizes/total."""
    import numpy as np

    n = w.shape[0]
    k = len(sizes)
    rows, cols, values = edges if edges is not None else _edges(w)
    if not (rows != cols).any() or n < 2 * k:
        # No weight to go by, or too few vertices for METIS (it refuses more parts than vertices):
        # an exact fill in order, which the repair and swap passes then improve.
        return _fill_in_order(sizes, vs)
    import pymetis

    scale = _INT_SCALE / w.max()
    keep = rows != cols
    rows, cols, values = rows[keep], cols[keep], values[keep]
    ints = np.maximum(1, np.rint(values * scale)).astype(np.int64)
    # Keep the total well inside METIS's 32-bit integers.
    total = ints.sum()
    if total > 2**30:
        ints = np.maximum(1, ints * (2**30 / total)).astype(np.int64)
    xadj = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n)))).astype(np.int64)
    total_size = float(sum(sizes))
    options = pymetis.Options(seed=seed)
    # numpy arrays go to METIS as they are (lists of a million edges cost more than METIS itself).
    membership = pymetis.part_graph(
        k, pymetis.CSRAdjacency(xadj, np.ascontiguousarray(cols, dtype=np.int64)), eweights=np.ascontiguousarray(ints, dtype=np.int64),
        vweights=np.ascontiguousarray(vs, dtype=np.int64), tpwgts=[s / total_size for s in sizes], options=options,
    ).vertex_part
    return np.asarray(membership, dtype=np.int64)


def _grow(w, sizes: list[int], vs):
    """Greedy growth: the largest part first takes the free vertex with the most weight, then,
    while it has room, the free vertex most drawn to it; the next part likewise."""
    import numpy as np

    n = w.shape[0]
    parts = np.full(n, -1, dtype=np.int64)
    free = np.ones(n, dtype=bool)
    total = w.sum(axis=1)
    for p in sorted(range(len(sizes)), key=lambda p: -sizes[p]):
        room = sizes[p]
        pull = np.zeros(n)
        first = True
        while room > 0:
            fits = free & (vs <= room)
            if not fits.any():
                break
            v = int(np.argmax(np.where(fits, total if first else pull, -np.inf)))
            first = False
            parts[v] = p
            free[v] = False
            room -= int(vs[v])
            pull += w[v]
    for v in np.nonzero(parts < 0)[0]:  # vertices too big for the room left anywhere
        parts[v] = int(np.argmax([s for s in sizes]))
    return parts


def _fill_in_order(sizes: list[int], vs):
    """Vertices in order into parts in order (when there is no weight to go by)."""
    import numpy as np

    parts = np.empty(len(vs), dtype=np.int64)
    p, room = 0, list(sizes)
    for v in range(len(vs)):
        while p < len(room) - 1 and room[p] < vs[v]:
            p += 1
        if room[p] < vs[v]:  # does not fit whole anywhere from here: the most room left
            p = int(np.argmax(room))
        parts[v] = p
        room[p] -= int(vs[v])
    return parts


def _repair(w, parts, sizes: list[int], vs, edges=None):
    """Move vertices out of over-full parts until every part has exactly its size (when sizes allow).

    Each move takes, over all (vertex of an over-full part, part with room for it), the one
    whose weight to its new part minus weight to its old part is largest.
    """
    import numpy as np

    k = len(sizes)
    target = np.asarray(sizes, dtype=np.int64)
    load = np.bincount(parts, weights=vs, minlength=k).astype(np.int64)
    conn = _connections(w, parts, k, edges)
    while True:
        over = np.nonzero(load > target)[0]
        if over.size == 0:
            return parts
        room = target - load
        movable = np.nonzero(np.isin(parts, over))[0]
        best = None
        for v in movable:
            fits = room >= vs[v]
            if not fits.any():
                continue
            gains = np.where(fits, conn[v] - conn[v, parts[v]], -np.inf)
            q = int(np.argmax(gains))
            if best is None or gains[q] > best[0]:
                best = (gains[q], int(v), q)
        if best is None:  # vertex sizes do not allow an exact fit (a pair for a part of one): as close as it gets
            return parts
        _, v, q = best
        p = parts[v]
        conn[:, p] -= w[:, v]
        conn[:, q] += w[:, v]
        load[p] -= vs[v]
        load[q] += vs[v]
        parts[v] = q


def _connections(w, parts, k: int, edges=None):
    """conn[v, p]: the weight between vertex v and the vertices of part p.

    Summed over the non-zero entries with one bincount (graphs are sparse in practice, and a
    dense product with a one-hot matrix is slow where BLAS has one core)."""
    import numpy as np

    n = w.shape[0]
    rows, cols, values = edges if edges is not None else _edges(w)
    flat = np.bincount(rows * k + np.asarray(parts)[cols], weights=values, minlength=n * k)
    return flat.reshape(n, k).astype(np.float64, copy=False)


def refine(w, parts, vs=None, *, passes: int = 3, edges=None):
    """Swaps of two vertices of equal size between parts while a swap raises the inside weight.

    For each vertex, the part it is most drawn to is tried: the partner there that gives the
    largest gain (its own pull back, minus twice their common weight, which both lose) is swapped
    with it when the gain is positive. Sizes of parts never change.
    """
    import numpy as np

    n = w.shape[0]
    if n < 2:
        return parts
    vs = np.ones(n, dtype=np.int64) if vs is None else np.asarray(vs)
    k = int(parts.max()) + 1
    conn = _connections(w, parts, k, edges)
    rows = np.arange(n)
    for _ in range(passes):
        improved = False
        for u in range(n):
            p = parts[u]
            pull = conn[u] - conn[u, p]
            pull[p] = -np.inf
            q = int(np.argmax(pull))
            if pull[q] <= 0:
                continue
            cand = rows[(parts == q) & (vs == vs[u])]
            if cand.size == 0:
                continue
            gains = pull[q] + conn[cand, p] - conn[cand, q] - 2 * w[u, cand]
            best = int(np.argmax(gains))
            if gains[best] <= 1e-12 * max(1.0, abs(pull[q])):
                continue
            v = int(cand[best])
            conn[:, p] += w[:, v] - w[:, u]
            conn[:, q] += w[:, u] - w[:, v]
            parts[u], parts[v] = q, p
            improved = True
        if not improved:
            break
    return parts


def inside_weight(weights, parts: Sequence[int]) -> float:
    """The total weight of pairs whose two vertices are in the same part (each pair once)."""
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    p = np.asarray(parts)
    rows, cols, values = _edges(w)
    return float(values[p[rows] == p[cols]].sum() / 2)
