"""Performance counters of a whole program (every thread, from its first instruction), checked
against what the kernel reports otherwise (rusage, page counts), with whatever counters this
machine has: software events everywhere, hardware events where there is a PMU."""

from __future__ import annotations

import json
import os
import sys

import pytest

import pinlab
from pinlab.errors import UsageError
from pinlab.measure import counters
from pinlab.native import native_path
from tests.conftest import run_pinlab

ALLOWED = sorted(os.sched_getaffinity(0))
HARDWARE_HERE = bool(counters.probe(counters.parse_events("task-clock,instructions")).usable[1:])


def test_names_are_perfs():
    assert counters.parse_event("cycles") == counters.Event("cycles", counters.PERF_TYPE_HARDWARE, 0)
    assert counters.parse_event("cs").config == counters.SOFTWARE["context-switches"]
    # LLC (2) | load (0) << 8 | miss (1) << 16, as perf's tables give it
    assert counters.parse_event("LLC-load-misses") == counters.Event("LLC-load-misses", counters.PERF_TYPE_HW_CACHE, 0x10002)
    assert counters.parse_event("dTLB-stores").config == 3 | 1 << 8
    assert counters.parse_event("r013c") == counters.Event("r013c", counters.PERF_TYPE_RAW, 0x13C)
    names = [e.name for e in counters.parse_events("default,cycles,task-clock")]
    assert names == list(counters.DEFAULT)


def test_pmu_terms_are_placed_by_the_pmus_format(tmp_path, monkeypatch):
    pmu = tmp_path / "cpu"
    (pmu / "format").mkdir(parents=True)
    (pmu / "events").mkdir()
    (pmu / "type").write_text("4\n")
    (pmu / "format" / "event").write_text("config:0-7\n")
    (pmu / "format" / "umask").write_text("config:8-15\n")
    (pmu / "format" / "ldlat").write_text("config1:0-15\n")
    (pmu / "events" / "mem-loads").write_text("event=0xcd,umask=0x1,ldlat=3\n")
    monkeypatch.setattr(counters, "_PMUS", tmp_path)
    assert counters.parse_event("cpu/event=0x3c,umask=0x2/") == counters.Event("cpu/event=0x3c,umask=0x2/", 4, 0x23C)
    assert counters.parse_event("mem-loads") == counters.Event("mem-loads", 4, 0x1CD, 3)
    assert counters.parse_event("cpu/mem-loads/").config == 0x1CD
    assert [e.name for e in counters.parse_events("cpu/event=1,umask=2/,cycles")] == ["cpu/event=1,umask=2/", "cycles"]
    with pytest.raises(UsageError, match="has no term 'cmask'"):
        counters.parse_event("cpu/cmask=1/")
    with pytest.raises(UsageError, match="no PMU 'gpu'"):
        counters.parse_event("gpu/event=1/")


@pytest.mark.parametrize("name", ["foo", "LLC-misses-load", "cycles:x"])
def test_unknown_names_are_refused(name):
    with pytest.raises(UsageError, match="unknown counter"):
        counters.parse_event(name)


def test_every_thread_is_counted_and_nothing_of_pinlab():
    """task-clock of a 2-thread CPU-bound program is its CPU time (rusage), well above its wall time
    when it has two CPUs: the worker thread is counted, not only the main thread; pinlab's own
    sampling is not."""
    threads = min(2, len(ALLOWED))
    record = pinlab.run(
        [str(native_path("pinlab-primes")), "--limit", "3M", "--threads", str(threads)],
        ALLOWED[:threads],
        counters="task-clock,context-switches",
        sample_ms=5,
    )
    assert record.exit_status == 0
    clock = record.counters["task-clock"]
    cpu_time = record.user_seconds + record.system_seconds
    assert 0.8 * cpu_time <= clock["value"] / 1e9 <= 1.25 * cpu_time + 0.02, (clock, cpu_time)
    assert clock["running_ns"] == clock["enabled_ns"]  # software events are never multiplexed
    # The bound above already holds the worker to account (rusage counts every thread); when the two
    # threads really ran side by side (not on a machine loaded by others), the count shows it too:
    # more CPU time than the wall time, which no single thread can have.
    if threads == 2 and cpu_time > 1.3 * record.wall_seconds:
        assert clock["value"] / 1e9 > record.wall_seconds, (clock, record.wall_seconds)


def test_page_faults_are_the_pages_the_program_touches():
    """64 MiB touched page by page with huge pages off: at least one fault per 4 KiB page."""
    script = "b = bytearray(64 << 20)"
    record = pinlab.run([sys.executable, "-c", script], counters="page-faults,minor-faults", thp="never")
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert pages <= record.counters["page-faults"]["value"] <= 4 * pages
    assert record.counters["minor-faults"]["value"] <= record.counters["page-faults"]["value"]


def test_context_switches_count_the_programs_sleeps():
    record = pinlab.run([sys.executable, "-c", "import time\nfor _ in range(100): time.sleep(0.001)"], counters="context-switches")
    assert 100 <= record.counters["context-switches"]["value"] <= record.voluntary_context_switches + record.involuntary_context_switches + 5


@pytest.mark.skipif(not HARDWARE_HERE, reason="no hardware performance counters on this machine (checked: software ones)")
def test_instructions_grow_with_the_work():
    def instructions(limit):
        record = pinlab.run([str(native_path("pinlab-primes")), "--limit", limit, "--threads", "1"], ALLOWED[:1], counters="instructions,cycles")
        return record.counters["instructions"]["value"]

    small, large = instructions("1M"), instructions("4M")
    assert large > 2.5 * small > 0


@pytest.mark.skipif(HARDWARE_HERE, reason="this machine has hardware counters")
def test_without_hardware_counters_a_notice_and_the_software_ones():
    result = run_pinlab("run", "--counters", "default", "--", "true")
    assert result.returncode == 0, result.stderr
    assert (
        "pinlab: notice: counters cycles, instructions, cache-misses cannot be counted: this machine has no hardware performance counters"
        in result.stderr
    )
    assert "task-clock" in result.stderr.splitlines()[-1]


def test_record_holds_the_counts(tmp_path):
    path = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "--counters", "task-clock,page-faults", "--record", str(path), "--", "true")
    assert result.returncode == 0, result.stderr
    data = json.loads(path.read_text())
    assert set(data["counters"]) == {"task-clock", "page-faults"} and data["counters"]["page-faults"]["value"] > 0
    assert data["options"]["counters"] == ["task-clock", "page-faults"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("nope", "unknown counter 'nope'"),
        ("cpu/event=1", "unknown counter"),
    ]
    + ([] if HARDWARE_HERE else [("cycles,instructions", "none of the counters asked for (cycles, instructions) can be counted here")]),
)
def test_bad_counters_are_one_line_and_status_2(value, message):
    result = run_pinlab("run", "--counters", value, "--", "true")
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_cache_event_names_are_spelled_as_perfs():
    # PERF_COUNT_HW_CACHE_LLC (2) | OP_PREFETCH (2) << 8 | RESULT_ACCESS (0) << 16
    assert counters.parse_event("LLC-prefetches").config == 2 | 2 << 8
    assert counters.parse_event("LLC-prefetch-misses").config == 2 | 2 << 8 | 1 << 16
    for wrong in ("LLC-prefetchs", "LLC-loades", "LLC-storees"):
        with pytest.raises(UsageError, match="unknown counter"):
            counters.parse_event(wrong)
