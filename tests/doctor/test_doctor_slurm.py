"""The doctor inside a real Slurm step (the one-host test cluster, tests/study/slurm_cluster.py).

A batch job asks for 2 CPUs per task (``sbatch -c 2``) and its step runs an OpenMP program with
``OMP_NUM_THREADS=1``, as a job script that set it once for a serial step would: the doctor, run
in the step, reads Slurm's variables from the program's own environment and says they disagree;
the job script with the printed ``export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK`` gets no such
finding. (The cluster binds no task, so a step's CPUs are the node's whatever ``srun -c`` says:
the trap of Slurm 22.05, where ``srun`` stopped reading ``--cpus-per-task`` from the job, cannot
be shown here.)
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import PINLAB
from tests.doctor.helpers import clean_env, probe

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a job of 2 CPUs per task needs a node of 2 CPUs")


def _job(slurm, tmp_path, name: str, script: str) -> tuple[int, dict]:
    """Submit ``script`` with 2 CPUs per task and wait for it: (its exit status, which is the
    doctor's, and the doctor's report)."""
    out = tmp_path / f"{name}.out"
    job = tmp_path / f"{name}.sh"
    job.write_text("#!/bin/sh\n" + script)
    env = {**clean_env(), **{k: v for k, v in slurm.env.items() if k.startswith("SLURM_CONF")}}
    done = subprocess.run(["sbatch", "-W", "-c", "2", "-o", str(out), str(job)], env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode in (0, 1), (done.stdout, done.stderr, out.read_text() if out.exists() else "")
    lines = out.read_text().splitlines()
    return done.returncode, json.loads(next(line for line in reversed(lines) if line.startswith("{")))


def test_omp_num_threads_against_slurms_cpus_per_task_in_a_real_step_and_the_printed_export_fixes_it(slurm, tmp_path):
    run = f"srun {PINLAB} doctor --json --seconds 2 -- {probe()} 3000\n"
    status, report = _job(slurm, tmp_path, "mismatch", "export OMP_NUM_THREADS=1\n" + run)
    assert status == 1  # the doctor's finding fails the job: it can gate a job script
    found = next(f for f in report["findings"] if f["code"] == "env-slurm-mismatch")
    assert found["evidence"] == {"OMP_NUM_THREADS": "1", "SLURM_CPUS_PER_TASK": "2"}, found
    assert found["fix"][0] == "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK"
    status, report = _job(slurm, tmp_path, "fixed", "export OMP_NUM_THREADS=1\n" + found["fix"][0] + "\n" + run)
    assert "env-slurm-mismatch" not in {f["code"] for f in report["findings"]}, report
