"""Pools counted by library (the preload library names each thread's start library under a
placement), and the checks' thresholds on made-up windows."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from pinlab.doctor.checks import diagnose, oversubscribed, threads_share_cpu
from pinlab.doctor.evidence import busy_threads
from pinlab.doctor.machine_checks import memory_far
from pinlab.doctor.observe import ProcessObservation, Sample
from pinlab.measure.threads import LiveThread
from pinlab.native import native_path
from tests.conftest import run_pinlab
from tests.doctor.helpers import clean_env, codes, doctor


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_an_openmp_pool_the_program_makes_larger_than_its_cpus_is_counted_and_found():
    primes = str(native_path("pinlab-primes"))

    def doctor(threads: str) -> tuple[int, dict]:
        result = run_pinlab(
            "doctor", "-s", "compact", "-n", "2", "--seconds", "1", "--json", "--", primes, "--threads", threads, "--limit", "5M", env=clean_env()
        )
        return result.returncode, json.loads(result.stdout.splitlines()[-1])

    status, report = doctor("3")
    large = next(f for f in report["findings"] if f["code"] == "pool-too-large")
    assert status == 1 and large["evidence"]["size"] == 3 and large["evidence"]["size_from"] == "observed"
    assert large["fix"] == ["# the program sets the size itself: give it at most 2 threads with its own option"]
    status, report = doctor("2")
    assert status == 0 and codes(report) == set(), report


def test_a_pool_larger_than_the_plan_is_found_however_many_cpus_the_process_may_use():
    """Under a plan of one CPU, a pool of two threads shares it, on a machine of 2 CPUs as of 16."""
    primes = str(native_path("pinlab-primes"))
    result = run_pinlab(
        "doctor",
        "-c",
        str(min(os.sched_getaffinity(0))),
        "--seconds",
        "1",
        "--json",
        "--",
        primes,
        "--threads",
        "2",
        "--limit",
        "5M",
        env=clean_env(),
    )
    report = json.loads(result.stdout.splitlines()[-1])
    large = next((f for f in report["findings"] if f["code"] == "pool-too-large"), None)
    assert result.returncode == 1 and large is not None, report["findings"]
    assert large["evidence"]["size"] == 2 and "for 1 CPU of pinlab's plan" in large["statement"], large
    assert large["fix"] == ["# the program sets the size itself: give it at most 1 thread with its own option"]


def test_a_pool_of_a_process_pinlab_did_not_start_is_counted_from_its_threads_stacks():
    """Without pinlab's record, the pool's size is the threads its library started (read from
    their stacks), not its variable's or default size: here the program asks for 3 itself."""
    primes = str(native_path("pinlab-primes"))
    status, report = doctor([primes, "--threads", "3", "--limit", "4G"], clean_env())
    pool = next(f for f in report["findings"] if f["code"] in ("pool", "pool-too-large"))
    assert pool["evidence"]["library"] == "libgomp" and pool["evidence"]["size"] == 3 and pool["evidence"]["size_from"] == "observed", pool
    assert status == (1 if len(os.sched_getaffinity(0)) < 3 else 0), report


def _thread(tid: int, state: str, cpu_seconds: float, mask: frozenset[int] = frozenset({0, 1})) -> LiveThread:
    return LiveThread(tid, 100, "prog", "unknown", None, None, min(mask), mask, 0, cpu_seconds, state)


def _window(states: list[str], masks: list[frozenset[int]] | None = None, busy: bool = True) -> ProcessObservation:
    """A made-up window of 10 samples 0.1 s apart; ``states[i]`` is every thread's state at sample i."""
    n = len(states[0])
    masks = masks or [frozenset({0, 1})] * n
    obs = ProcessObservation(100, "prog", ["prog"], {}, [], frozenset({0, 1}))
    for i, row in enumerate(states):
        obs.samples.append(Sample(i * 0.1, [_thread(100 + k, row[k], (0.1 * i if busy else 0.0), masks[k]) for k in range(n)]))
    return obs


def test_more_runnable_threads_than_cpus_for_half_the_window_is_oversubscribed_and_a_burst_is_not():
    assert [f.code for f in oversubscribed(_window(["RRR"] * 5 + ["RSS"] * 5))] == ["oversubscribed"]
    burst = _window(["RRR"] * 2 + ["RSS"] * 8, busy=False)
    assert oversubscribed(burst) == []
    assert oversubscribed(_window(["RRR"] * 2)) == []  # too few samples to judge


def test_busy_threads_above_the_cpus_that_are_not_runnable_together_are_a_warning():
    found = oversubscribed(_window(["RRS", "RSR", "SRR"] * 3 + ["RRS"]))
    assert [(f.code, f.severity) for f in found] == [("busy-threads-above-cpus", "warning")]
    assert len(busy_threads(_window(["SSS"] * 10, busy=False))) == 0


def test_a_thread_runnable_in_most_samples_is_busy_however_little_cpu_a_loaded_machine_gave_it():
    starved = _window(["RS"] * 10, busy=False)  # thread 100 always runnable, never got CPU time
    assert [t.tid for t in busy_threads(starved)] == [100]
    assert [t.tid for t in busy_threads(_window(["RS", "SS"] * 5, busy=False))] == [100]  # runnable in half
    assert busy_threads(_window(["RS", "SS", "SS"] * 3 + ["SS"], busy=False)) == []  # a third: not busy
    assert busy_threads(_window(["RS", "RS"], busy=False)) == []  # two samples are too few to tell


def test_threads_piled_on_one_cpu_while_another_is_free_and_not_when_none_is():
    one = frozenset({0})
    bound = _window(["RR"] * 10, masks=[one, one])
    assert threads_share_cpu(bound) == []  # the masks are all it has: the process may only use CPU 0
    bound.environ = {"GOMP_CPU_AFFINITY": "0"}  # the runtime bound them: the process may use what its cgroup offers
    piled = threads_share_cpu(bound)
    assert [f.code for f in piled] == ["threads-share-cpu"] and piled[0].fix == ["env -uGOMP_CPU_AFFINITY pinlab run -s compact -n 2 -- prog"]
    wrapped = _window(["RRR"] * 10, masks=[one, frozenset({1}), one])  # 3 threads, 2 CPUs: oversubscribed, no CPU free
    assert threads_share_cpu(wrapped) == []


def test_an_idle_process_has_no_finding():
    assert diagnose(_window(["SS"] * 10, busy=False)) == []


def test_memory_on_a_node_where_no_busy_thread_runs_is_found_and_not_when_it_is_local():
    """Made up: the machines that run the tests may have one NUMA node."""
    far = _window(["RR"] * 10)
    far.cpu_nodes = {0: 0, 1: 1}
    far.samples = [
        Sample(s.time, [_thread(t.tid, "R", t.cpu_seconds, frozenset({0})) for t in s.threads]) for s in far.samples
    ]  # both on CPU 0: node 0
    far.pages_per_node = {0: 1000, 1: 50000}
    found = memory_far(far)
    assert [f.code for f in found] == ["memory-far-from-threads"]
    assert found[0].evidence["thread_nodes"] == [0] and found[0].fix[0] == "pinlab migrate 100 --to 0"
    assert found[0].statement.startswith("98% of the memory is on node 1, where none of the 2 busy threads runs")
    far.pages_per_node = {0: 50000, 1: 1000}
    assert memory_far(far) == []
    far.pages_per_node = {1: 100}  # too little to matter
    assert memory_far(far) == []


def test_a_pool_whose_threads_could_not_be_read_is_sized_by_its_variable_and_says_why():
    obs = _window(["SS"] * 10)
    obs.files = ["/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"]
    obs.environ = {"OMP_NUM_THREADS": "2"}
    obs.stacks_readable = False
    (pool,) = [f for f in diagnose(obs) if f.code == "pool"]
    assert pool.evidence["size_from"] == "OMP_NUM_THREADS" and "ptrace_scope" in pool.evidence["threads_not_counted"]
    obs.stacks_readable = True
    (pool,) = [f for f in diagnose(obs) if f.code == "pool"]
    assert "threads_not_counted" not in pool.evidence


def test_two_copies_of_one_library_are_two_pools_each_counted_by_its_own_threads(tmp_path):
    """numpy's and scipy's wheels each bring an OpenBLAS: each copy starts its own workers, so
    one worker per copy on 2 CPUs is two pools of 2, not one pool of 3 (which would say the pool
    is too large and tell the user to set what is already so)."""
    numpy_copy, scipy_copy = "/venv/numpy.libs/libscipy_openblas64_-a.so", "/venv/scipy.libs/libscipy_openblas-b.so"
    obs = _window(["SSS"] * 10)
    obs.files = ["/usr/bin/python3.11", numpy_copy, scipy_copy]
    obs.samples = [
        Sample(s.time, [t if lib is None else _with_library(t, lib) for t, lib in zip(s.threads, [None, numpy_copy, scipy_copy])])
        for s in obs.samples
    ]
    pools = {f.evidence["file"]: f for f in diagnose(obs) if f.code in ("pool", "pool-too-large")}
    assert {file: (f.code, f.evidence["size"], f.evidence["size_from"]) for file, f in pools.items()} == {
        numpy_copy: ("pool", 2, "observed"),
        scipy_copy: ("pool", 2, "observed"),
    }
    assert pools[numpy_copy].statement.startswith("OpenBLAS (libscipy_openblas64_-a.so) pool: 2 threads")
    obs.samples = [Sample(s.time, [s.threads[0], s.threads[1], _with_library(s.threads[2], numpy_copy)]) for s in obs.samples]
    (large,) = [f for f in diagnose(obs) if f.code == "pool-too-large"]  # both workers numpy's: its pool is 3
    assert large.evidence["file"] == numpy_copy and large.evidence["size"] == 3


def test_a_thread_named_by_the_loader_s_path_counts_for_the_file_the_process_maps(tmp_path):
    """The preload library names a thread's start library as the loader opened it (a symbolic
    link such as libgomp.so.1); /proc/PID/maps names the file it points to."""
    real = tmp_path / "libgomp.so.1.0.0"
    real.write_bytes(b"")
    (tmp_path / "libgomp.so.1").symlink_to(real.name)
    obs = _window(["SSS"] * 10)
    obs.files = [str(real)]
    obs.samples = [Sample(s.time, [s.threads[0]] + [_with_library(t, str(tmp_path / "libgomp.so.1")) for t in s.threads[1:]]) for s in obs.samples]
    (large,) = [f for f in diagnose(obs) if f.code == "pool-too-large"]
    assert large.evidence["file"] == str(real) and large.evidence["size"] == 3 and large.evidence["size_from"] == "observed"


def _with_library(t: LiveThread, library: str) -> LiveThread:
    return dataclasses.replace(t, library=library)


def test_a_python_process_with_numpy_and_scipy_has_no_pool_too_large():
    """The real case: numpy and scipy each called once, their OpenBLAS pools as their defaults
    make them (one thread per allowed CPU, the caller among them)."""
    program = (
        "import numpy, scipy.linalg, os, re\n"
        "a = numpy.ones((300, 300)); a @ a; scipy.linalg.lu(a)\n"
        "files = {line.split()[-1] for line in open('/proc/self/maps') if re.search(r'/lib(scipy_)?openblas', line)}\n"
        "print('ready', len(files), flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    program_process = subprocess.Popen([sys.executable, "-c", program], env=clean_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert program_process.stdout is not None
        word, copies = program_process.stdout.readline().split()
        result = run_pinlab("doctor", str(program_process.pid), "--seconds", "0.5", "--json")
    finally:
        program_process.kill()
        program_process.wait()
    report = json.loads(result.stdout)
    pools = [f for f in report["findings"] if f["code"] in ("pool", "pool-too-large") and f["evidence"]["library"] == "OpenBLAS"]
    assert word == "ready" and len(pools) == int(copies) >= 1, report
    assert all(f["code"] == "pool" and f["evidence"]["size"] <= len(os.sched_getaffinity(0)) for f in pools), report
    assert result.returncode == 0, report
