"""pinlab memmap: resident bytes per NUMA node, per kind of mapping and per mapping.

The parser is pinned down on a numa_maps text with two nodes, huge pages, a file name with a
space and every kind of mapping; the real command on a real process that holds a known amount
of touched memory, against numastat -p's totals. Several nodes for real: tests/vm/test_vm_memory.py.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from pinlab.errors import UsageError
from pinlab.memory.memmap import machine_nodes, memmap, parse_numa_maps, watch
from tests.conftest import PINLAB, run_pinlab

TEXT = textwrap.dedent("""\
    55b1c8d4b000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=4
    55b1e7b13000 default heap anon=4 dirty=4 active=0 N0=3 N1=1 kernelpagesize_kB=4
    7f0000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
    7f1000000000 interleave:0-1 anon=4 dirty=4 N0=2 N1=2 kernelpagesize_kB=2048
    7f2000000000 default file=/anon_hugepage\\040(deleted) huge anon=1 dirty=1 N1=1 kernelpagesize_kB=2048
    7f3000000000 default file=/home/a b/data.bin dirty=3 mapped=3 N0=3 kernelpagesize_kB=4
    7f4000000000 default file=/dev/shm/ring mapped=1 N0=1 kernelpagesize_kB=4
    7f5000000000 prefer:0
    7ffd00000000 default stack anon=5 dirty=5 N0=5 kernelpagesize_kB=4
    """)
ENDS = {0x7F0000000000: 0x7F0000200000}


def test_numa_maps_are_read_into_bytes_per_node_kind_and_policy():
    maps = parse_numa_maps(TEXT, ENDS)
    assert [m.kind for m in maps] == ["file", "heap", "anon", "anon", "huge", "file", "shm", "anon", "stack"]
    heap, bound, interleaved, huge, spaced = maps[1], maps[2], maps[3], maps[4], maps[5]
    assert heap.bytes_per_node == {0: 3 * 4096, 1: 4096}
    assert bound.policy == "bind:1" and bound.bytes_per_node == {1: 512 * 4096} and bound.size == 2 * 1024 * 1024
    assert interleaved.bytes_per_node == {0: 2 * 2 << 20, 1: 2 * 2 << 20}  # 2 MiB pages weigh 2 MiB each
    assert huge.bytes_per_node == {1: 2 << 20}
    assert spaced.path == "/home/a b/data.bin" and spaced.resident == 3 * 4096
    assert maps[7].policy == "prefer:0" and maps[7].resident == 0 and maps[7].size is None
    shared = parse_numa_maps("7f6000000000 default file=/dev/zero\\040(deleted) dirty=2 N0=2 kernelpagesize_kB=4")[0]
    assert shared.kind == "shm", "MAP_SHARED|MAP_ANONYMOUS memory is shared memory, not a file"


def test_totals_per_node_and_kind_add_up():
    from pinlab.memory.memmap import MemMap

    look = MemMap(pid=1, time=0.0, mappings=parse_numa_maps(TEXT), nodes=[0, 1, 2])
    per_node = look.per_node()
    assert per_node[2] == 0, "a node without pages of the process is listed with 0"
    assert per_node[0] == (2 + 3 + 3 + 1 + 5) * 4096 + 2 * (2 << 20)
    assert per_node[1] == (1 + 512) * 4096 + 2 * (2 << 20) + (2 << 20)
    kinds = look.per_kind()
    assert sum(sum(row.values()) for row in kinds.values()) == look.resident == sum(per_node.values())
    assert kinds["stack"] == {0: 5 * 4096, 1: 0, 2: 0}
    assert json.loads(json.dumps(look.to_json()))["bytes_per_node"]["1"] == per_node[1]


HOLDER = (
    "import mmap, sys, time\n"
    "m = mmap.mmap(-1, {mib} << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
    "for i in range(0, len(m), 4096): m[i] = 1\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def holder():
    """A process holding 48 MiB of touched anonymous memory until its standard input closes."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(mib=48)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=10)


def test_a_real_process_shows_the_memory_it_touched(holder):
    look = memmap(holder.pid)
    assert look.nodes == machine_nodes()
    big = max(look.mappings, key=lambda m: m.resident)
    assert big.kind == "anon" and big.size == 48 << 20
    assert big.resident == 48 << 20, "every page of the mapping was touched, so every page is resident"
    assert set(big.bytes_per_node) <= set(look.nodes)
    with open(f"/proc/{holder.pid}/status") as status:
        rss = int(re.search(r"VmRSS:\s+(\d+) kB", status.read()).group(1)) * 1024
    assert look.resident >= 48 << 20 and abs(look.resident - rss) < 0.05 * rss


@pytest.mark.skipif(shutil.which("numastat") is None, reason="numastat (Debian package numactl) is not installed")
def test_memmap_matches_numastat_per_node(holder):
    out = subprocess.run(["numastat", "-p", str(holder.pid)], capture_output=True, text=True, check=True).stdout
    look = memmap(holder.pid)
    total = next(line for line in out.splitlines() if line.startswith("Total")).split()[1:]
    numastat_mb = [float(x) for x in total[:-1]]  # one column per node, then the total
    assert len(numastat_mb) == len(look.nodes)
    for node, mb in zip(look.nodes, numastat_mb):
        assert abs(look.per_node()[node] / 2**20 - mb) < 0.1, (node, mb, look.per_node())


def test_the_command_prints_the_summary_the_mappings_and_json(holder):
    text = run_pinlab("memmap", str(holder.pid))
    assert text.returncode == 0, text.stderr
    assert f"process {holder.pid}:" in text.stdout and "│ anon " in text.stdout and "48.00" in text.stdout, text.stdout
    as_json = run_pinlab("memmap", str(holder.pid), "--json")
    look = json.loads(as_json.stdout)
    assert look["pid"] == holder.pid and look["resident"] >= 48 << 20
    assert any(m["size"] == 48 << 20 and m["resident"] == 48 << 20 for m in look["mappings"])


def test_watch_follows_the_process_until_it_ends():
    # The process lives until the watcher has looked twice (a fixed lifetime could end before a
    # watcher started late on a busy machine), then ends.
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    watcher = subprocess.Popen(
        [str(PINLAB), "memmap", str(proc.pid), "--watch", "0.2", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines = [watcher.stdout.readline(), watcher.stdout.readline()]
    proc.stdin.close()
    proc.wait()
    out, err = watcher.communicate(timeout=600)
    result = subprocess.CompletedProcess(watcher.args, watcher.returncode, "".join(lines) + out, err)
    assert result.returncode == 0, result.stderr
    looks = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(looks) >= 2 and all(look["pid"] == proc.pid for look in looks)
    assert looks == sorted(looks, key=lambda look: look["time"])
    assert f"process {proc.pid} has ended" in result.stderr


def test_watch_stops_after_count_without_sleeping_after_the_last(holder):
    slept = []
    looks = list(watch(holder.pid, 0.5, count=3, sleep=slept.append))
    assert len(looks) == 3 and slept == [0.5, 0.5]


@pytest.mark.parametrize(
    "args, message",
    [
        (["999999999"], "no process 999999999"),
        (["0"], "PID 0: give the process id"),
        (["1", "--watch", "0"], "--watch must be a positive number"),
        (["1", "--top", "0"], "0 is not in the range"),
    ],
)
def test_bad_input_is_one_line(args, message):
    result = run_pinlab("memmap", *args)
    assert result.returncode == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_the_library_refuses_a_gone_process():
    proc = subprocess.Popen(["true"])
    proc.wait()
    time.sleep(0.05)
    with pytest.raises(UsageError, match="no process"):
        memmap(proc.pid)


def _a_kernel_thread() -> int | None:
    """A kernel thread visible here (PF_KTHREAD in /proc/PID/stat's flags), or None."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rpartition(")")[2].split()[6]) & 0x00200000:
                        return int(entry)
            except (OSError, IndexError, ValueError):
                continue
    return None


def test_a_kernel_thread_is_refused_not_shown_as_empty_tables():
    pid = _a_kernel_thread()
    if pid is None:
        pytest.skip("no kernel thread is visible in this PID namespace")
    result = run_pinlab("memmap", str(pid))
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr
        == f"pinlab: error: process {pid} is a kernel thread: it has no memory map of its own; give the PID of a program (pinlab ps lists them)\n"
    )


def test_a_thread_id_is_refused_with_its_process_named():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, threading; t = threading.Thread(target=sys.stdin.read); t.start(); print(t.native_id, flush=True); t.join()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        tid = int(proc.stdout.readline())
        assert tid != proc.pid
        result = run_pinlab("memmap", str(tid))
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (
            f"pinlab: error: {tid} is a thread of process {proc.pid}, and threads share their process's memory: "
            f"give the process, pinlab memmap {proc.pid}\n"
        )
        with pytest.raises(UsageError, match=f"thread of process {proc.pid}"):
            memmap(tid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
