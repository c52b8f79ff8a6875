"""Maximum-weight matching of an affinity graph: the pairs of threads that share the most.

Interim implementation on networkx (the reference); to be replaced by the compiled one.
"""
from __future__ import annotations

from typing import Sequence


def max_weight_matching(weights: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """Pairs (i < j) of a maximum-weight matching of the symmetric matrix ``weights``, sorted.

    Only pairs of positive weight are matched; threads left over are not paired here.
    """
    import networkx as nx

    g = nx.Graph()
    n = len(weights)
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from((i, j, weights[i][j]) for i in range(n) for j in range(i + 1, n) if weights[i][j] > 0)
    return sorted(tuple(sorted(p)) for p in nx.max_weight_matching(g))
