"""pinlab study end to end: runs stored as they finish, interrupted and killed studies resumed
without losing or repeating a run, failing programs, timeouts, metrics, bad input."""
from __future__ import annotations

import os
import signal
import subprocess
import sqlite3
import time

import pytest

from pinlab.study.engine import StudyPlan, schedule
from pinlab.study.store import Store
from tests.conftest import PINLAB, run_pinlab

CORES = len(os.sched_getaffinity(0))


def stored(db, name):
    with Store.open(db) as store:
        study = store.study(name, must_exist=True)
        return study, store.configs(study.id), store.runs(study.id)


def test_a_tiny_study_end_to_end(tmp_path):
    db = tmp_path / "s.db"
    result = run_pinlab("study", "--db", str(db), "--name", "tiny", "-s", "none,compact", "-n", str(CORES), "--runs", "3", "-q",
                        "--workload", "primes:--limit 5000", "--metric", "json:results.count")
    assert result.returncode == 0, result.stderr
    study, configs, runs = stored(db, "tiny")
    assert [c["placement"] for c in configs] == ["none", "compact"]
    assert len(runs) == 2 * (1 + 3) and all(r["status"] == "ok" for r in runs)
    assert {r["metric"] for r in runs} == {669.0}  # pi(5000)
    compact = run_pinlab("place", "-s", "compact", "-n", str(CORES)).stdout.strip()
    for run in runs:
        expected = None if run["config_id"] == configs[0]["id"] else [int(c) for c in compact.split(",")]
        assert run["placement_cpus"] == expected
        assert run["wall_seconds"] > 0 and run["record"]["options"]["no_aslr"] is True and run["record"]["options"]["clean_env"] is True
    # Interleaved: warm-ups first, then one run of each configuration in turn.
    order = [(r["config_id"], r["run_index"], r["warmup"]) for r in runs]
    ids = [c["id"] for c in configs]
    assert order == [(ids[c], i, w) for c, i, w in schedule(StudyPlan("x", [], [], [], 3), 2)]
    assert study.finished and study.machine["kernel"] == os.uname().release
    assert "study tiny: 8 runs stored" in result.stderr


def test_random_draws_a_new_stored_placement_per_run_reproducibly(tmp_path):
    args = ["study", "-s", "random", "-n", str(CORES), "--runs", "6", "--warmup", "0", "-q", "--seed", "7", "--", "true"]
    for name in ("a", "b"):
        assert run_pinlab(*args[:1], "--db", str(tmp_path / f"{name}.db"), "--name", name, *args[1:]).returncode == 0
    placements = [[r["placement_cpus"] for r in stored(tmp_path / f"{n}.db", n)[2]] for n in ("a", "b")]
    assert placements[0] == placements[1]  # the same seed gives the same placements
    assert all(sorted(p) == sorted(os.sched_getaffinity(0))[:CORES] or len(set(p)) == CORES for p in placements[0])


def test_a_failing_program_is_stored_and_the_study_stops_after_max_failures(tmp_path):
    db = tmp_path / "s.db"
    result = run_pinlab("study", "--db", str(db), "--name", "bad", "-s", "none", "-n", "1", "--runs", "5", "--warmup", "0", "-q",
                        "--max-failures", "2", "--", "sh", "-c", "echo broken input >&2; exit 3")
    assert result.returncode == 2
    assert "stopped after 2 failed runs" in result.stderr and "broken input" in result.stderr and result.stderr.count("\n") == 1
    runs = stored(db, "bad")[2]
    assert [(r["status"], r["exit_status"]) for r in runs] == [("failed", 3), ("failed", 3)]
    assert "broken input" in runs[0]["stderr_tail"]


def test_a_run_past_the_timeout_is_killed_and_stored_as_timed_out(tmp_path):
    db = tmp_path / "s.db"
    started = time.monotonic()
    run_pinlab("study", "--db", str(db), "--name", "slow", "-s", "none", "-n", "1", "--runs", "1", "--warmup", "0", "-q",
               "--timeout", "0.5", "--", "sleep", "30")
    assert time.monotonic() - started < 20
    (run,) = stored(db, "slow")[2]
    assert run["status"] == "timeout" and run["signal"] == signal.SIGKILL


def study_process(db, name, runs=5):
    return subprocess.Popen([str(PINLAB), "study", "--db", str(db), "--name", name, "-s", "none,compact", "-n", "1",
                             "--runs", str(runs), "-q", "--", "sleep", "0.2"], stderr=subprocess.PIPE, text=True)


def wait_for_runs(db, at_least, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM runs").fetchone()[0] >= at_least:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    raise AssertionError("the study stored no runs")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_or_killed_study_resumes_without_losing_or_repeating_runs(tmp_path, sig):
    db = tmp_path / "s.db"
    proc = study_process(db, "long")
    wait_for_runs(db, 3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "--resume long" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    before = {(r["config_id"], r["run_index"], r["warmup"]): r["id"] for r in stored(db, "long")[2]}
    assert 3 <= len(before) < 12
    resumed = run_pinlab("study", "--db", str(db), "--resume", "long", "-q")
    assert resumed.returncode == 0, resumed.stderr
    runs = stored(db, "long")[2]
    keys = [(r["config_id"], r["run_index"], r["warmup"]) for r in runs]
    assert len(keys) == len(set(keys)) == 2 * (1 + 5)  # every run once
    assert all(before[k] == r["id"] for k, r in zip(keys, runs) if k in before)  # the old ones untouched


def test_bad_study_input(tmp_path):
    db = tmp_path / "s.db"
    assert run_pinlab("study", "--db", str(db), "--name", "x", "--runs", "1", "-q", "--", "true").returncode == 0
    cases = [
        (["--name", "x", "--runs", "2", "--", "true"], "already exists with other parameters"),
        (["--resume", "nope"], "no study named 'nope'"),
        (["--name", "y", "-s", "sideways", "--", "true"], "unknown strategy"),
        (["--name", "y", "--runs", "0", "--", "true"], "--runs must be a positive number"),
        (["--name", "y"], "no program to study"),
        (["--name", "y", "--runs", "1", "--max-failures", "1", "--workload", "nope"], "nope: command not found"),
        (["--name", "y", "--metric", "([0-9]", "--", "true"], "is not a regular expression"),
        (["--name", "y", "--corun", "gpu:1", "--", "true"], "malformed co-runner configuration"),
        (["--name", "y", "--mem", "bind:99", "--", "true"], "NUMA node 99 does not exist"),
    ]
    for args, message in cases:
        result = run_pinlab("study", "--db", str(db), "-q", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    not_ours = tmp_path / "other.db"
    not_ours.write_text("hello")
    result = run_pinlab("study", "--db", str(not_ours), "--name", "z", "-q", "--", "true")
    assert result.returncode == 2 and not_ours.read_text() == "hello"
