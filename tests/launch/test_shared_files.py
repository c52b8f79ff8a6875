"""Nothing pinlab shares with a program (event ring, live plan, heartbeat) outlives a pinlab killed
with SIGKILL beyond the next pinlab start, and a live pinlab's files are never taken from it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from pinlab.measure import shared_files
from pinlab.native import native_path
from tests.conftest import PINLAB, run_pinlab

CPUS = sorted(os.sched_getaffinity(0))


def _wait_until(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _dead_pid() -> int:
    """The PID of a process that has ended and been reaped."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    "command, kinds",
    [
        (["run", "-q", "-c", str(CPUS[0])], {"events"}),
        (["autopin", "-C", f"{CPUS[0]};{CPUS[-1]}", "-T", "30"], {"events", "plan", "heartbeat"}),
        (["trace", "-n", "1", "--method", "pages", "--no-baseline", "-o", "GRAPH"], {"events"}),
    ],
    ids=["run", "autopin", "trace"],
)
def test_a_kill_9_leaves_shared_files_only_until_the_next_start(tmp_path, command, kinds):
    shared = tmp_path / "shm"
    shared.mkdir()
    env = dict(os.environ, PINLAB_EVENTS_DIR=str(shared))
    command = [str(tmp_path / "g.json") if word == "GRAPH" else word for word in command]
    proc = subprocess.Popen([str(PINLAB), *command, "--", "sleep", "300"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # the program runs (pinlab-exec, sleep): every shared file exists by then
        assert _wait_until(lambda: any(open(f"/proc/{c}/comm").read().strip() == "sleep" for c in _children(proc.pid) if not _gone(c)))
        below = _children(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=20)
    assert _wait_until(lambda: all(_gone(p) for p in below), timeout=20)
    left = sorted(p.name for p in shared.iterdir())
    assert {name.split("-")[1] for name in left} == kinds and all(f"-{proc.pid}-" in name for name in left), left  # what SIGKILL left

    after = run_pinlab("run", "-q", "-c", str(CPUS[0]), "--", "ls", str(shared), env=env)
    assert after.returncode == 0, after.stderr
    assert [name for name in after.stdout.split() if f"-{proc.pid}-" in name] == []  # gone before the next program started
    assert list(shared.iterdir()) == []  # and the next pinlab removed its own


def test_a_live_pinlabs_files_are_left_alone(tmp_path):
    env = dict(os.environ, PINLAB_EVENTS_DIR=str(tmp_path))
    proc = subprocess.Popen(
        [str(PINLAB), "run", "-q", "-c", str(CPUS[0]), "--", sys.executable, "-c", "import sys; sys.stdin.read()"], env=env, stdin=subprocess.PIPE
    )
    try:
        assert _wait_until(lambda: any(f"-{proc.pid}-" in p.name for p in tmp_path.iterdir()))
        mine = [p.name for p in tmp_path.iterdir()]
        other = run_pinlab("run", "-q", "-c", str(CPUS[0]), "--", "ls", str(tmp_path), env=env)
        assert other.returncode == 0 and set(mine) <= set(other.stdout.split())
        assert [p.name for p in tmp_path.iterdir()] == mine
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_maker_holds_its_lock_is_kept_though_its_pid_looks_dead(tmp_path):
    """A pinlab in another PID namespace sharing /dev/shm: its PID means nothing here, its lock does."""
    dead = _dead_pid()
    held = tmp_path / f"pinlab-events-{dead}-1-0.bin"
    stale = tmp_path / f"pinlab-plan-{dead}-2-0.bin"
    foreign = tmp_path / f"pinlab-results-{dead}-3-0.bin"  # not a name pinlab gives a shared file
    for path in (held, stale, foreign):
        path.write_bytes(b"x")
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert shared_files.sweep(str(tmp_path)) == [str(stale)]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([held.name, foreign.name])
    finally:
        os.close(fd)
    assert shared_files.sweep(str(tmp_path)) == [str(held)]


def test_release_removes_the_file_and_drops_the_lock(tmp_path):
    path, fd = shared_files.create(str(tmp_path), "heartbeat")
    assert os.path.basename(path).startswith(f"pinlab-heartbeat-{os.getpid()}-")
    shared_files.release(path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_a_killed_libomp_program_leaves_no_registration_in_dev_shm():
    """libomp writes /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> at start and removes it only at a
    normal exit: pinlab removes the one of a program it ran that was killed."""
    try:
        probe = native_path("pinlab-probe-llvm")
    except Exception:
        pytest.skip("pinlab-probe-llvm was not built (LLVM OpenMP runtime missing)")
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm here")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "GOMP_"))}
    pinlab = subprocess.Popen(
        [str(PINLAB), "run", "-q", "--", probe, "600000"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        registration = None

        def registered() -> bool:
            nonlocal registration
            for child in _children(pinlab.pid):
                path = "/dev/shm/" + shared_files.OPENMP_REGISTRATION.format(pid=child, uid=os.getuid())
                if os.path.exists(path):
                    registration = path
                    return True
            return False

        assert _wait_until(registered, timeout=300), "the program never registered with libomp"
        pinlab.send_signal(signal.SIGTERM)  # passed on to the program, which dies of it
        _, err = pinlab.communicate(timeout=300)
    finally:
        if pinlab.poll() is None:
            pinlab.kill()
            pinlab.wait()
    assert pinlab.returncode == 128 + signal.SIGTERM, err
    assert not os.path.exists(registration), f"{registration} was left behind"


def test_only_registrations_of_ended_processes_of_this_user_are_removed(tmp_path):
    uid = os.getuid()
    dead, alive = _dead_pid(), os.getpid()
    for pid in (dead, alive):
        (tmp_path / shared_files.OPENMP_REGISTRATION.format(pid=pid, uid=uid)).write_text("x")
    other = tmp_path / shared_files.OPENMP_REGISTRATION.format(pid=dead, uid=uid + 1)
    other.write_text("someone else's")
    removed = shared_files.remove_openmp_registrations([dead, alive, dead + 10**7], str(tmp_path))
    assert removed == [str(tmp_path / shared_files.OPENMP_REGISTRATION.format(pid=dead, uid=uid))]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([shared_files.OPENMP_REGISTRATION.format(pid=alive, uid=uid), other.name])
