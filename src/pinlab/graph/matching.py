"""Maximum-weight matching of an affinity graph: the pairs of threads that share the most.

The pairing strategies (lp-compact, lp-scatter, lpgp, gplp) put the two threads of each pair on
cores sharing a cache, so the pairs must be an exact optimum, and graphs of thousands of threads
must be matched quickly. The work is done by Edmonds' blossom algorithm compiled in C
(``native/graph/matching.c``, shipped as ``libpinlab-graph.so``) and called through ctypes;
networkx stays the reference the tests compare against.

Exactness: the C code works on 64-bit integers (vertex duals kept doubled, so every dual stays
integral). Weights that are all whole numbers up to 2**53 are used as they are, so the optimum is
exact. Otherwise (fractions, or larger numbers) the weights are scaled so that the largest becomes
2**40 and rounded to integers: each weight moves by at most 2**-41 of the largest one, so the
matching found is optimal for weights within that relative precision of the given ones (its
true weight is within ``n/2 * 2**-40`` times the largest weight of the optimum). A positive weight
below 2**-41 of the largest rounds to zero and is treated as no sharing at all.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any, Iterable, Sequence

from pinlab.errors import UsageError
from pinlab.native import native_path

EXACT_INTEGER_LIMIT = 2**53  # whole-number weights up to this are matched exactly
FLOAT_SCALE_BITS = 40  # other weights are scaled so that the largest becomes 2**FLOAT_SCALE_BITS

MAX_PAIRS = 2**30 - 1  # the C code numbers the ends of the pairs (2 per pair) with ints

Pair = tuple[int, int]


@functools.lru_cache(maxsize=1)
def _native_function():
    """The C entry point, loaded once (the library lives in pinlab/_native)."""
    library = ctypes.CDLL(str(native_path("libpinlab-graph.so")))
    function = library.pinlab_max_weight_matching
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return function


def _integer_weights(weights):
    """Weights as int64 (numpy): exact for whole numbers, else scaled (see the module's docstring)."""
    import numpy as np

    if weights.size == 0:
        return np.zeros(0, dtype=np.int64)
    top = float(weights.max())
    if top <= EXACT_INTEGER_LIMIT and bool(np.all(weights == np.floor(weights))):
        return weights.astype(np.int64)
    return np.rint(weights * (2.0**FLOAT_SCALE_BITS / top)).astype(np.int64)


def _check_weights(values, what: str) -> None:
    import numpy as np

    if not np.all(np.isfinite(values)):
        raise UsageError(f"matching: {what} has a weight that is not a finite number; give finite, non-negative weights")
    if values.size and float(values.min()) < 0:
        raise UsageError(f"matching: {what} has a negative weight ({float(values.min()):g}); weights must be non-negative")


def _match(n: int, u, v, w) -> list[Pair]:
    """Runs the C matching on the edge arrays (int32, int32, float64) and returns the sorted pairs."""
    import numpy as np

    wi = _integer_weights(w)
    keep = wi > 0  # only pairs that share something are matched
    u = np.ascontiguousarray(u[keep], dtype=np.int32)
    v = np.ascontiguousarray(v[keep], dtype=np.int32)
    wi = np.ascontiguousarray(wi[keep], dtype=np.int64)
    if len(wi) > MAX_PAIRS or n > MAX_PAIRS:
        raise UsageError(
            f"matching: {n} threads and {len(wi)} sharing pairs are more than the matching handles "
            f"({MAX_PAIRS} of each); drop the lightest pairs (max_weight_matching_edges takes a sparse list)"
        )
    mate = np.full(max(n, 1), -1, dtype=np.int32)
    if len(wi):
        rc = _native_function()(n, len(wi), u.ctypes.data, v.ctypes.data, wi.ctypes.data, mate.ctypes.data)
        if rc == -1:
            raise MemoryError(f"matching: out of memory for {n} threads and {len(wi)} pairs")
        if rc != 0:  # the inputs were checked here; the C code refusing them is a bug
            raise RuntimeError(f"matching: the native matching refused its input (status {rc})")
    return [(i, int(j)) for i, j in enumerate(mate[:n].tolist()) if j > i]


def max_weight_matching(weights: Sequence[Sequence[float]] | Any) -> list[Pair]:
    """Pairs (i < j) of a maximum-weight matching of the symmetric matrix ``weights``, sorted.

    ``weights`` is an AffinityGraph's matrix (list of rows, or a numpy array): square, symmetric,
    finite and non-negative. Only pairs of positive weight are matched; threads left over are not
    paired here (see :func:`perfect_pairs`). Exact for whole-number weights; see the module's
    docstring for fractional ones.
    """
    import numpy as np

    try:
        matrix = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError("matching: the weight matrix must be square rows of numbers, one row per thread") from None
    n = len(matrix)
    if n == 0:
        return []
    if matrix.ndim != 2 or matrix.shape != (n, n):
        raise UsageError(f"matching: the weight matrix must be square (got shape {matrix.shape}); give one row per thread")
    # One pass finds the positive pairs; the checks then look at those only: a negative or NaN
    # weight fails ``>= 0`` anywhere, and the matrix is symmetric when every positive weight equals
    # its mirror (a zero whose mirror is positive is caught from the mirror's side).
    if not bool((matrix >= 0).all()):
        _check_weights(matrix, "the weight matrix")
    i, j = np.nonzero(matrix > 0)
    w, mirror = matrix[i, j], matrix[j, i]
    if not np.isfinite(w).all():
        _check_weights(matrix, "the weight matrix")
    if not np.array_equal(w, mirror):
        # Sums of the same weights added in another order (a contracted graph) differ in the last
        # bits: those are symmetric for the matching's purpose; anything more is refused.
        if not np.allclose(w, mirror, rtol=1e-9, atol=0.0):
            raise UsageError("matching: the weight matrix is not symmetric; symmetrise it first (load_graph does)")
        w = np.maximum(w, mirror)
    upper = i < j
    return _match(n, i[upper], j[upper], w[upper])


def max_weight_matching_edges(n: int, edges: Iterable[tuple[int, int, float]]) -> list[Pair]:
    """Pairs (i < j) of a maximum-weight matching of the graph on threads 0..n-1 given by its edges.

    For sparse graphs: ``edges`` are ``(i, j, weight)`` triples (an AffinityGraph's ``edges()``),
    so thousands of threads are matched without a dense matrix. A pair may be listed in both
    directions only with the same weight; weights must be finite and non-negative; zero-weight
    edges are ignored.
    """
    import numpy as np

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise UsageError(f"matching: the thread count must be a non-negative integer (got {n!r})")
    rows = edges if isinstance(edges, np.ndarray) else list(edges)  # an (m, 3) array is taken as it is
    if len(rows) == 0:
        return []
    try:
        table = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError("matching: each edge must be three numbers (i, j, weight)") from None
    if table.ndim != 2 or table.shape[1] != 3:
        raise UsageError("matching: each edge must be three numbers (i, j, weight)")
    ends, w = table[:, :2], table[:, 2]
    if not np.all(ends == np.floor(ends)) or float(ends.min()) < 0 or float(ends.max()) >= n:
        raise UsageError(f"matching: edge ends must be thread numbers from 0 to {n - 1}")
    _check_weights(w, "the edge list")
    i = ends.min(axis=1).astype(np.int64)
    j = ends.max(axis=1).astype(np.int64)
    if np.any(i == j):
        raise UsageError(f"matching: edge ({int(i[i == j][0])}, {int(i[i == j][0])}) joins a thread to itself; remove it")
    key = i * n + j
    order = np.argsort(key, kind="stable")
    key, i, j, w = key[order], i[order], j[order], w[order]
    repeat = np.nonzero(key[1:] == key[:-1])[0]
    if len(repeat):
        clash = repeat[w[repeat + 1] != w[repeat]]
        if len(clash):
            a, b = int(i[clash[0]]), int(j[clash[0]])
            raise UsageError(f"matching: pair ({a}, {b}) is listed twice with different weights; list each pair once")
        first = np.ones(len(key), dtype=bool)
        first[repeat + 1] = False
        i, j, w = i[first], j[first], w[first]
    return _match(n, i, j, w)


def matching_weight(weights: Sequence[Sequence[float]], pairs: Iterable[Pair]) -> float:
    """Total weight of ``pairs`` in the matrix ``weights`` (for reports and checks)."""
    return math.fsum(float(weights[i][j]) for i, j in pairs)


def perfect_pairs(weights: Sequence[Sequence[float]] | Any) -> tuple[list[Pair], int | None]:
    """A pairing of all threads of maximum total weight, and the thread left alone (n odd) or None.

    The maximum-weight matching is completed by pairing the threads it left over in index order
    (with n odd, the last of them stays alone). Why this is optimal for non-negative weights:
    every pairing is a matching, so none weighs more than the maximum-weight matching; and two
    left-over threads never share anything (otherwise adding their pair would give a heavier
    matching), so the added pairs weigh zero and the pairing has exactly the maximum weight.
    """
    pairs = max_weight_matching(weights)
    n = len(weights)
    matched = {t for pair in pairs for t in pair}
    left = [t for t in range(n) if t not in matched]
    alone = left.pop() if n % 2 else None
    pairs.extend((left[k], left[k + 1]) for k in range(0, len(left), 2))
    return sorted(pairs), alone
