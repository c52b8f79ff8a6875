#!/usr/bin/env python3
"""The slowdown of each tracing method of ``pinlab trace`` on the built-in workloads.

Run by hand (not a test; exits 0 whatever the figures): ``.venv/bin/python bench/bench_trace.py``
Options: ``--threads T`` (default: the allowed CPUs, at least 2, even), ``--rounds R`` (default 3:
the median is printed), ``--methods exact,sampled,pages`` (default all).

The exact method needs the program rebuilt with ``pinlab cc``: pairs, primes and stream are
built instrumented into a temporary directory from native/workloads. The sampled and pages methods
trace the installed, unmodified workloads; a method this machine or this install lacks is
reported as such with its reason. Each round traces the workload once (``pinlab trace``'s own
untraced baseline run, same launcher and placement, gives the untraced time) and the figures are
traced seconds, untraced seconds and their ratio, medians over the rounds.

For the exact method the untraced run is the original workload, the installed uninstrumented
build (``pinlab trace --original``), so every slowdown is against the program as users run it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "native" / "workloads"
INCLUDE = REPO / "native" / "include"
BIN = Path(sys.executable).parent

# name -> (sources beyond common.c, arguments for a run of about a second untraced here)
CASES = {
    "pairs": (["pairs.c"], ["--groups", "2", "--size", "64k", "--reps", "2000"]),
    "primes": (["primes.c"], ["--limit", "5M"]),
    "stream": (["stream.c"], ["--size", "1M", "--ntimes", "5"]),
}


def build_instrumented(name: str, sources: list[str], directory: Path) -> Path | None:
    out = directory / name
    command = [
        str(BIN / "pinlab"),
        "cc",
        "--",
        "gcc",
        "-O3",
        "-fopenmp",
        f"-I{WORKLOADS}",
        f"-I{INCLUDE}",
        f"-I{REPO / 'native' / 'common'}",
        *(str(WORKLOADS / s) for s in [*sources, "common.c"]),
        str(REPO / "native" / "common" / "cpulist.c"),
        "-o",
        str(out),
        "-lm",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  {name}: cannot be built instrumented: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return out


def method_missing(method: str, argv: list[str], threads: int) -> str | None:
    """Why ``method`` cannot trace ``argv`` here (None: it can)."""
    from pinlab.trace import method_module
    from pinlab.trace.common import TraceRequest

    try:
        module = method_module(method)
    except ImportError as exc:
        return f"not in this install ({exc})"
    return module.unavailable(TraceRequest(argv=argv, threads=threads))


def trace_once(method: str, argv: list[str], threads: int, directory: Path, original: str | None) -> tuple[float, float | None] | str:
    from pinlab.graph.model import load_graph

    out = directory / f"graph-{method}.json"
    extra = ["--original", original] if original else []
    done = subprocess.run(
        [str(BIN / "pinlab"), "trace", "-q", "-n", str(threads), "--method", method, "-o", str(out), *extra, "--", *argv],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return f"failed with status {done.returncode}: {done.stderr.strip()[-200:]}"
    if not out.exists():  # pinlab trace writes no graph when nothing was counted (a run shorter than one round)
        return f"no graph: {done.stderr.strip()[-200:]}"
    measured = load_graph(out).measured
    return measured["traced_seconds"], measured.get("baseline_seconds")


def main() -> int:
    from pinlab.native import native_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_threads = max(2, len(os.sched_getaffinity(0)) // 2 * 2)
    parser.add_argument("--threads", type=int, default=default_threads)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="exact,sampled,pages")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    print(f"pinlab trace slowdown, {args.threads} threads, median of {args.rounds} rounds (CPUs allowed: {len(os.sched_getaffinity(0))})")
    print(f"{'workload':10} {'method':8} {'traced s':>10} {'untraced s':>11} {'slowdown':>9}")
    with tempfile.TemporaryDirectory(prefix="pinlab-bench-trace-") as tmp:
        directory = Path(tmp)
        for name, (sources, wargs) in CASES.items():
            for method in methods:
                if method == "exact":
                    program = build_instrumented(name, sources, directory)
                    if program is None:
                        continue
                else:
                    program = native_path(f"pinlab-{name}")
                argv = [str(program), *wargs]
                why = method_missing(method, argv, args.threads)
                if why is not None:
                    print(f"{name:10} {method:8} unavailable: {why}")
                    continue
                original = str(native_path(f"pinlab-{name}")) if method == "exact" else None
                rounds = [trace_once(method, argv, args.threads, directory, original) for _ in range(args.rounds)]
                failed = [r for r in rounds if isinstance(r, str)]
                if failed:
                    print(f"{name:10} {method:8} {failed[0]}")
                    continue
                traced = statistics.median(r[0] for r in rounds)
                untraced = statistics.median(r[1] for r in rounds)
                print(f"{name:10} {method:8} {traced:10.3f} {untraced:11.3f} {traced / untraced:8.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
