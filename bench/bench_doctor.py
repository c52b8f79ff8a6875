#!/usr/bin/env python3
"""What ``pinlab doctor PID`` costs the program it watches, side by side with the program alone.

Run by hand: ``.venv/bin/python bench/bench_doctor.py [--rounds 7] [--seconds 10] [--threads N]``
(pinlab is looked for next to the running interpreter, then on PATH, then in this repository's
.venv). Not a test: it asserts nothing about time and exits 0; it prints a table and PASS/MISS
against the target:

    the watched program's run time within 1% of its time alone (a 10 s OpenMP program, the
    doctor's default sampling, every 100 ms).

The program is the ``primes`` workload (OpenMP, libgomp), one thread per allowed CPU unless
``--threads``, its ``--limit`` chosen first so that it runs about ``--seconds`` alone. It reports
its own elapsed time, so the start of pinlab is not counted. Each round runs it alone and watched
(``pinlab doctor PID --seconds 3600``, started as soon as the program is, watching until it ends),
in an order that alternates between rounds. Reported: median (min-max) seconds of each, the ratio
of the medians and the median of the per-round ratios (less sensitive to a machine whose load
changes between rounds), and the doctor's own CPU time per second watched, split into its fixed
start-up (measured apart, on a sleeping process) and its sampling: on a machine of few CPUs, all
busy with the program, the fixed part alone is a visible share of a 10 s run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 1.01
_ELAPSED = re.compile(r"primes below (\d+), ([0-9.]+) s")


def find_pinlab() -> Path | None:
    candidates = [Path(sysconfig.get_path("scripts")) / "pinlab", Path(sys.executable).parent / "pinlab"]
    if shutil.which("pinlab"):
        candidates.append(Path(shutil.which("pinlab")))  # type: ignore[arg-type]
    candidates.append(HERE.parent / ".venv" / "bin" / "pinlab")
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def primes_path(pinlab: Path) -> str:
    done = subprocess.run([str(pinlab), "workload", "path", "primes"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run_once(program: list[str], env: dict[str, str], pinlab: Path | None) -> tuple[float, float | None]:
    """The program's own elapsed seconds, and with ``pinlab`` the doctor's CPU seconds per second watched."""
    started = time.monotonic()
    proc = subprocess.Popen(program, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    doctor = None
    if pinlab is not None:
        doctor = subprocess.Popen(
            [str(pinlab), "doctor", str(proc.pid), "--seconds", "3600", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    out, _ = proc.communicate()
    share = None
    if doctor is not None:
        _, _, usage = os.wait4(doctor.pid, 0)
        doctor.returncode = 0
        share = (usage.ru_utime + usage.ru_stime) / max(1e-9, time.monotonic() - started)
    match = _ELAPSED.search(out)
    if match is None:
        raise RuntimeError(f"cannot read the program's time from: {out.strip()[-200:]}")
    return float(match.group(2)), share


def fixed_cost(pinlab: Path) -> float:
    """CPU seconds of a doctor that watches a sleeping process for 0.2 s: its start-up (Python,
    imports, hwloc's look at the machine at the end) and two samples."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        doctor = subprocess.Popen(
            [str(pinlab), "doctor", str(sleeper.pid), "--seconds", "0.2", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _, _, usage = os.wait4(doctor.pid, 0)
        doctor.returncode = 0
        return usage.ru_utime + usage.ru_stime
    finally:
        sleeper.kill()
        sleeper.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=10.0, help="the program's run time alone (default 10)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    options = parser.parse_args()
    pinlab = find_pinlab()
    if pinlab is None:
        print("bench_doctor: pinlab is not installed here: make install (or pip install .), then run this again", file=sys.stderr)
        return 2
    primes = primes_path(pinlab)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}
    env["OMP_NUM_THREADS"] = str(options.threads)
    limit = 2_000_000
    for _ in range(2):  # a short run, then one near the length asked, each scaled to it
        took, _ = run_once([primes, "--limit", str(limit)], env, None)
        limit = max(100_000, int(limit * (options.seconds / max(took, 1e-3)) ** (1 / 1.4)))  # trial division: about n^1.4 here
    program = [primes, "--limit", str(limit)]
    alone: list[float] = []
    watched: list[float] = []
    shares: list[float] = []
    for round_ in range(options.rounds):
        order = (None, pinlab) if round_ % 2 == 0 else (pinlab, None)
        for who in order:
            seconds, share = run_once(program, env, who)
            (alone if who is None else watched).append(seconds)
            if share is not None:
                shares.append(share)
        print(f"round {round_ + 1}: alone {alone[-1]:.3f} s, watched {watched[-1]:.3f} s", flush=True)

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    fixed = statistics.median(fixed_cost(pinlab) for _ in range(5))
    ratio = statistics.median(watched) / statistics.median(alone)
    per_round = statistics.median(w / a for w, a in zip(watched, alone))
    print(f"\nprimes --limit {limit}, {options.threads} threads, {options.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"  alone:   {spread(alone)} s")
    print(f"  watched: {spread(watched)} s")
    print(f"  ratio of the medians {ratio:.4f}; median of the per-round ratios {per_round:.4f}")
    print(f"  the doctor's CPU time: {statistics.median(shares):.2%} of one CPU per second watched (median), of which")
    print(f"    fixed: {fixed:.3f} s once (start-up, imports, hwloc), the same whatever the window")
    sampling = statistics.median(shares) - fixed / statistics.median(watched)
    print(
        f"    sampling: {sampling:.2%} of one CPU per second; on {len(os.sched_getaffinity(0))} CPUs busy with the program that is {sampling / len(os.sched_getaffinity(0)):.2%} of the machine"
    )
    print(f"{'PASS' if per_round <= TARGET else 'MISS'}: watched within {TARGET - 1:.0%} of alone (median of the per-round ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
