#!/usr/bin/env python3
"""pinlab-stream's triad bandwidth next to likwid-bench's, same threads, same pinning, same sizes.

Run by hand (not a test; exits 0 whatever the figures): ``.venv/bin/python bench/bench_stream.py``
Options: ``--rounds R`` (default 7), ``--mib M`` (total size of the three arrays, default 4x the
last-level cache and at least 600 MiB), ``--threads T`` (default all allowed CPUs).

Both programs run pinned to the same CPUs, chosen with likwid's domain order (first PU of each
core, then siblings): likwid-bench with ``-w N:<size>:<T>``, pinlab-stream under
``pinlab run -c N:0-<T-1>`` (pinlab's expression language numbers CPUs the same way). Rounds
are interleaved (likwid, pinlab, likwid, ...), so drift in the machine hits both alike.

likwid-bench reports the average bandwidth over all its iterations, so it is compared with
pinlab-stream's average rate; pinlab-stream's best rate (what STREAM prints first) is shown too.
Target: pinlab-stream reaches at least 95% of likwid-bench's triad bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def llc_total_bytes() -> int:
    """Sum of the sizes of all last-level cache instances (one per distinct set of sharing CPUs)."""
    sizes: dict[int, dict[str, int]] = {}
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        sizes.setdefault(level, {})[shared] = int(re.match(r"\d+", size).group()) * units.get(size[-1], 1)
    return sum(sizes[max(sizes)].values()) if sizes else 0


def likwid_triad(mib: int, threads: int) -> float:
    out = subprocess.run(["likwid-bench", "-t", "stream", "-w", f"N:{mib}MB:{threads}"], capture_output=True, text=True, check=True).stdout
    return float(re.search(r"MByte/s:\s*([\d.]+)", out).group(1))


def pinlab_triad(mib: int, threads: int) -> tuple[float, float]:
    elements = mib * 1_000_000 // 3 // 8  # likwid's MB are 10^6 bytes, over three arrays
    cmd = [
        str(BIN / "pinlab"),
        "run",
        "-q",
        "-c",
        f"N:0-{threads - 1}",
        "--",
        str(BIN / "pinlab"),
        "workload",
        "run",
        "stream",
        "-n",
        str(threads),
        "--json",
        "--",
        "--size",
        str(elements),
        "--ntimes",
        "20",
    ]
    data = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert data["valid"], data
    triad = data["results"]["triad"]
    return triad["avg_mbs"], triad["best_mbs"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mib", type=int)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if not shutil.which("likwid-bench"):
        print("likwid-bench not found (Debian package likwid): nothing to compare with")
        return
    mib = args.mib or max(600, 4 * llc_total_bytes() // (1 << 20))
    print(
        f"STREAM triad, {args.threads} threads pinned to likwid's N:0-{args.threads - 1}, {mib} MB in three arrays, {args.rounds} interleaved rounds"
    )
    likwid, ours_avg, ours_best = [], [], []
    for _ in range(args.rounds):
        likwid.append(likwid_triad(mib, args.threads))
        avg, best = pinlab_triad(mib, args.threads)
        ours_avg.append(avg)
        ours_best.append(best)
    rows = [("likwid-bench -t stream (average)", likwid), ("pinlab-stream triad (average)", ours_avg), ("pinlab-stream triad (best)", ours_best)]
    print(f"{'':36} {'median MB/s':>12} {'min':>10} {'max':>10}")
    for label, values in rows:
        print(f"{label:36} {statistics.median(values):12.0f} {min(values):10.0f} {max(values):10.0f}")
    ratio = statistics.median(ours_avg) / statistics.median(likwid)
    print(f"pinlab-stream / likwid-bench (average vs average): {ratio:.3f} -> {'PASS' if ratio >= 0.95 else 'MISS'} (target >= 0.95)")
    print(f"pinlab-stream best / likwid-bench average: {statistics.median(ours_best) / statistics.median(likwid):.3f}")


if __name__ == "__main__":
    main()
