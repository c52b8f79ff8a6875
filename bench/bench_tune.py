#!/usr/bin/env python3
"""How often ``pinlab tune`` picks what a long exhaustive study ranks first, and at what share of its runs.

Run by hand: ``.venv/bin/python bench/bench_tune.py [--tunes 10] [--exhaustive-runs 35] [--only NAME]``.
Not a test: it asserts nothing and exits 0; it prints one row per scenario and PASS/MISS against
the targets:

    the tune's choice is the exhaustive study's best placement (or within 1% of its median) in at
    least 95% of the tunes, using at most 40% of the exhaustive study's measured runs.

A scenario is a built-in workload, a thread count and a co-runner setting. Its exhaustive study
runs every placement the tune races (the same candidates, this machine's) ``--exhaustive-runs``
times, interleaved; its ranking by median is the truth. Then ``--tunes`` fresh tunes run with the
default settings. A tune's choice is its winner when it names a pinned placement, else the
operating system's placement. Everything is stored in one SQLite file (``--db``, default a
temporary one), so ``pinlab report`` can show any of the studies afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name -> (workload, threads, co-runners, metric, better)
SCENARIOS = {
    "primes-x1": ("primes:--limit 1200000", 1, "none", "time", None),
    "primes-x1-corun": ("primes:--limit 1200000", 1, "cpu:1", "time", None),
    "stream-x2": ("stream:--size 4M", 2, "none", "json:results.triad.best_mbs", "higher"),
    "stream-x2-corun": ("stream:--size 4M", 2, "cpu:1", "json:results.triad.best_mbs", "higher"),
}
TARGET_RIGHT = 0.95
TARGET_SHARE = 0.40


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tunes", type=int, default=10)
    parser.add_argument("--exhaustive-runs", type=int, default=35)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--db")
    options = parser.parse_args()

    from pinlab.stats import median_test
    from pinlab.study.engine import run_study
    from pinlab.study.store import Store
    from pinlab.tune import TuneRequest, tune, tune_plan

    db = options.db or os.path.join(tempfile.mkdtemp(prefix="bench-tune-"), "bench.db")
    stamp = time.strftime("%H%M%S")
    rows = []
    for name in options.only or list(SCENARIOS):
        workload, threads, corun, metric, better = SCENARIOS[name]
        request = dict(workload=workload, threads=threads, corun=corun, metric=metric, metric_better=better, db=db)
        race = tune_plan(TuneRequest(**request, name=f"{name}-probe-{stamp}"))
        exhaustive = dataclasses.replace(race, name=f"{name}-exhaustive-{stamp}", runs=options.exhaustive_runs)
        started = time.monotonic()
        run_study(exhaustive, db, progress=False, say=lambda text: print(text, file=sys.stderr))
        exhaustive_s = time.monotonic() - started
        samples: dict[str, list[float]] = {}
        with Store.open(db, create=False) as store:
            for placement in exhaustive.strategies:
                samples[placement] = [
                    r["metric"]
                    for r in store.run_rows(exhaustive.name)
                    if r["placement"] == placement and not r["warmup"] and r["status"] == "ok" and r["metric"] is not None
                ]
        medians = {p: statistics.median(v) for p, v in samples.items()}
        sign = 1 if better == "higher" else -1
        best = max(medians, key=lambda p: sign * medians[p])
        good = {p for p in medians if abs(medians[p] / medians[best] - 1) <= 0.01}
        # the exhaustive study's own verdict: the choices it does not show slower than its best
        # (one-sided median test at 0.05, as pinlab report), a looser truth than the 1% margin
        same = {p for p in medians if p == best or median_test(samples[p], samples[best], better=better or "lower")[0] >= 0.05}
        print(f"{name} exhaustive medians: " + ", ".join(f"{p} {m:.5g}" for p, m in medians.items()), file=sys.stderr)
        right, loose, shares, seconds = 0, 0, [], []
        for k in range(options.tunes):
            started = time.monotonic()
            answer = tune(TuneRequest(**request, name=f"{name}-tune{k}-{stamp}"))
            seconds.append(time.monotonic() - started)
            choice = answer.winner.placement if answer.pinned else "none"
            right += choice in good
            loose += choice in good or choice in same
            shares.append(answer.measured_runs / (options.exhaustive_runs * len(exhaustive.strategies)))
            print(
                f"{name} tune {k + 1}: {choice} ({'right' if choice in good else 'wrong'}), {answer.measured_runs} runs; {answer.sentence()}",
                file=sys.stderr,
            )
        rows.append(
            (name, best, len(good), right, loose, options.tunes, statistics.median(shares), max(shares), exhaustive_s, statistics.median(seconds))
        )

    print(f"\nexhaustive: {options.exhaustive_runs} runs per placement; tunes with the default settings; db {db}")
    print(
        f"{'scenario':<18} {'exhaustive best':<16} {'ties':>4} {'right':>7} {'not slower':>10} {'runs share: median':>19} {'max':>6} "
        f"{'exhaustive s':>13} {'tune s':>7}"
    )
    for name, best, ties, right, loose, tunes, share, most, ex_s, tune_s in rows:
        print(f"{name:<18} {best:<16} {ties:>4} {right:>3}/{tunes:<3} {loose:>6}/{tunes:<3} {share:>19.0%} {most:>6.0%} {ex_s:>13.0f} {tune_s:>7.0f}")
    print("right: the exhaustive best or within 1% of its median; not slower: or not shown slower than it by the exhaustive study (p >= 0.05)")
    right_all = sum(r[3] for r in rows) / max(1, sum(r[5] for r in rows))
    share_all = statistics.median([r[6] for r in rows]) if rows else 0.0
    verdict = "PASS" if right_all >= TARGET_RIGHT and share_all <= TARGET_SHARE else "MISS"
    print(
        f"{verdict}: right {right_all:.0%} (target {TARGET_RIGHT:.0%}), median share of the exhaustive runs {share_all:.0%} (target at most {TARGET_SHARE:.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
