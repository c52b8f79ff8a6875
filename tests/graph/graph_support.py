"""Graphs with a planted structure for the graph tests: known heaviest pairs over random noise."""

from __future__ import annotations

import json
import random
from pathlib import Path

from pinlab.graph.model import AffinityGraph


def planted_graph(threads: int, pairs: list[tuple[int, int, float]], *, noise: float = 10.0, seed: int = 1) -> AffinityGraph:
    """Noise in 0..noise on every pair (whole numbers, some zero), the planted pairs' weights on top."""
    rng = random.Random(seed)
    weights = [[0.0] * threads for _ in range(threads)]
    for i in range(threads):
        for j in range(i + 1, threads):
            weights[i][j] = weights[j][i] = float(rng.randint(0, int(noise)))
    for i, j, w in pairs:
        weights[i][j] = weights[j][i] = float(w)
    return AffinityGraph(weights=weights)


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def tree_levels(topo, cpus):
    """An independent cost's distances: between each two of ``cpus``, how many levels of the tree
    lie between a PU and the lowest object that holds both (0 for the same PU).

    Written from the tree alone, nothing shared with pinlab.placement.cost."""
    import numpy as np

    def ancestors(cpu):
        chain, obj = [], topo.pu(cpu)
        while obj is not None:
            chain.append(obj)
            obj = obj.parent
        return chain

    chains = [ancestors(c) for c in cpus]
    members = [{id(o) for o in chain} for chain in chains]
    d = np.zeros((len(cpus), len(cpus)))
    for i, a in enumerate(chains):
        for j, inside_b in enumerate(members):
            if i != j:
                d[i, j] = next(k for k, o in enumerate(a) if id(o) in inside_b)
    return d


def independent_cost(topo, w, cpus) -> float:
    """sum over pairs i < j of w[i][j] x tree levels up to the lowest common ancestor of their CPUs."""
    import numpy as np

    w = np.asarray(w, dtype=float)
    return float((w * tree_levels(topo, cpus)).sum() / 2)


def exhaustive_optimum(topo, w, cpus) -> float:
    """The lowest independent cost of the threads of ``w`` on the CPUs ``cpus``, over every permutation."""
    import itertools

    import numpy as np

    w = np.asarray(w, dtype=float)
    d = tree_levels(topo, cpus)
    perms = np.array(list(itertools.permutations(range(len(cpus)))))
    best = np.inf
    for chunk in np.array_split(perms, max(1, len(perms) // 5000)):
        costs = (d[chunk[:, :, None], chunk[:, None, :]] * w).sum(axis=(1, 2)) / 2
        best = min(best, float(costs.min()))
    return best


def groups_and_stencil(n: int, seed: int):
    """A dense graph with structure at several sizes, none of it the machine's: groups of 8 and of
    32 threads sharing inside, a 2-D stencil, 2% noise, threads shuffled (also bench/bench_quality.py's)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    w = np.zeros((n, n))
    for size, weight in ((8, 60.0), (32, 15.0)):
        labels = np.arange(n) // size
        w[labels[:, None] == labels[None, :]] += weight
    side = int(np.sqrt(n))
    for i in range(n):
        r, c = divmod(i, side)
        for j in (i + 1 if c + 1 < side else -1, i + side if r + 1 < side else -1):
            if 0 <= j < n:
                w[i, j] += 10.0
    w += (rng.random((n, n)) < 0.02) * rng.random((n, n)) * 5.0
    w = w + w.T
    np.fill_diagonal(w, 0)
    perm = rng.permutation(n)
    return w[np.ix_(perm, perm)]
