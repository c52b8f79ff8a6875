#!/usr/bin/env python3
"""What pinning every thread at creation costs with ``pinlab run``, next to the floor, taskset, numactl and likwid-pin.

Run by hand: ``.venv/bin/python bench/bench_run.py [--rounds 7] [--threads 10000] [--batch 8]``
(any interpreter will do: pinlab is looked for in the running interpreter's scripts directory,
then on PATH, then in this repository's ``.venv``; without one it says how to install and
exits 2). Not a test: it asserts nothing about time and otherwise exits 0 (timings depend on
the machine and its load); it prints tables and PASS/MISS against the targets:

    pinlab's per-thread cost within 1.15 times the floor: the same program pinning each of its
    own threads at creation (pthread_attr_setaffinity_np) onto the same CPUs;
    pinlab's per-thread overhead within 10% of the fastest of the peers below, and below 5
    microseconds per thread.

1. Per-thread cost. ``bench/thread_churn.c`` (compiled here with ``cc -O2 -pthread`` into a
   temporary directory) creates and joins THREADS threads, BATCH at a time, each doing trivial
   work, and prints the elapsed time it measured itself, so a launcher's start-up is excluded.
   It runs, in interleaved rounds (the order rotates every round), under:

   - nothing (unpinned);
   - nothing, compiled with ``-DSELF_PIN`` (the floor): the program pins its main thread to the
     first CPU of LIST and each thread it creates, round-robin over LIST, through
     ``pthread_attr_setaffinity_np`` on the attributes it passes to ``pthread_create`` (glibc
     applies them right after clone, before the thread runs): the placement ``pinlab run -c
     LIST`` gives, at the least cost a program can pay for it;
   - ``pinlab run -c LIST --quiet --sample-ms 1000 --`` (every thread pinned at creation by the
     preload library, round-robin over LIST);
   - ``taskset -c LIST``, ``numactl --physcpubind=LIST`` (the whole process restricted to LIST:
     nothing to do per thread);
   - ``likwid-pin -q -c LIST`` (every thread pinned by likwid's own preload library) when
     installed; it is measured on fewer threads when it is slow (said in the table).

   LIST is every CPU this process may use, or ``--cpus``. With one CPU (``--cpus 0``) the tools
   all end with every thread on that CPU: the difference is then pinlab's own per-thread cost,
   not the cost of moving threads to other CPUs, which only per-thread pinners pay. Reported: median (min-max) microseconds per thread,
   the overhead of the median over unpinned, pinlab's cost over the floor's (the ratio of the
   medians, and the median of the ratios within each round, less sensitive to a loaded machine)
   and over the fastest peer's.

   Then, to show where pinlab's per-thread time goes, the same program with the preload library
   set up by hand (the environment ``pinlab run`` gives it, without the Python launcher):
   pinning only, without the event file; pinning every thread on the first CPU of LIST (the
   creator's CPU); and with the event file, as ``pinlab run`` does. Then the scheduler's
   software counters per thread (``perf stat -e task-clock,context-switches,cpu-migrations``,
   when perf is installed) and the system calls per thread (``strace -f -c``, when installed)
   of unpinned, the floor and the preload library.

2. Fixed start-up: wall time of ``pinlab run -c 0 -- true`` (and with ``-q``) next to
   ``taskset -c 0 true``, the bare interpreter and ``import pinlab.cli``; many repetitions,
   median. Then the ten imports with the largest cumulative time when ``pinlab run`` starts
   (``PYTHONPROFILEIMPORTTIME=1``, what ``python -X importtime`` prints).
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
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "thread_churn.c"
TARGET = (
    "pinlab's per-thread cost within 1.15 times the floor (threads pinned by the program itself); "
    "its overhead within 10% of the fastest peer's, and below 5 microseconds per thread"
)
TARGET_FLOOR_RATIO = 1.15
TARGET_OVERHEAD_US = 5.0
TARGET_RATIO = 1.10
FLOOR = "floor: self-pinning (pthread_attr_setaffinity_np)"
# The event ring pinlab run prepares (pinlab.launch.runner), for when pinlab cannot be imported here.
RING_MAGIC, RING_HEADER, RING_CAPACITY = b"PINLABE1", 4096, 64 << 20


def find_pinlab() -> Path | None:
    """The pinlab command: next to the running interpreter's scripts, else on PATH, else in this repository's .venv."""
    candidates = [Path(sysconfig.get_path("scripts")) / "pinlab", Path(sys.executable).parent / "pinlab"]
    found = shutil.which("pinlab")
    if found:
        candidates.append(Path(found))
    candidates.append(HERE.parent / ".venv" / "bin" / "pinlab")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


PINLAB: Path = Path("pinlab")  # set by main()
PINLAB_PYTHON: str = sys.executable  # the interpreter pinlab is installed in, set by main()


def interpreter_of(script: Path) -> str:
    """The Python interpreter a console script runs with (its #! line), else this one."""
    try:
        with open(script, "rb") as f:
            first = f.readline().decode("utf-8", "replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!"):
        words = first[2:].split()
        if words and "python" in os.path.basename(words[0]) and os.access(words[0], os.X_OK):
            return words[0]
    return sys.executable


_PRELOAD: list[str] = []


def preload_library() -> str:
    """Path of pinlab's preload library, asked of the interpreter pinlab is installed in."""
    if not _PRELOAD:
        code = "from pinlab.native import native_path; print(native_path('libpinlab-preload.so'))"
        proc = subprocess.run([PINLAB_PYTHON, "-c", code], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(f"cannot find pinlab's preload library with {PINLAB_PYTHON}: {proc.stderr.strip()[-200:]}")
        _PRELOAD.append(proc.stdout.strip())
    return _PRELOAD[0]


LIKWID_BUDGET_S = 3.0  # likwid-pin runs on fewer threads when THREADS would take longer than this
_OUTPUT = re.compile(r"threads=(\d+) batch=(\d+) elapsed_s=([0-9.]+)")


def cpulist(cpus) -> str:
    cpus, parts, i = sorted(cpus), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def compile_churn(where: str, *defines: str, name: str = "thread_churn") -> str:
    """bench/thread_churn.c compiled with cc -O2 -pthread (and -D flags: SELF_PIN for the floor)."""
    exe = os.path.join(where, name)
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        raise RuntimeError(f"no C compiler ({cc}; set CC) to build {SOURCE.name}")
    subprocess.run([cc, "-O2", "-pthread", *(f"-D{d}" for d in defines), "-o", exe, str(SOURCE)], check=True)
    return exe


def churn_once(command: Sequence[str], env: dict[str, str] | None = None) -> float | None:
    """Microseconds per thread the program measured, or None (with the reason printed) if it failed."""
    proc = subprocess.run(list(command), capture_output=True, text=True, env=env, check=False)
    match = _OUTPUT.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        print(f"  ! {' '.join(command[:4])}...: exit {proc.returncode} {proc.stderr.strip()[:200]}", file=sys.stderr)
        return None
    return float(match.group(3)) / int(match.group(1)) * 1e6


def median_range(values: list[float]) -> str:
    if not values:
        return "failed"
    return f"{statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


def preload_env(cpus: str, allowed: str, events: str | None) -> dict[str, str]:
    """The environment `pinlab run -c CPUS` gives the program (pinlab.launch.runner.build_environment)."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(p for p in (preload_library(), env.get("LD_PRELOAD", "")) if p)
    env["PINLAB_CPUS"] = cpus
    env["PINLAB_OVERFLOW"] = "wrap"
    env["PINLAB_ALLOWED"] = allowed
    env.pop("PINLAB_EVENTS", None)
    if events:
        env["PINLAB_EVENTS"] = events
    return env


def reset_ring(path: str) -> None:
    """An empty event ring at ``path``, laid out as pinlab run makes it (header page + sparse room)."""
    with open(path, "wb") as ring:
        ring.write(RING_MAGIC + RING_CAPACITY.to_bytes(8, "little") + bytes(16))
        ring.truncate(RING_HEADER + RING_CAPACITY)


def per_thread(args, exe: str, floor_exe: str) -> dict:
    allowed = sorted(int(c) for c in args.cpus.split(",")) if args.cpus else sorted(os.sched_getaffinity(0))
    listed = ",".join(map(str, allowed))
    compact = cpulist(allowed)
    n, batch = str(args.threads), str(args.batch)
    tmp = tempfile.mkdtemp(prefix="bench-run-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    events = os.path.join(tmp, "events.txt")  # in /dev/shm, where pinlab run puts its ring
    # name -> (command, env, kind); kind: base, floor, pinlab, peer, diag
    configs: dict[str, tuple[list[str], dict | None, str]] = {
        "unpinned": ([exe, n, batch], None, "base"),
        FLOOR: ([floor_exe, n, batch, listed], None, "floor"),
        f"pinlab run -c {listed}": ([str(PINLAB), "run", "-c", listed, "--quiet", "--sample-ms", "1000", "--", exe, n, batch], None, "pinlab"),
        f"taskset -c {compact}": (["taskset", "-c", compact, exe, n, batch], None, "peer"),
        f"numactl --physcpubind={compact}": (["numactl", f"--physcpubind={compact}", exe, n, batch], None, "peer"),
    }
    likwid_threads = None
    if shutil.which("likwid-pin"):
        # likwid-pin's preload may be far slower per thread: calibrate, then size its runs.
        probe = churn_once(["likwid-pin", "-q", "-c", listed, exe, "40", batch])
        likwid_threads = args.threads
        if probe is not None and probe * 1e-6 * args.threads > LIKWID_BUDGET_S:
            likwid_threads = max(40, int(LIKWID_BUDGET_S / (probe * 1e-6)) // args.batch * args.batch)
        configs[f"likwid-pin -q -c {listed}"] = (["likwid-pin", "-q", "-c", listed, exe, str(likwid_threads), batch], None, "peer")
    for tool in ("taskset", "numactl"):
        if not shutil.which(tool):
            del configs[next(k for k in configs if k.startswith(tool))]
    diag = {
        "preload, pinning only (no event file)": ([exe, n, batch], preload_env(listed, compact, None), "diag"),
        f"preload, every thread on CPU {allowed[0]} (no event file)": ([exe, n, batch], preload_env(str(allowed[0]), compact, None), "diag"),
        "preload + event file (= pinlab run without Python)": ([exe, n, batch], preload_env(listed, compact, events), "diag"),
    }
    configs.update(diag)
    names = list(configs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    rounds: list[dict[str, float]] = []  # each round's values, for ratios within a round
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        this: dict[str, float] = {}
        for name in order:
            command, env, _ = configs[name]
            if env and env.get("PINLAB_EVENTS") == events:
                reset_ring(events)  # a fresh event ring, as pinlab run prepares one
            value = churn_once(command, env)
            if value is not None:
                samples[name].append(value)
                this[name] = value
        rounds.append(this)
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"configs": configs, "samples": samples, "rounds": rounds, "likwid_threads": likwid_threads, "listed": listed}


def paired_ratio(rounds: list[dict[str, float]], a: str, b: str) -> float | None:
    """The median over the rounds of a / b measured in the same round (a load that comes and goes
    between rounds moves both)."""
    ratios = [r[a] / r[b] for r in rounds if a in r and b in r and r[b] > 0]
    return statistics.median(ratios) if ratios else None


def print_per_thread(args, result: dict) -> tuple[bool, str]:
    configs, samples = result["configs"], result["samples"]
    med = {name: statistics.median(v) for name, v in samples.items() if v}
    base = med.get("unpinned")
    pinlab_name = next(k for k, c in configs.items() if c[2] == "pinlab")
    peers = [k for k, c in configs.items() if c[2] == "peer" and k in med]
    print(f"\n1. Per-thread cost: {args.threads} threads created and joined, {args.batch} at a time, {args.rounds} interleaved rounds")
    print("   (time measured by the program itself; microseconds per thread, median (min-max); overhead = median - unpinned median)\n")
    header = f"   {'launcher':56} {'us/thread':>24} {'overhead us':>12} {'vs unpinned':>12}"
    print(header)
    print("   " + "-" * (len(header) - 3))
    for name, (_, _, kind) in configs.items():
        if kind == "diag":
            continue
        label = name
        if name.startswith("likwid-pin") and result["likwid_threads"] != args.threads:
            label = f"{name} [{result['likwid_threads']} threads]"
        over = f"{med[name] - base:+12.2f}" if name in med and base else f"{'-':>12}"
        ratio = f"{med[name] / base:11.2f}x" if name in med and base else f"{'-':>12}"
        print(f"   {label:56} {median_range(samples[name]):>24} {over} {ratio}")
    verdict_ok = True
    lines = []
    if pinlab_name in med and FLOOR in med:
        ratio = med[pinlab_name] / med[FLOOR]
        paired = paired_ratio(result["rounds"], pinlab_name, FLOOR)
        ok_floor = ratio <= TARGET_FLOOR_RATIO
        verdict_ok = ok_floor
        floor_over = f", overhead over unpinned {med[FLOOR] - base:+.2f} us" if base else ""
        print(f"\n   floor: {med[FLOOR]:.2f} us/thread{floor_over} (each thread pinned by the program itself at creation)")
        print(
            f"   pinlab / floor (per-thread cost): {ratio:.3f}  -> {'PASS' if ok_floor else 'MISS'} (target <= {TARGET_FLOOR_RATIO:.2f}); "
            f"median of the ratios within each round {paired:.3f}; difference {med[pinlab_name] - med[FLOOR]:+.2f} us/thread"
        )
        lines.append(f"per-thread: pinlab/floor {ratio:.3f} ({'PASS' if ok_floor else 'MISS'})")
    else:
        print("\n   (not enough successful runs for the floor verdict)")
        verdict_ok = False
    if pinlab_name in med and base and peers:
        fastest = min(peers, key=lambda k: med[k])
        overhead = med[pinlab_name] - base
        ratio = med[pinlab_name] / med[fastest]
        peer_over = med[fastest] - base
        ok_ratio = ratio <= TARGET_RATIO
        ok_abs = overhead < TARGET_OVERHEAD_US
        verdict_ok = verdict_ok and ok_ratio and ok_abs
        print(f"\n   fastest peer: {fastest} ({med[fastest]:.2f} us/thread, overhead {peer_over:+.2f} us)")
        print(f"   pinlab / fastest peer (per-thread cost): {ratio:.3f}  -> {'PASS' if ok_ratio else 'MISS'} (target <= {TARGET_RATIO:.2f})")
        print(
            f"   pinlab overhead over unpinned: {overhead:+.2f} us/thread  -> {'PASS' if ok_abs else 'MISS'} (target < {TARGET_OVERHEAD_US:.0f} us)"
        )
        lows = {k: min(samples[k]) for k in [pinlab_name, "unpinned", *peers]}
        low_fastest = min(peers, key=lambda k: lows[k])
        print(
            f"   (on the minima, the least disturbed runs: pinlab / fastest peer {lows[pinlab_name] / lows[low_fastest]:.3f}, "
            f"pinlab overhead {lows[pinlab_name] - lows['unpinned']:+.2f} us)"
        )
        lines.append(
            f"pinlab/fastest peer {ratio:.3f} ({'PASS' if ok_ratio else 'MISS'}), overhead {overhead:+.2f} us ({'PASS' if ok_abs else 'MISS'})"
        )
    else:
        print("\n   (not enough successful runs for a verdict)")
        verdict_ok = False
    print("\n   Where pinlab's per-thread time goes (the preload library set up by hand, no Python launcher):\n")
    print(f"   {'variant':56} {'us/thread':>24} {'overhead us':>12}")
    print("   " + "-" * 94)
    for name, (_, _, kind) in configs.items():
        if kind != "diag":
            continue
        over = f"{med[name] - base:+12.2f}" if name in med and base else f"{'-':>12}"
        vs_floor = f"{med[name] / med[FLOOR]:10.3f}x" if name in med and FLOOR in med else f"{'-':>11}"
        print(f"   {name:56} {median_range(samples[name]):>24} {over} {vs_floor} floor")
    return verdict_ok, "; ".join(lines)


def software_counters(exe: str, floor_exe: str, listed: str, allowed: str, threads: int, batch: int, reps: int = 3) -> None:
    """The scheduler's view per thread (perf stat software events): unpinned, the floor, the preload library."""
    if not shutil.which("perf"):
        print("\n   (perf not installed: no software counters)")
        return
    events = "task-clock,context-switches,cpu-migrations,page-faults"
    tmp = tempfile.mkdtemp(prefix="bench-run-perf-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    ring = os.path.join(tmp, "events.ring")
    runs = {
        "unpinned": ([exe, str(threads), str(batch)], None),
        "floor (self-pinning)": ([floor_exe, str(threads), str(batch), listed], None),
        "preload + event ring": ([exe, str(threads), str(batch)], preload_env(listed, allowed, ring)),
    }
    values: dict[str, dict[str, list[float]]] = {name: {} for name in runs}
    for _ in range(reps):
        for name, (command, env) in runs.items():
            if env:
                reset_ring(ring)
            proc = subprocess.run(["perf", "stat", "-x", ",", "-e", events, *command], env=env, capture_output=True, text=True, check=False)
            for line in proc.stderr.splitlines():
                fields = line.split(",")
                if len(fields) > 2 and fields[2] in events.split(",") and fields[0].replace(".", "", 1).isdigit():
                    values[name].setdefault(fields[2], []).append(float(fields[0]) / threads)
    shutil.rmtree(tmp, ignore_errors=True)
    if not any(values.values()):
        print("\n   (perf stat failed: no software counters)")
        return
    print(f"\n   Software counters per created thread (perf stat, {threads} threads, median of {reps} runs):\n")
    print(f"   {'':24} {'task-clock us':>14} {'context-switches':>17} {'cpu-migrations':>15} {'page-faults':>12}")
    for name, table in values.items():
        cells = [
            f"{statistics.median(table[e]) * (1e3 if e == 'task-clock' else 1):{w}.{2 if e == 'task-clock' else 3}f}"
            if table.get(e)
            else f"{'-':>{w}}"
            for e, w in zip(events.split(","), (14, 17, 15, 12))
        ]
        print(f"   {name:24} {' '.join(cells)}")


def syscall_profile(exe: str, floor_exe: str, listed: str, allowed: str, threads: int, batch: int) -> None:
    """System calls per thread: unpinned, the floor and the preload library with its event ring (strace -f -c)."""
    if not shutil.which("strace"):
        print("\n   (strace not installed: no system-call profile)")
        return
    print(f"\n   System calls per created thread (strace -f -c, {threads} threads; strace itself slows everything down):\n")
    tmp = tempfile.mkdtemp(prefix="bench-run-strace-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    ring = os.path.join(tmp, "events.ring")
    counts: dict[str, dict[str, float]] = {}
    runs = {
        "unpinned": ([exe, str(threads), str(batch)], None),
        "floor": ([floor_exe, str(threads), str(batch), listed], None),
        "preload + event ring": ([exe, str(threads), str(batch)], preload_env(listed, allowed, ring)),
    }
    for name, (command, env) in runs.items():
        out = os.path.join(tmp, f"{name.split()[0]}.strace")
        if env:
            reset_ring(ring)
        subprocess.run(["strace", "-f", "-c", "-o", out, *command], env=env, capture_output=True, check=False)
        table: dict[str, float] = {}
        try:
            text = Path(out).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            # % time, seconds, usecs/call, calls, [errors], syscall
            if len(words) >= 5 and words[-1] != "total" and words[3].isdigit():
                table[words[-1]] = int(words[3]) / threads
        counts[name] = table
    shutil.rmtree(tmp, ignore_errors=True)
    if len(counts) != 3:
        print("   (strace failed)")
        return
    u, f, b = counts["unpinned"], counts["floor"], counts["preload + event ring"]
    calls = sorted(set(u) | set(f) | set(b), key=lambda c: (-(b.get(c, 0) - f.get(c, 0)), -(f.get(c, 0) - u.get(c, 0))))
    print(f"   {'system call':24} {'unpinned':>10} {'floor':>10} {'pinlab preload':>15} {'vs floor':>9}")
    for call in calls:
        if max(abs(b.get(call, 0) - f.get(call, 0)), abs(f.get(call, 0) - u.get(call, 0))) >= 0.05:
            print(f"   {call:24} {u.get(call, 0):10.2f} {f.get(call, 0):10.2f} {b.get(call, 0):15.2f} {b.get(call, 0) - f.get(call, 0):+9.2f}")
    print(f"   {'all':24} {sum(u.values()):10.2f} {sum(f.values()):10.2f} {sum(b.values()):15.2f} {sum(b.values()) - sum(f.values()):+9.2f}")


def startup(args) -> None:
    reps = args.startup_reps
    python = PINLAB_PYTHON
    configs = {
        "taskset -c 0 true": ["taskset", "-c", "0", "true"],
        "pinlab run -c 0 -- true": [str(PINLAB), "run", "-c", "0", "--", "true"],
        "pinlab run -q -c 0 -- true": [str(PINLAB), "run", "-q", "-c", "0", "--", "true"],
        "python -c pass (pinlab's interpreter)": [python, "-c", "pass"],
        "python -c 'import pinlab.cli'": [python, "-c", "import pinlab.cli"],
    }
    if shutil.which("numactl"):
        configs["numactl --physcpubind=0 true"] = ["numactl", "--physcpubind=0", "true"]
    if shutil.which("likwid-pin"):
        configs["likwid-pin -q -c 0 true"] = ["likwid-pin", "-q", "-c", "0", "true"]
    times: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(reps):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            subprocess.run(configs[name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[name].append((time.perf_counter() - start) * 1e3)
    print(f"\n2. Fixed start-up: wall time of the whole command, {reps} interleaved repetitions, milliseconds median (min-max)\n")
    base = statistics.median(times["taskset -c 0 true"])
    for name in names:
        m = statistics.median(times[name])
        print(f"   {name:40} {m:8.1f} ({min(times[name]):.1f}-{max(times[name]):.1f})   {m - base:+8.1f} vs taskset")
    # Where pinlab run's start-up goes: the imports.
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([str(PINLAB), "run", "-q", "-c", "0", "--", "true"], capture_output=True, text=True, env=env, check=False)
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) - 1, m.group(4)))
    total_self = sum(r[1] for r in rows)
    print(f"\n   Imports of `pinlab run -q -c 0 -- true` (PYTHONPROFILEIMPORTTIME=1): {len(rows)} modules, {total_self / 1e3:.1f} ms in all")
    print("   top 10 by cumulative time:\n")
    print(f"   {'cumulative ms':>13} {'self ms':>8}  module (indent = nesting)")
    for cumulative, own, depth, name in sorted(rows, key=lambda r: -r[0])[:10]:
        print(f"   {cumulative / 1e3:13.2f} {own / 1e3:8.2f}  {'  ' * depth}{name}")
    profile_run()


def profile_run() -> None:
    """After the imports: where one `pinlab run -q -c 0 -- true` spends its time (cProfile, in a fresh interpreter)."""
    code = (
        "import cProfile, pstats, io, sys\n"
        "from pinlab.cli import main\n"
        "import pinlab.launch, pinlab.launch.runner\n"
        "main(['run', '-q', '-c', '0', '--', 'true'])\n"  # warm-up: lazy imports, caches
        "prof = cProfile.Profile(); prof.enable()\n"
        "for _ in range(20):\n"
        "    main(['run', '-q', '-c', '0', '--', 'true'])\n"
        "prof.disable()\n"
        "out = io.StringIO(); pstats.Stats(prof, stream=out).sort_stats('cumulative').print_stats(18)\n"
        "print(out.getvalue())\n"
    )
    proc = subprocess.run([PINLAB_PYTHON, "-c", code], capture_output=True, text=True, check=False)
    print(
        "\n   After the imports: 20 calls of pinlab.cli.main(['run', '-q', '-c', '0', '--', 'true']) in one process (cProfile, by cumulative time):\n"
    )
    lines = proc.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "function calls" in line), 0)
    for line in lines[start:]:
        if line.strip():
            print(f"   {line.rstrip()[:150]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--startup-reps", type=int, default=21)
    parser.add_argument(
        "--cpus",
        help="comma-separated CPUs for LIST (default: all allowed). With one CPU every tool ends "
        "with all threads on it, so the comparison isolates pinlab's own per-thread cost",
    )
    parser.add_argument("--no-startup", action="store_true", help="skip the start-up measurements")
    args = parser.parse_args()
    global PINLAB, PINLAB_PYTHON
    found = find_pinlab()
    if found is None:
        print(
            "bench_run: pinlab is not installed (not next to this interpreter, not on PATH, not in this repository's .venv): "
            "run `make install` in the repository, or `pip install .` into the interpreter that runs this script",
            file=sys.stderr,
        )
        return 2
    PINLAB, PINLAB_PYTHON = found, interpreter_of(found)
    try:
        import platform

        print(
            f"bench_run: {platform.node()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} allowed), Linux {platform.release()}, Python {platform.python_version()}"
        )
        print(f"pinlab: {PINLAB} (Python {PINLAB_PYTHON})")
        print(f"target: {TARGET}")
        with tempfile.TemporaryDirectory(prefix="bench-run-cc-") as build:
            exe = compile_churn(build)
            floor_exe = compile_churn(build, "SELF_PIN", name="thread_churn_selfpin")
            result = per_thread(args, exe, floor_exe)
            ok, summary = print_per_thread(args, result)
            allowed = cpulist(sorted(os.sched_getaffinity(0)))
            software_counters(exe, floor_exe, result["listed"], allowed, min(args.threads, 4000), args.batch)
            syscall_profile(exe, floor_exe, result["listed"], allowed, min(args.threads, 2000), args.batch)
        if not args.no_startup:
            startup(args)
        print(f"\nverdict: {summary or 'no verdict'} -> {'PASS' if ok else 'MISS'}")
    except Exception as exc:  # a benchmark never fails the build
        print(f"bench_run: could not finish: {exc!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
