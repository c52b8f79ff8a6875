"""Slowdown of the pages tracing method: the same workload traced and untraced, through the same launcher.

Run by hand: ``.venv/bin/python bench/bench_trace_pages.py [--repeat 3] [--period-ms 10]``. Prints,
for pairs, primes and stream, the best wall time of each way and their ratio, with the rounds and
faults the tracer made.
"""
from __future__ import annotations

import argparse
import os

from pinlab.graph.trace import pages
from pinlab.graph.trace.common import TraceRequest
from pinlab.graph.trace.traced_run import run_traced
from pinlab.native import native_path

WORKLOADS = {
    "pairs": ["pinlab-pairs", "--groups", "2", "--reps", "3000"],
    "primes": ["pinlab-primes", "--limit", "2000000"],
    "stream": ["pinlab-stream", "--size", "8M", "--ntimes", "10"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--period-ms", type=int, default=10)
    parser.add_argument("--threads", type=int, default=max(2, len(os.sched_getaffinity(0))))
    args = parser.parse_args()
    print(f"{'workload':10} {'untraced s':>11} {'traced s':>9} {'slowdown':>9} {'rounds':>7} {'faults':>8} {'exit':>4}")
    for name, argv in WORKLOADS.items():
        argv = [str(native_path(argv[0])), *argv[1:]]
        request = TraceRequest(argv=argv, threads=args.threads, options={"period_ms": args.period_ms})
        devnull = os.open(os.devnull, os.O_WRONLY)
        saved = os.dup(1)
        os.dup2(devnull, 1)  # the workloads' own output is not the benchmark's
        try:
            plain = min(run_traced(request, {}).wall_seconds for _ in range(args.repeat))
            results = [pages.trace(request) for _ in range(args.repeat)]
        finally:
            os.dup2(saved, 1)
            os.close(devnull)
            os.close(saved)
        best = min(results, key=lambda r: r.wall_seconds)
        m = best.graph.measured
        print(f"{name:10} {plain:11.3f} {best.wall_seconds:9.3f} {best.wall_seconds / plain:8.2f}x {m['rounds']:7d} {m['faults']:8d} {best.exit_status:4d}")


if __name__ == "__main__":
    main()
