#!/usr/bin/env python3
"""How long pinlab takes to load a topology and compute placements, next to hwloc itself.

Run by hand (or `make bench`): ``.venv/bin/python bench/bench_placement.py [--quick]``.
Not a test: it asserts nothing about time and always exits 0 (timings depend on the machine
and its load); it prints a table and PASS/MISS against the target of the issue.

For synthetic machines of 8, 96, 1024 and 4096 PUs it measures, each repeated and reported as
median (min-max):

1. hwloc expanding the synthetic description to XML (``lstopo-no-graphics -i DESC --of xml -``,
   wall time of the subprocess);
2. pinlab parsing that XML (``pinlab.topology.hwloc_xml.parse_xml``), and the ratio to (1);
3. every strategy computing a placement for as many threads as the machine has cores
   (``pinlab.placement.make_placement``); intra-socket with as many threads as one package has
   cores (all threads must fit in one package);
4. the whole command ``pinlab place -t synthetic:DESC -s scatter -n CORES`` end to end, next to
   ``lstopo-no-graphics -i DESC --of xml -`` alone ("e2e").

Verdicts: each placement line is PASS/MISS against 50 ms; each parse line PASS/MISS for "load
dominated by hwloc" (pinlab's parse takes less time than hwloc's expansion); and, as a stricter
reading, parse + slowest placement against 50 ms. Misses are profiled (cProfile, one call).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pinlab.placement import make_placement
from pinlab.topology.hwloc_xml import parse_xml

TARGET_MS = 50.0
TARGET = "a placement for 4096 PUs in under 50 ms of pinlab's own time, topology load dominated by hwloc itself"

#: (label, hwloc synthetic description): a laptop, a 4-socket server, two large NUMA machines.
MACHINES = [
    ("8 PUs", "pack:1 [numa] l3:1 l2:8 l1d:1 core:1 pu:1"),
    ("96 PUs", "pack:4 [numa] l3:1 l2:24 l1d:1 core:1 pu:1"),
    ("1024 PUs", "pack:8 [numa] l3:4 l2:16 l1d:1 core:1 pu:2"),
    ("4096 PUs", "pack:16 [numa] l3:8 l2:16 l1d:1 core:1 pu:2"),
]
STRATEGIES = ("compact", "scatter", "random", "inter-socket", "intra-socket")
LSTOPO = "lstopo-no-graphics"
SEED = 42


def repeats(pus: int, quick: bool) -> dict[str, int]:
    """How many times to run each measurement: fewer for the slow ones."""
    if quick:
        return {"hwloc": 3, "parse": 3, "strategy": 3, "e2e": 2}
    if pus >= 4096:
        return {"hwloc": 7, "parse": 7, "strategy": 9, "e2e": 5}
    if pus >= 1024:
        return {"hwloc": 9, "parse": 9, "strategy": 11, "e2e": 7}
    return {"hwloc": 15, "parse": 15, "strategy": 15, "e2e": 9}


def measure(function: Callable[[], object], runs: int, warmup: int = 1) -> list[float]:
    """Wall times of ``runs`` calls (after ``warmup`` untimed calls), in milliseconds."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1000)
    return times


def clean_env() -> dict[str, str]:
    # pinlab drops HWLOC_* variables before calling lstopo; do the same for the bare hwloc runs
    return {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}


def run_checked(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def pinlab_command() -> str:
    candidate = Path(sys.executable).parent / "pinlab"
    return str(candidate) if candidate.exists() else (shutil.which("pinlab") or "pinlab")


def fmt_row(step: str, times: list[float] | None, note: str = "") -> str:
    if times is None:
        return f"  {step:<44} {'':>4} {'':>10} {'':>21}  {note}"
    spread = f"{min(times):.2f}-{max(times):.2f}"
    return f"  {step:<44} {len(times):>4} {statistics.median(times):>10.2f} {spread:>21}  {note}"


def profile(function: Callable[[], object], top: int = 10) -> str:
    """Top functions by own time of one call of ``function``."""
    profiler = cProfile.Profile()
    profiler.enable()
    function()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join("      " + line for line in lines[start:])


def bench_machine(label: str, desc: str, quick: bool, verdicts: list[str], profiles: list[str]) -> None:
    lstopo_argv = [LSTOPO, "-i", desc, "--of", "xml", "-"]
    xml = run_checked(lstopo_argv)
    topo = parse_xml(xml, source=f"synthetic:{desc}")
    summary = topo.summary()
    n = summary["cores"]
    per_package = max(len([c for c in topo.cores if c.cpus <= p.cpus]) for p in topo.packages) if topo.packages else n
    runs = repeats(summary["pus"], quick)

    print(f"\n{label}: synthetic:{desc}")
    print(
        f"  {summary['packages']} packages, {summary['numa_nodes']} NUMA nodes, {summary['cores']} cores, "
        f"{summary['pus']} PUs; hwloc XML {len(xml) / 1e6:.2f} MB; placements for {n} threads"
    )
    print(f"  {'step':<44} {'runs':>4} {'median ms':>10} {'min-max ms':>21}  note")

    hwloc = measure(lambda: run_checked(lstopo_argv), runs["hwloc"])
    print(fmt_row("(1) hwloc: lstopo -i DESC --of xml", hwloc, "subprocess wall time"))

    parse = measure(lambda: parse_xml(xml, source=f"synthetic:{desc}"), runs["parse"])
    ratio = statistics.median(parse) / statistics.median(hwloc)
    load_ok = ratio < 1.0
    print(fmt_row("(2) pinlab: parse_xml", parse, f"parse/hwloc = {ratio:.2f}  load dominated by hwloc: {'PASS' if load_ok else 'MISS'}"))
    verdicts.append(f"{label:>9} load: parse/hwloc {ratio:.2f} -> {'PASS' if load_ok else 'MISS'}")

    slowest = 0.0
    for strategy in STRATEGIES:
        threads = per_package if strategy == "intra-socket" else n
        kwargs = {"strategy": strategy, "threads": threads, "seed": SEED if strategy == "random" else None}
        placement = make_placement(topo, **kwargs)
        assert len(placement.cpus) == threads
        times = measure(lambda kw=kwargs: make_placement(topo, **kw), runs["strategy"])
        median = statistics.median(times)
        slowest = max(slowest, median)
        ok = median < TARGET_MS
        what = f"(3) placement {strategy} n={threads}" + (" (1 package)" if strategy == "intra-socket" else "")
        print(fmt_row(what, times, f"{'PASS' if ok else 'MISS'} (< {TARGET_MS:.0f} ms)"))
        if not ok:
            profiles.append(f"  {label}, {strategy} n={threads} (median {median:.1f} ms):\n" + profile(lambda kw=kwargs: make_placement(topo, **kw)))

    own = statistics.median(parse) + slowest
    print(
        fmt_row(
            "    pinlab's own time: parse + slowest", None, f"{own:.2f} ms (stricter reading of the target: {'PASS' if own < TARGET_MS else 'MISS'})"
        )
    )
    verdicts.append(
        f"{label:>9} placement: slowest strategy {slowest:.2f} ms -> {'PASS' if slowest < TARGET_MS else 'MISS'}; "
        f"parse + slowest placement {own:.2f} ms -> {'PASS' if own < TARGET_MS else 'MISS'}"
    )
    if not load_ok or (own >= TARGET_MS and summary["pus"] >= 4096):
        profiles.append(f"  {label}, parse_xml (median {statistics.median(parse):.1f} ms):\n" + profile(lambda: parse_xml(xml, source="bench")))

    pinlab_argv = [pinlab_command(), "place", "-t", f"synthetic:{desc}", "-s", "scatter", "-n", str(n)]
    e2e = measure(lambda: run_checked(pinlab_argv), runs["e2e"])
    alone = measure(lambda: run_checked(lstopo_argv), runs["e2e"])
    print(
        fmt_row(
            f"(4) e2e: pinlab place -s scatter -n {n}", e2e, f"end to end = {statistics.median(e2e) / statistics.median(alone):.1f}x lstopo alone"
        )
    )
    print(
        fmt_row(
            "(4) e2e: lstopo -i DESC --of xml alone",
            alone,
            f"pinlab adds {statistics.median(e2e) - statistics.median(alone):.0f} ms (Python start, imports, parse, placement, output)",
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    args = parser.parse_args()
    if shutil.which(LSTOPO) is None:
        print(f"bench: {LSTOPO} not found (install hwloc-nox)", file=sys.stderr)
        return 0
    hwloc_version = run_checked([LSTOPO, "--version"]).strip()
    print("pinlab placement benchmark")
    print(f"target (from the issue): {TARGET}")
    print(f"python {platform.python_version()}, {hwloc_version}, {os.cpu_count()} CPUs, {platform.machine()}")
    print("times in ms: median and min-max of the runs (after one untimed warm-up run)")
    verdicts: list[str] = []
    profiles: list[str] = []
    for label, desc in MACHINES:
        bench_machine(label, desc, args.quick, verdicts, profiles)
    print(f"\ntarget: {TARGET}")
    for line in verdicts:
        print(f"  {line}")
    if profiles:
        print("\nprofiles of the misses (cProfile, one call, sorted by own time):")
        for text in profiles:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
