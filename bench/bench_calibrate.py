#!/usr/bin/env python3
"""How long `pinlab calibrate` takes, and how well two measurements in a row agree.

Run by hand: ``.venv/bin/python bench/bench_calibrate.py [--quick]``. Not a test: it asserts
nothing and exits 0; it prints figures and PASS/MISS against the issue's targets:

1. a full latency matrix of this machine's allowed CPUs (every pair), wall time of the whole
   measurement (native program start, threads, pairs) with the default per-pair budget and with
   ``--quick``'s;
2. the issue's size, a full 16-core matrix (120 pairs), in under 2 s: where this machine has fewer
   CPUs, the same 120 pair measurements are made on the CPUs it has (pairs repeated), which costs
   the same time per pair, so the figure is the time a 16-core machine would take at this
   machine's per-pair cost;
3. the same matrix measured twice in a row: the distinct levels (pinlab.topology.measured's
   clustering of the first measurement) and, per level, the median of each measurement; agreement
   within 10% on every level;
4. the memory part (bandwidth and latency of each node from each package), its wall time.

With ``--realtime`` the 16-core timing is also taken with the native program at real-time
priority 1 (``chrt -f 1``, needs the right to use it): the other processes of a loaded machine then
no longer interleave with the pair's two threads, which gives the time an idle machine would take.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time

from pinlab.native import native_path
from pinlab.topology import load_topology
from pinlab.topology.calibrate import BATCH, PAIR_BUDGET_MS, QUICK_PAIR_BUDGET_MS, measure_latency, measure_memory
from pinlab.topology.measured import latency_levels

SIXTEEN_CORE_PAIRS = 16 * 15 // 2


def level_medians(latency, cuts: list[float]) -> list[float]:
    """Median latency of the pairs in each level, the levels given by their upper bounds ``cuts``."""
    values = [latency.matrix[i][j] for i in range(len(latency.cpus)) for j in range(i + 1, len(latency.cpus))]
    medians, low = [], 0.0
    for cut in cuts:
        inside = [v for v in values if low < v <= cut] if cut != cuts[-1] else [v for v in values if v > low]
        medians.append(statistics.median(inside) if inside else float("nan"))
        low = cut
    return medians


def sixteen_core_time(cpus: list[int], budget_ms: float, realtime: bool = False) -> float:
    pairs = [(cpus[i % len(cpus)], cpus[(i + 1) % len(cpus)]) for i in range(SIXTEEN_CORE_PAIRS)]
    started = time.perf_counter()
    subprocess.run(
        [
            *(["chrt", "-f", "1"] if realtime else []),
            str(native_path("pinlab-calibrate")),
            "latency",
            "--pairs",
            ",".join(f"{a}:{b}" for a, b in pairs),
            "--budget-ms",
            str(budget_ms),
            "--batch",
            str(BATCH),
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="measure with --quick's budget only")
    parser.add_argument("--realtime", action="store_true", help="also time the 16-core matrix at real-time priority (as on an idle machine)")
    args = parser.parse_args()
    topo = load_topology("this")
    cpus = sorted(topo.allowed_cpus)
    print(f"machine: {platform.node()}, {len(cpus)} allowed CPUs, {os.cpu_count()} online; load average {os.getloadavg()[0]:.2f}")
    if len(cpus) < 2:
        print("fewer than 2 allowed CPUs: nothing to measure")
        return
    budgets = [("quick", QUICK_PAIR_BUDGET_MS)] if args.quick else [("default", PAIR_BUDGET_MS), ("quick", QUICK_PAIR_BUDGET_MS)]
    for label, budget in budgets:
        quick = label == "quick"
        latency, pairs, _, seconds = measure_latency(topo, quick=quick)
        print(f"\n== {label}: {budget} ms per pair")
        print(f"full matrix here: {pairs} pairs of {len(cpus)} CPUs in {seconds:.3f} s ({seconds / pairs * 1000:.1f} ms per pair, wall)")
        t16 = sixteen_core_time(cpus, budget)
        print(
            f"16-core matrix ({SIXTEEN_CORE_PAIRS} pairs, measured on CPUs {','.join(map(str, cpus))}): {t16:.3f} s "
            f"-> {'PASS' if t16 < 2.0 else 'MISS'} (target < 2 s)"
        )
        if args.realtime:
            try:
                t16 = sixteen_core_time(cpus, budget, realtime=True)
                print(f"16-core matrix at real-time priority (chrt -f 1): {t16:.3f} s -> {'PASS' if t16 < 2.0 else 'MISS'} (target < 2 s)")
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"16-core matrix at real-time priority: not possible here ({exc})")
        second, _, _, _ = measure_latency(topo, quick=quick)
        levels = latency_levels(latency)
        cuts = [level[-1] for level in levels]
        first_medians, second_medians = level_medians(latency, cuts), level_medians(second, cuts)
        worst = 0.0
        for number, (a, b) in enumerate(zip(first_medians, second_medians), 1):
            gap = abs(a - b) / a
            worst = max(worst, gap)
            print(f"  level {number}: {len(levels[number - 1])} pairs, first {a:.1f} ns, second {b:.1f} ns, difference {gap:.1%}")
        print(
            f"twice in a row: {len(levels)} distinct level(s), worst difference {worst:.1%} -> {'PASS' if worst <= 0.10 else 'MISS'} (target within 10%)"
        )
    memory, readers, names, seconds = measure_memory(topo, quick=args.quick)
    print(f"\n== memory ({'quick' if args.quick else 'default'}): {seconds:.2f} s")
    for name, cpu, bandwidth, latency_ns in zip(names, readers, memory.bandwidth_mbps, memory.latency_ns):
        for node, b, lat in zip(memory.nodes, bandwidth, latency_ns):
            print(f"  {name} (CPU {cpu}) -> node {node}: {b:.0f} MB/s, {lat:.1f} ns")


if __name__ == "__main__":
    main()
