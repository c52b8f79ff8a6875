"""A study checks everything before it stores or runs anything, says why runs fail as they fail,
exits non-zero when a configuration never succeeded, refuses a damaged database, and samples
short runs often enough to show where their threads ran."""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from pinlab.errors import UsageError
from pinlab.study.limits import MAX_RUNS_PER_CONFIG
from pinlab.study.plan import Program, StudyPlan
from pinlab.study.schedule import sample_period, schedule, scheduled_runs
from pinlab.study.store import Store
from tests.conftest import PINLAB, run_pinlab

CORES = len(os.sched_getaffinity(0))


#: Runs argv[2:], then writes the peak resident size of that child in KiB to argv[1]; the child's exit status.
PEAK_RSS = (
    "import resource, subprocess, sys; status = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(status)"
)


def sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def one_line_error(result, message: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("pinlab: error: ") and "Traceback" not in result.stderr


# ------------------------------------------------------------------ checked before anything is stored


BAD_BEFORE_ANYTHING = [
    (["-n", str(CORES + 1), "-s", "none,compact"], f"placement compact with {CORES + 1} threads does not fit this machine"),
    (["--runs", "999999999999"], f"more than {MAX_RUNS_PER_CONFIG} runs per configuration"),
    (["--runs", "auto", "--max-runs", "999999999"], "--max-runs 999999999 is more than"),
    (["--runs", "100000", "-s", "none,compact,scatter,random", "--corun", "none,cpu:1", "--mem", "first-touch,local"], "more than 1,000,000"),
    (["--warmup", "-1"], "--warmup must be between 0 and"),
    (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
    (["--timeout", "0"], "--timeout must be a positive number of seconds"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
    (["--corun", f"cpu:{CORES + 1}"], f"co-runners cpu:{CORES + 1} ask for {CORES + 1} processes but this process may use only {CORES} CPUs"),
    (["--corun", f"sleep:{CORES}+cpu:1"], f"ask for {CORES + 1} processes"),
    (["--counters", ","], "--counters ',' names no event"),
    (["--counters", ""], "names no event"),
    (["--sample-ms", "0"], "--sample-ms must be auto or a number of milliseconds between 1 and"),
    (["--sample-ms", "often"], "--sample-ms must be auto or a number of milliseconds"),
    (["-s", "bogus"], "unknown strategy 'bogus'"),
    (["-s", "compact,close"], "a placement is listed twice"),
]


@pytest.mark.parametrize("args, message", BAD_BEFORE_ANYTHING, ids=[" ".join(a) for a, _ in BAD_BEFORE_ANYTHING])
def test_bad_plans_are_refused_before_anything_is_stored_or_run(tmp_path, args, message):
    work = tmp_path / "work"
    work.mkdir()
    db, peak = work / "s.db", tmp_path / "peak-kib"
    result = run_pinlab("study", "--db", str(db), "--name", "bad", "-q", *args, "--", "true", prefix=[sys.executable, "-c", PEAK_RSS, str(peak)])
    one_line_error(result, message)
    assert not db.exists() and os.listdir(work) == []  # no database made, no run
    # No schedule built in memory first (10^12 runs would not fit; 1.6 million would take hundreds
    # of MiB): pinlab refusing a plan is its usual size, about 100 MiB with numpy imported
    assert int(peak.read_text()) < 256 * 1024, f"pinlab study's peak resident size was {int(peak.read_text()) >> 10} MiB"


def test_the_strategy_hint_names_no_option_study_lacks(tmp_path):
    result = run_pinlab("study", "--db", str(tmp_path / "s.db"), "-q", "-s", "bogus", "--", "true")
    assert "-c" not in result.stderr.split("unknown strategy", 1)[1]


def test_a_bad_plan_leaves_the_name_free_for_the_corrected_one(tmp_path):
    db = tmp_path / "s.db"
    assert run_pinlab("study", "--db", str(db), "--name", "a", "-q", "--runs", "1", "--", "true").returncode == 0
    one_line_error(
        run_pinlab("study", "--db", str(db), "--name", "b", "-q", "-n", str(CORES + 1), "-s", "compact", "--", "true"), "does not fit this machine"
    )
    assert [s.name for s in Store.open(db, create=False).studies()] == ["a"]
    fixed = run_pinlab("study", "--db", str(db), "--name", "b", "-q", "-n", str(CORES), "-s", "compact", "--runs", "1", "--", "true")
    assert fixed.returncode == 0, fixed.stderr


def test_resume_into_a_missing_database_creates_nothing(tmp_path):
    result = run_pinlab("study", "--db", str(tmp_path / "new.db"), "--resume", "nosuch")
    one_line_error(result, "no study database at")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-w", "nosuch"], "unknown workload 'nosuch'"),
        (["-w", "true"], "unknown workload 'true'"),  # a program on PATH is not a workload
        (["--", "/nonexistent/program"], "cannot study '/nonexistent/program'"),
        (["--", "{data}"], "permission denied"),
    ],
    ids=["unknown workload", "program name as workload", "missing program", "not executable"],
)
def test_programs_that_cannot_run_are_refused_before_anything_is_stored(tmp_path, argv, message):
    data = tmp_path / "data" / "notes.txt"
    data.parent.mkdir()
    data.write_text("not a program\n")
    data.chmod(0o644)
    work = tmp_path / "work"
    work.mkdir()
    result = run_pinlab("study", "--db", str(work / "s.db"), "-q", "--runs", "1", *[a.format(data=data) for a in argv])
    one_line_error(result, message)
    assert os.listdir(work) == []


def test_a_name_taken_by_a_running_study_is_refused_at_once(tmp_path):
    """Started while the first study runs, a study of the same name refuses without a warm-up, and without
    blaming a --resume nobody gave."""
    db = tmp_path / "s.db"
    # The first study takes at least 600 s (300 runs of 2 s; it is killed once the second has answered):
    # the second must be refused while it still runs, on a loaded machine too.
    first = subprocess.Popen(
        [str(PINLAB), "study", "--db", str(db), "--name", "same", "-s", "none", "-n", "1", "--runs", "300", "-q", "--", "sleep", "2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                with Store.open(db, create=False, readonly=True) as store:
                    if store.study("same") is not None:
                        break
            except UsageError:
                pass  # not created yet
            time.sleep(0.05)
        with Store.open(db, readonly=True) as store:
            before = len(store.runs(store.study("same").id))
        second = run_pinlab("study", "--db", str(db), "--name", "same", "-s", "none", "-n", "1", "--runs", "20", "-q", "--", "sleep", "0.1")
        one_line_error(second, "a study named same already exists")
        assert "another `pinlab study --resume" not in second.stderr
        # Refused at once: without waiting for the first study to end
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()
    with Store.open(db, readonly=True) as store:
        runs = store.runs(store.study("same").id)
    assert len(runs) >= before and len({(r["config_id"], r["run_index"], r["warmup"]) for r in runs}) == len(runs)


# ------------------------------------------------------------------ schedules


def test_schedules_are_generated_lazily_and_keep_their_order():
    plan = StudyPlan("x", [], [], [], MAX_RUNS_PER_CONFIG, warmup=2)
    order = schedule(plan, 10)
    assert inspect.isgenerator(order)
    assert [next(order) for _ in range(22)] == [(c, r, True) for r in range(2) for c in range(10)] + [(0, 0, False), (1, 0, False)]
    assert scheduled_runs(plan, 10) == 10 * (MAX_RUNS_PER_CONFIG + 2)
    # The shuffled order is the permutation the earlier, list-based schedule gave (resumed studies keep it).
    small = StudyPlan("x", [], [], [], 7, order="shuffled", seed=11, warmup=0)
    reference = [(c, r, False) for r in range(7) for c in range(3)]
    random.Random(11).shuffle(reference)
    assert list(schedule(small, 3)) == reference
    blocked = StudyPlan("x", [], [], [], 2, order="blocked", warmup=0)
    assert list(schedule(blocked, 2)) == [(0, 0, False), (0, 1, False), (1, 0, False), (1, 1, False)]


# ------------------------------------------------------------------ runs that fail


FAILING = [
    (["-w", "primes:--limit abc"], "exit status 2: pinlab-primes: error: --limit"),
    (["--metric", "json:no.such.key", "--metric-better", "lower", "-w", "primes:--limit 1000"], "the metric 'json:no.such.key' was not found"),
    (["--", "sh", "-c", "echo out of cheese >&2; exit 3"], "exit status 3: out of cheese"),
    (["--", "sh", "-c", "kill -SEGV $$"], "killed by signal 11 (exit status 139)"),
]


@pytest.mark.parametrize("args, reason", FAILING, ids=["workload option", "metric", "exit 3", "segfault"])
def test_a_study_whose_runs_all_fail_says_why_and_exits_1(tmp_path, args, reason):
    db = tmp_path / "s.db"
    result = run_pinlab("study", "--db", str(db), "--name", "f", "-s", "none,compact", "-n", "1", "--runs", "2", "-q", *args)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    # The first failure of each configuration is told as it happens (its warm-up here), with its reason...
    assert lines[0].startswith("pinlab: warm-up run 1 of ") and reason in lines[0]
    assert len([line for line in lines if " failed: " in line]) == 2
    # ...and the study ends with one line naming the configurations that never succeeded.
    assert lines[-1].startswith("pinlab: error: study f: 2 configurations had no successful run") and reason in lines[-1]
    assert "Traceback" not in result.stderr
    with Store.open(db, readonly=True) as store:
        runs = store.runs(store.study("f").id)
    assert len(runs) == 2 * 3 and all(r["status"] == "failed" for r in runs)  # every run stored all the same


def test_a_study_with_one_good_configuration_among_failing_ones_still_exits_1(tmp_path):
    result = run_pinlab(
        "study",
        "--db",
        str(tmp_path / "s.db"),
        "--name",
        "m",
        "-s",
        "none",
        "-n",
        "1",
        "--runs",
        "2",
        "-q",
        "-w",
        "primes:--limit 1000",
        "-w",
        "primes:--limit abc",
    )
    assert result.returncode == 1
    assert "1 configuration had no successful run" in result.stderr


def test_a_co_runner_that_dies_fails_the_run(tmp_path, monkeypatch):
    """A configuration 'with co-runners' whose co-runner did not run measured nothing of what it says."""
    from pinlab.workloads import corun

    db = tmp_path / "s.db"
    plan = StudyPlan("c", [Program("true", ["true"])], ["none"], [1], 1, warmup=0, coruns=["memory:1"])
    monkeypatch.setattr(corun.CoRunners, "__init__", _bad_size_corunners(corun.CoRunners.__init__))
    from pinlab.study.engine import StudyFailed, run_study

    with pytest.raises(StudyFailed, match="co-runner memory"):
        run_study(plan, str(db), progress=False, say=lambda line: None)


def _bad_size_corunners(init):
    def patched(self, kind, count, *args, **kwargs):
        init(self, kind, count, *args, size="1X", **kwargs)  # pinlab-corun refuses this size and exits 2

    return patched


# ------------------------------------------------------------------ damaged databases


@pytest.fixture(scope="module")
def good_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("good") / "good.db"
    result = run_pinlab("study", "--db", str(db), "--name", "g", "-s", "none,compact", "-n", "1", "--runs", "40", "-q", "-w", "primes:--limit 2000")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


def damage(source, target) -> str:
    """A copy of ``source`` whose pages 10-29 are overwritten with random bytes (as dd would)."""
    shutil.copy(source, target)
    size = os.path.getsize(target)
    assert size > 30 * 4096, size  # the pages overwritten are inside the file
    rng = random.Random(5)
    with open(target, "r+b") as file:
        file.seek(10 * 4096)
        file.write(bytes(rng.getrandbits(8) for _ in range(20 * 4096)))
    return sha(target)


def test_a_damaged_database_is_refused_by_study_and_report_and_left_as_it_was(tmp_path, good_db):
    db = tmp_path / "c.db"
    before = damage(good_db, db)
    for args in (
        ["study", "--db", str(db), "--name", "more", "--runs", "1", "-q", "--", "true"],
        ["study", "--db", str(db), "--resume", "g", "-q"],
        ["report", "--db", str(db)],
        ["report", "g", "--db", str(db), "--csv", str(tmp_path / "csv")],
    ):
        result = run_pinlab(*args)
        one_line_error(result, f"the study database {db} is damaged")
        assert f"sqlite3 {db} .recover" in result.stderr and result.stdout == ""
        assert sha(db) == before
    assert sorted(os.listdir(tmp_path)) == ["c.db"]  # no -wal or -shm written next to it
    with pytest.raises(UsageError, match="is damaged"):
        Store.open(db)


def test_the_recovery_the_message_suggests_works(tmp_path, good_db):
    if not shutil.which("sqlite3"):
        pytest.skip("the sqlite3 command is not installed")
    probe = subprocess.run(["sqlite3", ":memory:", "SELECT 1 FROM sqlite_dbpage LIMIT 1"], capture_output=True, text=True)
    if probe.returncode != 0:  # Debian 12's sqlite3 3.40 is built without it, and its .recover fails on any file
        pytest.skip(f"this sqlite3 has no sqlite_dbpage table, which .recover needs ({probe.stderr.strip()})")
    db = tmp_path / "c.db"
    damage(good_db, db)
    recovered = tmp_path / "recovered.db"
    subprocess.run(f"sqlite3 {db} .recover | sqlite3 {recovered}", shell=True, check=True, capture_output=True)
    with Store.open(recovered, readonly=True) as store:
        assert store.study("g") is not None


# ------------------------------------------------------------------ sampling short runs


def test_auto_sampling_gives_short_runs_many_samples(tmp_path):
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study", "--db", str(db), "--name", "short", "-s", "none,compact", "-n", "1", "--runs", "3", "-q", "-w", "primes:--limit 400000"
    )
    assert result.returncode == 0, result.stderr
    with Store.open(db, readonly=True) as store:
        study = store.study("short")
        runs = store.runs(study.id)
        configs = store.configs(study.id)
    warmups = [r for r in runs if r["warmup"]]
    shortest = min(r["wall_seconds"] for r in warmups)
    expected = round(min(100.0, max(5.0, shortest * 1000 / 20)), 1)
    plan = StudyPlan("short", [Program(configs[0]["program"], configs[0]["argv"])], ["none"], [1], 3)
    frame = [{"warmup": True, "wall_seconds": r["wall_seconds"], "program": configs[0]["program"], "argv": configs[0]["argv"]} for r in warmups]
    assert sample_period(plan, configs[0], frame) == expected
    for run in runs:
        assert run["record"]["options"]["sample_ms"] == (100.0 if run["warmup"] else expected)
        if not run["warmup"] and run["wall_seconds"] > 0.05:
            samples = max(len(t["sample_times"]) for t in run["record"]["threads"])
            assert samples >= min(10, run["wall_seconds"] * 1000 / expected / 4), (samples, run["wall_seconds"], expected)  # 100 ms gave 1


def test_an_explicit_sample_period_is_used_for_every_run(tmp_path):
    db = tmp_path / "s.db"
    assert (
        run_pinlab(
            "study", "--db", str(db), "--name", "s7", "-s", "none", "-n", "1", "--runs", "2", "-q", "--sample-ms", "7", "--", "sleep", "0.05"
        ).returncode
        == 0
    )
    with Store.open(db, readonly=True) as store:
        study = store.study("s7")
        assert study.parameters["sample_ms"] == 7.0
        assert {r["record"]["options"]["sample_ms"] for r in store.runs(study.id)} == {7.0}
