"""Co-runners load the CPUs they were given, and are gone after stop or when pinlab is killed."""
from __future__ import annotations

import os
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


@pytest.mark.parametrize("kind, low, high", [("cpu", 0.7, 1.05), ("sleep", 0.1, 0.9), ("memory", 0.5, 1.05)])
def test_co_runners_load_their_cpus(kind, low, high):
    cpus = ALLOWED[-1:]
    with CoRunners(kind, 1, cpus, period_us=1000 if kind == "sleep" else None, size="16MiB" if kind == "memory" else None) as runners:
        pid = runners.pids[0]
        time.sleep(0.3)
        status = open(f"/proc/{pid}/status").read()
        assert re.search(r"Cpus_allowed_list:\s*(\S+)", status).group(1) == str(cpus[0])
        before, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(1.0)
        share = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
    assert low <= share <= high, share
    assert wait_gone(runners.pids)


def test_co_runners_go_round_robin_over_the_cpus():
    with CoRunners("cpu", 2 * len(ALLOWED), ALLOWED) as runners:
        time.sleep(0.2)
        masks = [re.search(r"Cpus_allowed_list:\s*(\S+)", open(f"/proc/{p}/status").read()).group(1) for p in runners.pids]
    assert masks == [str(ALLOWED[i % len(ALLOWED)]) for i in range(2 * len(ALLOWED))]


def start_cli(*args: str) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen([str(PINLAB), "corun", *args], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    pids = [int(p) for p in line.rsplit("pids", 1)[1].split()]
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
    for args, message in ((["nope"], "unknown co-runner kind"), (["cpu", "--count", "0"], "at least 1"),
                          (["sleep", "--period-us", "5"], "between 10 and 10000"), (["cpu", "--cpus", "9999"], "not allowed")):
        out = subprocess.run([str(PINLAB), "corun", *args], capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and message in out.stderr
