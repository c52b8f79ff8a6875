"""pinlab tune: the candidates on real machines' topologies, the settings, the refusals, and a real
race on this machine beside a co-runner, stored as a study, resumed and reported."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.graph.model import load_graph
from pinlab.measure.linux import numa_nodes
from pinlab.placement.exports import parse_kmp_affinity, parse_omp_places
from pinlab.placement.portable import resolve
from pinlab.study.plan import explicit_cpus, study_placement
from pinlab.topology import load_topology
from pinlab.tune import TuneRequest, tune, tune_plan
from pinlab.tune.candidates import OS_DEFAULT, memory_candidates, tune_candidates
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
    must leave the race and not win: at its first look on a quiet machine, by the second under
    load 16 (where a run of 0.4 s on the other CPU may get as little CPU time as the slow one's
    work needs: seen once in a busy run); the runs are a study pinlab report reads;
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
    assert on_slow["left_at"] in (6, 9) and on_slow["runs"] == on_slow["left_at"], answer
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
    cs = [{"id": 1 + i, "position": i, "placement": s, "mem": "first-touch", "extra": {"label": f"L{i}"}} for i, s in enumerate(p.strategies)]
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


# -- memory policies (--mem) --------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["opteron-4x4", "nehalem-ep", "epyc-7763-2s", "dunnington-96"])
def test_memory_candidates_are_over_the_nodes_of_each_placement_s_threads(preset):
    topo = load_topology(preset)
    every = sorted(topo.allowed_nodes & {n for c in topo.allowed_cpus for n in topo.pu(c).nodes})
    for threads in (2, 4, len(topo.allowed_cpus)):
        placements = tune_candidates(topo, threads)
        found = memory_candidates(topo, placements)
        assert found and all(c.mem != "first-touch" for c in found)
        assert not any(c.twin for c in found)  # a twin differs by its neighbours, not its memory
        for c in found:
            kind, _, nodes = c.mem.partition(":")
            used = sorted({n for cpu in (c.cpus or topo.allowed_cpus) for n in topo.pu(cpu).nodes})
            assert parse_cpulist(nodes) == used and c in [replace(p, mem=c.mem) for p in placements]
            assert kind == "interleave" and len(used) > 1 or kind == "bind" and c.cpus is not None and set(used) < set(every)
        assert next(c for c in found if c.cpus is None).mem == f"interleave:{format_cpulist(every)}"
        one_node = [p for p in placements if p.cpus is not None and len({n for cpu in p.cpus for n in topo.pu(cpu).nodes}) == 1 and not p.twin]
        assert all(any(c.cpus == p.cpus and c.mem.startswith("bind:") for c in found) for p in one_node)
        assert not any(c.cpus == p.cpus and c.mem.startswith("interleave:") for p in one_node for c in found)


def test_one_numa_node_has_no_memory_policy_to_race():
    topo = load_topology("clovertown")
    assert memory_candidates(topo, tune_candidates(topo, 4)) == []


def test_a_study_of_pairs_runs_only_the_pairs_and_keeps_them_when_resumed():
    from pinlab.study.plan import Program, StudyPlan, plan_from_parameters

    pairs = [["none", "first-touch"], ["cpus:0", "first-touch"], ["none", "interleave:0"]]
    plan = StudyPlan(
        name="p", programs=[Program("p", ["true"])], strategies=["none", "cpus:0"], mem=["first-touch", "interleave:0"], pairs=pairs,
        threads=[1], runs="race", warmup=0, min_runs=6, max_runs=9, labels={"none": "OS", "cpus:0": "first CPU"},
    )  # fmt: skip
    plan.validate(fits=False)
    configs = [(c["placement"], c["mem"], c["extra"]["label"]) for c in plan.configs()]
    assert configs == [("none", "first-touch", "OS, memory first-touch"), ("none", "interleave:0", "OS, memory interleave:0"),
                       ("cpus:0", "first-touch", "first CPU, memory first-touch")]  # fmt: skip
    again = plan_from_parameters("p", json.loads(json.dumps(plan.parameters())), 0, 10)
    again.validate(fits=False)
    assert again.configs() == plan.configs()
    for bad, message in (([["cpus:1", "first-touch"]], "does not list"), ([pairs[0], pairs[0]], "listed twice"), ([["none"]], "a placement and")):
        with pytest.raises(UsageError, match=message):
            StudyPlan(
                name="p", programs=[Program("p", ["true"])], strategies=["none", "cpus:0"], mem=["first-touch"], pairs=bad, threads=[1], runs=3
            ).validate(fits=False)  # fmt: skip


def test_settings_run_the_program_under_numactl_where_the_tool_sets_no_memory_policy():
    from pinlab.placement import make_placement

    topo = load_topology("opteron-4x4")
    lines = settings(make_placement(topo, cpus="0,4", threads=2), ["prog"], GNU, mem="interleave:0-1")
    assert lines["openmp"].splitlines()[-1] == "numactl --interleave=0-1 prog"
    assert lines["taskset"].startswith("taskset -c 0,4 numactl --interleave=0-1 prog")
    assert lines["numactl"].startswith("numactl --physcpubind=0,4 --interleave=0-1 prog")
    assert lines["likwid"] == "likwid-pin -c 0,4 numactl --interleave=0-1 prog"
    assert lines["srun"].endswith("--cpu-bind=mask_cpu:0x11 numactl --interleave=0-1 prog")
    assert lines["pinlab"] == "pinlab run -c 0,4 --mem interleave:0-1 -- prog"
    bound = settings(make_placement(topo, strategy="none", threads=2), ["prog"], None, plan_file="p.json", mem="bind:1")
    assert bound["numactl"] == "numactl --membind=1 prog" and bound["pinlab"] == "pinlab run -s none -n 2 --mem bind:1 -- prog"


def test_an_answer_can_be_a_memory_policy_without_pinning():
    """The operating system's placement with its memory interleaved, shown faster than with first touch."""
    from pinlab.study.direction import study_direction
    from pinlab.study.plan import Program, StudyPlan
    from pinlab.tune.answer import answer

    good = [1.0, 1.01, 0.99, 1.02, 1.0, 0.98]
    p = StudyPlan(name="t", programs=[Program("p", ["p"])], strategies=["none", "cpus:0"], mem=["first-touch", "interleave:0"], threads=[1],
                  runs="race", warmup=0, min_runs=6, max_runs=9)  # fmt: skip
    kinds = [("none", "first-touch", 1.5), ("none", "interleave:0", 1.0), ("cpus:0", "first-touch", 2.0)]
    cs = [{"id": 1 + i, "position": i, "placement": pl, "mem": m, "extra": {"label": f"L{i}"}} for i, (pl, m, _) in enumerate(kinds)]
    runs = [
        {"config_id": 1 + pos, "run_index": i, "warmup": False, "status": "ok", "metric": f * x, "wall_seconds": 1.0}
        for pos, (_, _, f) in enumerate(kinds)
        for i, x in enumerate(good)
    ]
    found = answer(p, study_direction(p.parameters()), cs, runs, "db")
    assert found.baseline.position == 0 and found.winner.position == 1 and found.winner.mem == "interleave:0"
    assert found.chosen and not found.pinned and found.sentence().startswith("use L1 (no pinning): 1.5")
    assert found.to_json()["chosen"] is True and found.to_json()["winner"]["mem"] == "interleave:0"


def test_a_plan_file_s_memory_policy_is_applied_over_its_threads_nodes(tmp_path):
    plan, record = tmp_path / "plan.json", tmp_path / "r.json"
    data = json.loads(run_pinlab("place", "-c", str(min(os.sched_getaffinity(0))), "-f", "json").stdout)
    plan.write_text(json.dumps({**data, "mem": "interleave"}))
    ran = run_pinlab("run", "-q", "--plan", str(plan), "--record", str(record), "--", sys.executable, "-c", "pass")
    assert ran.returncode == 0, ran.stderr
    node = next(n for n, cpus in numa_nodes().items() if min(os.sched_getaffinity(0)) in cpus)
    assert json.loads(record.read_text())["options"]["mem"] == f"interleave:{node}"
    plan.write_text(json.dumps({**data, "mem": "spread"}))
    refused = run_pinlab("run", "--plan", str(plan), "--", "true")
    assert refused.returncode == 2 and "'mem' must be interleave or bind" in refused.stderr


# -- graph strategies (--graph) ---------------------------------------------------------------------------
def test_a_graph_adds_the_graph_strategies_each_placement_once(tmp_path):
    from tests.graph.graph_support import planted_graph

    path = tmp_path / "g.json"
    planted_graph(8, [(0, 5, 1000.0), (1, 4, 1000.0), (2, 7, 1000.0), (3, 6, 1000.0)]).save(path)
    graph = load_graph(str(path))
    topo = load_topology("clovertown")
    req = TuneRequest(workload="primes:--limit 1000", threads=8, graph=str(path), db=str(tmp_path / "t.db"), name="t")
    req.validate()
    plan = tune_plan(req, topo, graph)
    labels = [c["extra"]["label"] for c in plan.configs()]
    placements = [c["placement"] for c in plan.configs()]
    assert len(set(placements)) == len(placements)
    for strategy in ("lp-compact", "lp-scatter", "gp", "lpgp", "gplp", "treematch"):
        named = [label for label in labels if strategy in label.replace(" (graph)", "").split(" = ")]
        assert len(named) == 1, (strategy, labels)
    lpgp = study_placement(topo, placements[next(i for i, label in enumerate(labels) if "lpgp" in label.replace(" (graph)", "").split(" = "))], 8)
    shared = [obj.cpus for obj in topo.objects("L2")]
    for i, j in ((0, 5), (1, 4), (2, 7), (3, 6)):  # each planted pair on one L2
        assert any({lpgp.cpus[i], lpgp.cpus[j]} <= l2 for l2 in shared), lpgp.cpus
    with pytest.raises(UsageError, match="give -n 8"):
        tune_plan(TuneRequest(workload="primes", threads=4, graph=str(path)), topo, graph)


def test_a_missing_graph_file_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match="--graph nothing.json: no such file"):
        tune(TuneRequest(program=("true",), graph="nothing.json", db=str(tmp_path / "t.db")))
    assert not (tmp_path / "t.db").exists()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_graph_auto_traces_the_program_once_and_races_its_placements(tmp_path):
    db = tmp_path / "t.db"
    args = ["tune", "-n", "2", "--graph", "auto", "-w", "pairs:--reps 6000", "--max-candidates", "1"]
    result = run_pinlab(*args, "--min-runs", "3", "--max-runs", "3", "--warmup", "0", "--db", str(db), "--name", "g", "--json")
    assert result.returncode == 0, result.stderr
    assert "--graph auto: tracing one run of the program with 2 threads" in result.stderr
    answer = json.loads(result.stdout)  # the traced run's output went to stderr
    labels = " ".join(p["label"] for p in answer["placements"])
    if "counted no sharing between the threads: the graph strategies are left out" in result.stderr:
        # on a loaded machine the page tracer may never catch the second thread first on a page
        assert "were never seen first on a traced page" in result.stderr and "lpgp" not in labels
    else:
        assert "lpgp" in labels and "treematch" in labels, answer["placements"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM studies").fetchone()[0] == 1
