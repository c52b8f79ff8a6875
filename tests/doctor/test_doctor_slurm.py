"""The doctor inside real Slurm steps (one-host test clusters, tests/study/slurm_cluster.py).

A batch job asks for 2 CPUs per task (``sbatch -c 2``):

- its step runs an OpenMP program with ``OMP_NUM_THREADS=1``, as a job script that set it once
  for a serial step would: the doctor, run in the step, reads Slurm's variables from the
  program's own environment and says they disagree; the job script with the printed
  ``export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK`` gets no such finding;
- on a cluster that binds tasks to cores, as production clusters do, a plain ``srun`` (Slurm
  22.05 and later do not pass the job's ``-c`` on) gives the task one CPU: the doctor says so,
  and both printed fixes, ``srun -c $SLURM_CPUS_PER_TASK`` and ``export SRUN_CPUS_PER_TASK=...``,
  give the step its 2 CPUs.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import PINLAB
from tests.doctor.helpers import clean_env, codes, probe
from tests.study import slurm_cluster

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a job of 2 CPUs per task needs a node of 2 CPUs")


@pytest.fixture(scope="module")
def binding_slurm(tmp_path_factory):
    """A second one-host cluster whose task plugin binds each task to cores."""
    try:
        cluster = slurm_cluster.start(tmp_path_factory.mktemp("slurm-binding"), slurm_cluster.BINDING)
    except slurm_cluster.Unavailable as why:
        pytest.skip(f"no Slurm cluster here: {why}")
    yield cluster
    slurm_cluster.stop(cluster)


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


def test_a_step_srun_gave_fewer_cpus_than_the_job_asked_per_task_is_found_and_both_printed_fixes_work(binding_slurm, tmp_path):
    program = f"{probe()} 3000"
    doctor = f"{PINLAB} doctor --json --seconds 2 --"
    setup = "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
    status, report = _job(binding_slurm, tmp_path, "narrowed", setup + f"srun {doctor} {program}\n")
    assert status == 1 and len(report["processes"][0]["allowed_cpus"]) == 1, report  # bound to one core
    found = next(f for f in report["findings"] if f["code"] == "slurm-step-fewer-cpus")
    assert found["severity"] == "problem" and found["evidence"]["SLURM_CPUS_PER_TASK"] == "2", found
    assert found["fix"] == [
        f"srun -c $SLURM_CPUS_PER_TASK {program}",
        "# or once in the job script, before its srun lines:",
        "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK",
    ]
    # The thread count is right for the job: nothing tells the user to lower it.
    assert not codes(report) & {"env-threads-above-cpus", "pool-too-large", "env-slurm-mismatch"}, report
    srun_line = found["fix"][0].replace("srun -c $SLURM_CPUS_PER_TASK ", f"srun -c $SLURM_CPUS_PER_TASK {doctor} ", 1)
    for name, script in (("srun-c", setup + srun_line + "\n"), ("exported", setup + found["fix"][2] + "\n" + f"srun {doctor} {program}\n")):
        status, report = _job(binding_slurm, tmp_path, name, script)
        assert report["processes"][0]["allowed_cpus"] == [0, 1], (name, report)
        assert status == 0 and codes(report) == set(), (name, report)
