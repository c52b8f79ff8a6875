"""Each finding on a real program, and gone once its printed fix is applied (the fix's variables,
on the command line the doctor printed)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

from tests.doctor.helpers import HERE, LONG_MS, LONG_S, PYTHON, apply, clean_env, codes, doctor, finding, probe

LIBOMP = "/usr/lib/llvm-14/lib/libomp.so.5"


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="needs numpy")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one Python thread per CPU: needs 2")
def test_blas_called_from_python_threads_is_found_and_its_fix_makes_it_go_away():
    argv = [PYTHON, str(HERE / "blas_in_threads.py"), LONG_S]
    status, report = doctor(argv, clean_env(), seconds=3, ready="ready")
    assert "nested-pools" in codes(report) and status == 1, report  # from the threads' start libraries, whatever the load
    nested = finding(report, "nested-pools")
    assert len(nested["evidence"]["python_threads"]) >= 2 and "OpenBLAS" in nested["evidence"]["pool_threads"], nested
    fix = nested["fix"]
    assert fix[0].startswith("OPENBLAS_NUM_THREADS=1 "), fix
    assert 'threadpool_limits(limits=1, user_api="blas")' in fix
    fixed_argv, fixed_env = apply(fix[0], clean_env())
    assert fixed_argv[1:] == argv[1:]
    status, report = doctor(fixed_argv, fixed_env, ready="ready")
    assert codes(report) == set() and status == 0, report


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_an_openmp_team_larger_than_its_one_cpu_is_found_and_its_fix_makes_it_go_away():
    argv = ["taskset", "-c", "0", probe(), LONG_MS]
    status, report = doctor(argv, clean_env(OMP_NUM_THREADS="4"))
    assert status == 1
    assert {"env-threads-above-cpus", "oversubscribed"} <= codes(report), report
    env_finding = finding(report, "env-threads-above-cpus")
    assert env_finding["evidence"]["variables"] == {"OMP_NUM_THREADS": "4"}
    assert finding(report, "oversubscribed")["evidence"]["pool_libraries"].keys() == {"libgomp"}
    fixed_argv, fixed_env = apply(env_finding["fix"][0], clean_env(OMP_NUM_THREADS="4"))
    assert fixed_env["OMP_NUM_THREADS"] == "1" and fixed_argv == [probe(), LONG_MS]
    status, report = doctor(["taskset", "-c", "0", *fixed_argv], fixed_env)
    assert codes(report) == set() and status == 0, report


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_openmp_threads_all_bound_to_one_cpu_are_found_and_the_fix_spreads_them():
    argv = [probe(), LONG_MS]
    status, report = doctor(argv, clean_env(OMP_NUM_THREADS="2", GOMP_CPU_AFFINITY="0"))
    assert status == 1
    piled = finding(report, "threads-share-cpu")
    assert piled["severity"] == "problem" and list(piled["evidence"]["cpus"]) == ["0"], piled
    assert len(piled["evidence"]["cpus"]["0"]) == 2
    line = piled["fix"][0]
    assert line.startswith("env -uGOMP_CPU_AFFINITY pinlab run -s compact -n 2 -- "), line
    fixed_argv, fixed_env = apply(line.replace(" pinlab run -s compact -n 2 --", ""), clean_env(OMP_NUM_THREADS="2", GOMP_CPU_AFFINITY="0"))
    assert "GOMP_CPU_AFFINITY" not in fixed_env and fixed_argv == argv
    status, report = doctor(fixed_argv, fixed_env)
    assert codes(report) == set() and status == 0, report


@pytest.mark.skipif(not __import__("os").path.exists(LIBOMP), reason=f"needs LLVM's OpenMP runtime at {LIBOMP}")
def test_two_openmp_runtimes_in_one_process_are_found():
    both = f"import ctypes, time; ctypes.CDLL('libgomp.so.1'); ctypes.CDLL('{LIBOMP}'); print('ready', flush=True); time.sleep(600)"
    status, report = doctor([PYTHON, "-c", both], clean_env(), seconds=0.5, ready="ready", settle=0)
    two = finding(report, "two-openmp-runtimes")
    assert status == 1 and two["severity"] == "problem"
    assert two["evidence"]["libomp"].endswith("libomp.so.5") and "libgomp" in two["evidence"]["libgomp"]
    assert two["fix"][-1].startswith(f"LD_PRELOAD={LIBOMP} ")
    one = "import ctypes, time; ctypes.CDLL('libgomp.so.1'); print('ready', flush=True); time.sleep(600)"
    status, report = doctor([PYTHON, "-c", one], clean_env(), seconds=0.5, ready="ready", settle=0)
    assert codes(report) == set() and status == 0, report
