"""pinlab tune: the candidates on real machines' topologies, the settings, the refusals, and a real
race on this machine beside a co-runner, stored as a study, resumed and reported."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.placement.exports import parse_kmp_affinity, parse_omp_places
from pinlab.placement.portable import resolve
from pinlab.study.plan import explicit_cpus
from pinlab.topology import load_topology
from pinlab.tune import TuneRequest, tune, tune_plan
from pinlab.tune.candidates import OS_DEFAULT, tune_candidates
from pinlab.tune.request import parse_budget
from pinlab.tune.settings import GNU, LLVM, openmp_runtime, settings
from tests.conftest import PINLAB, run_pinlab
from tests.memory import mem_expect

PRESETS = ("clovertown", "nehalem-ep", "opteron-4x4", "epyc-7763-2s", "alderlake-i9", "dunnington-96", "x7560-4x8")


@pytest.mark.parametrize("preset", PRESETS)
def test_candidates_are_the_os_then_distinct_pinnings_of_the_thread_count(preset):
    topo = load_topology(preset)
    for threads in (1, 2, 4):
        found = tune_candidates(topo, threads, max_candidates=6)
        assert found[0].placement == OS_DEFAULT and found[0].cpus is None
        pinned = found[1:]
        assert 1 <= len(pinned) <= 6
        assert len({c.cpus for c in pinned}) == len(pinned)  # no placement twice
        for c in pinned:
            assert len(c.cpus) == threads and set(c.cpus) <= topo.allowed_cpus and explicit_cpus(c.placement) == list(c.cpus)
        shared = [c for c in pinned if len(set(c.cpus)) < len(c.cpus)]
        assert threads == 1 or shared, "two threads per CPU is always among the candidates (room permitting)"


def test_on_two_cpus_one_thread_is_raced_on_each_cpu():
    """A placement and its twin: on an idle machine the same, beside a co-runner not."""
    topo = load_topology("this") if len(os.sched_getaffinity(0)) == 2 else None
    if topo is None:
        pytest.skip("the twin check is written for 2 allowed CPUs")
    found = tune_candidates(topo, 1)
    assert sorted(c.cpus for c in found[1:]) == [(c,) for c in sorted(topo.allowed_cpus)]


def test_budget_is_a_duration_or_runs():
    assert parse_budget("90s") == (None, 90.0) and parse_budget("10m") == (None, 600.0) and parse_budget("1.5h") == (None, 5400.0)
    assert parse_budget("60") == (60, None) and parse_budget("60 runs") == (60, None) and parse_budget(None) == (None, None)
    for bad in ("3x", "-5m", "0", "ten"):
        with pytest.raises(UsageError, match="--budget"):
            parse_budget(bad)


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "nothing to tune"),
        ({"program": ("true",), "workload": "primes"}, "not both"),
        ({"program": ("true",), "alpha": 0.5}, "--alpha must be between 0 and 0.5"),
        ({"program": ("true",), "tolerance": -0.1}, "--tolerance must be a share"),
        ({"program": ("true",), "min_runs": 2}, "--min-runs must be at least 3"),
        ({"program": ("true",), "max_runs": 5}, "--max-runs must be between"),
        ({"program": ("true",), "threads": 0}, "-n must be a positive number"),
        ({"program": ("true",), "budget": "soon"}, "--budget 'soon'"),
        ({"resume": "x", "program": ("true",)}, "--resume continues a stored tune"),
    ],
)
def test_the_api_refuses_what_the_command_refuses_before_anything_runs(tmp_path, options, message):
    db = tmp_path / "t.db"
    with pytest.raises(UsageError, match=message):
        tune(TuneRequest(db=str(db), **options))
    assert not db.exists()


def test_settings_say_the_winner_in_each_tool_s_syntax():
    topo = load_topology("clovertown")
    from pinlab.placement import make_placement

    placement = make_placement(topo, cpus="1,3,5,7", threads=4)
    lines = settings(placement, ["./a.out", "-x", "it's"], LLVM, plan_file="plan.json")
    assert [frozenset({c}) for c in (1, 3, 5, 7)] == parse_omp_places(lines["openmp"].split("OMP_PLACES=")[1].split("\n")[0].strip("'"))
    assert "OMP_PROC_BIND=close" in lines["openmp"] and "OMP_NUM_THREADS=4" in lines["openmp"]
    assert parse_kmp_affinity(lines["kmp"]) == [1, 3, 5, 7]
    assert lines["taskset"].startswith("taskset -c 1,3,5,7 ./a.out -x 'it'\"'\"'s'")
    assert lines["numactl"].startswith("numactl --physcpubind=1,3,5,7 ./a.out")
    assert lines["likwid"] == "likwid-pin -c 1,3,5,7 ./a.out -x 'it'\"'\"'s'"
    assert lines["srun"].startswith("srun --ntasks=1 --cpus-per-task=4 --cpu-bind=mask_cpu:0xaa ./a.out")
    assert lines["pinlab"] == "pinlab run --plan plan.json -- ./a.out -x 'it'\"'\"'s'"
    gnu = settings(placement, ["prog"], GNU)
    assert "kmp" not in gnu and "openmp" in gnu and gnu["pinlab"] == "pinlab run -c 1,3,5,7 -- prog"
    plain = settings(placement, ["prog"], None)
    assert "openmp" not in plain and "kmp" not in plain
    shared = settings(make_placement(topo, cpus="1,1", threads=2, oversubscribe=True), ["prog"], None)
    assert shared["pinlab"] == "pinlab run -c 1,1 --oversubscribe -- prog" and "--cpus-per-task=1 " in shared["srun"]
    unpinned = settings(make_placement(topo, strategy="none", threads=4), ["prog"], GNU)
    assert unpinned["pinlab"] == "pinlab run -s none -n 4 -- prog" and "OMP_PROC_BIND=false" in unpinned["openmp"]


def test_the_openmp_runtime_is_told_by_the_file_threads_started_in():
    assert openmp_runtime(["/usr/lib/x86_64-linux-gnu/libgomp.so.1", None, "/bin/prog"]) == GNU
    assert openmp_runtime(["/opt/llvm/lib/libomp.so.5", "/usr/lib/libgomp.so.1"]) == LLVM
    assert openmp_runtime(["/bin/prog", None]) is None


def test_a_plan_races_every_candidate_as_a_stored_study_placement(tmp_path):
    req = TuneRequest(workload="primes:--limit 10000", threads=2, db=str(tmp_path / "t.db"), name="t")
    req.validate()
    topo = load_topology("clovertown")
    plan = tune_plan(req, topo)
    assert plan.racing and plan.strategies[0] == "none" and plan.threads == [2]
    assert [c["placement"] for c in plan.configs()] == [c.placement for c in tune_candidates(topo, 2)]
    assert all(c.get("extra", {}).get("label") for c in plan.configs()[1:])


@pytest.fixture(scope="module")
def spinner(tmp_path_factory) -> str:
    """The autopin tests' spinner: fixed chunks of arithmetic, 16 times each on its --slow-on CPU."""
    out = tmp_path_factory.mktemp("spinner") / "spinner"
    return str(mem_expect.build(str(PINLAB), out, Path(__file__).parent.parent / "autopin" / "spinner.c"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_a_real_race_drops_the_slow_cpu_and_is_a_study_that_resumes(tmp_path, spinner):
    """One thread of the spinner for 0.4 s a run, its chunks the metric (higher is better), 16
    times the arithmetic per chunk on the first allowed CPU: there it does 1/16 of the chunks at
    any load (a co-runner could not promise that on a busy machine). The placement on that CPU
    must leave the race at its first look and not win; the runs are a study pinlab report reads;
    a tune resumed after its end adds nothing and answers the same."""
    db, plan_file = tmp_path / "t.db", tmp_path / "plan.json"
    slow = min(os.sched_getaffinity(0))
    args = ["tune", "-n", "1", "--metric", "chunks=([0-9]+)", "--metric-better", "higher", "--min-runs", "6", "--max-runs", "9"]
    args += ["--db", str(db), "--name", "race", "-o", str(plan_file), "--json", "--", spinner, "--threads", "1", "--seconds", "0.4"]
    args += ["--slow-on", str(slow)]
    result = run_pinlab(*args)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    on_slow = next(p for p in answer["placements"] if p["cpus"] == [slow])
    assert on_slow["left_at"] == 6 and on_slow["runs"] == 6, answer
    assert answer["winner"]["cpus"] != [slow] and answer["metric"] == "chunks=([0-9]+)" and answer["better"] == "higher"
    assert answer["measured_runs"] <= 6 + 9 + 9 and set(answer["settings"]) >= {"pinlab", "taskset", "srun"}
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM runs WHERE warmup = 0").fetchone()[0]
    assert stored == answer["measured_runs"]
    if answer["pinned"]:
        written = json.loads(plan_file.read_text())
        assert written["cpus"] == answer["winner"]["cpus"]
        assert written["portable"]["levels"][-2:] == ["Core", "PU"]
        assert resolve(load_topology("this"), written["portable"]) == written["cpus"]  # the same CPUs where it was made
        assert answer["speedup"]["low"] <= answer["speedup"]["speedup"] <= answer["speedup"]["high"]
    else:
        assert json.loads(plan_file.read_text())["cpus"] is None  # the operating system's placement: no pinning
    report = run_pinlab("report", "race", "--db", str(db))
    assert report.returncode == 0 and f"cpus:{slow}" in report.stdout, report.stderr
    again = run_pinlab("tune", "--resume", "race", "--db", str(db), "--json", "-q")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)
    assert resumed["measured_runs"] == answer["measured_runs"] and resumed["winner"] == answer["winner"]


def _answer(metrics: dict[int, list], failed: dict[int, int] | None = None):
    """The answer of a made-up race: position -> metrics (None: a failed run)."""
    from pinlab.study.direction import study_direction
    from pinlab.study.plan import Program, StudyPlan
    from pinlab.tune.answer import answer

    p = StudyPlan(
        name="t", programs=[Program("p", ["p"])], strategies=["none", "cpus:0", "cpus:1"], threads=[1], runs="race", warmup=0, min_runs=6, max_runs=9
    )
    cs = [{"id": 1 + i, "position": i, "placement": s, "extra": {"label": f"L{i}"}} for i, s in enumerate(p.strategies)]
    runs = [
        {"config_id": 1 + pos, "run_index": i, "warmup": False, "status": "ok" if m is not None else "failed", "metric": m, "wall_seconds": 1.0}
        for pos, ms in metrics.items()
        for i, m in enumerate(ms)
    ]
    return answer(p, study_direction(p.parameters()), cs, runs, "db")


def test_an_answer_says_when_the_os_placement_failed_and_when_too_few_runs_were_tested():
    good = [1.0, 1.01, 0.99, 1.02, 1.0, 0.98]
    failed_os = _answer({0: [None, None, None], 1: good, 2: [2.0 * x for x in good]})
    assert failed_os.pinned and failed_os.winner.placement == "cpus:0" and failed_os.speedup is None
    assert "could not be measured (its first 3 runs failed)" in failed_os.sentence()
    few = _answer({0: [1.5, 1.6], 1: [1.0, 1.01], 2: [1.2, 1.3]})
    assert not few.pinned and few.sentence().startswith("not tested: too few successful runs")
    clear = _answer({0: [1.5 * x for x in good], 1: good, 2: [2.0 * x for x in good]})
    assert clear.pinned and clear.speedup is not None and clear.speedup.low > 1.3 and clear.p_over_baseline < clear.level_over_baseline
    assert clear.sentence().startswith("use L1 (CPUs 0): 1.5") and clear.level_over_baseline == pytest.approx(0.05 / 2)
    assert clear.sureness() == "every other placement left the race"  # both shown slower at the first look
    near = _answer({0: good, 1: [0.995 * x for x in good], 2: [2.0 * x for x in good]})
    assert (
        near.winner.placement == "cpus:0" and not near.pinned and near.sentence().startswith("no placement beats leaving it to the operating system")
    )
    assert near.sureness().startswith("not sure: L1 leads the operating system's placement (p = ")


def test_resume_keeps_its_settings_and_refuses_what_is_not_a_tune(tmp_path):
    with pytest.raises(UsageError, match="leave --budget, --max-runs out"):
        TuneRequest(resume="x", budget="90s", max_runs=20).validate()
    db = tmp_path / "s.db"
    made = run_pinlab("study", "--db", str(db), "--name", "plain", "--runs", "1", "--warmup", "0", "-s", "none", "-n", "1", "--", "true")
    assert made.returncode == 0, made.stderr
    with pytest.raises(UsageError, match="study plain in .* is not a tune"):
        tune(TuneRequest(resume="plain", db=str(db)))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1  # nothing more was run
    with pytest.raises(UsageError, match="no tune of that name"):
        tune(TuneRequest(resume="nope", db=str(db)))


def test_a_budget_that_cannot_reach_the_first_look_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"--budget 5 cannot reach the race's first look \(\d+ placements x 6 runs"):
        tune(TuneRequest(workload="primes:--limit 1000", threads=1, budget="5", db=str(tmp_path / "t.db")))
    assert not (tmp_path / "t.db").exists()


def test_pinlab_tune_is_callable_before_and_after_the_package_is_imported(tmp_path):
    """In a fresh interpreter: the first call goes through the root module's function, which
    imports the package; the package then stands in for it, callable the same way."""
    script = (
        "import sys, pinlab\n"
        "from pinlab.errors import UsageError\n"
        "for _ in range(2):\n"
        "    first = 'pinlab.tune' not in sys.modules\n"
        "    try:\n"
        f"        pinlab.tune(['true'], alpha=0.9, db={str(tmp_path / 't.db')!r})\n"
        "    except UsageError as exc:\n"
        "        print(first, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True --alpha must be between 0 and 0.5 (got 0.9)", "False --alpha must be between 0 and 0.5 (got 0.9)"]


def test_the_command_line_refuses_in_one_line(tmp_path):
    missing = run_pinlab("tune", "--db", str(tmp_path / "t.db"), "--", str(tmp_path / "nothing"))
    assert missing.returncode == 127 and missing.stderr.count("\n") == 1 and "no such file" in missing.stderr
    for args, message in (
        ([], "nothing to tune"),
        (["--budget", "3x", "--", "true"], "--budget '3x'"),
        (["--resume", "nope", "--db", str(tmp_path / "none.db")], "no database"),
    ):
        result = run_pinlab("tune", *args)
        assert (
            result.returncode == 2 and result.stderr.startswith("pinlab: error: ") and message in result.stderr and result.stderr.count("\n") == 1
        ), result.stderr
    assert not (tmp_path / "t.db").exists()
