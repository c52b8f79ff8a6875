"""Every built-in workload at a tiny size: its JSON, its own result check, its bad input."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from pinlab.workloads import WORKLOADS, workload_path
from tests.conftest import run_pinlab

THREADS = min(2, len(os.sched_getaffinity(0)))
TINY = {
    "stream": ["--size", "100k", "--ntimes", "3"],
    "nested-stream": ["--teams", "2", "--threads-per-team", "1", "--size", "50k", "--ntimes", "3"],
    "twisted-stream": ["--teams", "2", "--threads-per-team", "1", "--size", "50k", "--ntimes", "3"],
    "imbalanced-stream": ["--teams", "2", "--size", "50k", "--work", "2,1"],
    "mb": ["--n", "4", "--m", "1000", "--reps", "10"],
    "primes": ["--limit", "100000"],
    "pairs": ["--groups", "2", "--size", "1000", "--reps", "10"],
}


def run_json(name: str, *args: str, threads: int = THREADS) -> tuple[int, dict, str]:
    out = subprocess.run([workload_path(name), "--threads", str(threads), "--json", *args], capture_output=True, text=True, timeout=300)
    data = json.loads(out.stdout)  # exactly one JSON object and nothing else on stdout
    return out.returncode, data, out.stderr


def test_every_workload_has_a_tiny_case():
    assert set(TINY) == set(WORKLOADS)


@pytest.mark.parametrize("name", sorted(TINY))
def test_workload_json_is_valid_and_complete(name):
    rc, data, _ = run_json(name, *TINY[name], threads=2 if name in ("nested-stream", "twisted-stream", "pairs") else THREADS)
    assert rc == 0 and data["valid"] is True, data
    assert data["workload"] == name
    assert isinstance(data["parameters"], dict) and data["parameters"]
    assert data["elapsed_seconds"] > 0 and isinstance(data["results"], dict)
    if name not in ("nested-stream", "twisted-stream", "imbalanced-stream"):
        assert data["threads"] == (2 if name == "pairs" else THREADS)


def test_stream_reports_every_kernel_as_stream_does():
    _, data, _ = run_json("stream", *TINY["stream"])
    for kernel in ("copy", "scale", "add", "triad"):
        figures = data["results"][kernel]
        assert figures["best_mbs"] >= figures["avg_mbs"] >= figures["min_mbs"] > 0
        assert figures["max_mbs"] == pytest.approx(figures["best_mbs"])
        assert figures["min_time"] <= figures["avg_time"] <= figures["max_time"]
    assert data["parameters"]["size_elements"] == 100_000 and data["parameters"]["ntimes"] == 3


def test_stream_size_units():
    _, data, _ = run_json("stream", "--size", "8MiB", "--ntimes", "2")
    assert data["parameters"]["size_elements"] == 8 * 1024 * 1024 // 8


def test_primes_count_is_checked_against_the_known_value():
    _, data, _ = run_json("primes", "--limit", "100000")
    assert data["results"]["count"] == data["results"]["expected"] == 9592  # pi(10^5)


def test_mb_sweep_keeps_the_working_set_per_thread_constant():
    _, data, _ = run_json("mb", "--sweep", "--ws-per-thread", "64KiB", "--reps", "5", threads=THREADS)
    runs = data["results"]["runs"]
    assert runs[0]["n"] == THREADS and runs[-1]["m"] == 1
    assert all(r["n"] * r["m"] * 8 == THREADS * 64 * 1024 for r in runs)


def test_team_workloads_report_every_team():
    _, nested, _ = run_json("nested-stream", *TINY["nested-stream"], threads=2)
    assert [t["team"] for t in nested["results"]["teams"]] == [0, 1]
    _, twisted, _ = run_json("twisted-stream", *TINY["twisted-stream"], threads=2)
    assert [p["phase"] for p in twisted["results"]["phases"]] == [1, 2]
    _, imbalanced, _ = run_json("imbalanced-stream", *TINY["imbalanced-stream"])
    assert [t["repetitions"] for t in imbalanced["results"]["teams"]] == [2, 1]
    assert imbalanced["results"]["overall_seconds"] >= max(t["seconds"] for t in imbalanced["results"]["teams"])


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_corrupted_result_is_caught(name):
    rc, data, _ = run_json(name, *TINY[name], "--corrupt", threads=2 if name in ("nested-stream", "twisted-stream", "pairs") else THREADS)
    assert rc == 1 and data["valid"] is False and data.get("error")


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("stream", ["--size", "0"], "error"),
        ("stream", ["--size", "100TiB"], "available"),
        ("stream", ["--ntimes", "-1"], "error"),
        ("stream", ["--size", "12parsecs"], "error"),
        ("mb", ["--reps", "0"], "error"),
        ("primes", ["--limit", "-5"], "error"),
        ("pairs", ["--groups", "0"], "error"),
        ("stream", ["--no-such-option"], "error"),
    ],
)
def test_bad_input_exits_2_with_one_line(name, args, message):
    out = subprocess.run([workload_path(name), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and message in out.stderr and out.stderr.startswith(f"pinlab-{name}: ")


def test_pairs_needs_whole_groups():
    out = subprocess.run([workload_path("pairs"), "--threads", "3", "--groups", "2"], capture_output=True, text=True)
    assert out.returncode == 2 and "multiple" in out.stderr


def test_cli_list_path_and_run():
    listed = run_pinlab("workload", "list").stdout
    assert all(name in listed for name in WORKLOADS)
    path = run_pinlab("workload", "path", "stream").stdout.strip()
    assert os.access(path, os.X_OK)
    result = run_pinlab("workload", "run", "stream", "-n", str(THREADS), "--json", "--", *TINY["stream"])
    assert result.returncode == 0 and json.loads(result.stdout)["valid"] is True
    unknown = run_pinlab("workload", "run", "nope")
    assert unknown.returncode == 2 and "unknown workload 'nope'" in unknown.stderr


def test_a_workload_runs_under_other_tools_and_pinned():
    path = run_pinlab("workload", "path", "primes").stdout.strip()
    cpu = str(sorted(os.sched_getaffinity(0))[0])
    under_taskset = subprocess.run(["taskset", "-c", cpu, path, "--json", "--limit", "10000"], capture_output=True, text=True)
    assert json.loads(under_taskset.stdout)["threads"] == 1  # OpenMP sees one CPU
    pinned = run_pinlab("workload", "run", "primes", "-n", str(THREADS), "-s", "compact", "--json", "--", "--limit", "10000")
    assert pinned.returncode == 0 and json.loads(pinned.stdout)["threads"] == THREADS
    # and where its threads really ran, under pinlab run with a record
    plan = run_pinlab("place", "-s", "compact", "-n", str(THREADS)).stdout.strip()
    record_path = f"/tmp/pinlab-test-wl-{os.getpid()}.json"
    try:
        run_pinlab("run", "-q", "-c", plan, "--record", record_path, "--", path, "--limit", "200000")
        threads = json.loads(open(record_path).read())["threads"]
    finally:
        if os.path.exists(record_path):
            os.unlink(record_path)
    # the main thread starts on the plan's CPUs and is narrowed to its own; the workers start on theirs
    assert threads[0]["mask_at_start"] == (threads[0]["planned_start_mask"] or plan) and threads[0]["planned_cpu"] == int(plan.split(",")[0])
    assert [t["mask_at_start"] for t in threads[1:]] == plan.split(",")[1:]
    assert all(t["pinned_as_planned"] for t in threads)


@pytest.mark.parametrize("remote", [3, 2])
@pytest.mark.parametrize("policy", ["first-touch", "next-touch", "move-threads", "mixed"])
def test_twisted_stream_runs_every_policy_with_valid_results(policy, remote):
    """Where the data and threads go is proved on 2 nodes (tests/vm/test_vm_memory.py); here every
    policy runs, keeps the results right and reports the nodes (all 0 on one node)."""
    rc, data, err = run_json("twisted-stream", *TINY["twisted-stream"], "--policy", policy, "--remote", str(remote), threads=2)
    assert rc == 0 and data["valid"] is True, err
    assert data["parameters"]["policy"] == policy and data["parameters"]["remote"] == remote
    nodes = {team["node"] for phase in data["results"]["phases"] for team in phase["teams"]}
    assert nodes <= set(range(256)) and len(data["results"]["data_node_after"]) == 2
    assert [len(v) for v in data["results"]["vector_nodes_after"]] == [3, 3]
    # each vector's pages per node as measured: every whole page of the 50k doubles, on some node
    pages = 50_000 * 8 // os.sysconf("SC_PAGE_SIZE")
    assert [[sum(v.values()) for v in team] for team in data["results"]["vector_pages_after"]] == [[pages] * 3] * 2, data["results"]
    assert all(len(team["nodes"]) == team["threads"] for phase in data["results"]["phases"] for team in phase["teams"])
    phase2 = data["results"]["phases"][1]["teams"]
    assert [t["vectors_of_team"] for t in phase2] == [1, 0]
    assert [t["c_of_team"] for t in phase2] == ([0, 1] if remote == 2 else [1, 0])
    if len(os.sched_getaffinity(0)) >= 2 and policy == "move-threads":
        assert "could not move" not in err


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("twisted-stream", ["--policy", "bogus"], "unknown --policy 'bogus'"),
        ("nested-stream", ["--policy", "next-touch"], "nested-stream has one phase"),
        ("nested-stream", ["--remote", "2"], "nested-stream has one phase"),
        ("twisted-stream", ["--remote", "1"], "--remote must be between 2 and 3"),
    ],
)
def test_team_policies_are_refused_where_they_do_not_apply(name, args, message):
    out = subprocess.run([workload_path(name), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in out.stderr


@pytest.mark.parametrize("policy", ["first-touch", "move-threads", "mixed", "next-touch"])
def test_imbalanced_stream_steals_half_of_the_busiest_team_when_a_team_finishes(policy):
    """Team 0 (one repetition) ends first; under every policy but first-touch it takes half of team
    1's threads (at most one per CPU its own threads ran on), which end on those CPUs, and the
    results stay right. Where the data goes is proved on 2 and 4 nodes (tests/vm/test_vm_memory.py)."""
    rc, data, err = run_json(
        "imbalanced-stream", "--teams", "2", "--threads-per-team", "4", "--size", "200k", "--work", "1,200", "--policy", policy, "--place-teams"
    )
    assert rc == 0 and data["valid"] is True, err
    assert data["parameters"]["policy"] == policy and data["parameters"]["place_teams"] is True
    first, second = data["results"]["teams"]
    assert first["stolen_by"] == -1 and first["threads_stolen"] == 0
    assert len(first["cpus_after"]) == len(second["cpus_after"]) == 4 and len(second["part_nodes_after"]) == 4
    thief_cpus = set(first["cpus_after"])
    if policy == "first-touch":
        assert second["stolen_by"] == -1 and second["threads_stolen"] == 0 and "stolen_at_seconds" not in second
        return
    assert second["stolen_by"] == 0 and second["threads_stolen"] == min(2, len(thief_cpus)), second
    assert 0 < second["stolen_at_seconds"] <= data["results"]["overall_seconds"]
    stolen = second["cpus_after"][4 - second["threads_stolen"] :]
    assert set(stolen) <= thief_cpus and len(set(stolen)) == len(stolen), (first, second)


def test_imbalanced_stream_policy_and_place_words_are_checked():
    out = subprocess.run([workload_path("imbalanced-stream"), "--policy", "steal"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown --policy 'steal': use first-touch, next-touch, move-threads or mixed" in out.stderr
    out = subprocess.run(
        [workload_path("imbalanced-stream"), "--policy", "mixed", "--teams", "1000", "--threads-per-team", "2", "--size", "1k"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "more than the memory API's 4096 regions" in out.stderr
