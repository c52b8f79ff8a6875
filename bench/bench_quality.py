#!/usr/bin/env python3
"""How good the graph strategies' placements are on large machines, side by side with Scotch.

Run by hand: ``.venv/bin/python bench/bench_quality.py [--quick]``. Not a test: it prints, for
each machine and graph, every strategy's cost divided by the lowest cost any of them found
(1.000 = the best known), and asserts nothing. The cost is an independent one, not pinlab's
model: weight x the number of tree levels between a PU and the lowest object holding both
threads' PUs.

Machines: ``epyc-7763-2s`` with 128 threads (one per core) and 256 (every PU, ``--smt``), and
synthetic ``pack:4 [numa] l3:4 core:32 pu:1`` (512) and ``pack:8 [numa] l3:4 core:32 pu:1``
(1024). Graphs: groups of 8 and of 32 threads that share a lot inside, a 2-D stencil, light
noise on 2% of the pairs, thread numbers shuffled ("structured"); and every pair sharing by a
heavy-tailed random weight ("skewed").

Scotch (Debian's ``scotch`` package: ``scotch_gmap``, elsewhere ``gmap``) is the reference when it is installed: the
machine is given to it as a tree-leaf architecture (``tleaf``, one level per tree level with
the level's arity and link cost) and the graph as a Scotch source graph; its mapping is scored
by the same cost. Without it, the column says ``-``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pinlab.placement.mapping import map_threads
from pinlab.placement.tree import choose_units, unit_tree
from pinlab.topology import load_topology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for the tests' graph
from tests.graph.graph_support import groups_and_stencil  # noqa: E402  (also the mapping tests' graph)

STRATEGIES = ("lpgp", "gplp", "gp", "treematch")
CASES = [
    ("epyc-7763-2s", 128, False),
    ("epyc-7763-2s", 256, True),
    ("synthetic:pack:4 [numa] l3:4 core:32 pu:1", 512, False),
    ("synthetic:pack:8 [numa] l3:4 core:32 pu:1", 1024, False),
]


def skewed_graph(n: int, seed: int) -> np.ndarray:
    """Every pair shares, by a heavy-tailed weight (Pareto): no structure planted to find."""
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.5, (n, n))
    w = w + w.T
    np.fill_diagonal(w, 0)
    return w


FAMILIES = {"structured": groups_and_stencil, "skewed": skewed_graph}


def tree_levels(topo, cpus: list[int]) -> np.ndarray:
    """Levels between a PU and the lowest common ancestor, for every pair of ``cpus``."""
    chains = []
    for cpu in cpus:
        chain, obj = [], topo.pu(cpu)
        while obj is not None:
            chain.append(id(obj))
            obj = obj.parent
        chains.append(chain)
    depth = len(chains[0])
    # Objects at each height above the PU, as integers: equal ids at height h mean an ancestor in common.
    ids = np.array([[c[h] if h < len(c) else -1 for h in range(depth)] for c in chains])
    d = np.full((len(cpus), len(cpus)), depth, dtype=float)
    for h in range(depth - 1, -1, -1):
        same = ids[:, h][:, None] == ids[:, h][None, :]
        d[same] = h
    return d


def cost(topo, w: np.ndarray, cpus: list[int]) -> float:
    return float((w * tree_levels(topo, cpus)).sum() / 2)


def scotch_mapping(topo, units: list[int], smt: bool, w: np.ndarray) -> list[int] | None:
    """Scotch's gmap on the units' tree (tleaf), or None when gmap is not installed."""
    gmap = shutil.which("gmap") or shutil.which("scotch_gmap")  # Debian names it scotch_gmap
    if gmap is None:
        return None
    tree = unit_tree(topo, units, smt)
    arities = []
    previous = 1
    for level in tree.levels:
        arities.append(len(level) // previous)
        previous = len(level)
    arities.append(len(units) // previous)
    links = list(range(len(arities) * 10, 0, -10))  # further levels cost more
    n = w.shape[0]
    rows, cols = np.nonzero(w)
    ints = np.maximum(1, np.rint(w[rows, cols] / w.max() * 1000)).astype(int)
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "g.grf"
        lines = ["0", f"{n}\t{len(rows)}", "0\t010"]
        start = 0
        degree = np.bincount(rows, minlength=n)
        for v in range(n):
            end = start + int(degree[v])
            lines.append(f"{end - start}" + "".join(f"\t{ints[e]}\t{cols[e]}" for e in range(start, end)))
            start = end
        graph.write_text("\n".join(lines) + "\n")
        target = Path(tmp) / "t.tgt"
        target.write_text("tleaf\n" + f"{len(arities)}" + "".join(f" {a} {c}" for a, c in zip(arities, links)) + "\n")
        out = Path(tmp) / "m.map"
        subprocess.run([gmap, str(graph), str(target), str(out)], check=True, capture_output=True)
        mapping = [0] * n
        for line in out.read_text().split("\n")[1:]:
            if line.strip():
                v, leaf = map(int, line.split())
                mapping[v] = units[leaf]
    return mapping


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two epyc cases only, one graph each")
    args = parser.parse_args()
    cases = CASES[:2] if args.quick else CASES
    print(f"{'machine':<42} {'threads':>7} {'graph':>10}  " + "  ".join(f"{s:>9}" for s in STRATEGIES) + f"  {'scotch':>9}   (cost / best known; ms)")
    for source, n, smt in cases:
        topo = load_topology(source)
        for family, seed in [(f, seed) for f in FAMILIES for seed in range(1 if args.quick else 2)]:
            w = FAMILIES[family](n, seed)
            results: dict[str, tuple[float, float]] = {}
            for strategy in STRATEGIES:
                start = time.process_time()
                cpus = map_threads(topo, strategy, w, n, smt=smt)
                results[strategy] = (cost(topo, w, cpus), (time.process_time() - start) * 1000)
            start = time.perf_counter()
            mapped = scotch_mapping(topo, choose_units(topo, n, smt=smt), smt, w)
            if mapped is not None:
                results["scotch"] = (cost(topo, w, mapped), (time.perf_counter() - start) * 1000)
            best = min(c for c, _ in results.values())
            cells = [f"{results[s][0] / best:5.3f} {results[s][1]:3.0f}" if s in results else f"{'-':>9}" for s in (*STRATEGIES, "scotch")]
            print(f"{source:<42} {n:>7} {family:>10}  " + "  ".join(f"{c:>9}" for c in cells))


if __name__ == "__main__":
    main()
