"""autopin's metrics on real threads: perf events per tid, the heartbeat, lines of output and CPU
time; rates between two readings; which metric is chosen and why; the errors."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab import heartbeat
from pinlab.autopin import metrics
from pinlab.autopin.metrics import (
    HeartbeatMetric,
    PerfMetric,
    Reading,
    StdoutMetric,
    TaskClockMetric,
    ThreadTimes,
    choose_metric,
    event_available,
    list_metrics,
    rates,
)
from pinlab.errors import UsageError
from pinlab.measure import counters

HARDWARE = event_available(counters.parse_event("instructions"))
WINDOW = 1.0
NAP_RATE = 50  # wake-ups per second of the sleeping thread


def _ended_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _window(metric, tids):
    before = metric.read(tids)
    time.sleep(WINDOW)
    return before, metric.read(tids)


def _spin_and_nap(start, metric, scale):
    """Thread 0 spins, thread 1 wakes NAP_RATE times a second: their rates in ``metric``, then the
    spinner ends and is dropped from the next window."""
    program = start("rate", [0, NAP_RATE], None)
    spin, nap = program.tids[0], program.tids[1]
    before, after = _window(metric, [spin, nap, _ended_pid()])  # a tid already gone is left out
    assert set(after.per_thread) == {spin, nap}
    per_thread, mean = rates(before, after, 2)
    assert per_thread[nap] < 0.02 * scale  # asleep nearly all the time
    assert per_thread[spin] > 20 * per_thread[nap]  # busy (as much as a shared machine lets it)
    assert mean == pytest.approx((per_thread[spin] + per_thread[nap]) / 2)
    program.end_thread(0)
    later = metric.read(sorted(program.live_tids() - {program.pid}))
    assert spin not in later.per_thread
    per_thread, _ = rates(after, later, 1)
    assert set(per_thread) == {nap}
    program.finish()


def test_task_clock_tells_a_spinning_thread_from_a_sleeping_one(start):
    with TaskClockMetric() as metric:
        assert metric.unit == "CPU seconds" and "not useful work" in metric.notice
        _spin_and_nap(start, metric, 1.0)


def _perf_fds() -> int:
    """perf_event file descriptors this process holds."""

    def target(fd):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return ""

    return sum(1 for fd in os.listdir("/proc/self/fd") if target(fd) == "anon_inode:[perf_event]")


def test_perf_task_clock_per_thread(start):
    held = _perf_fds()
    metric = PerfMetric("task-clock")
    assert metric.per_thread and metric.unit == "ns"
    _spin_and_nap(start, metric, 1e9)
    assert _perf_fds() == held + 1  # the spinner's counter was closed when it ended, the napper's is open
    metric.read([])
    assert _perf_fds() == held
    metric.close()


def test_perf_task_clock_agrees_with_proc(start):
    program = start("rate", [0], None)
    tid = program.tids[0]
    with PerfMetric("task-clock") as perf, TaskClockMetric() as proc:
        first = (perf.read([tid]), proc.read([tid]))
        time.sleep(WINDOW)
        second = (perf.read([tid]), proc.read([tid]))
    by_perf = second[0].per_thread[tid] - first[0].per_thread[tid]
    by_proc = second[1].per_thread[tid] - first[1].per_thread[tid]
    assert by_perf / 1e9 == pytest.approx(by_proc, rel=0.1, abs=0.02)
    assert by_proc > 0.05  # it did run
    program.finish()


def test_perf_context_switches_count_each_threads_wake_ups(start):
    program = start("rate", [0, NAP_RATE], None)
    with PerfMetric("context-switches") as metric:
        before, after = _window(metric, [program.tids[1]])
        per_thread, _ = rates(before, after, 1)
        assert per_thread[program.tids[1]] == pytest.approx(NAP_RATE, rel=0.3)  # one switch per sleep
    program.finish()


@pytest.mark.skipif(not HARDWARE[0], reason=f"instructions cannot be counted here: {HARDWARE[2]}")
def test_perf_instructions_per_thread(start):
    program = start("rate", [0, NAP_RATE], None)
    with PerfMetric("instructions") as metric:
        before, after = _window(metric, [program.tids[0], program.tids[1]])
        per_thread, _ = rates(before, after, 2)
        assert per_thread[program.tids[0]] > 100 * per_thread[program.tids[1]] > 0
    program.finish()


def test_heartbeat_metric_counts_threads_that_have_not_beaten_as_zero(start, tmp_path):
    path = heartbeat.create(str(tmp_path))
    program = start("rate", [0, NAP_RATE], path)
    with HeartbeatMetric(path) as metric:
        assert (metric.name, metric.unit, metric.per_thread) == ("heartbeat", "beats", True)
        before, after = _window(metric, [program.tids[0], program.tids[1]])
        per_thread, _ = rates(before, after, 2)
        assert per_thread[program.tids[0]] == 0.0  # the spinner never beats
        assert per_thread[program.tids[1]] == pytest.approx(NAP_RATE, rel=0.1)
        assert after.total - before.total == pytest.approx(NAP_RATE * (after.time - before.time), abs=2)
    program.finish()


# --------------------------------------------------------------------------- stdout


def _tee(metric: StdoutMetric, feed) -> bytes:
    """Run ``feed(write_fd)`` as the program's output through the tee; what came out."""
    program_r, program_w = os.pipe()
    ours_r, ours_w = os.pipe()
    out = bytearray()
    drain = threading.Thread(target=lambda: out.extend(_read_all(ours_r)))
    drain.start()
    copier = metric.tee(program_r, ours_w)
    feed(program_w)
    os.close(program_w)
    copier.join(timeout=30)
    assert not copier.is_alive()
    os.close(ours_w)
    drain.join(timeout=30)
    os.close(ours_r)
    return bytes(out)


def _read_all(fd: int) -> bytes:
    chunks = []
    while data := os.read(fd, 65536):
        chunks.append(data)
    return b"".join(chunks)


OUTPUT = """
import os, sys, time
for i in range(300):
    os.write(1, b"step %d done\\n" % i)
os.write(1, b"half a li")
time.sleep(0.2)
os.write(1, b"ne: step 300 done\\n\\xff\\xfe not utf-8 step done\\n")
os.write(1, b"x" * 200000 + b" step 301 done\\n")
os.write(1, b"last line without newline: step 302 done")
"""


def test_stdout_lines_are_counted_and_passed_through_unchanged():
    expected = subprocess.run([sys.executable, "-c", OUTPUT], capture_output=True, check=True).stdout
    metric = choose_metric(r"stdout:step \d+ done", heartbeat_path=None, heartbeat_seen=False)
    assert isinstance(metric, StdoutMetric) and not metric.per_thread and metric.unit == "matches"
    start = metric.read([])

    def program(fd):
        subprocess.run([sys.executable, "-c", OUTPUT], stdout=fd, check=True)

    assert _tee(metric, program) == expected
    end = metric.read([])
    assert end.per_thread is None and end.total - start.total == 303
    _, mean = rates(start, end, 3)
    assert mean == pytest.approx(303 / (end.time - start.time) / 3)
    metric.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"\n")), max_size=20), st.sampled_from([b"a", b"\n", b"ab"]))
def test_stdout_copy_is_exact_and_counts_complete_lines(chunks, sprinkle):
    chunks = [c + sprinkle for c in chunks]
    metric = StdoutMetric("a")

    def program(fd):
        for chunk in chunks:
            os.write(fd, chunk)

    data = b"".join(chunks)
    assert _tee(metric, program) == data
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    assert metric.count == sum(1 for line in lines if "a" in line.decode("utf-8", "replace"))


def test_stdout_keeps_reading_when_our_output_is_closed():
    metric = StdoutMetric("x")
    program_r, program_w = os.pipe()
    ours_r, ours_w = os.pipe()
    os.close(ours_r)  # nobody reads pinlab's output any more
    copier = metric.tee(program_r, ours_w)
    os.write(program_w, b"x\n" * 1000)
    os.close(program_w)
    copier.join(timeout=10)
    os.close(ours_w)
    assert not copier.is_alive() and metric.count == 1000


# --------------------------------------------------------------------------- rates


tid_values = st.dictionaries(st.integers(1, 50), st.floats(0, 1e12), max_size=8)


@given(tid_values, tid_values, st.floats(0.01, 100))
def test_rates_keep_only_threads_present_in_both_readings(before, after, seconds):
    per_thread, mean = rates(Reading(1.0, before, 0.0), Reading(1.0 + seconds, after, 0.0), 4)
    assert set(per_thread) == set(before) & set(after)
    for tid, rate in per_thread.items():
        assert rate == pytest.approx((after[tid] - before[tid]) / seconds)
    if per_thread:
        assert mean == pytest.approx(sum(per_thread.values()) / len(per_thread))
    else:
        assert mean != mean  # NaN: no thread to measure


@given(st.floats(0, 1e9), st.floats(0, 1e9), st.floats(0.01, 100), st.integers(1, 64))
def test_program_wide_rates_are_per_worker(first, second, seconds, workers):
    per_thread, mean = rates(Reading(5.0, None, first), Reading(5.0 + seconds, None, second), workers)
    assert per_thread == {} and mean == pytest.approx((second - first) / seconds / workers)


def test_rates_need_time_to_pass():
    with pytest.raises(ValueError):
        rates(Reading(2.0, None, 0.0), Reading(2.0, None, 1.0), 1)


# --------------------------------------------------------------------------- choosing


def test_auto_prefers_instructions_then_the_heartbeat_then_cpu_time(tmp_path):
    path = heartbeat.create(str(tmp_path))
    beat = choose_metric(None, heartbeat_path=path, heartbeat_seen=True)
    silent = choose_metric("auto", heartbeat_path=path, heartbeat_seen=False)
    if HARDWARE[0]:
        for metric in (beat, silent):
            assert isinstance(metric, PerfMetric) and metric.notice.startswith("metric: instructions (")
    else:
        assert isinstance(beat, HeartbeatMetric)
        assert beat.notice == (f"metric: heartbeat ({HARDWARE[2]}; the program reports its work through PINLAB_HEARTBEAT)")
        assert isinstance(silent, TaskClockMetric)
        assert silent.notice.startswith(
            f"metric: task-clock ({HARDWARE[2]}, and no thread of the program had beaten through PINLAB_HEARTBEAT by the end of the "
            "initialisation: one that beats later wants a longer -i, or --metric heartbeat); warning:"
        )
        unwatched = choose_metric("auto", heartbeat_path=None, heartbeat_seen=False)
        assert unwatched.notice.startswith(f"metric: task-clock ({HARDWARE[2]}, and the program reports no heartbeat); warning:")
        unwatched.close()
        assert "not useful work" in silent.notice
    for metric in (beat, silent):
        assert "\n" not in metric.notice
        metric.close()


def test_metrics_named_explicitly(tmp_path):
    path = heartbeat.create(str(tmp_path))
    chosen = {
        name: choose_metric(name, heartbeat_path=path, heartbeat_seen=False)
        for name in ("heartbeat", "task-clock", "context-switches", "stdout:^ok$")
    }
    assert isinstance(chosen["heartbeat"], HeartbeatMetric) and "not beaten yet" in chosen["heartbeat"].notice
    assert isinstance(chosen["task-clock"], TaskClockMetric) and "not useful work" in chosen["task-clock"].notice
    assert isinstance(chosen["context-switches"], PerfMetric) and chosen["context-switches"].name == "context-switches"
    assert isinstance(chosen["stdout:^ok$"], StdoutMetric) and chosen["stdout:^ok$"].regex.pattern == "^ok$"
    for metric in chosen.values():
        metric.close()


@pytest.mark.parametrize(
    "name, message",
    [
        ("bogus", "unknown metric 'bogus': use instructions, cycles, heartbeat, stdout:REGEX, task-clock"),
        ("stdout:(unclosed", "--metric stdout:(unclosed: not a regular expression"),
        ("heartbeat", "--metric heartbeat: the program has no PINLAB_HEARTBEAT"),
    ],
)
def test_bad_metrics_are_one_line(name, message):
    with pytest.raises(UsageError) as error:
        choose_metric(name, heartbeat_path=None, heartbeat_seen=False)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.skipif(HARDWARE[0], reason="this machine counts instructions: nothing to refuse")
def test_a_hardware_event_asked_for_is_insisted_on():
    with pytest.raises(UsageError, match=r"^--metric cycles: .*; use --metric heartbeat, stdout:REGEX or task-clock$"):
        choose_metric("cycles", heartbeat_path=None, heartbeat_seen=False)


def test_a_refusal_names_the_setting_to_change():
    message = metrics._refusal(counters.parse_event("instructions"), errno.EACCES)
    assert f"perf_event_paranoid = {counters.paranoid()}" in message
    assert "sysctl kernel.perf_event_paranoid=2" in message or "CAP_PERFMON" in message


def test_list_metrics_says_what_this_machine_can_count():
    listed = list_metrics()
    names = [name for name, _, _ in listed]
    assert len(names) == len(set(names))
    available = {name: ok for name, _, ok in listed}
    assert {
        "instructions",
        "cycles",
        "LLC-load-misses",
        "L1-dcache-prefetches",
        "context-switches",
        "heartbeat",
        "stdout:REGEX",
        "task-clock",
    } <= set(names)
    assert available["instructions"] == HARDWARE[0]
    assert available["context-switches"] and available["heartbeat"] and available["task-clock"]
    for name in names:  # every perf name listed is one choose_metric accepts
        if name not in ("heartbeat", "stdout:REGEX", "task-clock"):
            assert counters.parse_event(name).name == name


def test_task_clock_tells_threads_waiting_by_sched_yield_from_threads_that_compute():
    """The two rules, on made-up /proc figures: most CPU time in the kernel with no page faults (a
    yield loop alone on its CPU), or preempted tens of thousands of times per CPU second (beside a
    runnable thread). Not flagged: a computing thread (user time, one preemption per time slice),
    one first-touching memory (kernel time, but thousands of page faults per kernel millisecond),
    one seen for 0.1 s of CPU only. A yield loop that was alone on its CPU for 0.13 s and beside a
    runnable thread the rest (the load moved, as on a busy machine) is told by its kernel share
    from 0.1 s of CPU on, since it was also preempted 1,100 times (7,900 per CPU second: too few
    for the second rule with its alone time counted in)."""
    metric = TaskClockMetric()
    zero = ThreadTimes(cpu=0.0, preempted=0, user=0, system=0, faults=0)
    before = {tid: zero for tid in range(1, 9)}
    before[5] = ThreadTimes(cpu=0.0, preempted=None, user=0, system=0)
    tick = metric._tick
    after = {
        1: ThreadTimes(cpu=2.0, preempted=1500, user=2 * tick - 1, system=1, faults=10),  # computes
        2: ThreadTimes(cpu=2.0, preempted=3, user=int(0.6 * tick), system=int(1.4 * tick), faults=0),  # yields alone on its CPU
        3: ThreadTimes(cpu=0.004, preempted=300, user=0, system=0, faults=0),  # yields beside a computing thread
        4: ThreadTimes(cpu=0.1, preempted=10, user=3, system=7, faults=0),  # too brief
        5: ThreadTimes(cpu=1.0, preempted=None, user=tick, system=0),  # no preemption count: the kernel share alone
        6: ThreadTimes(cpu=2.0, preempted=50, user=int(0.4 * tick), system=int(1.6 * tick), faults=900_000),  # first touch
        7: ThreadTimes(cpu=0.14, preempted=1100, user=1, system=13, faults=0),  # yields alone a while, then beside one
        8: ThreadTimes(cpu=0.14, preempted=1100, user=1, system=13, faults=20_000),  # first touch, preempted
    }
    metric._first, metric._last = before, after
    found = metric.yield_waiters()
    assert found == {
        2: "70% of its CPU time in the kernel, 0 page faults",
        3: "preempted 300 times in 4 ms of CPU time",
        7: "93% of its CPU time in the kernel, 0 page faults, preempted 1100 times",
    }, found
    why = metric.distrust()
    assert why.startswith("3 worker threads wait by sched_yield, as OpenBLAS's pool and MPI progress threads do (thread 2: 70% of")
    metric._last = before
    assert metric.distrust() is None


def test_task_clock_reads_the_preemptions_and_page_faults_of_a_real_thread():
    metric = TaskClockMetric()
    tid = threading.get_native_id()
    first = metric._times(tid)
    pages = bytearray(64 << 20)
    pages[::4096] = b"x" * (len(pages) // 4096)  # a write to each of its 16 Ki pages: first touches
    second = metric._times(tid)
    assert first is not None and second is not None and first.preempted is not None
    assert second.faults - first.faults >= 1000 and second.preempted >= first.preempted
