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

from pinlab.graph.kernels import Weights, group_sums, grow, heaviest, unique, weights_of
from pinlab.graph.kernels import inside_weight as weight_inside
from pinlab.graph.kernels import refine as refine_native

#: METIS takes integer edge weights; float weights are scaled so that the largest is this.
_INT_SCALE = 1_000_000


def partition(weights, sizes: Sequence[int], *, vsize: Sequence[int] | None = None, seed: int = 0, passes: int = 3) -> list[int]:
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
    g = Weights(w)  # dense, or the non-zero entries found once (every pass sums over them)
    for start in (_initial(g, live_sizes, vs, seed), _grow(g, live_sizes, vs)):
        parts = refine(g, repair(g, start, live_sizes, vs), vs, passes=passes)
        score = weight_inside(g, parts)
        if best is None or score > best[0]:
            best = (score, parts)
    parts = best[1]
    mapping = np.array(live, dtype=np.int64)
    return mapping[parts].tolist()


#: On a dense graph (see pinlab.graph.kernels.DENSE_FRACTION) of more than METIS_ALL_PAIRS
#: vertices, METIS is given each vertex's METIS_NEIGHBOURS heaviest pairs rather than all n^2 / 2:
#: it finds the structure there (the repair and swap passes that follow see every weight) in a
#: fraction of the time (1024 dense threads: 55 ms -> 20 ms, with the edge list).
METIS_NEIGHBOURS = 16
METIS_ALL_PAIRS = 256


def _metis_edges(g):
    """(rows, cols, values) for METIS: the non-zero entries, off the diagonal; on a large dense
    graph, each vertex's METIS_NEIGHBOURS heaviest pairs (either end's choice keeps a pair, both ways)."""
    import numpy as np

    n = g.n
    if g.dense is None:
        rows = np.repeat(np.arange(n), np.diff(g.indptr))
        cols, values = g.indices.astype(np.int64), g.data
    elif n > max(METIS_ALL_PAIRS, 2 * METIS_NEIGHBOURS):
        w = g.dense
        k = METIS_NEIGHBOURS
        rows = np.repeat(np.arange(n), k)
        cols = heaviest(w, k).ravel().astype(np.int64)
        rows, cols = rows[cols >= 0], cols[cols >= 0]
        key = unique(np.concatenate((rows * n + cols, cols * n + rows)))  # both ways, in row-major order
        rows, cols = key // n, key % n
        values = w[rows, cols]
    else:
        rows, cols = np.nonzero(g.dense)
        values = g.dense[rows, cols]
    keep = (rows != cols) & (values > 0)
    return rows[keep], cols[keep], values[keep]


def _initial(g, sizes: list[int], vs, seed: int):
    """METIS's partition into len(sizes) parts with target fractions sizes/total."""
    import numpy as np

    n = g.n
    k = len(sizes)
    rows, cols, values = _metis_edges(g)
    if rows.size == 0 or n < 2 * k:
        # No weight to go by, or too few vertices for METIS (it refuses more parts than vertices):
        # an exact fill in order, which the repair and swap passes then improve.
        return _fill_in_order(sizes, vs)
    import pymetis

    scale = _INT_SCALE / values.max()
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
        k,
        pymetis.CSRAdjacency(xadj, np.ascontiguousarray(cols, dtype=np.int64)),
        eweights=np.ascontiguousarray(ints, dtype=np.int64),
        vweights=np.ascontiguousarray(vs, dtype=np.int64),
        tpwgts=[s / total_size for s in sizes],
        options=options,
    ).vertex_part
    return np.asarray(membership, dtype=np.int64)


def _grow(g, sizes: list[int], vs):
    """Greedy growth: the largest part first takes the free vertex with the most weight, then,
    while it has room, the free vertex most drawn to it; the next part likewise (in C,
    pinlab.graph.kernels.grow)."""
    import numpy as np

    order = sorted(range(len(sizes)), key=lambda p: -sizes[p])
    parts = grow(g, sizes, order, vs)
    parts[parts < 0] = int(np.argmax(sizes))  # vertices too big for the room left anywhere
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


def repair(w, parts, sizes: list[int], vs):
    """Move vertices out of over-full parts until every part has exactly its size (when sizes allow).

    Each move takes, over all (vertex of an over-full part, part with room for it), the one
    whose weight to its new part minus weight to its old part is largest (the first vertex, then
    the first part, among equals). ``w``: a matrix or a pinlab.graph.kernels.Weights.
    """
    import numpy as np

    parts = np.array(parts, dtype=np.int64)
    k = len(sizes)
    target = np.asarray(sizes, dtype=np.int64)
    load = np.bincount(parts, weights=vs, minlength=k).astype(np.int64)
    if not (load > target).any():
        return parts
    g = weights_of(w)
    m = g.matrix
    conn = group_sums(g, parts, k)
    while True:
        over = np.nonzero(load > target)[0]
        if over.size == 0:
            return parts
        room = target - load
        movable = np.nonzero(np.isin(parts, over))[0]
        fits = room[None, :] >= vs[movable][:, None]
        gains = np.where(fits, conn[movable] - conn[movable, parts[movable]][:, None], -np.inf)
        flat = int(np.argmax(gains))
        if not np.isfinite(gains.flat[flat]):  # sizes do not allow an exact fit (a pair for a part of one): as close as it gets
            return parts
        v, q = int(movable[flat // k]), flat % k
        p = parts[v]
        column = m[:, v]
        conn[:, p] -= column
        conn[:, q] += column
        load[p] -= vs[v]
        load[q] += vs[v]
        parts[v] = q


def refine(w, parts, vs=None, *, passes: int = 3):
    """Swaps of two vertices of equal size between parts while a swap raises the inside weight.

    For each vertex, the part it is most drawn to is tried: the partner there that gives the
    largest gain (its own pull back, minus twice their common weight, which both lose) is swapped
    with it when the gain is positive. Sizes of parts never change. The loop runs in C
    (pinlab.graph.kernels.refine); ``w`` is a symmetric matrix or a kernels.Weights.
    """
    return refine_native(w, parts, vs, passes=passes)


def inside_weight(weights, parts: Sequence[int]) -> float:
    """The total weight of pairs whose two vertices are in the same part (each pair once)."""
    return weight_inside(weights, parts)
