"""pinlab study end to end: runs stored as they finish, interrupted and killed studies resumed
without losing or repeating a run, failing programs, timeouts, metrics, bad input."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

import pytest

from pinlab.study.plan import StudyPlan
from pinlab.study.schedule import schedule
from pinlab.study.store import Store
from tests.conftest import PINLAB, run_pinlab

CORES = len(os.sched_getaffinity(0))


def stored(db, name):
    with Store.open(db) as store:
        study = store.study(name, must_exist=True)
        return study, store.configs(study.id), store.runs(study.id)


def test_a_tiny_study_end_to_end(tmp_path):
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "tiny",
        "-s",
        "none,compact",
        "-n",
        str(CORES),
        "--runs",
        "3",
        "-q",
        "--workload",
        "primes:--limit 5000",
        "--metric",
        "json:results.count",
        "--metric-better",
        "higher",
    )
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
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "bad",
        "-s",
        "none",
        "-n",
        "1",
        "--runs",
        "5",
        "--warmup",
        "0",
        "-q",
        "--max-failures",
        "2",
        "--",
        "sh",
        "-c",
        "echo broken input >&2; exit 3",
    )
    assert result.returncode == 2
    told, error = result.stderr.splitlines()  # the first failure as it happened, then why the study stopped
    assert told.startswith("pinlab: run 1 of sh none x1 failed: exit status 3: broken input")
    assert error.startswith("pinlab: error: study bad stopped after 2 failed runs") and "broken input" in error
    runs = stored(db, "bad")[2]
    assert [(r["status"], r["exit_status"]) for r in runs] == [("failed", 3), ("failed", 3)]
    assert "broken input" in runs[0]["stderr_tail"]


def test_a_run_past_the_timeout_is_killed_and_stored_as_timed_out(tmp_path):
    db = tmp_path / "s.db"
    # a run that was not killed would outlast run_pinlab's own time limit
    run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "slow",
        "-s",
        "none",
        "-n",
        "1",
        "--runs",
        "1",
        "--warmup",
        "0",
        "-q",
        "--timeout",
        "0.5",
        "--",
        "sleep",
        "600",
    )
    (run,) = stored(db, "slow")[2]
    assert run["status"] == "timeout" and run["signal"] == signal.SIGKILL


def study_process(db, name, runs=5):
    return subprocess.Popen(
        [str(PINLAB), "study", "--db", str(db), "--name", name, "-s", "none,compact", "-n", "1", "--runs", str(runs), "-q", "--", "sleep", "0.2"],
        stderr=subprocess.PIPE,
        text=True,
    )


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
        (["--name", "x", "--runs", "2", "--", "true"], "a study named x already exists in"),
        (["--name", "x", "--runs", "1", "--", "true"], "a study named x already exists in"),
        (["--resume", "nope"], "no study named 'nope'"),
        (["--name", "y", "-s", "sideways", "--", "true"], "unknown strategy"),
        (["--name", "y", "--runs", "0", "--", "true"], "--runs must be a positive number"),
        (["--name", "y"], "no program to study"),
        (["--name", "y", "--runs", "1", "--max-failures", "1", "--workload", "nope"], "unknown workload 'nope'"),
        (["--name", "y", "--metric", "([0-9]", "--", "true"], "is not a regular expression"),
        (["--name", "y", "--corun", "gpu:1", "--", "true"], "malformed co-runner configuration"),
        (["--name", "y", "--mem", "bind:99", "--", "true"], "NUMA node 99 does not exist"),
        (["--name", "y", "--runs", "many", "--", "true"], "--runs must be a positive number of runs or auto"),
        (["--name", "y", "--runs", "auto", "-s", "compact,scatter", "--", "true"], "add none to --strategies"),
        (["--name", "y", "--runs", "auto", "--min-runs", "20", "--max-runs", "10", "--", "true"], "--max-runs (10) must be at least --min-runs (20)"),
        (["--name", "y", "--runs", "auto", "--alpha", "0.7", "--", "true"], "--alpha must be between 0 and 0.5"),
        (["--name", "y", "--counters", "cycels", "--", "true"], "unknown counter 'cycels'"),
    ]
    for args, message in cases:
        result = run_pinlab("study", "--db", str(db), "-q", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    not_ours = tmp_path / "other.db"
    not_ours.write_text("hello")
    result = run_pinlab("study", "--db", str(not_ours), "--name", "z", "-q", "--", "true")
    assert result.returncode == 2 and not_ours.read_text() == "hello"


def test_counters_are_stored_per_run_and_reported_against_the_baseline(tmp_path):
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "c",
        "-s",
        "none,compact",
        "-n",
        "1",
        "--runs",
        "3",
        "--warmup",
        "0",
        "-q",
        "--counters",
        "task-clock,page-faults",
        "--",
        sys.executable,
        "-c",
        "b = bytearray(32 << 20)",
    )
    assert result.returncode == 0, result.stderr
    study, configs, runs = stored(db, "c")
    assert study.parameters["counters"] == ["task-clock", "page-faults"]
    for run in runs:
        counts = run["record"]["counters"]
        cpu = run["user_seconds"] + run["system_seconds"]
        assert 0.7 * cpu <= counts["task-clock"]["value"] / 1e9 <= 1.3 * cpu + 0.02
        assert counts["page-faults"]["value"] >= (32 << 20) // os.sysconf("SC_PAGE_SIZE") // 512  # at least one per huge page
    report = json.loads(run_pinlab("report", "--db", str(db), "--json").stdout)
    assert report["counters"] == ["task-clock", "page-faults"]
    for row in report["stats"]:
        mine = [r["record"]["counters"]["page-faults"]["value"] for r in runs if r["config_id"] == configs[row["placement"] == "compact"]["id"]]
        assert row["counter:page-faults"] == pytest.approx(statistics.mean(mine))
    base, compact = report["stats"]
    assert compact["counter:page-faults:ratio"] == pytest.approx(compact["counter:page-faults"] / base["counter:page-faults"])
    assert base["counter:page-faults:ratio"] == 1.0
    assert {"counter:task-clock", "counter:page-faults"} <= set(report["runs"][0])
    table = run_pinlab("report", "--db", str(db)).stdout
    assert "Performance counters" in table and "page-faults" in table


def test_adaptive_study_stops_when_every_comparison_is_decided(tmp_path):
    """sleep 0.02 against sleep 0.06: the median test decides at the first look (min-runs)."""
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "auto",
        "-s",
        "none",
        "-n",
        "1",
        "--runs",
        "auto",
        "--min-runs",
        "5",
        "--max-runs",
        "12",
        "--warmup",
        "0",
        "-q",
        "--",
        "sh",
        "-c",
        "sleep 0.02",
    )
    assert result.returncode == 0, result.stderr
    study, configs, runs = stored(db, "auto")
    assert study.parameters["runs"] == "auto" and study.parameters["max_runs"] == 12
    assert len(runs) == 5  # only the baseline: nothing to compare, so its first runs are enough
    assert "adaptive study: 5 measured runs over 1 configuration; a fixed 35 runs each would take 35" in result.stderr


def test_adaptive_study_runs_until_decided_or_max_runs(tmp_path):
    """Two placements that cannot differ (the same program, unpinned vs pinned on an idle CPU is not
    guaranteed): whatever the data, each configuration ends with min-runs <= n <= max-runs, the
    baseline has as many runs as the most-run placement, and the report agrees with the stored runs."""
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "auto",
        "-s",
        "none,compact",
        "-n",
        "1",
        "--runs",
        "auto",
        "--min-runs",
        "4",
        "--max-runs",
        "9",
        "--warmup",
        "0",
        "-q",
        "--",
        "true",
    )
    assert result.returncode == 0, result.stderr
    study, configs, runs = stored(db, "auto")
    counts = {c["placement"]: sum(r["config_id"] == c["id"] for r in runs) for c in configs}
    assert 4 <= counts["compact"] <= 9 and counts["none"] == counts["compact"]
    # Runs are interleaved and each run index is stored once.
    keys = [(r["config_id"], r["run_index"]) for r in runs]
    assert len(set(keys)) == len(keys)
    report = json.loads(run_pinlab("report", "--db", str(db), "--json").stdout)
    adaptive = report["adaptive"]
    assert adaptive["measured"] == len(runs) and adaptive["fixed_total"] == 70 and adaptive["max_runs"] == 9
    compact = next(r for r in report["stats"] if r["placement"] == "compact")
    if counts["compact"] < 9:
        assert compact["decided"] is True and adaptive["undecided"] == []
    else:
        assert (compact["decided"] is True) == (adaptive["undecided"] == [])


def test_adaptive_study_resumes_with_its_own_rule(tmp_path):
    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [
            str(PINLAB),
            "study",
            "--db",
            str(db),
            "--name",
            "a",
            "-s",
            "none,compact",
            "-n",
            "1",
            "--runs",
            "auto",
            "--min-runs",
            "6",
            "--max-runs",
            "6",
            "--warmup",
            "0",
            "-q",
            "--",
            "sleep",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_runs(db, 3)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert run_pinlab("study", "--db", str(db), "--resume", "a", "-q").returncode == 0
    study, configs, runs = stored(db, "a")
    assert sorted((r["config_id"], r["run_index"]) for r in runs) == sorted((c["id"], i) for c in configs for i in range(6))


def _mount_small_tmpfs(path) -> bool:
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True).returncode == 0


def test_disk_full_is_one_line_and_the_study_resumes_once_there_is_room(tmp_path):
    small = tmp_path / "small"
    if not _mount_small_tmpfs(small):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        db, filler = small / "s.db", small / "filler"
        assert run_pinlab("study", "--db", str(db), "--name", "first", "-s", "none", "-n", "1", "--runs", "2", "-q", "--", "true").returncode == 0
        with open(filler, "wb") as f:  # fill the file system, then give back a little room
            try:
                while True:
                    f.write(bytes(1 << 16))
                    f.flush()
            except OSError:
                pass
        os.truncate(filler, max(0, filler.stat().st_size - (96 << 10)))
        result = run_pinlab("study", "--db", str(db), "--name", "second", "-s", "none,compact", "-n", "1", "--runs", "20", "-q", "--", "true")
        assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
        assert "disk full while" in result.stderr and "`pinlab study --resume second` continues" in result.stderr
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert len(stored(db, "first")[2]) == 3  # the earlier study is untouched
        kept = len(stored(db, "second")[2])
        filler.unlink()
        result = run_pinlab("study", "--db", str(db), "--resume", "second", "-q")
        assert result.returncode == 0, result.stderr
        study, configs, runs = stored(db, "second")
        assert len(runs) == 2 * 21 > kept and study.finished
        assert len({(r["config_id"], r["run_index"], r["warmup"]) for r in runs}) == len(runs)
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
