"""The application heartbeat: real programs (C with the installed header, Python, the built-in
workloads) beat into a shared file; pinlab's reader sees each thread's count under its tid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinlab import heartbeat
from pinlab.autopin.metrics import HeartbeatMetric, rates
from pinlab.errors import UsageError
from tests.conftest import run_pinlab

THREADS = max(3, len(os.sched_getaffinity(0)) + 1)  # more threads than CPUs: slots must not depend on CPUs


@pytest.mark.parametrize("creator", ["pinlab", "program"])
def test_each_threads_count_is_read_under_its_tid(start, tmp_path, creator):
    path = heartbeat.create(str(tmp_path)) if creator == "pinlab" else str(tmp_path / "made-by-the-program")
    calls = [1000 * (i + 2) for i in range(THREADS)]  # thread i beats i+1 units, calls[i] times
    program = start("fixed", calls, path)
    with heartbeat.Heartbeat(path, create=False) as reader:
        expected = {program.tids[i]: (i + 1) * calls[i] for i in range(THREADS)}
        assert reader.read() == expected
        assert set(expected) <= program.live_tids() and program.pid not in expected  # the main thread never beat
        assert reader.total() == sum(expected.values()) and reader.claimed() == THREADS

        # A thread that ends keeps its count in the file; the metric, given the live tids, drops it.
        metric = HeartbeatMetric(path)
        before = metric.read(sorted(program.live_tids() - {program.pid}))
        program.end_thread(0)
        assert program.tids[0] not in program.live_tids()
        after = metric.read(sorted(program.live_tids() - {program.pid}))
        per_thread, mean = rates(before, after, THREADS - 1)
        assert set(per_thread) == {program.tids[i] for i in range(1, THREADS)}
        assert mean == 0.0  # the others wait without beating
        assert reader.read()[program.tids[0]] == calls[0]
        metric.close()
    assert program.finish() == 0


def test_threads_past_the_last_slot_share_the_overflow_slot(start, tmp_path):
    path = heartbeat.create(str(tmp_path), slots=3)  # 2 slots of their own, then the shared one
    calls = [100, 200, 300, 400]
    program = start("fixed", calls, path)
    with heartbeat.Heartbeat(path) as reader:
        seen = reader.read()
        assert len(seen) == 2
        by_tid = {program.tids[i]: (i + 1) * calls[i] for i in range(4)}
        assert all(seen[tid] == by_tid[tid] for tid in seen)
        assert reader.total() == sum(by_tid.values())
        assert reader.claimed() == 4
    program.finish()


def test_beats_at_known_speeds_give_those_rates(start, tmp_path):
    path = heartbeat.create(str(tmp_path))
    speeds = [200 * (i + 1) for i in range(THREADS)]  # beats per second; the threads mostly sleep
    program = start("rate", speeds, path)
    metric = HeartbeatMetric(path)
    workers = sorted(program.tids.values())
    before = metric.read(workers)
    time.sleep(1.5)
    after = metric.read(workers)
    per_thread, mean = rates(before, after, len(workers))
    for i, speed in enumerate(speeds):
        assert per_thread[program.tids[i]] == pytest.approx(speed, rel=0.1)
    assert mean == pytest.approx(sum(speeds) / len(speeds), rel=0.1)
    metric.close()
    program.finish()


PYTHON_BEATS = """
import os, sys, threading
from pinlab.heartbeat import beat
lock = threading.Lock()
def say(n):
    with lock:
        print(threading.get_native_id(), n, flush=True)
def work(n, units):
    for _ in range(n):
        beat(units)
    say(n * units)
threads = [threading.Thread(target=work, args=(100 * (i + 1), i + 1)) for i in range(int(sys.argv[1]))]
[t.start() for t in threads]
[t.join() for t in threads]
beat(7)
say(7)
pid = os.fork()
if pid == 0:  # a child beats into a slot of its own, under its own tid
    beat(11)
    say(11)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_python_programs_beat_from_every_thread_and_forked_children(tmp_path):
    path = str(tmp_path / "python.hb")  # created by the program's first beat
    env = {**os.environ, "PINLAB_HEARTBEAT": path}
    done = subprocess.run([sys.executable, "-c", PYTHON_BEATS, str(THREADS)], env=env, capture_output=True, text=True, check=True, timeout=60)
    reported = {int(t): int(n) for t, n in (line.split() for line in done.stdout.splitlines())}
    assert len(reported) == THREADS + 2
    with heartbeat.Heartbeat(path, create=False) as reader:
        assert reader.read() == reported
        assert reader.total() == sum(reported.values())


def test_without_a_usable_file_beats_do_nothing(beating, tmp_path):
    not_ours = tmp_path / "data.bin"
    content = bytes(range(256)) * 300
    not_ours.write_bytes(content)
    for value in (None, "", str(tmp_path / "no-such-dir" / "hb"), str(not_ours)):
        env = {k: v for k, v in os.environ.items() if k != "PINLAB_HEARTBEAT"}
        if value is not None:
            env["PINLAB_HEARTBEAT"] = value
        done = subprocess.run([beating, "fixed", "1000", "2000"], input="", env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 2
    assert not (tmp_path / "no-such-dir").exists()
    assert not_ours.read_bytes() == content
    with pytest.raises(UsageError, match="not a pinlab heartbeat file"):
        heartbeat.Heartbeat(str(not_ours))


def _run_workload(name: str, args: list[str], path: str) -> dict[int, int]:
    exe = run_pinlab("workload", "path", name).stdout.strip()
    env = {**os.environ, "PINLAB_HEARTBEAT": path}
    subprocess.run([exe, *args], env=env, check=True, capture_output=True, timeout=600)
    with heartbeat.Heartbeat(path, create=False) as reader:
        counts = reader.read()
        assert reader.total() == sum(counts.values())
        return counts


def _trial_divisions(x: int) -> int:
    """The divisions primes' trial division makes on odd x >= 3 (by 3, 5, ... up to sqrt(x) or a divisor)."""
    d = 3
    while d * d <= x:
        if x % d == 0:
            return (d - 3) // 2 + 1
        d += 2
    return (d - 3) // 2


def test_primes_beats_its_work_from_the_threads_doing_it(tmp_path):
    """One unit per candidate and per trial division: a unit costs the same early and late in the run."""
    limit = 100_000
    counts = _run_workload("primes", ["--limit", str(limit), "--threads", "2"], str(tmp_path / "hb"))
    odd = range(3, limit, 2)
    assert sum(counts.values()) == len(odd) + sum(_trial_divisions(x) for x in odd)
    assert 1 <= len(counts) <= 2


@pytest.mark.parametrize(
    "name, args, per_thread",
    [
        ("stream", ["--size", "1000", "--ntimes", "3"], 4 * 3),  # each kernel pass over a thread's chunk
        ("mb", ["--n", "4", "--m", "100", "--reps", "50"], 2 * 50),  # rows x repetitions per thread
        ("pairs", ["--size", "1000", "--reps", "30"], 30),  # passes
        ("nested-stream", ["--teams", "2", "--size", "1000", "--ntimes", "5"], 5),  # triads (one thread a team)
        ("twisted-stream", ["--teams", "2", "--size", "1000", "--ntimes", "5"], 2 * 5),  # two phases
    ],
)
def test_every_built_in_workload_beats(tmp_path, name, args, per_thread):
    counts = _run_workload(name, [*args, "--threads", "2"], str(tmp_path / "hb"))
    assert sorted(counts.values()) == [per_thread, per_thread]


def test_the_header_is_installed_and_found():
    header = run_pinlab("workload", "heartbeat-header")
    assert header.returncode == 0 and "pinlab_beat" in Path(header.stdout.strip()).read_text()
    directory = run_pinlab("workload", "heartbeat-header", "--include-dir").stdout.strip()
    assert Path(directory) / "pinlab_heartbeat.h" == Path(header.stdout.strip())


def _started(env: dict[str, str], cwd) -> subprocess.Popen:
    """A process that has finished starting (its environment is readable in /proc)."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "ready\n"
    return process


def test_the_heartbeat_of_a_running_process_is_found(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PINLAB_HEARTBEAT"}
    for value, expected in (("rel.hb", str(tmp_path / "rel.hb")), ("/dev/shm/abs.hb", "/dev/shm/abs.hb"), (None, None)):
        process = _started({**env, "PINLAB_HEARTBEAT": value} if value else env, tmp_path)
        try:
            assert heartbeat.path_of_process(process.pid) == expected
        finally:
            process.kill()
            process.wait()
            process.stdout.close()


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(UsageError, match="negative"):
        heartbeat.beat(-1)
    with pytest.raises(UsageError, match="2 to"):
        heartbeat.create(str(tmp_path), slots=1)
    with pytest.raises(UsageError, match="not a writable directory"):
        heartbeat.create(str(tmp_path / "missing"))
