"""``pinlab.memory.migrate.migrate_pages`` against this machine's kernel (one NUMA node is enough).

Moving pages between two nodes is proved in the emulated NUMA machine (tests/vm/test_vm_autopin.py);
here the system call itself: it reaches the kernel, returns how many pages were not moved, and
reports the kernel's refusals as OSError with the kernel's errno.
"""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import time

import pytest

from pinlab.live import pages_per_node
from pinlab.memory.memmap import machine_nodes
from pinlab.memory.migrate import ProcessEnded, errno_name, migrate_pages, move_page_list
from tests.conftest import run_pinlab


def _migrate_or_skip(pid: int, old: list[int], new: list[int]) -> int:
    try:
        return migrate_pages(pid, old, new)
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            pytest.skip("this kernel has no migrate_pages (built without NUMA support)")
        raise


def test_moving_own_pages_to_the_node_they_are_on_leaves_none_behind():
    nodes = sorted(n for n, pages in pages_per_node(os.getpid()).items() if pages)
    if not nodes:
        pytest.skip("this kernel shows no pages per node in /proc/self/numa_maps")
    node = nodes[0]
    before = pages_per_node(os.getpid())
    assert _migrate_or_skip(os.getpid(), [node], [node]) == 0
    after = pages_per_node(os.getpid())
    assert after.get(node, 0) > 0 and set(after) == set(before)  # nothing went anywhere else


def test_pid_0_means_the_calling_process():
    # The kernel reads pid 0 as "the caller": the same answer as the caller's own pid.
    if not pages_per_node(os.getpid()):
        pytest.skip("this kernel shows no pages per node in /proc/self/numa_maps")
    assert _migrate_or_skip(0, [0], [0]) == 0


def test_a_process_that_has_ended_is_esrch():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = int(child.stdout)
    assert not os.path.exists(f"/proc/{gone}"), "the pid was reused already; run again"
    with pytest.raises(OSError) as raised:
        _migrate_or_skip(gone, [0], [0])
    assert raised.value.errno == errno.ESRCH
    assert raised.value.strerror == os.strerror(errno.ESRCH)


def test_a_pid_beyond_pid_max_is_esrch():
    with open("/proc/sys/kernel/pid_max") as limit:
        beyond = int(limit.read()) + 1
    with pytest.raises(OSError) as raised:
        _migrate_or_skip(beyond, [0], [0])
    assert raised.value.errno == errno.ESRCH


@pytest.mark.parametrize("node", [-1, 1024])
def test_node_numbers_outside_the_mask_are_refused_before_the_call(node):
    with pytest.raises(ValueError, match=f"node {node} out of range"):
        migrate_pages(os.getpid(), [node], [0])


def test_pinlab_migrate_moves_a_process_to_the_nodes_it_is_told_and_says_where_its_pages_are():
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = bytearray(8 << 20); print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "ready\n"
        nodes = sorted(pages_per_node(holder.pid))
        result = run_pinlab("migrate", str(holder.pid), "--to", str(nodes[0]))
        assert result.returncode == 0, result.stderr
        after = pages_per_node(holder.pid)
        assert f"process {holder.pid}: pages per node before " in result.stdout
        assert result.stdout.strip().endswith("after " + ", ".join(f"{n}: {c}" for n, c in sorted(after.items())))
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


@pytest.mark.parametrize(
    "args, message",
    [
        (["999999999", "--to", "0"], "no process 999999999"),
        (["{me}", "--to", "4095"], "node 4095 does not exist or has no memory"),
        (["{me}", "--to", "0", "--from", "x"], "malformed node list of --from"),
        (["{me}"], "Missing option '--to'"),
    ],
)
def test_pinlab_migrate_refuses_bad_input_in_one_line(args, message):
    result = run_pinlab("migrate", *[a.format(me=os.getpid()) for a in args])
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1


def _a_page_of_ours() -> int:
    page = os.sysconf("SC_PAGE_SIZE")
    buffer = ctypes.create_string_buffer(2 * page)
    _a_page_of_ours.keep = buffer  # alive while the test runs
    return ctypes.addressof(buffer) // page * page + page


def test_moving_pages_of_a_process_that_has_ended_says_so_and_what_had_moved():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = int(child.stdout)
    assert not os.path.exists(f"/proc/{gone}"), "the pid was reused already; run again"
    with pytest.raises(ProcessEnded) as raised:
        move_page_list(gone, [_a_page_of_ours()], 0)
    assert raised.value.errno == errno.ESRCH and raised.value.moved == 0
    assert isinstance(raised.value, ProcessLookupError)


def test_a_process_exiting_or_a_zombie_has_ended_too():
    """The kernel answers EINVAL for a process that has released its memory (exiting, or a
    zombie not yet waited for): it has ended as far as its pages are concerned."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    try:
        with pytest.raises(ProcessEnded):
            move_page_list(child.pid, [_a_page_of_ours()], 0)
    finally:
        child.wait()


def test_a_live_process_is_not_taken_for_ended():
    # one of its own pages, moved to a node with memory: there (or busy), never "ended"
    node = machine_nodes()[0]
    address = _a_page_of_ours()
    ctypes.memset(address, 1, 1)
    there, left = move_page_list(os.getpid(), [address], node)
    assert (there, left) in ((1, 0), (0, 1))  # (a busy page may stay; never an exception)


@pytest.mark.parametrize("code, name", [(errno.EBUSY, "EBUSY"), (errno.ENOENT, "ENOENT"), (99999, "99999")])
def test_errno_names(code, name):
    assert errno_name(code) == name


def test_from_and_to_pair_nodes_in_the_order_written():
    from pinlab.errors import UsageError
    from pinlab.memory.migrate import pairwise_steps

    assert pairwise_steps([0, 1], [2, 3]) == [([0, 1], [2, 3])], "ascending pairs: one call"
    # one call would pair 0 with 0 and 3 with 1: node 0 is emptied into 1 first, then receives node 3's pages
    assert pairwise_steps([0, 3], [1, 0]) == [([0], [1]), ([3], [0])]
    assert pairwise_steps([3, 0, 1], [0, 1, 2]) == [([1], [2]), ([0], [1]), ([3], [0])]
    with pytest.raises(UsageError, match=r"cycle \(0->1,1->0\)"):
        pairwise_steps([0, 1], [1, 0])
    with pytest.raises(UsageError, match="names node 0 twice"):
        pairwise_steps([0, 0], [1, 2])
