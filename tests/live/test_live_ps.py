"""pinlab ps on real running programs: each thread's real CPU, mask, role and creation order,
watching a program until it ends, the JSON looks, the picture."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import xml.etree.ElementTree as ET

import pytest

from pinlab.errors import UsageError
from pinlab.live import Watcher, check_process, pinlab_processes, process_threads, workers
from pinlab.native import native_path
from tests.conftest import PINLAB, run_pinlab
from tests.live.conftest import ALLOWED, wait_for


def ps_json(*args: str) -> list[dict]:
    result = run_pinlab("ps", "--json", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_under_pinlab_run_ps_shows_roles_creation_order_and_the_real_masks(start_program):
    plan = [ALLOWED[i % len(ALLOWED)] for i in range(4)][::-1]
    program = start_program(threads=3, pinlab=["-c", ",".join(map(str, plan)), "--oversubscribe"])
    [look] = ps_json(str(program.pid))
    assert look["pid"] == program.pid and look["roles_known"]
    threads = look["threads"]
    assert [t["tid"] for t in threads] == program.tids  # main first, then creation order
    assert [t["role"] for t in threads] == ["main", "worker", "worker", "worker"]
    assert [t["index"] for t in threads] == [0, 1, 2, 3]
    assert [t["slot"] for t in threads] == [0, 1, 2, 3]
    for t, cpu in zip(threads, plan):
        assert t["mask"] == sorted(os.sched_getaffinity(t["tid"])) == [cpu], t
        assert t["cpu"] == cpu, t  # each has run since it was pinned: it last ran there
        assert t["planned"] == cpu
    assert set(look["pages_per_node"]) <= {str(n) for n in range(1024)} and sum(look["pages_per_node"].values()) > 0


def test_a_process_not_started_by_pinlab_has_unknown_roles_in_tid_order(start_program):
    program = start_program(threads=2)
    [look] = ps_json(str(program.pid))
    assert not look["roles_known"]
    threads = look["threads"]
    assert [t["tid"] for t in threads] == sorted(program.tids)
    assert [t["role"] for t in threads] == ["main", "unknown", "unknown"]
    assert all(t["index"] is None and t["slot"] is None for t in threads)
    for t in threads:
        assert t["mask"] == sorted(os.sched_getaffinity(t["tid"]))
        assert t["cpu"] in t["mask"]
    # workers() takes every thread when roles are unknown
    assert [t.tid for t in workers(process_threads(program.pid))] == sorted(program.tids)


def test_helpers_are_shown_as_such_and_left_out_of_the_workers(start_program):
    program = start_program(threads=3, pinlab=["-c", str(ALLOWED[0]), "--skip", "2"])
    threads = process_threads(program.pid)
    assert [(t.tid, t.role) for t in threads] == list(zip(program.tids, ["main", "worker", "helper", "worker"]))
    helper = threads[2]
    assert helper.slot is None and helper.mask == frozenset(ALLOWED)  # helpers run on the program's allowed CPUs
    assert [t.tid for t in workers(threads)] == [program.tids[0], program.tids[1], program.tids[3]]


def test_an_openmp_workload_has_a_main_thread_and_workers():
    plan = ALLOWED[::-1][:2] if len(ALLOWED) > 1 else ALLOWED * 2
    primes = str(native_path("pinlab-primes"))
    process = subprocess.Popen(
        [str(PINLAB), "run", "-q", "-c", ",".join(map(str, plan)), "--oversubscribe", "--", primes, "--threads", "2", "--limit", "12M"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def team():
            # The worker is in /proc before its creation is recorded (the new thread records itself
            # first thing, which on a busy machine may come later): wait for the record, not the tid.
            for pid in pinlab_processes():
                if os.readlink(f"/proc/{pid}/exe") == os.path.realpath(primes):
                    threads = process_threads(pid)
                    if len(threads) == 2 and all(t.role != "unknown" for t in threads):
                        return threads
            return None

        threads = wait_for(team, "the OpenMP team")
        assert [(t.role, t.index, t.mask) for t in threads] == [("main", 0, frozenset({plan[0]})), ("worker", 1, frozenset({plan[1]}))]
    finally:
        out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert "Validation: the sieve of Eratosthenes finds the same count" in out  # it ran to its end


def test_ps_without_pid_lists_the_programs_under_pinlab_run_only(start_program):
    under = start_program(threads=1, pinlab=["-c", str(ALLOWED[0])])
    direct = start_program(threads=1)
    pids = [look["pid"] for look in ps_json()]
    assert under.pid in pids and direct.pid not in pids
    assert all(look["roles_known"] for look in ps_json())


def test_watch_counts_cpu_time_and_migrations_since_the_last_look_until_the_program_ends(start_program):
    # The program runs until the watcher has looked four times (on a busy machine the watcher may
    # take longer to start than any fixed run would last), then is told to stop.
    program = start_program(threads=1, spin=True)
    watcher = subprocess.Popen(
        [str(PINLAB), "ps", str(program.pid), "--watch", "0.2", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines = []
    try:
        while len(lines) < 4:
            line = watcher.stdout.readline()
            if not line:
                break
            lines.append(line)
    finally:
        program.stop()
        out, err = watcher.communicate(timeout=600)
    assert watcher.returncode == 0, err
    assert f"process {program.pid} has ended" in err
    looks = [json.loads(line) for line in [*lines, *out.splitlines()]]
    assert len(looks) >= 4
    # looks every 0.2 s (later on a busy machine, never sooner)
    assert looks[0]["interval"] is None and all(0.15 < look["interval"] < 10 for look in looks[1:])
    # What each look counts since the previous one adds up to the thread's total. A thread is in
    # every look from the first until it ends: the worker ends as the main thread stops it, so
    # a last look may come after it but before the process has ended.
    for tid in program.tids:
        present = [any(t["tid"] == tid for t in look["threads"]) for look in looks]
        seen = present.index(False) if False in present else len(looks)
        assert not any(present[seen:])
        assert seen == len(looks) if tid == program.pid else seen >= 2
        rows = [t for look in looks for t in look["threads"] if t["tid"] == tid]
        assert sum(r["new_cpu_seconds"] for r in rows) == pytest.approx(rows[-1]["cpu_seconds"], abs=0.01)
        if rows[-1]["migrations"] is not None:
            assert sum(r["new_migrations"] for r in rows) == rows[-1]["migrations"]
    # The spinning thread used CPU time in every interval between the first look and its last.
    spinner = program.tids[1]
    spins = [t["new_cpu_seconds"] for look in looks[1:] for t in look["threads"] if t["tid"] == spinner][:-1]
    assert len(spins) >= 1 and all(cpu > 0 for cpu in spins)
    assert program.process.wait(10) == 0


def test_a_move_is_counted_as_a_migration_by_the_watcher(start_program):
    if len(ALLOWED) < 2:
        pytest.skip("needs two allowed CPUs to move a thread between them")
    program = start_program(threads=1)
    tid = program.tids[1]
    os.sched_setaffinity(tid, {ALLOWED[0]})
    wait_for(lambda: next(t.cpu for t in process_threads(program.pid) if t.tid == tid) == ALLOWED[0], "the thread on its CPU")
    watcher = Watcher(program.pid)
    watcher.look()
    os.sched_setaffinity(tid, {ALLOWED[1]})
    wait_for(lambda: next(t.cpu for t in process_threads(program.pid) if t.tid == tid) == ALLOWED[1], "the thread to move")
    look = watcher.look()
    [thread] = [t for t in look.threads if t.tid == tid]
    assert thread.cpu == ALLOWED[1] and thread.mask == {ALLOWED[1]}
    if thread.migrations is None:
        pytest.skip("this kernel does not show se.nr_migrations")
    assert look.new_migrations[tid] >= 1


def test_the_watcher_says_when_the_process_has_ended(start_program):
    program = start_program(threads=1)
    watcher = Watcher(program.pid)
    assert watcher.look() is not None
    assert program.wait() == 0
    assert watcher.look() is None
    with pytest.raises(UsageError, match=f"no process {program.pid}"):
        check_process(program.pid)


def test_the_table_names_every_thread_and_the_pages(start_program):
    program = start_program(threads=2, pinlab=["-c", ",".join(map(str, ALLOWED))])
    result = run_pinlab("ps", str(program.pid))
    assert result.returncode == 0, result.stderr
    for tid in program.tids:
        assert str(tid) in result.stdout
    assert "worker" in result.stdout and "roles from pinlab run" in result.stdout
    assert "pages per NUMA node: " in result.stdout


def test_picture_shows_each_thread_number_in_the_cpu_it_runs_on(start_program, tmp_path):
    plan = [ALLOWED[i % len(ALLOWED)] for i in range(3)]
    program = start_program(threads=2, pinlab=["-c", ",".join(map(str, plan)), "--oversubscribe"])
    out = tmp_path / "threads.svg"
    result = run_pinlab("ps", str(program.pid), "--picture", str(out))
    assert result.returncode == 0, result.stderr
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = ["".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any(f"process {program.pid}" in t for t in texts)
    expected: dict[int, list[int]] = {}
    for number, cpu in enumerate(plan):
        expected.setdefault(cpu, []).append(number)
    numbers = [t for t in texts if re.fullmatch(r"\d+(,\d+)*", t)]  # the thread numbers written in PUs
    assert sorted(numbers) == sorted(",".join(map(str, v)) for v in expected.values())


@pytest.mark.parametrize(
    "args, message",
    [
        (["999999999"], "no process 999999999"),
        (["1", "2", "--picture", "x.svg"], "one PID"),
        (["1", "--picture", "x.pdf"], ".svg or .png"),
        (["1", "--watch", "0"], "--watch must be a positive"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, message):
    result = run_pinlab("ps", *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_a_thread_id_is_not_taken_for_a_process(start_program):
    program = start_program(threads=1)
    result = run_pinlab("ps", str(program.tids[1]))
    assert result.returncode == 2 and f"thread of process {program.pid}" in result.stderr


def test_ctrl_c_ends_watching_with_status_0_and_leaves_the_program_running(start_program):
    program = start_program(threads=1)
    watching = subprocess.Popen(
        [str(PINLAB), "ps", str(program.pid), "--watch", "0.1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first = watching.stdout.readline()
    assert json.loads(first)["pid"] == program.pid
    watching.send_signal(signal.SIGINT)
    out, err = watching.communicate(timeout=600)
    assert watching.returncode == 0 and "Traceback" not in err, err
    assert program.process.poll() is None
    assert program.wait() == 0
