"""The user's OpenMP variables that fight the plan: one clear warning line each, in runs and in studies.

pinlab keeps what the user set (OMP_NUM_THREADS, KMP_AFFINITY, OMP_PROC_BIND, OMP_PLACES,
GOMP_CPU_AFFINITY). Each test checks the warning and what really happened to the threads (the
probes print the CPU and mask of every OpenMP thread), so that the warning says the truth.
Plans use the CPUs this process may use, reversed; counts follow from how many there are.
"""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from pinlab.launch.openmp import disagreements
from pinlab.native import native_path
from tests.conftest import run_pinlab
from tests.launch.test_pinning import probe_rows

ALLOWED = sorted(os.sched_getaffinity(0))
PLAN = ALLOWED[::-1]
N = len(PLAN)
CPUS = ",".join(map(str, PLAN))
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "GOMP_"))}


def probe(name: str):
    try:
        return native_path(name)
    except Exception:
        pytest.skip(f"{name} was not built (LLVM OpenMP runtime missing)")


PROBES = pytest.mark.parametrize("probe_name", ["pinlab-probe", "pinlab-probe-llvm"], ids=["libgomp", "libomp"])


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("pinlab: warning:")]


def too_many(wanted: int, threads: int) -> str:
    return (
        f"OMP_NUM_THREADS={wanted} disagrees with the plan of {threads} threads: an OpenMP program starts {wanted} threads, "
        f"and the {wanted - threads} past the plan share the plan's CPUs; unset OMP_NUM_THREADS (pinlab then sets it to {threads}) "
        f"or ask for {wanted} (-n {wanted})"
    )


@PROBES
def test_more_omp_threads_than_the_plan_warns_and_they_share_its_cpus(probe_name, tmp_path):
    """OMP_NUM_THREADS=2N with a plan of N threads: 2N threads run, two per planned CPU."""
    record = tmp_path / "r.json"
    env = dict(CLEAN, OMP_NUM_THREADS=str(2 * N))
    result = run_pinlab("run", "-c", CPUS, "--record", str(record), "--", str(probe(probe_name)), "30", env=env)
    assert result.returncode == 0, result.stderr
    rows = probe_rows(result.stdout)
    assert [int(r["thread"]) for r in rows] == list(range(2 * N))
    assert all(int(r["cpu"]) == PLAN[int(r["thread"]) % N] and r["mask"] == {PLAN[int(r["thread"]) % N]} for r in rows), rows
    warning = too_many(2 * N, N).replace("plan of 1 threads", "plan of 1 thread")
    assert warnings_of(result.stderr) == [f"pinlab: warning: {warning}"]
    assert json.loads(record.read_text())["warnings"] == [warning]


@PROBES
def test_fewer_omp_threads_than_the_plan_warns_that_planned_cpus_stay_unused(probe_name):
    threads = max(2, N)  # with one CPU, a plan of two threads on it (--oversubscribe)
    result = run_pinlab(
        "run", "-c", CPUS, "-n", str(threads), "--oversubscribe", "--", str(probe(probe_name)), "10", env=dict(CLEAN, OMP_NUM_THREADS="1")
    )
    assert result.returncode == 0, result.stderr
    # one thread ran: the main thread, never narrowed since it created no thread, on the plan's CPUs
    assert [(int(r["thread"]), r["mask"]) for r in probe_rows(result.stdout)] == [(0, set(PLAN))]
    unused = threads - 1
    assert warnings_of(result.stderr) == [
        f"pinlab: warning: OMP_NUM_THREADS=1 disagrees with the plan of {threads} threads: an OpenMP program starts 1 thread, "
        f"leaving {unused} planned CPU{'s' if unused > 1 else ''} unused; unset OMP_NUM_THREADS (pinlab then sets it to {threads}) or ask for 1 (-n 1)"
    ]


def test_an_unpinned_run_warns_about_the_thread_count_only():
    env = dict(CLEAN, OMP_NUM_THREADS=str(N + 1), OMP_PROC_BIND="close")
    result = run_pinlab("run", "-s", "none", "-n", str(N), "--", str(probe("pinlab-probe")), "10", env=env)
    assert result.returncode == 0, result.stderr
    assert len(probe_rows(result.stdout)) == N + 1
    assert warnings_of(result.stderr) == [
        f"pinlab: warning: OMP_NUM_THREADS={N + 1} disagrees with -n {N}: an OpenMP program starts {N + 1} threads; "
        f"unset OMP_NUM_THREADS (pinlab then sets it to {N}) or ask for {N + 1} (-n {N + 1})"
    ]


NOT_APPLIED = "disagrees with the plan and is not applied: pinlab pins each thread as the plan says, in place of the OpenMP runtime's binding; unset"


@PROBES
@pytest.mark.parametrize(
    "name, value, remedy",
    [
        ("OMP_PROC_BIND", "close", "or set it to false"),
        ("OMP_PLACES", "cores", "and give pinlab the CPUs instead (-c)"),
        ("GOMP_CPU_AFFINITY", ",".join(map(str, ALLOWED)), "and give pinlab the CPUs instead (-c)"),
    ],
)
def test_a_binding_variable_is_one_line_and_the_plan_holds(probe_name, name, value, remedy):
    result = run_pinlab("run", "-c", CPUS, "--", str(probe(probe_name)), "10", env=dict(CLEAN, **{name: value}))
    assert result.returncode == 0, result.stderr
    assert warnings_of(result.stderr) == [f"pinlab: warning: {name}={value} {NOT_APPLIED} {name} {remedy}"]
    rows = probe_rows(result.stdout)
    assert len(rows) == N and all(r["mask"] == {PLAN[int(r["thread"])]} for r in rows), rows  # what the warning says: the plan holds


def test_kmp_affinity_is_one_line_and_says_where_libomp_puts_the_threads():
    exe = probe("pinlab-probe-llvm")
    result = run_pinlab("run", "-c", CPUS, "--", str(exe), "10", env=dict(CLEAN, KMP_AFFINITY="granularity=fine,compact"))
    assert result.returncode == 0, result.stderr
    assert warnings_of(result.stderr) == [
        "pinlab: warning: KMP_AFFINITY=granularity=fine,compact disagrees with the plan: an LLVM/Intel OpenMP runtime re-binds every "
        "thread after pinlab pinned it, in its own compact order over the plan's CPUs, not the plan's; unset KMP_AFFINITY (pinlab then sets it to disabled)"
    ]
    rows = probe_rows(result.stdout)  # what the warning says: one plan CPU each, in libomp's order
    assert all(len(r["mask"]) == 1 and r["mask"] <= set(PLAN) for r in rows) and {min(r["mask"]) for r in rows} == set(PLAN[: len(rows)])


@pytest.mark.parametrize(
    "settings",
    [
        {"OMP_NUM_THREADS": str(N)},
        {"KMP_AFFINITY": "disabled"},
        {"OMP_PROC_BIND": "false"},
        {"OMP_PROC_BIND": "FALSE", "OMP_PLACES": "cores", "GOMP_CPU_AFFINITY": "0"},  # nothing is bound: the places do not matter
    ],
    ids=["same-count", "kmp-disabled", "bind-false", "places-without-binding"],
)
def test_settings_that_agree_with_the_plan_give_no_warning(settings):
    result = run_pinlab("run", "-c", CPUS, "--", str(probe("pinlab-probe")), "10", env=dict(CLEAN, **settings))
    assert result.returncode == 0, result.stderr
    assert warnings_of(result.stderr) == []
    assert all(r["mask"] == {PLAN[int(r["thread"])]} for r in probe_rows(result.stdout))


def test_how_each_value_is_read():
    assert disagreements({"OMP_NUM_THREADS": "2,4"}, 2, pinned=True) == []  # nested levels: the first is the team
    assert disagreements({"OMP_NUM_THREADS": " 3 "}, 3, pinned=True) == []
    (bad,) = disagreements({"OMP_NUM_THREADS": "many"}, 2, pinned=True)
    assert bad == "OMP_NUM_THREADS=many is not a thread count: an OpenMP runtime ignores it or refuses to start; unset it (pinlab then sets it to 2)"
    assert disagreements({"OMP_NUM_THREADS": "0"}, 2, pinned=False)[0].startswith("OMP_NUM_THREADS=0 is not a thread count")
    (unpinned,) = disagreements({"OMP_NUM_THREADS": "8"}, 4, pinned=True, overflow="unpinned")
    assert "and the 4 past the plan run unpinned (--overflow unpinned)" in unpinned
    assert "cannot be created (--overflow error)" in disagreements({"OMP_NUM_THREADS": "8"}, 4, pinned=True, overflow="error")[0]
    assert disagreements({"OMP_NUM_THREADS": "8"}, None, pinned=True) == []  # no thread count asked for: nothing to compare
    # KMP_AFFINITY: any type but disabled re-binds; no type at all means 'none', which binds to the whole initial mask.
    assert disagreements({"KMP_AFFINITY": "verbose,disabled"}, 2, pinned=True) == []
    assert len(disagreements({"KMP_AFFINITY": "verbose"}, 2, pinned=True)) == 1
    assert "to CPUs of its own choosing (norespect)" in disagreements({"KMP_AFFINITY": "norespect,explicit,proclist=[0,1]"}, 2, pinned=True)[0]
    # Binding variables do not matter to an unpinned run; several at once give one line each.
    assert disagreements({"OMP_PLACES": "cores", "KMP_AFFINITY": "compact"}, 2, pinned=False) == []
    both = disagreements({"OMP_PLACES": "cores", "KMP_AFFINITY": "compact", "OMP_NUM_THREADS": "2"}, 2, pinned=True)
    assert [w.split("=", 1)[0] for w in both] == ["KMP_AFFINITY", "OMP_PLACES"]
    assert all("\n" not in w for w in both)


def test_a_study_stores_the_warning_with_each_run_and_the_report_shows_it(tmp_path):
    """OMP_NUM_THREADS=2N in a study of N threads: every run ran 2N threads; its stored record
    holds the warning, the study holds it once per configuration group, and pinlab report shows it."""
    db = tmp_path / "s.db"
    env = dict(CLEAN, OMP_NUM_THREADS=str(2 * N))
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "omp",
        "-s",
        "none,compact",
        "-n",
        str(N),
        "--runs",
        "1",
        "--warmup",
        "0",
        "-q",
        "--",
        str(probe("pinlab-probe")),
        "10",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    pinned = too_many(2 * N, N).replace("plan of 1 threads", "plan of 1 thread")
    unpinned = (
        f"OMP_NUM_THREADS={2 * N} disagrees with -n {N}: an OpenMP program starts {2 * N} threads; "
        f"unset OMP_NUM_THREADS (pinlab then sets it to {N}) or ask for {2 * N} (-n {2 * N})"
    )
    program = "pinlab-probe"
    study_warnings = [f"{program} none x{N}: {unpinned}", f"{program} compact x{N}: {pinned}"]
    assert [line for line in result.stderr.splitlines() if "OMP_NUM_THREADS" in line] == [f"pinlab: warning: {w}" for w in study_warnings]
    # The bytes in the SQLite file: each run's record, and the study's warnings.
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT c.placement, r.record FROM runs r JOIN configs c ON c.id = r.config_id ORDER BY r.id").fetchall()
        (stored_warnings,) = conn.execute("SELECT warnings FROM studies WHERE name = 'omp'").fetchone()
    assert sorted(placement for placement, _ in rows) == ["compact", "none"]
    for placement, text in rows:
        record = json.loads(text)
        expected = unpinned if placement == "none" else pinned
        assert json.dumps(expected) in text and record["warnings"] == [expected]
        if placement == "compact":  # what the warning says: 2N OpenMP threads ran, two per planned CPU
            threads = [t for t in record["threads"] if t["role"] in ("main", "worker")]
            assert len(threads) == 2 * N and {t["planned_cpu"] for t in threads} == set(record["plan"]["cpus"])
    assert all(json.dumps(w) in stored_warnings for w in study_warnings)
    report = run_pinlab("report", "--db", str(db))
    assert report.returncode == 0, report.stderr
    flat = " ".join(report.stdout.split())
    assert all(f"warning: {w}" in flat for w in study_warnings), report.stdout
    # A resumed session adds nothing twice.
    again = run_pinlab("study", "--db", str(db), "--resume", "omp", "-q", env=env)
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(db) as conn:
        assert json.loads(conn.execute("SELECT warnings FROM studies WHERE name = 'omp'").fetchone()[0]).count(study_warnings[0]) == 1
