"""Each thread's start library read from its stack, on real programs started without pinlab,
checked against what the programs say of their own threads and against the preload library's
in-process record of the same threads."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pinlab
from pinlab.measure.roles import events_path, roles_from_events
from pinlab.measure.stacks import start_libraries, waiting_in
from tests.conftest import PINLAB, compile_c

STARTERS = r"""
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t said;

static void *own(void *arg)
{
    printf("own %ld\n", (long)syscall(SYS_gettid));
    fflush(stdout);
    pthread_barrier_wait(&said);
    pause();
    return arg;
}

int main(void)
{
    pthread_t t;
    pthread_barrier_init(&said, NULL, 2);
    pthread_create(&t, NULL, own, NULL);
    pthread_barrier_wait(&said);
#pragma omp parallel num_threads(3)
    {
        int me = omp_get_thread_num();
#pragma omp critical
        {
            printf("omp%d %ld\n", me, (long)syscall(SYS_gettid));
            fflush(stdout);
        }
#pragma omp barrier
        if (me == 0) {
            printf("ready\n");
            fflush(stdout);
        }
        if (me == 1)
            for (volatile unsigned long i = 0;; i++) /* running: the kernel shows no stack pointer */
                ;
        pause();
    }
    return 0;
}
"""

STD_THREAD = r"""
#include <chrono>
#include <cstdio>
#include <thread>
#include <unistd.h>
#include <sys/syscall.h>

int main()
{
    std::thread worker([] {
        std::printf("std %ld\nready\n", (long)syscall(SYS_gettid));
        std::fflush(stdout);
        pause();
    });
    worker.join();
}
"""

PYTHON_THREADS = """
import os, threading
import numpy
a = numpy.ones((300, 300))
a @ a  # OpenBLAS starts its pool
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(2)]
for t in threads:
    t.start()
print(os.getpid(), *(t.native_id for t in threads), flush=True)
stop.wait()
"""


def _start(argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, dict[str, int]]:
    """Start a program that names its threads (``LABEL TID`` lines, then ``ready``)."""
    program = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    assert program.stdout is not None
    said: dict[str, int] = {}
    for line in program.stdout:
        if line.strip() == "ready":
            return program, said
        label, tid = line.split()
        said[label] = int(tid)
    program.wait()
    raise AssertionError(f"the program ended before it was ready (status {program.returncode})")


def _end(program: subprocess.Popen) -> None:
    program.kill()
    program.wait()


def test_openmp_workers_and_the_program_s_own_thread_are_told_apart_running_or_blocked(tmp_path: Path):
    program_path = compile_c(tmp_path, "starters", STARTERS, "-fopenmp")
    program, said = _start([program_path], env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    try:
        found = start_libraries(program.pid, [program.pid, *said.values()])
        for _ in range(600):  # until the blocked two have reached pause() (the spinner never blocks)
            waits = waiting_in(program.pid, [said["omp1"], said["omp2"], said["own"]])
            if len(waits) >= 2:
                break
            time.sleep(0.1)
    finally:
        _end(program)
    # Both blocked in pause() called from the program's code; the spinning worker runs, so no wait.
    assert waits == {said["omp2"]: os.path.realpath(program_path), said["own"]: os.path.realpath(program_path)}, waits
    assert os.path.basename(found[said["omp1"]] or "").startswith("libgomp"), found  # spinning
    assert os.path.basename(found[said["omp2"]] or "").startswith("libgomp"), found  # blocked
    assert found[said["own"]] == os.path.realpath(program_path), found
    assert found[program.pid] is None  # the main thread: started by the kernel, not by a library
    assert said["omp0"] == program.pid


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_a_cxx_std_thread_is_the_program_s_own_not_the_cxx_runtime_s(tmp_path: Path):
    (tmp_path / "std.cpp").write_text(STD_THREAD)
    done = subprocess.run(["g++", "-O1", "-pthread", str(tmp_path / "std.cpp"), "-o", str(tmp_path / "std")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    program, said = _start([str(tmp_path / "std")])
    try:
        found = start_libraries(program.pid, [said["std"]])
    finally:
        _end(program)
    assert found == {said["std"]: os.path.realpath(tmp_path / "std")}


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="needs numpy")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS starts no pool on one CPU")
def test_python_and_openblas_threads_agree_with_the_preload_library_s_record():
    """Under ``pinlab run`` the preload library records each thread's start library in the
    process (dladdr of its start routine); the stacks, read from outside, must say the same."""
    run = subprocess.Popen(
        [str(PINLAB), "run", "-s", "compact", "-n", "2", "--", sys.executable, "-c", PYTHON_THREADS],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")},  # OpenBLAS sizes its pool by the plan's 2
    )
    assert run.stdout is not None
    pid, *python_threads = (int(word) for word in run.stdout.readline().split())
    try:
        record = roles_from_events(events_path(pid) or "")
        tids = [tid for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid]
        found = start_libraries(pid, [int(tid) for tid in tids])
        # The Python threads wait on their Event in the interpreter; OpenBLAS's idle worker, once
        # its spin is over, sleeps in OpenBLAS.
        for _ in range(600):
            waits = waiting_in(pid, [int(tid) for tid in tids])
            if len(waits) == len(tids):
                break
            time.sleep(0.1)
    finally:
        os.kill(pid, 9)
        run.wait()
    libraries = {tid: os.path.realpath(entry["library"]) for tid, entry in record.items() if tid != pid}
    assert {tid: found.get(tid) for tid in libraries} == libraries
    assert all("python" in os.path.basename(libraries[tid]) for tid in python_threads), libraries  # libpython, or the interpreter itself
    assert any("openblas" in os.path.basename(path) for path in libraries.values()), libraries
    assert waits == libraries, waits  # each waits in the library that started it


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to look as another user")
def test_another_user_s_process_is_unreadable_and_said_so(tmp_path: Path):
    program, _ = _start([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"])
    look = (
        "import sys\n"
        "from pinlab.measure.stacks import StacksUnreadable, start_libraries\n"
        "try:\n"
        "    start_libraries(int(sys.argv[1]), [int(sys.argv[1])])\n"
        "except StacksUnreadable as error:\n"
        "    print('unreadable:', error)\n"
    )
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", look, str(program.pid)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(Path(pinlab.__file__).parent.parent)},  # this pinlab, installed or not
        )
    finally:
        _end(program)
    assert done.stdout.strip() == f"unreadable: the memory map of process {program.pid} is not ours to read", done.stderr
