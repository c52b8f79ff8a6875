"""The environment findings on real programs, each gone once its printed fix is applied."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest

from pinlab.native import native_path
from tests.doctor.helpers import LONG_MS, PYTHON, apply, clean_env, codes, doctor, finding, probe

two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


def runs(program) -> bool:
    """Whether ``program`` exists and starts (its libraries found: a wheel built elsewhere may hold
    a probe linked to a libomp this machine lacks)."""
    if not program.exists():
        return False
    return subprocess.run([str(program), "--help"], capture_output=True, timeout=60).returncode != 127


@two_cpus
def test_omp_num_threads_other_than_slurm_s_cpus_is_found_and_its_fix_makes_it_go_away():
    env = clean_env(OMP_NUM_THREADS="2", SLURM_CPUS_PER_TASK="1")
    status, report = doctor([probe(), LONG_MS], env, seconds=1)
    mismatch = finding(report, "env-slurm-mismatch")
    assert status == 1 and mismatch["evidence"] == {"OMP_NUM_THREADS": "2", "SLURM_CPUS_PER_TASK": "1"}
    assert mismatch["fix"][0] == "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK"
    argv, env = apply(mismatch["fix"][1], env)
    status, report = doctor(argv, env, seconds=1)
    assert codes(report) == set() and status == 0, report


@two_cpus
@pytest.mark.skipif(not runs(native_path("pinlab-probe").with_name("pinlab-probe-llvm")), reason="pinlab-probe-llvm not built, or its libomp missing")
def test_omp_proc_bind_turned_off_by_kmp_affinity_is_found_and_its_fix_binds_the_threads():
    llvm = str(native_path("pinlab-probe-llvm"))
    env = clean_env(OMP_NUM_THREADS="2", OMP_PROC_BIND="close", KMP_AFFINITY="disabled")
    status, report = doctor([llvm, LONG_MS], env, seconds=1.5)
    ignored = finding(report, "env-binding-ignored")
    assert status == 1 and ignored["evidence"]["asked"] == {"OMP_PROC_BIND": "close"} and len(ignored["evidence"]["threads"]) == 2
    assert ignored["fix"][0] == f"env -uKMP_AFFINITY {llvm} {LONG_MS}"
    argv, env = apply(ignored["fix"][0], env)
    assert "KMP_AFFINITY" not in env
    status, report = doctor(argv, env, seconds=1.5)
    assert codes(report) == set() and status == 0, report


@two_cpus
@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="needs numpy")
def test_blas_threads_inside_openmp_threads_are_found_and_the_fix_keeps_one_blas_thread_each():
    both = "import ctypes, time, numpy; ctypes.CDLL('libgomp.so.1'); print('ready', flush=True); time.sleep(600)"
    # one OpenMP thread per allowed CPU, each with a BLAS pool of 2: twice as many threads as CPUs
    # (2 x 2 alone is no excess on a machine of 16)
    cpus = str(len(os.sched_getaffinity(0)))
    env = clean_env(OMP_NUM_THREADS=cpus, OPENBLAS_NUM_THREADS="2")
    status, report = doctor([PYTHON, "-c", both], env, seconds=0.5, ready="ready", settle=0)
    nested = finding(report, "env-nested-pools")
    assert status == 1 and nested["evidence"]["OPENBLAS_NUM_THREADS"] == "2"
    argv, env = apply(nested["fix"][0], env)
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["OMP_NUM_THREADS"] == cpus
    status, report = doctor(argv, env, seconds=0.5, ready="ready", settle=0)
    assert codes(report) == set() and status == 0, report


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_openmp_threads_told_to_spin_beside_runnable_threads_are_found_and_the_fix_lets_them_sleep():
    env = clean_env(OMP_NUM_THREADS="2", OMP_WAIT_POLICY="active")
    argv = ["taskset", "-c", "0", probe(), LONG_MS]
    status, report = doctor(argv, env, seconds=1)
    spin = finding(report, "env-active-wait")
    assert status == 1 and spin["evidence"]["variables"] == {"OMP_WAIT_POLICY": "active"}
    fixed_argv, fixed_env = apply(spin["fix"][0], env)
    assert fixed_env["OMP_WAIT_POLICY"] == "passive" and fixed_argv == argv[3:]  # the process is the program taskset became
    status, report = doctor([*argv[:3], *fixed_argv], fixed_env, seconds=1)
    assert "env-active-wait" not in codes(report)  # the two threads on one CPU stay oversubscribed: that finding's own fix
