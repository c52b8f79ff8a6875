"""pinlab doctor's contract: nothing above info for well-placed programs, its exit statuses, bad
input refused in one line, the program it starts keeping its output and status, and the same
report from Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import pinlab
from pinlab.cpuset import format_cpulist
from pinlab.doctor import Report
from pinlab.errors import UsageError
from tests.conftest import run_pinlab
from tests.doctor.helpers import PYTHON, clean_env, codes, doctor, probe


def test_a_well_placed_openmp_program_started_by_the_doctor_gets_nothing_above_info():
    result = run_pinlab("doctor", "-s", "compact", "-n", "2", "--seconds", "1.5", "--json", "--", probe(), "2000", env=clean_env())
    assert result.returncode == 0, result.stderr
    *output, last = result.stdout.splitlines()
    assert len(output) == 2 and all(line.startswith("thread=") for line in output)  # the program's own output, kept
    report = json.loads(last)
    assert report["exit_status"] == 0 and codes(report) == set(), report
    pool = next(f for f in report["findings"] if f["code"] == "pool")
    assert pool["evidence"]["library"] == "libgomp" and pool["evidence"]["size_from"] == "observed"  # the preload library named it
    assert report["processes"][0]["samples"] >= 5


def test_a_program_the_doctor_starts_without_a_placement_is_recorded_and_not_pinned():
    """The preload library is loaded to record (PINLAB_OBSERVE): every thread keeps the whole
    mask, and the pool is still counted by the threads it started."""
    allowed = format_cpulist(sorted(os.sched_getaffinity(0)))
    result = run_pinlab("doctor", "--seconds", "1.5", "--json", "--", probe(), "2000", env=clean_env(OMP_NUM_THREADS="2"))
    *output, last = result.stdout.splitlines()
    assert [line.split()[2] for line in output] == [f"mask={allowed}"] * 2, output  # what each thread saw: not pinned
    report = json.loads(last)
    pool = next(f for f in report["findings"] if f["code"] in ("pool", "pool-too-large"))
    assert pool["evidence"]["library"] == "libgomp" and pool["evidence"]["size_from"] == "observed", pool


def test_a_single_threaded_program_and_an_idle_python_get_nothing_above_info():
    status, report = doctor(["sleep", "600"], clean_env(), seconds=1)
    assert (status, report["findings"]) == (0, [])
    status, report = doctor([PYTHON, "-c", "import time; print('ready', flush=True); time.sleep(600)"], clean_env(), seconds=1, ready="ready")
    assert (status, report["findings"]) == (0, [])
    loop = "print('ready', flush=True)\nwhile True: pass"
    status, report = doctor([PYTHON, "-c", loop], clean_env(), seconds=1, ready="ready")
    assert status == 0 and codes(report) == set(), report


def test_the_report_for_people_has_one_block_per_finding_with_its_fix():
    result = run_pinlab("doctor", "--seconds", "1", "--", "taskset", "-c", "0", probe(), "1500", env=clean_env(OMP_NUM_THREADS="3"))
    assert result.returncode == 1, result.stderr
    assert "PROBLEM oversubscribed" in result.stdout and "WARNING env-threads-above-cpus" in result.stdout
    assert f"OMP_NUM_THREADS=1 taskset -c 0 {probe()} 1500" in result.stdout  # the fix, as a line to paste (what was typed)
    assert "why: " in result.stdout


def test_the_program_s_failure_is_the_doctor_s_exit_status():
    result = run_pinlab("doctor", "--seconds", "0.5", "--", "sh", "-c", "echo out; exit 3", env=clean_env())
    assert result.returncode == 3 and result.stdout.startswith("out\n")
    assert "the program exited with status 3" in result.stdout
    assert run_pinlab("doctor", "--", "no-such-program-here").returncode == 127


def _zombie() -> subprocess.Popen:
    child = subprocess.Popen(["true"])
    for _ in range(200):
        with open(f"/proc/{child.pid}/stat") as stat:
            if stat.read().rpartition(")")[2].split()[0] == "Z":
                return child
        time.sleep(0.01)
    raise AssertionError("the child did not become a zombie")


def test_bad_pids_are_refused_in_one_line():
    gone = subprocess.Popen(["true"])
    gone.wait()
    zombie = _zombie()
    try:
        for pid, said in ((gone.pid, "has ended"), (zombie.pid, "has ended"), (2, "kernel thread"), (0, "positive")):
            result = run_pinlab("doctor", str(pid), "--seconds", "0.2")
            assert result.returncode == 2 and result.stdout == "", result
            assert result.stderr.count("\n") == 1 and said in result.stderr and "Traceback" not in result.stderr
    finally:
        zombie.wait()


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to look as another user")
def test_another_user_s_process_is_refused_in_one_line():
    pinlab_command = os.path.join(os.path.dirname(sys.executable), "pinlab")
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", pinlab_command, "doctor", "1", "--seconds", "0.2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "Permission denied" in result.stderr and "pinlab: error" not in result.stderr:
        pytest.skip("the installed pinlab is not readable by user nobody")
    assert result.returncode == 2 and result.stderr.startswith("pinlab: error: process 1 belongs to user ") and result.stderr.count("\n") == 1


def test_from_python_on_its_own_process():
    report = pinlab.doctor(os.getpid(), seconds=0.3)
    assert isinstance(report, Report) and report.pids == [os.getpid()] and report.status == 0
    assert report.to_json()["processes"][0]["samples"] >= 2
    import pinlab.doctor as package  # the package, once imported, is pinlab.doctor: callable the same way

    assert package(os.getpid(), seconds=0.2).status == 0
    with pytest.raises(UsageError, match="--seconds must be between"):
        pinlab.doctor(os.getpid(), seconds=0)


def test_a_window_shorter_than_one_look_still_gets_two_looks_at_a_live_process():
    """CPU time over a window is a difference of two looks: however long the first look takes
    (a busy machine, a large process), a live process is looked at twice."""
    from pinlab.doctor.observe import observe

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (seen,) = observe([sleeper.pid], 1e-6)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert len(seen.samples) == 2 and not seen.ended


def test_from_python_with_a_program():
    report = pinlab.doctor(argv=["sh", "-c", "exit 5"], seconds=0.3)
    assert report.exit_status == 5


def test_the_doctor_command_imports_neither_its_checks_nor_the_launcher_nor_placement_before_it_watches():
    """A watched program shares its CPUs with the doctor's start-up (bench/bench_doctor.py: 0.077 s
    of CPU against 0.115 s when these were imported up front), so they wait until the watching is done."""
    heavy = ("pinlab.doctor.checks", "pinlab.doctor.launched", "pinlab.launch", "pinlab.placement")
    script = f"import sys, pinlab.cli.doctor; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
