"""pinlab run in a rank context: each rank's threads run inside its part of this machine."""

from __future__ import annotations

import json
import os

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.native import native_path
from pinlab.ranks.gpus import find_gpus
from pinlab.ranks.split import split_node
from pinlab.topology.sources import load_node
from tests.conftest import run_pinlab

PROBE = str(native_path("pinlab-threads-probe"))
RANKS = min(2, len(os.sched_getaffinity(0)))


def _rows(text: str) -> list[dict]:
    return [dict(field.split("=", 1) for field in line.split()) for line in text.splitlines() if line.startswith("thread=")]


@pytest.mark.parametrize("rank", range(RANKS))
def test_each_ranks_threads_run_inside_its_domain(rank, tmp_path):
    domain = split_node(load_node(), RANKS).domains[rank]
    threads = len(domain.cpus)
    record = tmp_path / "r.json"
    result = run_pinlab(
        "run",
        "-q",
        "--rank",
        f"{rank}/{RANKS}",
        "-s",
        "compact",
        "-n",
        str(threads),
        "--smt",
        "--record",
        str(record),
        "--",
        PROBE,
        "--threads",
        str(threads - 1),
    )
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert len(rows) == threads and all(int(r["cpu"]) in domain.cpus and set(parse_cpulist(r["mask"])) <= domain.cpus for r in rows), (rows, domain)
    data = json.loads(record.read_text())
    # one CPU each, every one of the domain: the strategy ran inside it. The main thread starts on
    # all the plan's CPUs (its row shows where it was then) and is narrowed to its own as it
    # creates its first thread; the record says where each thread was pinned
    planned = [t["planned_cpu"] for t in data["threads"]]
    assert len(planned) == threads and set(planned) == domain.cpus, data["threads"]
    assert all(t["pinned_as_planned"] for t in data["threads"]), data["threads"]
    workers = [r for r in rows if r["thread"] != "0"]
    assert all(len(parse_cpulist(r["mask"])) == 1 for r in workers) and len({r["mask"] for r in workers}) == threads - 1, rows
    assert data["options"]["rank"]["local_rank"] == rank and data["options"]["rank"]["local_size"] == RANKS
    assert set(parse_cpulist(data["options"]["rank"]["domain"]["cpus"])) == domain.cpus


def test_without_a_strategy_the_program_is_kept_on_its_domain(tmp_path):
    env = {**os.environ, "OMPI_COMM_WORLD_LOCAL_RANK": str(RANKS - 1), "OMPI_COMM_WORLD_LOCAL_SIZE": str(RANKS)}
    result = run_pinlab("run", "--", PROBE, "--threads", "2", env=env)
    domain = split_node(load_node(), RANKS).domains[RANKS - 1]
    assert result.returncode == 0, result.stderr
    assert all(set(parse_cpulist(r["mask"])) == domain.cpus for r in _rows(result.stdout))
    assert f"pinlab: local rank {RANKS - 1} of {RANKS} (Open MPI (OMPI_COMM_WORLD_LOCAL_RANK))" in result.stderr


def test_a_launchers_binding_is_replaced_by_the_ranks_domain():
    """mpirun may bind each rank to a core already: the split is of what the job has, not of that."""
    first = min(os.sched_getaffinity(0))
    domain = split_node(load_node(), RANKS).domains[RANKS - 1]
    result = run_pinlab("run", "-q", "--rank", f"{RANKS - 1}/{RANKS}", "--", PROBE, "--threads", "1", prefix=["taskset", "-c", str(first)])
    assert result.returncode == 0, result.stderr
    assert all(set(parse_cpulist(r["mask"])) == domain.cpus for r in _rows(result.stdout))


def test_a_launchers_binding_does_not_limit_a_strategy_inside_the_ranks_domain(tmp_path):
    """With mpirun --bind-to core each rank starts on one core, which need not be in its domain:
    the strategy is placed in the domain all the same, every thread pinned there."""
    first = min(os.sched_getaffinity(0))
    rank = RANKS - 1
    domain = split_node(load_node(), RANKS).domains[rank]
    threads = len(domain.cpus)
    record = tmp_path / "r.json"
    result = run_pinlab(
        "run", "-q", "--rank", f"{rank}/{RANKS}", "-s", "compact", "-n", str(threads), "--smt", "--record", str(record), "--",
        PROBE, "--threads", str(threads), "--spin-ms", "20",
        prefix=["taskset", "-c", str(first)],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(record.read_text())
    workers = [t for t in data["threads"] if t["role"] == "worker"]
    assert {t["planned_cpu"] for t in data["threads"]} == domain.cpus and all(t["pinned_as_planned"] for t in data["threads"]), data["threads"]
    assert all(set(parse_cpulist(r["mask"])) <= domain.cpus for r in _rows(result.stdout)) and workers, result.stdout


def test_memory_of_the_domain_and_gpus_without_gpus(tmp_path):
    result = run_pinlab("run", "-q", "--rank", f"0/{RANKS}", "--mem", "domain", "--", PROBE, "--threads", "1", "--mempolicy")
    domain = split_node(load_node(), RANKS).domains[0]
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert rows and all(
        r["policy"] == "2"  # MPOL_BIND
        and set(parse_cpulist(r["nodes"])) == domain.nodes
        for r in rows
    ), rows
    result = run_pinlab("run", "--rank", f"0/{RANKS}", "--gpus", "--", "true")
    assert result.returncode == 0, result.stderr
    if find_gpus(load_node()):
        assert ", GPUs " in result.stderr
    else:
        assert "hwloc shows no GPU" in result.stderr and ", GPUs " not in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mem", "domain"], "--mem domain binds memory to the rank's domain: it needs a rank context"),
        (["--gpus"], "--gpus gives each MPI rank the GPUs next to it: it needs a rank context"),
        (["--rank", "1/1"], "local rank 1 is not below the local rank count 1; give LOCAL from 0 to COUNT-1"),
        (["--rank", f"0/{len(os.sched_getaffinity(0)) + 1}"], "local ranks but only"),
        (["--rank", "0/1", "--plan", "x.json"], "--plan gives fixed CPUs for the whole node"),
        (["--rank", "0/1", "-c", "99999"], "rank 0 of 1 (CPUs"),
    ],
)
def test_bad_rank_input_in_one_line(args, message):
    result = run_pinlab(
        "run", *args, "--", "true", env={k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "SLURM_", "MPI_", "MV2_"))}
    )
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("rank", range(RANKS))
def test_place_on_this_machine_in_a_rank_context_places_inside_the_domain(rank):
    domain = split_node(load_node(), RANKS).domains[rank]
    env = {**os.environ, "MPI_LOCALRANKID": str(rank), "MPI_LOCALNRANKS": str(RANKS)}
    result = run_pinlab("place", "-s", "scatter", "-n", str(len(domain.cpus)), "--smt", "-f", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)["cpus"]) == domain.cpus
    assert f"local rank {rank} of {RANKS} (MPICH (Hydra) (MPI_LOCALRANKID))" in result.stderr
    other = run_pinlab("place", "-s", "scatter", "-n", "2", "-t", "clovertown", "-f", "json", env=env)  # another machine: no rank context
    assert other.returncode == 0 and "local rank" not in other.stderr
