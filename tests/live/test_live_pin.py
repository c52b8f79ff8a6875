"""pinlab pin on real running programs: the masks really change, the program keeps running and
exits with its own status, threads that end meanwhile, and every refusal (one line, status 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pinlab.errors import UsageError
from pinlab.live import apply_plan, pin_threads, process_threads, repin, select_threads
from pinlab.placement import make_placement
from pinlab.topology import load_topology
from tests.conftest import PINLAB, run_pinlab
from tests.live.conftest import ALLOWED, wait_for

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def masks(tids: list[int]) -> list[set[int]]:
    return [set(os.sched_getaffinity(tid)) for tid in tids]


def cpu_of(pid: int, tid: int) -> int | None:
    return next((t.cpu for t in process_threads(pid) if t.tid == tid), None)


def pinned_lines(stdout: str) -> dict[int, int]:
    """tid -> CPU from pin's output lines ``  tid 1234  worker -> CPU 1``."""
    found = {}
    for line in stdout.splitlines():
        words = line.split()
        if words[:1] == ["tid"]:
            found[int(words[1])] = int(words[-1])
    return found


def test_pin_with_a_cpu_list_moves_every_thread_and_the_program_ends_with_its_own_status(start_program):
    program = start_program(threads=3, status=7)
    plan = ALLOWED[::-1]
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", ",".join(map(str, plan)), "--select", "all")
    assert result.returncode == 0, result.stderr
    expected = {tid: plan[i % len(plan)] for i, tid in enumerate(sorted(program.tids))}  # roles unknown: tid order
    assert pinned_lines(result.stdout) == expected
    assert masks(sorted(program.tids)) == [{expected[tid]} for tid in sorted(program.tids)]
    for tid, cpu in expected.items():  # they really run there now (the threads wake up every 2 ms)
        wait_for(lambda: cpu_of(program.pid, tid) == cpu, f"thread {tid} on CPU {cpu}")
    if len(program.tids) > len(plan):
        assert "thread i gets plan CPU i mod" in result.stderr
    assert program.process.poll() is None  # still running
    assert program.wait() == 7


def test_pin_with_a_strategy_under_pinlab_run_pins_the_workers_in_creation_order(start_program):
    program = start_program(threads=2, pinlab=["-c", str(ALLOWED[-1]), "--skip", "1"])
    helper = program.tids[1]
    helper_mask = os.sched_getaffinity(helper)
    result = run_pinlab("pin", "--pid", str(program.pid), "-s", "compact", "-n", "1")
    assert result.returncode == 0, result.stderr
    first_core = make_placement(load_topology("this"), strategy="compact", threads=1).cpus[0]
    workers = [program.tids[0], program.tids[2]]  # the helper is left alone
    assert pinned_lines(result.stdout) == {tid: first_core for tid in workers}
    assert masks(workers) == [{first_core}, {first_core}]
    assert os.sched_getaffinity(helper) == helper_mask
    assert "2 threads on a plan of 1 CPU (" in result.stderr
    assert program.wait() == 0


def test_pin_chosen_threads_in_the_order_given(start_program):
    if len(ALLOWED) < 2:
        pytest.skip("needs two CPUs to tell the order apart")
    program = start_program(threads=2)
    main, first, second = program.tids
    before = os.sched_getaffinity(main)
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", f"{ALLOWED[0]},{ALLOWED[1]}", "--select", f"{second},{first}")
    assert result.returncode == 0, result.stderr
    assert masks([second, first]) == [{ALLOWED[0]}, {ALLOWED[1]}]
    assert os.sched_getaffinity(main) == before
    assert program.wait() == 0


def test_threads_that_ended_are_reported_not_errors(start_program):
    program = start_program(threads=3)
    selected = select_threads(program.pid, "all")
    program.end_workers()
    result = apply_plan(program.pid, selected, [ALLOWED[0]])
    assert result.cpus == {program.pid: ALLOWED[0]}
    assert sorted(result.ended) == sorted(program.tids[1:])
    assert pin_threads({tid: [ALLOWED[0]] for tid in program.tids[1:]}) == {tid: False for tid in program.tids[1:]}
    assert program.wait() == 0


def test_threads_coming_and_going_while_pinned_repeatedly(tmp_path):
    """A program that creates and ends threads all the time: every pin succeeds, each selected
    thread is either pinned or reported ended, and the program ends normally."""
    churn = tmp_path / "churn.py"
    churn.write_text(
        "import threading, time\n"
        "end = time.monotonic() + 1.5\n"
        "while time.monotonic() < end:\n"
        "    ts = [threading.Thread(target=time.sleep, args=(0.001,)) for _ in range(4)]\n"
        "    [t.start() for t in ts]\n"
        "    [t.join() for t in ts]\n"
    )
    process = subprocess.Popen([sys.executable, str(churn)])
    try:
        while process.poll() is None:
            try:
                result = repin(process.pid, ALLOWED, "all")
            except UsageError as exc:
                assert "no process" in str(exc)  # it ended between two pins
                break
            assert set(result.cpus) | set(result.ended) == {t.tid for t in result.threads}
            assert process.pid in result.cpus
    finally:
        assert process.wait(30) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["-c", "0", "--select", "1"], "1 is not a thread of process"),
        (["-c", "0", "--select", "x"], "expected workers, all, or thread ids"),
        (["-c", "99999"], "CPU 99999 does not exist"),
        (["-s", "none", "-n", "1"], "pins nothing"),
        ([], "no placement given"),
    ],
)
def test_bad_input_is_one_line_status_2_and_changes_nothing(start_program, args, message):
    program = start_program(threads=1)
    before = masks(program.tids)
    result = run_pinlab("pin", "--pid", str(program.pid), *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert masks(program.tids) == before
    assert program.wait() == 0


def test_a_cpu_not_allowed_to_pinlab_is_refused(start_program):
    if len(ALLOWED) < 2:
        pytest.skip("needs two CPUs: one allowed to pinlab, one not")
    program = start_program(threads=1)
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", str(ALLOWED[1]), prefix=["taskset", "-c", str(ALLOWED[0])])
    assert result.returncode == 2 and "is not allowed for this process" in result.stderr, result.stderr
    assert program.wait() == 0


def test_a_process_that_is_gone_is_refused():
    process = subprocess.Popen(["true"])
    process.wait()
    result = run_pinlab("pin", "--pid", str(process.pid), "-c", str(ALLOWED[0]))
    assert result.returncode == 2 and f"no process {process.pid}" in result.stderr, result.stderr


def _nobody_can_run_pinlab() -> bool:
    if os.getuid() != 0:
        return False
    try:
        return subprocess.run([*NOBODY, str(PINLAB), "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def as_nobody():
    if not _nobody_can_run_pinlab():
        pytest.skip("needs root, setpriv and a virtual environment user nobody can read, to run pinlab as another user")
    return NOBODY


def test_pin_refuses_a_process_of_another_user(start_program, as_nobody):
    program = start_program(threads=1)  # ours: root's
    before = masks(program.tids)
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", str(ALLOWED[0]), prefix=as_nobody)
    assert result.returncode == 2, result.stderr
    assert f"process {program.pid} belongs to user root: pinlab can only re-pin your own processes" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert masks(program.tids) == before
    # Looking is allowed, with roles unknown (its environment is not nobody's to read).
    look = run_pinlab("ps", "--json", str(program.pid), prefix=as_nobody)
    assert look.returncode == 0 and f'"pid": {program.pid}' in look.stdout, look.stderr
    assert program.wait() == 0


def test_root_may_pin_a_process_of_another_user(start_program, as_nobody):
    program = start_program(threads=1, prefix=as_nobody)
    assert os.stat(f"/proc/{program.pid}").st_uid == 65534
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", str(ALLOWED[-1]), "--select", "all")
    assert result.returncode == 0, result.stderr
    assert masks(program.tids) == [{ALLOWED[-1]}] * len(program.tids)
    assert program.wait() == 0
