#!/usr/bin/env python3
"""How long ``--candidates auto`` takes to choose the placements autopin probes.

Run by hand: ``.venv/bin/python bench/bench_candidates.py [--quick]``. Not a test: it asserts
nothing about time and always exits 0; it prints a table and PASS/MISS against the target
("well under a second", read here as every call under 250 ms).

For the largest bundled preset (epyc-7763-2s: 2 packages, 8 NUMA nodes, 128 cores, 256 PUs) and a
synthetic 4-package x 64-core SMT2 machine (512 PUs), ``auto_candidates(topo, n)`` for every
thread count n = 1..256 (every 8th with --quick): the first call on a freshly loaded topology
(cold: per-machine tables are built then), and the median, 90th percentile and slowest of the
others, with the thread count of the slowest and how many candidates it returned.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from pinlab.autopin.candidates import auto_candidates
from pinlab.topology import load_topology

TARGET_MS = 250.0
MACHINES = [
    ("epyc-7763-2s (256 PUs)", "epyc-7763-2s"),
    ("4 x 64 cores SMT2 (512 PUs)", "synthetic:pack:4 [numa] l3:8 core:8 pu:2"),
]


def timed(topo, n: int) -> tuple[float, int]:
    start = time.perf_counter()
    found = auto_candidates(topo, n)
    return (time.perf_counter() - start) * 1000, len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 8th thread count only")
    args = parser.parse_args()
    counts = range(1, 257, 8 if args.quick else 1)
    print(f"# auto_candidates timing, Python {platform.python_version()} on {platform.machine()}; target: every call < {TARGET_MS:.0f} ms")
    print(f"{'machine':30} {'cold ms':>8} {'median':>8} {'p90':>8} {'max':>8} {'at n':>5} {'cands':>5}  verdict")
    for label, source in MACHINES:
        topo = load_topology(source)
        cold, _ = timed(topo, 2)
        samples = [(timed(topo, n), n) for n in counts]
        times = sorted(ms for (ms, _), _ in samples)
        (slowest, found), at = max(samples)
        p90 = times[int(0.9 * (len(times) - 1))]
        verdict = "PASS" if max(cold, slowest) < TARGET_MS else "MISS"
        print(f"{label:30} {cold:8.1f} {statistics.median(times):8.1f} {p90:8.1f} {slowest:8.1f} {at:5d} {found:5d}  {verdict}")


if __name__ == "__main__":
    main()
