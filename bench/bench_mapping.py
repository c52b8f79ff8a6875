#!/usr/bin/env python3
"""How long the graph strategies take to map a graph onto a machine.

Run by hand: ``.venv/bin/python bench/bench_mapping.py [--quick] [--profile]``. Not a test: it
asserts nothing about time and always exits 0; it prints a table and PASS/MISS against the
issue's target: a full lpgp or treematch mapping of 1024 threads on a 1024-core machine in
under 100 ms.

Machines are hwloc synthetic topologies, one thread per core:

- 64 cores: ``pack:2 l3:2 core:16``; 256: ``pack:4 l3:4 core:16``; 1024: ``pack:8 l3:8
  core:16``; 4096: ``pack:16 l3:16 core:16``.

Two graph families (``--graph`` picks one; both by default):

- ``structured``: sparse, like real programs: groups of 16 threads that share a lot, a 2-D
  stencil (each thread with its 4 neighbours on a square grid), and light random noise on 2% of
  the pairs, thread numbers shuffled;
- ``dense``: every pair shares, by a uniform random weight (the worst case: n^2 / 2 pairs).

The graph is given as a numpy matrix; times are the median of a few runs of
``pinlab.placement.mapping.map_threads`` in CPU time (``time.process_time``: the machine may be
shared, and wall time then counts the others' work). The topology's distance table is built once
beforehand and reported on its own line, as a program would load it once. The cost of each
mapping (pinlab.placement.cost) is printed beside compact's so speed is not bought with quality.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import statistics
import time

import numpy as np

from pinlab.placement.cost import distance_table, placement_cost
from pinlab.placement.mapping import map_threads
from pinlab.placement.strategies import compact
from pinlab.topology import load_topology

MACHINES = {64: "pack:2 l3:2 core:16 pu:1", 256: "pack:4 l3:4 core:16 pu:1", 1024: "pack:8 l3:8 core:16 pu:1", 4096: "pack:16 l3:16 core:16 pu:1"}
STRATEGIES = ("lpgp", "gplp", "gp", "treematch")
TARGET_MS = 100.0
#: A strategy slower than this at one size is skipped at the larger ones (lpgp and gplp on the
#: interim networkx matching take minutes at 4096 threads).
SKIP_AFTER_MS = 5000.0


def structured_graph(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = np.zeros((n, n))
    labels = np.arange(n) // 16
    w[labels[:, None] == labels[None, :]] += 50.0
    side = int(math.isqrt(n))
    for i in range(n):
        r, c = divmod(i, side)
        for dr, dc in ((0, 1), (1, 0)):
            j = (r + dr) * side + (c + dc)
            if r + dr < side and c + dc < side and j < n:
                w[i, j] += 20.0
    noise = (rng.random((n, n)) < 0.02) * rng.random((n, n)) * 5.0
    w += noise
    w = w + w.T
    np.fill_diagonal(w, 0)
    perm = rng.permutation(n)
    return w[np.ix_(perm, perm)]


def dense_graph(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.random((n, n))
    w = w + w.T
    np.fill_diagonal(w, 0)
    return w


GRAPHS = {"structured": structured_graph, "dense": dense_graph}


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64..1024 threads only, one run each")
    parser.add_argument("--profile", action="store_true", help="profile every strategy's 1024-thread runs")
    parser.add_argument("--graph", choices=[*GRAPHS, "both"], default="both", help="graph family (default: both)")
    parser.add_argument("--sizes", type=int, nargs="+", choices=sorted(MACHINES), help="thread counts to run")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=STRATEGIES, help="strategies to run")
    args = parser.parse_args()
    sizes = args.sizes or ([64, 256, 1024] if args.quick else [64, 256, 1024, 4096])
    repeat = 1 if args.quick else 3
    families = list(GRAPHS) if args.graph == "both" else [args.graph]
    print(f"{'threads':>7} {'machine':<28} {'graph':<10} {'strategy':<10} {'cpu ms':>9} {'cost':>12} {'compact cost':>13}  verdict")
    for family in families:
        slow: dict[str, float] = {}
        for n in sizes:
            topo = load_topology(f"synthetic:{MACHINES[n]}")
            start = time.process_time()
            distance_table(topo)
            print(f"{n:>7} {MACHINES[n]:<28} {family:<10} {'(table)':<10} {(time.process_time() - start) * 1000:>9.1f}", flush=True)
            w = GRAPHS[family](n)
            base = placement_cost(topo, w, compact(topo, n))
            for strategy in args.strategies:
                if strategy in slow:
                    print(
                        f"{n:>7} {MACHINES[n]:<28} {family:<10} {strategy:<10} {'skipped':>9}  (took {slow[strategy] / 1000:.1f} s at a smaller size)",
                        flush=True,
                    )
                    continue
                ms, cpus = timed(lambda: map_threads(topo, strategy, w, n), repeat)
                verdict = ("PASS" if ms < TARGET_MS else "MISS") if n == 1024 else ""
                print(
                    f"{n:>7} {MACHINES[n]:<28} {family:<10} {strategy:<10} {ms:>9.1f} {placement_cost(topo, w, cpus):>12.4g} {base:>13.4g}  {verdict}",
                    flush=True,
                )
                if ms > SKIP_AFTER_MS:
                    slow[strategy] = ms
                if args.profile and n == 1024:
                    profiler = cProfile.Profile()
                    profiler.enable()
                    map_threads(topo, strategy, w, n)
                    profiler.disable()
                    out = io.StringIO()
                    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
                    print(out.getvalue())


if __name__ == "__main__":
    main()
