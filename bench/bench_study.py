#!/usr/bin/env python3
"""pinlab's own cost per study run (launch, record, store) against running the program directly.

Run by hand: ``.venv/bin/python bench/bench_study.py [--runs 41]``. Not a test; exits 0.
Target (issue 5): under 5 ms per run, so that a 35-run study of a short program is dominated
by the program. Side by side, interleaved: (a) the program started directly (fork/exec/wait
from Python, as cheap as it gets), (b) one run as a study makes it: the launcher with the plan,
the controlled environment, output capture, the record, and one stored run in SQLite
(``pinlab.study.engine.execute_run`` + ``Store.add_run``). The program is ``/bin/true``, so
the difference is pinlab's own cost.
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
    from pinlab.study.engine import Program, StudyPlan, execute_run
    from pinlab.study.store import Store

    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        plan = StudyPlan(name="bench", programs=[Program("true", ["/bin/true"])], strategies=["none", "compact"], threads=[len(cpus)], runs=args.runs, warmup=0)
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
    for label, values in (("/bin/true started directly", direct), ("study run, none (unpinned)", unpinned), (f"study run, compact x{len(cpus)}", pinned)):
        med = statistics.median(values)
        print(f"  {label:34} {med * 1e3:8.2f} ({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})   pinlab's own: {(med - base) * 1e3:+.2f} ms")
    worst = max(statistics.median(unpinned), statistics.median(pinned)) - base
    print(f"target: pinlab's own cost under 5 ms per run -> {'PASS' if worst < 0.005 else 'MISS'} ({worst * 1e3:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
