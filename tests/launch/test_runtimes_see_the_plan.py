"""Runtimes that size their pools from the CPU mask, and processes the program starts, get the plan.

Many runtimes count the CPUs of sched_getaffinity at start to size their thread pools (OpenBLAS,
libgomp without OMP_NUM_THREADS, Rust's available_parallelism, Go, Java, TBB): the first
process's main thread therefore starts on all the plan's CPUs and is narrowed to its own as it
creates its first thread. Processes the program starts (Python multiprocessing, make -j, shell
pipelines) take the plan's next slots, as threads do (--children next), or keep what they
inherit (inherit), or run on every allowed CPU (unpinned).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from pinlab.cpuset import format_cpulist, parse_cpulist
from tests.conftest import run_pinlab

ALLOWED = sorted(os.sched_getaffinity(0))
PLAN = ALLOWED[::-1]
needs_two = pytest.mark.skipif(len(ALLOWED) < 2, reason="one CPU allowed: a plan of one CPU cannot show a pool sized from the mask")
CC = shutil.which("cc") or shutil.which("gcc")

POOL = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
/* Sizes its pool as many runtimes do: one thread per CPU of the mask the main thread starts with. */
static void *work(void *arg) { printf("worker %ld cpu %d\n", (long)arg, sched_getcpu()); return NULL; }
int main(void)
{
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    int n = CPU_COUNT(&set);
    printf("pool %d\n", n);
    pthread_t t[CPU_SETSIZE];
    for (long i = 1; i < n; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    for (long i = 1; i < n; i++)
        pthread_join(t[i], NULL);
    sched_getaffinity(0, sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            printf("main now on %d\n", c);
    return 0;
}
"""


@needs_two
@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_a_program_sizing_its_pool_from_the_mask_gets_one_thread_per_plan_cpu(tmp_path):
    (tmp_path / "pool.c").write_text(POOL)
    subprocess.run([CC, "-O2", "-pthread", "-o", str(tmp_path / "pool"), str(tmp_path / "pool.c")], check=True)
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN)), "--record", str(record), "--", str(tmp_path / "pool"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"pool {len(PLAN)}"  # it saw the plan's CPUs, not its own one
    workers = sorted(int(line.split()[-1]) for line in lines if line.startswith("worker"))
    assert workers == sorted(PLAN[1:])
    assert lines[-1] == f"main now on {PLAN[0]}"  # narrowed as it created its first thread
    main = json.loads(record.read_text())["threads"][0]
    assert main["mask_at_start"] == format_cpulist(PLAN) and main["narrowed_to"] == PLAN[0] and main["pinned_as_planned"] is True
    assert 0 <= main["narrowed_at"] < 10


@needs_two
def test_numpy_sees_the_plan_cpus():
    pytest.importorskip("numpy")
    script = "import os; n = len(os.sched_getaffinity(0)); import numpy; print(n, len(os.listdir('/proc/self/task')))"
    result = run_pinlab("run", "-q", "-s", "compact", "-n", str(len(ALLOWED)), "--", sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    seen, tasks = map(int, result.stdout.split())
    assert seen == len(ALLOWED)
    # numpy's BLAS starts its pool at import, one thread per CPU it may use (OpenBLAS), or none (a build without threads)
    numpy_threads = subprocess.run(
        [sys.executable, "-c", "import os, numpy; print(len(os.listdir('/proc/self/task')))"],
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS=str(len(ALLOWED))),
    ).stdout
    assert tasks == int(numpy_threads)  # as many threads as it starts when nothing restricts it


MULTIPROCESSING = textwrap.dedent("""
    import json, multiprocessing, os
    def where(queue):
        queue.put((sorted(os.sched_getaffinity(0)), os.getpid()))
    if __name__ == "__main__":
        multiprocessing.set_start_method({method!r})
        queue = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=where, args=(queue,)) for _ in range(2)]
        for worker in workers:
            worker.start()
        print(json.dumps([queue.get() for _ in workers]))
        for worker in workers:
            worker.join()
""")


@needs_two
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_processes_take_the_next_slots(tmp_path, method):
    script = tmp_path / "pool.py"
    script.write_text(MULTIPROCESSING.format(method=method))
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN)), "--record", str(record), "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    masks = {pid: mask for mask, pid in json.loads(result.stdout)}
    assert len(masks) == 2 and all(len(mask) == 1 for mask in masks.values())  # each worker on one CPU of the plan
    assert {mask[0] for mask in masks.values()} <= set(PLAN)
    data = json.loads(record.read_text())
    processes = {p["pid"]: p for p in data["processes"]}
    for pid, mask in masks.items():
        assert processes[pid]["planned_cpu"] == mask[0] and processes[pid]["slot"] >= 1 and not processes[pid]["first"]
    assert sum(p["first"] for p in data["processes"]) == 1


@needs_two
@pytest.mark.parametrize("mode, expected", [("inherit", set(PLAN)), ("unpinned", set(ALLOWED))])
def test_children_can_inherit_or_run_unpinned(tmp_path, mode, expected):
    script = tmp_path / "pool.py"
    script.write_text(MULTIPROCESSING.format(method="fork"))
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN)), "--children", mode, "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    assert {tuple(mask) for mask, _ in json.loads(result.stdout)} == {tuple(sorted(expected))}


def test_a_shell_script_s_commands_take_the_slot_the_one_before_gave_back(tmp_path):
    """sh -c 'a; b | c': sh holds slot 0 on the plan's CPUs; a takes slot 1 and gives it back as it
    ends (sh waits for it), so the pipeline's two processes take slots 1 and 2 again rather than
    walking on through the plan (3 and 4). Which of b and c reaches its slot first is the
    scheduler's choice (b may even end before c starts, and c then takes slot 1 as well)."""
    line = "grep Cpus_allowed_list /proc/self/status"
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN)), "--record", str(record), "--", "sh", "-c", f"{line}; {line} | cat")
    assert result.returncode == 0, result.stderr
    got = [parse_cpulist(row.split(":")[1]) for row in result.stdout.splitlines()]
    later = [p for p in json.loads(record.read_text())["processes"] if not p["first"]]
    assert len(later) == 3, later
    assert later[0]["slot"] == 1 and got[0] == [PLAN[1 % len(PLAN)]]
    pipeline = later[1:]
    assert 1 in [p["slot"] for p in pipeline] and {p["slot"] for p in pipeline} <= {1, 2}, pipeline
    assert got[1] in [[p["planned_cpu"]] for p in pipeline]


PROCESSES = textwrap.dedent("""
    import subprocess, sys
    def start():  # returns once the child runs its own code (its slot is taken before that)
        p = subprocess.Popen([sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        p.stdout.readline()
        return p
    a = start()
    b = start()  # starts while a runs
    a.stdin.close(); a.wait()
    c = start()  # starts once a has ended
    for p in (b, c):
        p.stdin.close(); p.wait()
    print(a.pid, b.pid, c.pid)
""")


def test_processes_alive_together_hold_different_slots_and_an_ended_ones_slot_is_taken_again(tmp_path):
    script = tmp_path / "three.py"
    script.write_text(PROCESSES)
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN)), "--record", str(record), "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    a, b, c = map(int, result.stdout.split())
    slots = {p["pid"]: p["slot"] for p in json.loads(record.read_text())["processes"]}
    assert (slots[a], slots[b], slots[c]) == (1, 2, 1)


WRAPPER = """#!/bin/sh
# forks before it runs the program, as version-manager shims do: each command substitution is a process
a=$(echo one); b=$(basename /x/two); c=$(cat /dev/null)
{python} "$@"
"""


@needs_two
@pytest.mark.parametrize("how", ["child", "exec"])
def test_a_program_behind_a_forking_wrapper_gets_the_plan_and_the_record_says_where(tmp_path, how):
    """The wrapper's commands each give their slot back as they end: the program it runs as a child
    takes slot 1 and its thread slot 2 (they took 4 and 5); one it execs keeps slot 0. The record
    says what the program's threads had, and a warning says the wrapper holds slot 0."""
    wrapper = tmp_path / "shimlike.sh"
    wrapper.write_text(WRAPPER.format(python=("exec " if how == "exec" else "") + sys.executable))
    wrapper.chmod(0o755)
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, PLAN[:2])), "--record", str(record), "--", str(wrapper), "-c", THREAD_MASK)
    assert result.returncode == 0, result.stderr
    data = json.loads(record.read_text())
    program = [t for t in data["threads"] if t["start_library"] and "python" in os.path.basename(t["start_library"]) and t["role"] == "main"]
    assert len(program) == 1
    pid = program[0]["pid"]
    threads = sorted((t for t in data["threads"] if t["pid"] == pid), key=lambda t: t["index"])
    expected_slots = [1, 2] if how == "child" else [0, 1]
    assert [t["slot"] for t in threads] == expected_slots
    worker = threads[1]
    assert worker["planned_cpu"] == PLAN[expected_slots[1] % 2] and worker["mask_at_start"] == str(worker["planned_cpu"])
    assert json.loads(result.stdout) == [worker["planned_cpu"]]  # what the thread itself saw
    warning = [w for w in data["warnings"] if "took plan slots past" in w]
    if how == "child":
        assert warning == [
            "1 thread of 1 process took plan slots past the plan's 2 CPUs and share its CPUs round-robin (--overflow wrap): "
            "the process pinlab started (dash) created no thread and holds slot 0 while 1 process it started created the threads; "
            'if it is a wrapper script, let it exec the program (exec prog "$@") so that the program holds slot 0, or plan one more CPU'.replace(
                "(dash)", f"({os.path.basename(os.path.realpath('/bin/sh'))})"
            )
        ]
        assert f"pinlab: warning: {warning[0]}\n" in result.stderr
    else:
        assert warning == [] and pid == data["pid"]


THREAD_MASK = "import os, threading; t = threading.Thread(target=lambda: print(sorted(os.sched_getaffinity(0)), flush=True)); t.start(); t.join()"


@needs_two
def test_the_threads_of_an_unpinned_child_process_are_unpinned_too(tmp_path):
    """sh -c 'python3 ...; true': python is a child of sh (no exec); under --children unpinned its
    thread runs on every allowed CPU, takes no slot, and the record does not call it pinned."""
    record = tmp_path / "r.json"
    result = run_pinlab(
        "run",
        "-q",
        "-c",
        ",".join(map(str, PLAN)),
        "--children",
        "unpinned",
        "--record",
        str(record),
        "--",
        "sh",
        "-c",
        f"{sys.executable} -c '{THREAD_MASK}'; true",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ALLOWED
    data = json.loads(record.read_text())
    first = data["pid"]
    child_threads = [t for t in data["threads"] if t["pid"] != first and t["role"] != "main"]
    assert len(child_threads) == 1
    thread = child_threads[0]
    assert thread["planned_cpu"] is None and thread["slot"] is None and thread["pinned_as_planned"] is None
    assert parse_cpulist(thread["mask_at_start"]) == ALLOWED
