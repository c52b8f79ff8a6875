"""The program gets its CPU, memory policy, personality and THP setting from its first instruction,
and pinlab's own thread gets its settings back (they are set on it around posix_spawn)."""

from __future__ import annotations

import os
import threading

import pytest

from pinlab.cpuset import format_cpulist
from pinlab.launch import memory, spawn

ALLOWED = sorted(os.sched_getaffinity(0))
NODES = sorted(memory.mems_allowed())


def own_state() -> tuple:
    """The calling thread's settings that spawn() changes for a moment."""
    libc = spawn._c()
    return (
        frozenset(os.sched_getaffinity(0)),
        memory.get_mempolicy(),
        libc.personality(0xFFFFFFFF),
        libc.prctl(spawn.PR_GET_THP_DISABLE, 0, 0, 0, 0),
    )


def spawned_status(**settings) -> dict[str, str]:
    """/proc/PID/status and personality of a program started with these settings, read by itself."""
    read, write = os.pipe()
    try:
        pid = spawn.spawn(
            "/bin/sh",
            ["sh", "-c", "cat /proc/self/status; echo Personality: $(cat /proc/self/personality)"],
            dict(os.environ),
            stdout=write,
            **settings,
        )
    finally:
        os.close(write)
    with os.fdopen(read) as out:
        text = out.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_the_program_starts_with_the_settings():
    status = spawned_status(cpus=frozenset(ALLOWED[-1:]), mem_mode=memory.MPOL_BIND, mem_nodes=(NODES[-1],), no_aslr=True, no_thp=True)
    assert status["Cpus_allowed_list"].strip() == str(ALLOWED[-1])
    assert int(status["Personality"], 16) & 0x0040000
    if "THP_enabled" in status:
        assert status["THP_enabled"].strip() == "0"


def test_without_settings_the_program_gets_the_callers_own():
    status = spawned_status()
    assert status["Cpus_allowed_list"].strip() == format_cpulist(ALLOWED)
    assert not int(status["Personality"], 16) & 0x0040000


def test_the_callers_settings_come_back():
    before = own_state()
    spawned_status(cpus=frozenset(ALLOWED[:1]), mem_mode=memory.MPOL_INTERLEAVE, mem_nodes=tuple(NODES), no_aslr=True, no_thp=True)
    assert own_state() == before


def test_the_callers_settings_come_back_when_exec_fails():
    before = own_state()
    with pytest.raises(FileNotFoundError):
        spawn.spawn(
            "/no/such/program", ["x"], {}, cpus=frozenset(ALLOWED[:1]), mem_mode=memory.MPOL_BIND, mem_nodes=(NODES[0],), no_aslr=True, no_thp=True
        )
    assert own_state() == before


def test_a_caller_under_a_policy_of_its_own_keeps_it():
    """pinlab itself run under numactl --interleave: its policy survives a spawn with another."""
    result = {}

    def body():
        memory.set_mempolicy(memory.MPOL_INTERLEAVE, tuple(NODES))
        mine = memory.get_mempolicy()
        spawned_status(mem_mode=memory.MPOL_BIND, mem_nodes=(NODES[0],))
        result["after"], result["mine"] = memory.get_mempolicy(), mine

    worker = threading.Thread(target=body)  # a thread of its own: the test's policy ends with it
    worker.start()
    worker.join()
    assert result["mine"] == (memory.MPOL_INTERLEAVE, tuple(NODES))
    assert result["after"] == result["mine"]
