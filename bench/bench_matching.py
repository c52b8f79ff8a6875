#!/usr/bin/env python3
"""How long the exact maximum-weight matching takes, next to networkx's in the same run.

Run by hand: ``.venv/bin/python bench/bench_matching.py [--quick] [--nx-dense-max N] [--nx-sparse-max N]``.
Not a test: it asserts nothing about time and always exits 0 unless the two matchings disagree
on the optimum weight (exit 1: that is a bug, not a slow machine). It prints a table.

Graphs (threads n = 64, 256, 512, 1024, 4096; integer weights, so both optima are exact):

- dense: every pair shares a random amount 0..999 (about half a million pairs at 1024);
- sparse: threads on a 2D grid sharing with their 4 stencil neighbours (heavy: 500..999) plus
  3 random partners each (light: 1..99), the structure of a halo-exchange program.

For each graph: pinlab's compiled matching (``max_weight_matching`` on the dense matrix,
``max_weight_matching_edges`` on the sparse edge list; the time includes the conversion from
Python), then networkx's ``max_weight_matching`` where it finishes in reasonable time: it is
O(n^3) in pure Python (tens of seconds at 512 dense threads, minutes at 1024), so it is skipped
above --nx-dense-max (512) dense and --nx-sparse-max (1024) sparse threads. The target of issue
11: at least 100x faster than networkx at 512 threads with the same optimum weight.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time

from pinlab.graph.matching import max_weight_matching, max_weight_matching_edges


def dense_graph(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    upper = np.triu(rng.integers(0, 1000, size=(n, n)), 1)
    matrix = upper + upper.T
    edges = [(int(i), int(j), int(matrix[i, j])) for i, j in zip(*np.nonzero(upper))]
    return matrix, edges


def stencil_graph(n: int, seed: int, partners: int = 3):
    """Edges of a 2D stencil over a near-square grid plus a few random partners per thread."""
    rng = random.Random(seed)
    cols = int(math.sqrt(n))
    while n % cols:
        cols -= 1
    weights: dict[tuple[int, int], int] = {}
    for t in range(n):
        r, c = divmod(t, cols)
        neighbours = ([t + cols] if t + cols < n else []) + ([t + 1] if c + 1 < cols else [])
        for other in neighbours:
            weights[(t, other)] = rng.randint(500, 999)
        for _ in range(partners):
            other = rng.randrange(n)
            if other != t:
                key = (min(t, other), max(t, other))
                weights.setdefault(key, rng.randint(1, 99))
    return [(i, j, w) for (i, j), w in weights.items()]


def weight_of(pairs, lookup) -> int:
    return sum(lookup[(min(i, j), max(i, j))] for i, j in pairs)


def timed(function, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def networkx_matching(n: int, edges):
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from(edges)
    start = time.perf_counter()
    pairs = nx.max_weight_matching(g)
    return time.perf_counter() - start, [tuple(p) for p in pairs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64, 256 and 512 threads only")
    parser.add_argument("--sizes", default=None, help="comma-separated thread counts (default 64,256,512,1024,4096)")
    parser.add_argument("--nx-dense-max", type=int, default=512, help="largest dense graph given to networkx")
    parser.add_argument("--nx-sparse-max", type=int, default=1024, help="largest sparse graph given to networkx")
    args = parser.parse_args()
    sizes = [64, 256, 512] if args.quick else [64, 256, 512, 1024, 4096]
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]

    print(f"{'graph':<8} {'threads':>7} {'pairs(edges)':>12} {'pinlab s':>10} {'networkx s':>11} {'speed-up':>9}  optimum")
    failed = False
    ratios = {}
    for kind in ("dense", "sparse"):
        for n in sizes:
            if kind == "dense":
                matrix, edges = dense_graph(n, n)
                run = lambda: max_weight_matching(matrix)  # noqa: E731
            else:
                edges = stencil_graph(n, n)
                run = lambda: max_weight_matching_edges(n, edges)  # noqa: E731
            lookup = {(i, j): w for i, j, w in edges}
            repeats = 3 if n <= 1024 else 1
            ours_s, pairs = timed(run, repeats)
            ours_w = weight_of(pairs, lookup)
            cap = args.nx_dense_max if kind == "dense" else args.nx_sparse_max
            if n <= cap:
                nx_s, nx_pairs = networkx_matching(n, edges)
                nx_w = weight_of(nx_pairs, lookup)
                same = "equal" if nx_w == ours_w else f"DIFFERENT (networkx {nx_w})"
                failed |= nx_w != ours_w
                ratio = nx_s / ours_s
                ratios[(kind, n)] = ratio
                nx_text, ratio_text = f"{nx_s:11.3f}", f"{ratio:8.0f}x"
            else:
                nx_text, ratio_text, same = f"{'skipped':>11}", f"{'-':>9}", f"(networkx skipped above {cap} {kind} threads: O(n^3) in Python)"
            print(f"{kind:<8} {n:>7} {len(edges):>12} {ours_s:10.4f} {nx_text} {ratio_text}  {ours_w} {same}", flush=True)
    for kind in ("dense", "sparse"):
        if (kind, 512) in ratios:
            verdict = "PASS" if ratios[(kind, 512)] >= 100 else "MISS"
            print(f"target at 512 threads ({kind}): >= 100x faster than networkx, same optimum: {ratios[(kind, 512)]:.0f}x {verdict}")
    if failed:
        print("the optima differ: a bug in one of the matchings", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
