#!/usr/bin/env python3
"""pinlab's own cost per study run (launch, record, store) against running the program directly.

Run by hand: ``.venv/bin/python bench/bench_study.py [--runs 41]``. Not a test; exits 0.
Target: under 5 ms per run, so that a 35-run study of a short program is dominated
by the program. Side by side, interleaved: (a) the program started directly (fork/exec/wait
from Python, as cheap as it gets), (b) one run as a study makes it: the launcher with the plan,
the controlled environment, output capture, the record, and one stored run in SQLite
(``pinlab.study.engine.execute_run`` + ``Store.add_run``). The program is ``/bin/true``, so
the difference is pinlab's own cost.

Then what checking a database costs: every ``Store.open`` runs SQLite's ``PRAGMA quick_check``
(so a damaged file is refused before anything reads or writes it). Databases of 2,000 and 20,000
runs, each with a record of 4 threads x 100 samples (about 4 KB, like a 10 s run sampled every
100 ms), are opened 7 times each; median milliseconds, and per MB of file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    args = parser.parse_args()
    from pinlab.study.engine import execute_run
    from pinlab.study.plan import Program, StudyPlan
    from pinlab.study.store import Store

    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        plan = StudyPlan(
            name="bench", programs=[Program("true", ["/bin/true"])], strategies=["none", "compact"], threads=[len(cpus)], runs=args.runs, warmup=0
        )
        store = Store.open(os.path.join(tmp, "bench.db"))
        study = store.create_study("bench", plan.parameters(), plan.configs(), 0, {}, "bench")
        configs = store.configs(study.id)
        direct, pinned, unpinned = [], [], []
        for i in range(args.runs):
            t = time.perf_counter()
            subprocess.run(["/bin/true"], check=True)
            direct.append(time.perf_counter() - t)
            for config, sink in ((configs[0], unpinned), (configs[1], pinned)):
                t = time.perf_counter()
                fields = execute_run(plan, config, i, False)
                store.add_run(config["id"], i, False, **fields)
                sink.append(time.perf_counter() - t)
        store.close()
    base = statistics.median(direct)
    print(f"pinlab's cost per study run, {args.runs} interleaved runs of /bin/true, milliseconds (median, min-max)")
    for label, values in (
        ("/bin/true started directly", direct),
        ("study run, none (unpinned)", unpinned),
        (f"study run, compact x{len(cpus)}", pinned),
    ):
        med = statistics.median(values)
        print(f"  {label:34} {med * 1e3:8.2f} ({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})   pinlab's own: {(med - base) * 1e3:+.2f} ms")
    worst = max(statistics.median(unpinned), statistics.median(pinned)) - base
    print(f"target: pinlab's own cost under 5 ms per run -> {'PASS' if worst < 0.005 else 'MISS'} ({worst * 1e3:.2f} ms)")
    check_cost()
    return 0


def check_cost() -> None:
    """Median time of Store.open (with its quick_check) on databases of a realistic size."""
    import sqlite3

    from pinlab.study.store import Store

    record = {"threads": [{"tid": t, "sample_times": [i / 10 for i in range(100)], "sample_cpus": [i % 4 for i in range(100)]} for t in range(4)]}
    print("checking a database when it is opened (PRAGMA quick_check), 7 opens, milliseconds (median, min-max)")
    for runs in (2_000, 20_000):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "big.db")
            with Store.open(path) as store:
                study = store.create_study("big", {}, [{"program": "p", "threads": 1}], 0, {}, "bench")
                config = store.configs(study.id)[0]["id"]
                store.add_run(config, 0, status="ok", wall_seconds=1.0, record=record)
                conn = store.connection
                columns = [c[1] for c in conn.execute("PRAGMA table_info(runs)") if c[1] not in ("id", "run_index")]
                conn.execute("BEGIN")
                conn.execute(
                    f"INSERT INTO runs (run_index, {', '.join(columns)}) SELECT value, {', '.join(columns)} FROM runs, "
                    f"(WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < {runs - 1}) SELECT value FROM n)"
                )
                conn.execute("COMMIT")
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(path) / 1e6
            times = []
            for _ in range(7):
                t = time.perf_counter()
                Store.open(path, readonly=True).close()
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            print(
                f"  {runs:6} runs, {size:6.1f} MB: {med * 1e3:7.1f} ({min(times) * 1e3:.1f}-{max(times) * 1e3:.1f}), {med * 1e3 / size:.2f} ms per MB"
            )


if __name__ == "__main__":
    sys.exit(main())
