"""The inner loops of partitioning and treematch, in C (``native/graph/refine.c``, in the same
``libpinlab-graph.so`` as the matching), called through ctypes.

A Python loop over the vertices of a 1024-thread graph, each step a few numpy calls, cost more
than the arithmetic it drives (the swap pass of :func:`pinlab.graph.partition.refine` alone took
80 ms of a dense 1024-thread mapping). The C functions take the weights as :class:`Weights`: the
dense matrix itself when most pairs share something (no edge list of a million entries to build),
else CSR arrays of the non-zero entries.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

from pinlab.native import native_path

#: A matrix with more than this fraction of non-zero entries is handed to C dense, else as CSR.
DENSE_FRACTION = 0.25

_P = ctypes.c_void_p


@functools.lru_cache(maxsize=1)
def _library():
    library = ctypes.CDLL(str(native_path("libpinlab-graph.so")))
    library.pinlab_group_sums.restype = None
    library.pinlab_group_sums.argtypes = [ctypes.c_int, _P, _P, _P, _P, _P, _P, ctypes.c_int, ctypes.c_int, _P]
    library.pinlab_refine.restype = ctypes.c_int
    library.pinlab_refine.argtypes = [ctypes.c_int, _P, _P, _P, _P, _P, ctypes.c_int, _P, ctypes.c_int]
    library.pinlab_heaviest.restype = None
    library.pinlab_heaviest.argtypes = [ctypes.c_int, _P, ctypes.c_int, _P]
    library.pinlab_grow.restype = ctypes.c_int
    library.pinlab_grow.argtypes = [ctypes.c_int, _P, _P, _P, _P, _P, ctypes.c_int, _P, _P, ctypes.c_int, _P]
    return library


def _pointer(array) -> int | None:
    return None if array is None else array.ctypes.data


class Weights:
    """A symmetric non-negative weight matrix as the C functions take it (dense or CSR).

    ``edges``: the non-zero entries (rows, cols, values) in row-major order, as numpy.nonzero gives
    them, when the caller has them already (they are then used for CSR)."""

    def __init__(self, w, edges=None) -> None:
        import numpy as np

        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"a square weight matrix is needed, not one of shape {w.shape}")
        self.n = n = w.shape[0]
        self.matrix = w
        self.dense = None
        self.indptr = self.indices = self.data = None
        nonzero = edges[0].size if edges is not None else int(np.count_nonzero(w))
        if nonzero > DENSE_FRACTION * n * n:
            self.dense = np.ascontiguousarray(w)
        else:
            rows, cols, values = edges if edges is not None else (*np.nonzero(w), None)
            if values is None:
                values = w[rows, cols]
            self.indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n)))).astype(np.int64)
            self.indices = np.ascontiguousarray(cols, dtype=np.int32)
            self.data = np.ascontiguousarray(values, dtype=np.float64)
        self.nonzero = nonzero

    def _args(self) -> tuple:
        return (self.n, _pointer(self.dense), _pointer(self.indptr), _pointer(self.indices), _pointer(self.data))


def weights_of(w) -> Weights:
    return w if isinstance(w, Weights) else Weights(w)


def _labels(values, n: int, k: int, what: str):
    """``values`` as a contiguous int64 array of n labels in [0, k): the C functions index with
    them unchecked, so a wrong caller gets an error here instead of memory written out of bounds."""
    import numpy as np

    labels = np.ascontiguousarray(values, dtype=np.int64)
    if labels.shape != (n,):
        raise ValueError(f"{what}: {labels.shape} labels for {n} vertices")
    if n and (int(labels.min()) < 0 or int(labels.max()) >= k):
        raise ValueError(f"{what}: labels must lie in [0, {k}), got [{int(labels.min())}, {int(labels.max())}]")
    return labels


def _sizes(vs, n: int, what: str):
    import numpy as np

    sizes = np.ones(n, dtype=np.int64) if vs is None else np.ascontiguousarray(vs, dtype=np.int64)
    if sizes.shape != (n,):
        raise ValueError(f"{what}: {sizes.shape} vertex sizes for {n} vertices")
    return sizes


def group_sums(w, col_label, k: int, row_label=None, kr: int | None = None):
    """Sums of weights by group: with ``row_label`` None, an n x k matrix (vertex v's weight to
    the vertices labelled p); else the kr x k matrix of the graph contracted to its groups."""
    import numpy as np

    g = weights_of(w)
    kr = g.n if row_label is None else int(kr if kr is not None else k)
    cols = _labels(col_label, g.n, k, "group_sums")
    rows = None if row_label is None else _labels(row_label, g.n, kr, "group_sums")
    out = np.empty((kr, k), dtype=np.float64)
    _library().pinlab_group_sums(*g._args(), _pointer(rows), cols.ctypes.data, kr, k, out.ctypes.data)
    return out


def refine(w, parts, vs=None, *, passes: int = 3):
    """Swaps between parts while one raises the weight inside parts (see
    :func:`pinlab.graph.partition.refine`); returns the new parts (int64 array)."""
    import numpy as np

    g = weights_of(w)
    out = np.array(parts, dtype=np.int64)
    if g.n < 2 or passes < 1:
        return out
    k = int(out.max()) + 1
    out = np.array(_labels(out, g.n, k, "refine"))
    sizes = _sizes(vs, g.n, "refine")
    if _library().pinlab_refine(*g._args(), sizes.ctypes.data, k, out.ctypes.data, passes) < 0:
        raise MemoryError(f"refine: out of memory for {g.n} vertices and {k} parts")
    return out


def grow(w, room: Sequence[int], order: Sequence[int], vs=None, first: int = -1):
    """Greedy growth of parts (see :func:`pinlab.graph.partition._grow`): parts taken in
    ``order``, part p filled to ``room[p]``; the first part starts from ``first`` when it fits.
    Vertices that fit nowhere get -1."""
    import numpy as np

    g = weights_of(w)
    sizes = _sizes(vs, g.n, "grow")
    rooms = np.ascontiguousarray(room, dtype=np.int64)
    ranks = np.ascontiguousarray(order, dtype=np.int32)
    if rooms.ndim != 1 or ranks.ndim != 1 or (ranks.size and (int(ranks.min()) < 0 or int(ranks.max()) >= rooms.size)):
        raise ValueError(f"grow: the order must name parts among the {rooms.size} rooms")
    if not -1 <= first < g.n:
        raise ValueError(f"grow: first vertex {first} is not among the {g.n}")
    out = np.empty(g.n, dtype=np.int64)
    if _library().pinlab_grow(*g._args(), sizes.ctypes.data, len(ranks), ranks.ctypes.data, rooms.ctypes.data, int(first), out.ctypes.data) < 0:
        raise MemoryError(f"grow: out of memory for {g.n} vertices")
    return out


def heaviest(w, k: int):
    """Each row's k heaviest positive weights off the diagonal of the dense matrix ``w``: an n x k
    array of their columns, heaviest first, -1 where a row has fewer."""
    import numpy as np

    m = np.ascontiguousarray(w, dtype=np.float64)
    n = m.shape[0]
    if m.shape != (n, n):
        raise ValueError(f"heaviest: a square matrix is needed, not {m.shape}")
    out = np.empty((n, max(k, 0)), dtype=np.int32)
    if n and k > 0:
        _library().pinlab_heaviest(n, m.ctypes.data, k, out.ctypes.data)
    return out


def unique(keys):
    """The distinct values of an integer array, sorted (np.unique by sorting: numpy 2's default
    hashing took 6 ms for 32,000 pair keys, a sort 1 ms)."""
    import numpy as np

    keys = np.sort(np.asarray(keys), kind="stable")
    if keys.size < 2:
        return keys
    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]


def inside_weight(w, parts) -> float:
    """The total weight of pairs inside parts (each pair once)."""
    import numpy as np

    p = np.asarray(parts, dtype=np.int64)
    if p.size == 0:
        return 0.0
    conn = group_sums(w, p, int(p.max()) + 1)
    return float(conn[np.arange(p.size), p].sum() / 2)
