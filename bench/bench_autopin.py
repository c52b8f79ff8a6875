#!/usr/bin/env python3
"""autopin against every candidate run as a fixed pinning, side by side, with co-runners making some CPUs worse.

Run by hand: ``.venv/bin/python bench/bench_autopin.py [--reps 3] [--trials 10] [--seconds 20] [--probe repin,restart]``.
Not a test: it asserts nothing about time; it prints tables and PASS/MISS against autopin's targets:

1. autopin's choice is the best fixed candidate, or one whose run time is within 1% of the
   best's, in at least 95% of cases;
2. the run time under autopin is within 3% of the best fixed pinning's, for runs longer than
   ten times the probing time;
3. with ``--rounds auto`` the probing takes at most half the time of fixed-window probing
   (``--rounds`` = ``--max-rounds``) at the same accuracy.

Scenarios come from this machine's CPUs: ``--corunners`` ``cpu`` co-runners (pinlab.workloads.corun)
load the last allowed CPU (and, on 8 CPUs or more, each CPU of the last quarter); for each
workload (the built-in primes: CPU-bound, dynamic schedule; stream: memory-bound, static
schedule; mb: cache-bound; and ``omp``, ``bench/omp_barriers.c``: a GNU OpenMP team meeting at a
barrier after every small step, compiled here) and thread count, the candidates are

- 1 thread: the loaded CPU, a free CPU;
- 2 threads: one per CPU with one of them loaded, both on a free CPU, both on the loaded CPU;
- n >= 4 threads (8 CPUs or more): autopin's automatic candidates for n threads.

Each workload's size is calibrated so that one run lasts about ``--seconds`` (at least ten times
the probing time). For each scenario and repetition, in rotating order: one ``pinlab run -c``
per candidate (wall time) and one ``pinlab autopin`` (wall time, the candidate the program ended
on, all the probing). Then ``--trials`` short probing-only sessions per mode (``--rounds auto``
against fixed rounds): autopin on a long run of the workload, stopped once it has chosen on the
heartbeat (a choice made on task-clock before the program beat is searched again when it does);
their choices and probing times, every search's.

``--probe`` names autopin's ways of probing to compare (``repin``: the running program moved to
each candidate; ``restart``: each probe a run of its own, then one more on the choice): each gets
its own whole runs and probing trials, and its own line against the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pinlab_command() -> str:
    for candidate in (Path(sys.executable).parent / "pinlab", shutil.which("pinlab"), HERE.parent / ".venv" / "bin" / "pinlab"):
        if candidate and Path(candidate).exists():
            return str(candidate)
    print("bench_autopin: pinlab is not installed: run `make install` first", file=sys.stderr)
    sys.exit(2)


PINLAB = pinlab_command()


OMP_SOURCE = HERE / "omp_barriers.c"


def compile_omp(where: Path) -> str:
    """bench/omp_barriers.c built with cc -O2 -fopenmp and pinlab's heartbeat header."""
    include = [
        f for f in subprocess.run([PINLAB, "cflags", "--mem"], capture_output=True, text=True, check=True).stdout.split() if f.startswith("-I")
    ]
    exe = where / "omp_barriers"
    subprocess.run(["cc", "-O2", "-fopenmp", *include, str(OMP_SOURCE), "-o", str(exe)], check=True)
    return str(exe)


OMP_EXE: list[str] = []  # built once, in main's work directory


def workload_path(name: str) -> str:
    if name == "omp":
        return OMP_EXE[0]
    return subprocess.run([PINLAB, "workload", "path", name], capture_output=True, text=True, check=True).stdout.strip()


def workload_argv(name: str, threads: int, size: float) -> list[str]:
    path = workload_path(name)
    if name == "primes":
        return [path, "--threads", str(threads), "--limit", str(int(size))]
    if name == "stream":
        return [path, "--threads", str(threads), "--size", str(int(size)), "--ntimes", "200"]
    if name == "mb":
        return [path, "--threads", str(threads), "--reps", str(int(size))]
    if name == "omp":
        return [path, str(threads), str(int(size))]
    raise ValueError(name)


BASE = {"primes": 5e6, "stream": 2e6, "mb": 2000, "omp": 20000}
EXPONENT = {"primes": 2 / 3, "stream": 1.0, "mb": 1.0, "omp": 1.0}  # size ~ time ** exponent


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.monotonic() - start


def calibrate(name: str, threads: int, cpus: str, seconds: float) -> float:
    """The size at which the workload runs about ``seconds`` on ``cpus`` (no co-runner)."""
    size = BASE[name]
    for _ in range(3):
        took = timed([PINLAB, "run", "-q", "--sample-ms", "1000", "--oversubscribe", "-c", cpus, "--", *workload_argv(name, threads, size)])
        print(f"  (calibrating {name}, {threads} threads: size {size:.4g} took {took:.2f} s)", flush=True)
        if 0.7 * seconds < took < 1.3 * seconds:
            break
        size *= (seconds / max(took, 0.05)) ** EXPONENT[name]
    return size


def scenarios(cpus: list[int], threads_list: list[int]) -> list[tuple[int, list[list[int]], list[int]]]:
    """(threads, candidates, CPUs the co-runners load)."""
    busy = [cpus[-1]] if len(cpus) < 8 else cpus[-max(1, len(cpus) // 4) :]
    free = [c for c in cpus if c not in busy]
    out = []
    for n in threads_list:
        if n == 1:
            out.append((1, [[busy[0]], [free[0]]], busy))
        elif n == 2 and len(cpus) >= 2:
            out.append((2, [[free[0], busy[0]], [free[0], free[0]], [busy[0], busy[0]]], busy))
        elif n >= 4 and len(cpus) >= 8:
            from pinlab.autopin.candidates import auto_candidates
            from pinlab.topology import load_topology

            out.append((n, [list(c.cpus) for c in auto_candidates(load_topology("this"), n, max_candidates=4)], busy))
    return out


def candidates_text(candidates: list[list[int]]) -> str:
    return ";".join(",".join(map(str, c)) for c in candidates)


def autopin_run(argv: list[str], candidates: list[list[int]], params: list[str], log: Path) -> tuple[float, dict]:
    """A whole run under autopin: its time, the candidate the program ended on and all the probing."""
    took = timed([PINLAB, "autopin", "-q", "-C", candidates_text(candidates), *params, "--log", str(log), "--", *argv])
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    summary = next((e for e in events if e["event"] == "summary"), None)
    final = (summary or {}).get("final")
    return took, {"choice": final["candidate"] if final else None, "probing": summary["probing_seconds"] if summary else None}


def settled_choice(events: list[dict]) -> tuple[dict | None, float]:
    """The first choice made on a metric other than task-clock, and the probing up to it (every
    search's): a choice on task-clock before the program beats is searched again once it does
    (autopin's metric event), so it is not yet the answer."""
    metric, probing = (events[0].get("metric") if events else None), 0.0
    for event in events:
        if event["event"] == "metric":
            metric = event["metric"]
        elif event["event"] == "choice":
            probing += event["probing_seconds"] or 0.0
            if metric != "task-clock":
                return event, probing
    return None, probing


def probe_only(argv: list[str], candidates: list[list[int]], params: list[str], log: Path, limit: float) -> dict:
    """autopin on a long run, stopped (with the program) once it has chosen on the heartbeat (or,
    failing that within ``limit``, the last choice it made)."""
    proc = subprocess.Popen(
        [PINLAB, "autopin", "-q", "-C", candidates_text(candidates), *params, "--log", str(log), "--", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + limit
    choice, probing, events = None, 0.0, []
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        if log.exists():
            events = [json.loads(line) for line in log.read_text().splitlines() if line.strip().endswith("}")]
            choice, probing = settled_choice(events)
            if choice:
                break
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    proc.wait()
    if choice is None:  # never beat: the last choice, on task-clock
        made = [e for e in events if e["event"] == "choice"]
        choice, probing = (made[-1], sum(e["probing_seconds"] or 0.0 for e in made)) if made else (None, 0.0)
    return {"choice": choice["candidate"] if choice else None, "probing": probing if choice else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every fixed run and autopin run")
    parser.add_argument("--trials", type=int, default=10, help="probing-only sessions per scenario and mode")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of one run")
    parser.add_argument("--workloads", default="primes,stream,mb")
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--interval", type=float, default=0.4, help="autopin -T (W = T/2, i = W)")
    parser.add_argument("--max-rounds", type=int, default=3)
    parser.add_argument("--probe", default="repin", help="autopin's ways of probing to compare: repin, restart or repin,restart")
    parser.add_argument("--corunners", type=int, default=1, help="cpu co-runners on each loaded CPU")
    parser.add_argument("--out", help="write every measurement to this JSON file")
    args = parser.parse_args()
    from pinlab.workloads.corun import CoRunners  # the installed pinlab (run this with its interpreter)

    modes = [m.strip() for m in args.probe.split(",") if m.strip()]
    cpus = sorted(os.sched_getaffinity(0))
    params = ["-T", str(args.interval)]
    results = []
    work = Path(tempfile.mkdtemp(prefix="bench-autopin-"))
    if "omp" in args.workloads.split(","):
        OMP_EXE.append(compile_omp(work))
    print(
        f"bench_autopin: {len(cpus)} CPUs, runs of about {args.seconds:g} s, autopin -T {args.interval:g} (W = T/2, i = W), "
        f"{args.reps} repetitions, {args.trials} probing trials per mode, probing by {', '.join(modes)}, "
        f"{args.corunners} co-runner(s) per loaded CPU"
    )
    for name in args.workloads.split(","):
        for n, candidates, busy in scenarios(cpus, [int(t) for t in args.threads.split(",")]):
            size = calibrate(name, n, ",".join(map(str, candidates[0])), args.seconds)
            argv = workload_argv(name, n, size)
            fixed: dict[int, list[float]] = {i: [] for i in range(len(candidates))}
            auto_runs: dict[str, list[dict]] = {m: [] for m in modes}
            trials: dict[str, dict[str, list[dict]]] = {m: {"auto": [], "fixed": []} for m in modes}
            with CoRunners("cpu", len(busy) * args.corunners, busy):
                for rep in range(args.reps):
                    order: list = list(range(len(candidates))) + [("autopin", m) for m in modes]
                    order = order[rep % len(order) :] + order[: rep % len(order)]
                    for what in order:
                        if isinstance(what, tuple):
                            mode = what[1]
                            took, info = autopin_run(argv, candidates, params + ["--probe", mode], work / f"{name}-{n}-{mode}-{rep}.jsonl")
                            auto_runs[mode].append({"seconds": took, **info})
                        else:
                            cpus_text = ",".join(map(str, candidates[what]))
                            fixed[what].append(timed([PINLAB, "run", "-q", "--sample-ms", "1000", "-c", cpus_text, "--oversubscribe", "--", *argv]))
                long_argv = workload_argv(name, n, size * 4)
                for trial in range(args.trials):
                    for mode in modes:
                        for rounds_mode in ("auto", "fixed"):
                            rounds = (
                                ["--rounds", "auto", "--max-rounds", str(args.max_rounds)]
                                if rounds_mode == "auto"
                                else ["--rounds", str(args.max_rounds)]
                            )
                            log = work / f"{name}-{n}-{mode}-{rounds_mode}-{trial}.jsonl"
                            trials[mode][rounds_mode].append(probe_only(long_argv, candidates, params + rounds + ["--probe", mode], log, 120))
            medians = {i: statistics.median(v) for i, v in fixed.items()}
            best = min(medians, key=lambda i: medians[i])
            good = {i for i, m in medians.items() if m <= 1.01 * medians[best]}
            overhead = {m: statistics.median(r["seconds"] for r in auto_runs[m]) / medians[best] - 1 for m in modes}
            results.append(
                {
                    "workload": name,
                    "threads": n,
                    "candidates": candidates,
                    "busy": busy,
                    "corunners": args.corunners,
                    "argv": argv[1:],
                    "fixed": fixed,
                    "autopin": auto_runs,
                    "trials": trials,
                    "best": best,
                    "good": sorted(good),
                    "overhead": overhead,
                }
            )
            print(f"\n{name}, {n} threads, {args.corunners} co-runner(s) on CPUs {','.join(map(str, busy))}: {' '.join(argv[1:])}")
            for i, c in enumerate(candidates):
                mark = " best" if i == best else (" within 1%" if i in good else "")
                print(f"  fixed {','.join(map(str, c)):>12}: median {medians[i]:7.2f} s (min {min(fixed[i]):.2f}, max {max(fixed[i]):.2f}){mark}")
            for mode in modes:
                runs = auto_runs[mode]
                chosen = [r["choice"] for r in runs]
                probing = [r["probing"] for r in runs if r["probing"] is not None]
                auto_median = statistics.median(r["seconds"] for r in runs)
                print(
                    f"  autopin ({mode:7}) : median {auto_median:7.2f} s, {overhead[mode]:+.1%} against the best fixed; "
                    f"choices {chosen}; probing {statistics.median(probing) if probing else float('nan'):.2f} s"
                )
                for rounds_mode in ("auto", "fixed"):
                    made = [t["choice"] for t in trials[mode][rounds_mode]]
                    times = [t["probing"] for t in trials[mode][rounds_mode] if t["probing"] is not None]
                    right = sum(1 for c in made if c in good)
                    median_time = statistics.median(times) if times else float("nan")
                    print(f"  probing ({mode:7}), rounds {rounds_mode:5}: {right}/{len(made)} right, probing median {median_time:.2f} s")
    for mode in modes:
        targets(mode, results)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def targets(mode: str, results: list[dict]) -> None:
    """The three targets, for one way of probing."""
    cases = [(r["choice"] in res["good"]) for res in results for r in res["autopin"][mode]] + [
        (t["choice"] in res["good"]) for res in results for rounds in ("auto", "fixed") for t in res["trials"][mode][rounds]
    ]
    accuracy = sum(cases) / len(cases) if cases else float("nan")
    overheads = [res["overhead"][mode] for res in results]
    auto_times = [t["probing"] for res in results for t in res["trials"][mode]["auto"] if t["probing"] is not None]
    fixed_times = [t["probing"] for res in results for t in res["trials"][mode]["fixed"] if t["probing"] is not None]
    acc_auto = [t["choice"] in res["good"] for res in results for t in res["trials"][mode]["auto"]]
    acc_fixed = [t["choice"] in res["good"] for res in results for t in res["trials"][mode]["fixed"]]
    ratio = statistics.median(auto_times) / statistics.median(fixed_times) if auto_times and fixed_times else float("nan")
    print(f"\nTargets, probing by {mode}")
    print(f"  choice best or within 1%: {sum(cases)}/{len(cases)} = {accuracy:.1%} (target >= 95%): {'PASS' if accuracy >= 0.95 else 'MISS'}")
    print(
        f"  run time under autopin against the best fixed: median {statistics.median(overheads):+.1%}, worst {max(overheads):+.1%} "
        f"(target within 3%): {'PASS' if max(overheads) <= 0.03 else 'MISS'}"
    )
    print(
        f"  rounds auto probing / fixed rounds probing: {ratio:.2f} (target <= 0.5), accuracy {sum(acc_auto)}/{len(acc_auto)} against "
        f"{sum(acc_fixed)}/{len(acc_fixed)}: {'PASS' if ratio <= 0.5 and sum(acc_auto) >= sum(acc_fixed) else 'MISS'}"
    )


if __name__ == "__main__":
    sys.exit(main())
