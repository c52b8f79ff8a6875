"""Migration throughput of the memory API, side by side with the kernel's own ways, in the NUMA VM.

    .venv/bin/python bench/bench_memory.py [--size MIB] [--rounds N]

Builds bench/mem_bench.c with the flags ``pinlab cflags/ldflags --mem`` print and runs it in the
emulated 2-node machine of tests/vm/numavm (this machine has one node). Emulation makes absolute
numbers meaningless, so the table quotes each method's median throughput as a ratio of the
direct move_pages system call measured in the same rounds, and the per-page cost of a next-touch
fault against a plain first-touch fault.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LABELS = {
    "move_pages": "move_pages(2) directly, 1024 pages a call (floor)",
    "pm_migrate": "pm_migrate (migrate now)",
    "migratepages": "migratepages (numactl), process exec included",
    "nt_region": "next touch, whole region (one touch)",
    "nt_page": "next touch, page by page (a touch per page)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="MiB moved per measurement (default 64)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from tests.conftest import PINLAB
    from tests.vm.conftest import Group, NumaVM

    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    cflags = subprocess.run([str(PINLAB), "cflags", "--mem"], capture_output=True, text=True, check=True).stdout.split()
    ldflags = subprocess.run([str(PINLAB), "ldflags", "--mem"], capture_output=True, text=True, check=True).stdout.split()
    binary = work / "mem_bench"
    subprocess.run(["cc", "-O2", "-pthread", *cflags, str(ROOT / "bench" / "mem_bench.c"), "-o", str(binary), *ldflags], check=True)
    vm = NumaVM()
    reason = vm._unavailable()
    if reason:
        print(f"bench_memory: the NUMA VM cannot run here: {reason}", file=sys.stderr)
        return 2
    results = vm.batch(
        [Group("bench", {"bench": f"echo 0 > /proc/sys/kernel/numa_balancing; {binary} {args.size} {args.rounds}"}, parallel=False)],
        nodes=2,
        sockets=2,
        cpus=4,
    )
    run = results["bench"]
    if run.returncode != 0:
        print(run.stdout, run.stderr, file=sys.stderr)
        return 1
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    floor = statistics.median(r["seconds"] for r in rows if r["method"] == "move_pages")
    print(f"{args.size} MiB moved from node 0 to node 1, {args.rounds} interleaved rounds, emulated 2-node machine (ratios only)")
    print(f"{'method':52} {'median s':>9} {'MB/s':>8} {'vs move_pages':>14} {'pages moved':>12}")
    for method, label in LABELS.items():
        mine = [r for r in rows if r["method"] == method]
        if not mine:
            continue
        seconds = statistics.median(r["seconds"] for r in mine)
        moved = min(r["pages_moved"] for r in mine)
        moved_text = "n/a" if moved < 0 else f"{moved}/{mine[0]['pages']}"
        print(f"{label:52} {seconds:9.4f} {mine[0]['bytes'] / seconds / 1e6:8.0f} {floor / seconds:13.2f}x {moved_text:>12}")
    per = [r for r in rows if r["method"] == "per_page"]
    nt = statistics.median(r["seconds"] for r in rows if r["method"] == "nt_page") / rows[0]["pages"] * 1e6
    touch = statistics.median(r["touch_us"] for r in per)
    fault = statistics.median(r["first_touch_fault_us"] for r in per)
    print(f"per page: next-touch fault {nt:.2f} us, first-touch fault {fault:.2f} us ({nt / fault:.1f}x), touching a page in place {touch:.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
