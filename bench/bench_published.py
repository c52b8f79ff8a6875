#!/usr/bin/env python3
"""Graph strategies on communication matrices measured by others (the published matrices).

For each NAS-MPI matrix that EagerMap ships (32 and 64 processes, see bench/published_matrices.py),
every strategy maps it onto a synthetic machine of as many cores, and its cost (pinlab's cost
model: weight x distance over all pairs) is printed relative to the lowest cost any strategy
found. Where the instance is small enough to enumerate, the exhaustive optimum is the reference
instead: the first 8 processes of each matrix on an 8-core machine (2 packages x 2 L2 pairs),
every one of the 8! placements priced at once with numpy.

EagerMap's repository publishes no mapping of these matrices, so there is no "EagerMap" column:
``published_mapping()`` is where one would go.

Run by hand: ``.venv/bin/python bench/bench_published.py``.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import published_matrices  # noqa: E402  (bench/published_matrices.py)

from pinlab.graph.model import graph_from_matrix  # noqa: E402
from pinlab.placement import make_placement  # noqa: E402
from pinlab.placement.cost import distance_table, placement_cost  # noqa: E402
from pinlab.topology import load_topology  # noqa: E402

GRAPH = ("lp-compact", "lp-scatter", "gp", "lpgp", "gplp", "treematch")
PLAIN = ("compact", "scatter")
MACHINES = {32: "synthetic:pack:2 l3:2 core:8 pu:1", 64: "synthetic:pack:4 l3:2 core:8 pu:1"}
SMALL = "synthetic:pack:2 l2:2 core:2 pu:1"


def costs(topo, graph) -> dict[str, tuple[float, float]]:
    """strategy -> (cost, milliseconds to map)."""
    found = {}
    for name in PLAIN + GRAPH:
        started = time.perf_counter()
        placement = make_placement(topo, strategy=name, threads=graph.threads, graph=graph if name in GRAPH else None)
        found[name] = (placement_cost(topo, graph, placement.cpus), (time.perf_counter() - started) * 1e3)
    randoms = [placement_cost(topo, graph, make_placement(topo, strategy="random", threads=graph.threads, seed=s).cpus) for s in range(11)]
    found["random (median of 11)"] = (statistics.median(randoms), 0.0)
    return found


def exhaustive_optimum(topo, graph) -> float:
    """The lowest cost over every placement of the graph's threads on the machine's cores."""
    cpus = sorted(topo.allowed_cpus)
    n = graph.threads
    table = distance_table(topo)
    d = np.array([[table.distance(a, b) for b in cpus] for a in cpus])
    w = np.triu(graph.as_array(), 1)
    i, j = np.nonzero(w)
    best = float("inf")
    perms = np.array(list(itertools.permutations(range(len(cpus)), n)), dtype=np.int64)
    for chunk in np.array_split(perms, max(1, len(perms) // 20000)):
        total = (w[i, j][None, :] * d[chunk[:, i], chunk[:, j]]).sum(axis=1)
        best = min(best, float(total.min()))
    return best


def table(title: str, rows: dict[str, tuple[float, float]], reference: float, reference_name: str) -> None:
    print(f"\n{title}  (reference: {reference_name} = {reference:.6g})")
    for name, (cost, ms) in rows.items():
        ratio = cost / reference if reference > 0 else float("nan")
        print(f"  {name:<22} {cost:>14.6g}  {ratio:6.3f}x  {ms:7.1f} ms")


def main() -> int:
    summary: dict[str, list[float]] = {}
    for name in published_matrices.names():
        graph = published_matrices.load(name)
        if graph.empty:
            print(f"\n{name}: all zeros (communication only through collectives the tracer did not count): skipped")
            continue
        topo = load_topology(MACHINES[graph.threads])
        rows = costs(topo, graph)
        best = min(c for c, _ in rows.values())
        table(f"{name}: {graph.threads} processes on {MACHINES[graph.threads].split(':', 1)[1]}", rows, best, "lowest found")
        for strategy, (cost, _) in rows.items():
            summary.setdefault(f"{graph.threads} processes, {strategy}", []).append(cost / best if best else 1.0)
        # The first 8 processes, small enough to enumerate every placement.
        sub = graph_from_matrix([row[:8] for row in graph.weights[:8]])
        if sub.empty:
            continue
        small = load_topology(SMALL)
        rows = costs(small, sub)
        optimum = exhaustive_optimum(small, sub)
        table(f"{name}, first 8 processes on {SMALL.split(':', 1)[1]}", rows, optimum, "exhaustive optimum")
        for strategy, (cost, _) in rows.items():
            summary.setdefault(f"8 processes, {strategy}", []).append(cost / optimum if optimum else 1.0)
    print("\nSummary: cost / reference, median and worst over the matrices")
    for key, ratios in summary.items():
        print(f"  {key:<40} median {statistics.median(ratios):.3f}x  worst {max(ratios):.3f}x  ({len(ratios)} matrices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
