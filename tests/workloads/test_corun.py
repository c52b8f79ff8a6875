"""Co-runners load the CPUs they were given, and are gone after stop or when pinlab is killed."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time

import pytest

from pinlab.workloads.corun import CoRunners
from tests.conftest import PINLAB

ALLOWED = sorted(os.sched_getaffinity(0))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_gone(pids, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def voluntary_switches(pid: int) -> int:
    return int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", open(f"/proc/{pid}/status").read(), re.M).group(1))


def runnable_share(pid: int, seconds: float, samples: int = 200) -> float:
    """Share of samples in which the process is running or waiting for a CPU (state R).

    Unlike its share of CPU time, this does not depend on what else the (shared, noisy) machine
    runs on the same CPU: a busy loop stays runnable while it waits for its turn.
    Samples are taken at random intervals: at a fixed interval that is a multiple of a periodic
    load's period (5 ms against 1 ms), the sampler can lock onto one phase of it and see it
    always asleep or always running.
    """
    gaps = random.Random(pid)
    running = 0
    for _ in range(samples):
        running += open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "R"
        time.sleep(gaps.uniform(0.2, 1.8) * seconds / samples)
    return running / samples


# kind, options, lowest and highest runnable share, fewest and most voluntary switches per second
LOADS = [
    ("cpu", {}, 0.9, 1.0, 0, 5),
    ("memory", {"size": "16MiB"}, 0.9, 1.0, 0, 5),
    # asleep for part of each millisecond: up to 1000 voluntary switches a second, fewer when the
    # CPU is shared with much else (a wake-up then finds it still waiting for its turn). On such a
    # CPU it is runnable nearly always (waiting for its turn is state R: 97% of the samples beside
    # 16 co-runners on 2 CPUs), so its sleeping shows in the voluntary switches, not the share.
    ("sleep", {"period_us": 1000}, 0.05, 1.0, 50, 1100),
]


@pytest.mark.parametrize("kind, options, low, high, fewest, most", LOADS, ids=[load[0] for load in LOADS])
def test_co_runners_load_their_cpus(kind, options, low, high, fewest, most):
    cpus = ALLOWED[-1:]
    with CoRunners(kind, 1, cpus, **options) as runners:
        pid = runners.pids[0]
        time.sleep(0.3)
        status = open(f"/proc/{pid}/status").read()
        assert re.search(r"Cpus_allowed_list:\s*(\S+)", status).group(1) == str(cpus[0])
        cpu_before, switches_before, t0 = cpu_seconds(pid), voluntary_switches(pid), time.monotonic()
        share = runnable_share(pid, 1.0)
        elapsed = time.monotonic() - t0
        used = (cpu_seconds(pid) - cpu_before) / elapsed
        switches = (voluntary_switches(pid) - switches_before) / elapsed
    assert low <= share <= high, share
    assert fewest <= switches <= most, switches
    assert used > 0.01, used  # it really computes (a share of its CPU that falls with what else shares it)
    assert wait_gone(runners.pids)


def test_co_runners_go_round_robin_over_the_cpus():
    with CoRunners("cpu", 2 * len(ALLOWED), ALLOWED) as runners:
        time.sleep(0.2)
        masks = [re.search(r"Cpus_allowed_list:\s*(\S+)", open(f"/proc/{p}/status").read()).group(1) for p in runners.pids]
    assert masks == [str(ALLOWED[i % len(ALLOWED)]) for i in range(2 * len(ALLOWED))]


def start_cli(*args: str) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen([str(PINLAB), "corun", *args], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    while not re.search(r"co-runners? on ", line):  # a co-runner's own complaint comes first (start waits for it)
        more = proc.stderr.readline()
        assert more, f"pinlab corun ended without naming its co-runners: {line!r}"
        line += more
    pids = [int(p) for p in re.split(r"\bpids? ", line, maxsplit=1)[1].split()]
    return proc, pids


def test_cli_stops_cleanly_on_sigterm():
    proc, pids = start_cli("cpu", "--count", "2")
    assert all(alive(p) for p in pids)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert wait_gone(pids)


def test_no_orphan_when_pinlab_is_killed():
    proc, pids = start_cli("sleep", "--count", "2", "--period-us", "500")
    proc.kill()
    proc.wait(timeout=10)
    assert wait_gone(pids), "co-runners outlived their killed parent"


def test_duration_and_bad_input():
    proc, pids = start_cli("cpu", "--count", "1", "--duration", "0.3")
    assert proc.wait(timeout=10) == 0 and wait_gone(pids)
    for args, message in (
        (["nope"], "unknown co-runner kind"),
        (["cpu", "--count", "0"], "at least 1"),
        (["sleep", "--period-us", "5"], "between 10 and 10000"),
        (["cpu", "--cpus", "9999"], "not allowed"),
    ):
        out = subprocess.run([str(PINLAB), "corun", *args], capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and message in out.stderr


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["memory", "--count", "1", "--size", "1X", "--duration", "600"], 2, "unknown unit"),  # the co-runner's own bad input
        (["cpu", "--count", "1", "--duration", "600"], 137, "killed by signal 9"),  # killed from outside while running
    ],
    ids=["bad size", "killed"],
)
def test_a_failing_co_runner_fails_pinlab_corun(args, status, message):
    """pinlab corun stops as soon as a co-runner ends by itself, says how, and exits with its status."""
    proc = subprocess.Popen([str(PINLAB), "corun", *args], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    while not re.search(r"co-runners? on ", line):  # a co-runner's own complaint comes first (start waits for it)
        more = proc.stderr.readline()
        assert more, f"pinlab corun ended without naming its co-runners: {line!r}"
        line += more
    pids = [int(p) for p in re.split(r"\bpids? ", line, maxsplit=1)[1].split()]
    if status == 137:
        os.kill(pids[0], signal.SIGKILL)
    try:
        proc.wait(timeout=240)  # at once, not after --duration's 600 s (its few lines fit the pipe)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == status, err
    assert message in line + err and f"co-runner {args[0]} (pid {pids[0]})" in err
    assert "Traceback" not in err


def resident_bytes(pid: int) -> int:
    return int(re.search(r"^VmRSS:\s*(\d+) kB", open(f"/proc/{pid}/status").read(), re.M).group(1)) * 1024


def test_start_returns_once_the_load_is_there():
    """A memory co-runner has touched its whole buffer when start() returns: the measured program
    starts under the full load, not while the co-runner is still setting up."""
    size = 256 << 20
    with CoRunners("memory", 1, ALLOWED[:1], size=f"{size}B") as runners:
        assert resident_bytes(runners.pids[0]) >= size
        assert runners.failure() is None


def test_a_co_runner_that_refuses_its_options_has_failed_when_start_returns():
    """However short the measured program, a co-runner with bad options is seen to have failed:
    start() waits until it has ended, and stop() does not hide it."""
    runners = CoRunners("memory", 2, ALLOWED[:1], size="1X").start()
    try:
        assert runners.failure() is not None and "exited with status 2" in runners.failure()
    finally:
        runners.stop()
    assert "exited with status 2" in runners.failure() and runners.exit_status() == 2


def test_a_co_runner_stopped_at_once_has_not_failed():
    runners = CoRunners("cpu", 2, ALLOWED[:1]).start()
    runners.stop()
    assert runners.failure() is None and runners.exit_status() == 0
