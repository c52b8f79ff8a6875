"""pinlab's memory API (libpinlab-mem) on this machine: every call from C, and the Python binding.

On one node every policy lands on node 0 and migrations have nowhere to go, so this proves the
calls, their error codes, next touch under concurrent access and system calls, and the cost
file; where pages go on 2 and 4 nodes is proved by tests/vm/test_vm_memory.py with the same
program and the same expectations.
"""

import os
import re
import shutil
import subprocess
import threading

import pytest

from pinlab.memory.api import Memory, MemoryAPIError
from pinlab.memory.memmap import machine_nodes
from tests.conftest import PINLAB
from tests.memory import mem_expect

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def mem_check(tmp_path_factory):
    return mem_expect.build(str(PINLAB), tmp_path_factory.mktemp("mem") / "mem_check")


@needs_cc
def test_every_call_does_what_the_api_promises_here(mem_check, tmp_path):
    costs = tmp_path / "costs.txt"
    done = subprocess.run([str(mem_check)], capture_output=True, text=True, timeout=600, env={**os.environ, "PINLAB_MEM_COSTS": str(costs)})
    assert done.returncode == 0, done.stderr
    checks = mem_expect.parse(done.stdout)
    mem_expect.assert_as_promised(checks, nodes=max(machine_nodes()) + 1)
    assert mem_expect.only(checks, "costs")[0]["source"] == f"measured (stored in {costs})"
    text = costs.read_text()
    assert text.startswith("# pinlab memory costs 1\n") and f"nodes {','.join(map(str, machine_nodes()))}\n" in text
    again = subprocess.run([str(mem_check)], capture_output=True, text=True, timeout=600, env={**os.environ, "PINLAB_MEM_COSTS": str(costs)})
    assert mem_expect.only(mem_expect.parse(again.stdout), "costs")[0]["source"] == str(costs), "the stored costs are read, not measured again"


@needs_cc
def test_costs_of_another_machine_are_measured_again(mem_check, tmp_path):
    costs = tmp_path / "costs.txt"
    costs.write_text("# pinlab memory costs 1\nnodes 0,1,2,3,4,5,6,7\n0 0 1.0 1 1 1\n")
    done = subprocess.run([str(mem_check)], capture_output=True, text=True, timeout=600, env={**os.environ, "PINLAB_MEM_COSTS": str(costs)})
    cost = mem_expect.only(mem_expect.parse(done.stdout), "costs")[0]
    assert cost["source"].startswith("measured") and cost["latency_ns"] != 1.0


def test_the_python_binding_allocates_moves_and_locates(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLAB_MEM_COSTS", str(tmp_path / "costs.txt"))
    mem = Memory()
    nodes = machine_nodes()
    region = mem.alloc(3 << 20, "bind", [nodes[-1]])
    assert region.size == 3 << 20 and region.where() == {} and region.absent == 768
    view = region.view()
    view[:] = bytes(range(256)) * (region.size // 256)
    assert region.where() == {nodes[-1]: 768} and region.absent == 0
    region.next_touch("page")
    assert region.pending() == 768
    assert view[1000] == 1000 % 256 and region.pending() == 767, "one read moved one page, contents kept"
    region.migrate(nodes[0])
    assert region.pending() == 0 and region.where() == {nodes[0]: 768}
    assert bytes(view[:512]) == bytes(range(256)) * 2
    region.attach()
    assert region.attached() == threading.get_native_id() and mem.attached_bytes() >= 3 << 20
    region.detach()
    assert region.attached() == 0
    region.free()
    with pytest.raises(MemoryAPIError, match="not the start of a region") as error:
        region.migrate(0)
    assert error.value.code == -5
    with pytest.raises(MemoryAPIError, match="node 4242 does not exist"):
        mem.alloc(4096, "bind", [4242])
    free, total = mem.free_memory(nodes[0])
    assert 0 < free <= total
    assert mem.node_of_cpu(os.sched_getaffinity(0).pop()) in nodes and mem.current_node() in nodes
    assert mem.access_cost(nodes[0], nodes[0])["latency_ns"] > 0 and mem.migrate_cost(1 << 20, nodes[0], nodes[0]) == 0


def test_registering_memory_python_already_has():
    import mmap

    buffer = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    import ctypes

    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    mem = Memory()
    region = mem.register(address, 1 << 20)
    buffer[:4] = b"abcd"
    assert sum(region.where().values()) == 1
    with pytest.raises(MemoryAPIError, match="overlaps"):
        mem.register(address, 4096)
    with pytest.raises(MemoryAPIError, match="not page-aligned") as error:
        mem.register(address + 8, 4096)
    assert error.value.code == -3
    region.free()
    assert buffer[:4] == b"abcd", "freeing a registered region leaves the memory to its owner"


def test_the_python_binding_moves_a_thread_with_its_data_and_names_where_the_costs_came_from(tmp_path, monkeypatch):
    costs = tmp_path / "costs.txt"
    monkeypatch.setenv("PINLAB_MEM_COSTS", str(costs))
    mem = Memory()
    nodes = machine_nodes()
    cpu = max(os.sched_getaffinity(0))
    moved, go, done = {}, threading.Event(), threading.Event()

    def worker():
        region = mem.alloc(1 << 20, "bind", [nodes[0]])
        region.view()[:] = b"x" * region.size
        region.attach()
        moved["tid"], moved["region"] = threading.get_native_id(), region
        go.set()
        done.wait(120)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert go.wait(120)
        tid = moved["tid"]
        mem.move_thread(tid, cpu)
        assert os.sched_getaffinity(tid) == {cpu}
        assert moved["region"].where() == {mem.node_of_cpu(cpu): 256}, "the attached data went to the CPU's node"
        with pytest.raises(MemoryAPIError):
            mem.move_thread(tid, 100_000)
    finally:
        done.set()
        thread.join(120)
        moved["region"].free()
    mem.access_cost(nodes[0], nodes[0])  # the costs are read or measured on first use, once per process
    source = re.fullmatch(r"measured \(stored in (.+)\)|(/.+)", mem.costs_source())
    assert source and os.path.exists(source.group(1) or source.group(2)), mem.costs_source()
