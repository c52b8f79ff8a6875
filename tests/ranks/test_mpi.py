"""Open MPI's mpirun starting ranks of an MPI + OpenMP program through pinlab run: every rank's
threads run inside its own part of this machine (as many ranks as this machine allows, up to 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.ranks.split import split_node
from pinlab.topology.sources import load_node
from tests.conftest import PINLAB

needs_mpi = pytest.mark.skipif(
    not (shutil.which("mpicc") and shutil.which("mpirun")), reason="Open MPI is not installed (make install installs openmpi-bin and libopenmpi-dev)"
)
RANKS = min(2, len(os.sched_getaffinity(0)))


@pytest.fixture(scope="module")
def hybrid_probe(tmp_path_factory) -> str:
    exe = tmp_path_factory.mktemp("mpi") / "hybrid_probe"
    subprocess.run(["mpicc", "-fopenmp", "-O1", "-o", str(exe), str(Path(__file__).with_name("hybrid_probe.c"))], check=True)
    return str(exe)


def mpirun(*args: str, ranks: int = RANKS, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    # --bind-to none: Open MPI's own binding would be replaced by pinlab's anyway (tested below
    # with --bind-to core); as root, Open MPI wants to be told it may run.
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **(env_extra or {})}
    return subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), *args], capture_output=True, text=True, env=env, timeout=600)


def rows(text: str) -> list[dict]:
    return [dict(f.split("=", 1) for f in line.split()) for line in text.splitlines() if line.startswith("rank=")]


@needs_mpi
@pytest.mark.parametrize("binding", ["none", "core"])
def test_every_ranks_threads_run_pinned_inside_its_domain(hybrid_probe, binding):
    domains = split_node(load_node(), RANKS).domains
    threads = min(len(d.cpus) for d in domains)
    result = mpirun("--bind-to", binding, str(PINLAB), "run", "-q", "-s", "compact", "-n", str(threads), "--smt", "--", hybrid_probe)
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    assert len(found) == RANKS * threads, result.stdout
    for rank in range(RANKS):
        mine = [r for r in found if int(r["rank"]) == rank]  # one node: the local rank is the rank
        assert len(mine) == threads
        assert {int(r["cpu"]) for r in mine} <= domains[rank].cpus, (rank, mine, domains[rank])
        assert all(len(set(parse_cpulist(r["mask"]))) == 1 for r in mine)  # pinned, one CPU each
        assert len({int(r["cpu"]) for r in mine}) == threads


@needs_mpi
def test_without_a_strategy_each_rank_is_kept_on_its_domain(hybrid_probe):
    domains = split_node(load_node(), RANKS).domains
    result = mpirun("--bind-to", "none", str(PINLAB), "run", "-q", "--", hybrid_probe, env_extra={"OMP_NUM_THREADS": "2"})
    assert result.returncode == 0, result.stderr
    for r in rows(result.stdout):
        assert set(parse_cpulist(r["mask"])) == domains[int(r["rank"])].cpus, r


def test_srun_ranks_run_inside_their_domains(slurm, tmp_path):
    """srun on the test cluster starts RANKS tasks of pinlab run: each reads its local rank from
    Slurm's step variables and pins its threads inside its part of the node."""
    from pinlab.native import native_path
    from tests.study import slurm_cluster

    domains = split_node(load_node(), RANKS).domains
    threads = min(len(d.cpus) for d in domains)
    out = tmp_path / "out.txt"
    script = tmp_path / "job.sh"
    run = f"{PINLAB} run -q -s compact -n {threads} --smt -- {native_path('pinlab-threads-probe')} --threads {threads - 1}"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --ntasks={RANKS}\n#SBATCH --output={out}\n"
        f"srun --cpu-bind=none -n {RANKS} bash -c '{run} | sed \"s/^/rank=$SLURM_PROCID /\"'\n"
    )
    submitted = subprocess.run(["sbatch", str(script)], env=slurm.env, capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    assert slurm_cluster.wait_idle(slurm, 120)
    lines = [dict(f.split("=", 1) for f in line.split()) for line in out.read_text().splitlines() if line.startswith("rank=")]
    assert len(lines) == RANKS * threads, out.read_text()
    by_rank: dict[int, set[int]] = {}
    for line in lines:
        by_rank.setdefault(int(line["rank"]), set()).add(int(line["cpu"]))
    assert sorted(by_rank) == list(range(RANKS))
    for rank, used in by_rank.items():
        assert used <= domains[rank].cpus and len(used) == threads, (rank, used, domains[rank])
