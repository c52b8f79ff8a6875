"""The move of re-pinned threads' data that --balance and autopin share, on this process's own pages."""

import mmap
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

from pinlab.measure import linux
from pinlab.memory.follow import Follow


def _pages(count):
    """``count`` written pages of this process and the address of the first."""
    import ctypes

    buffer = mmap.mmap(-1, count * mmap.PAGESIZE)
    buffer.write(b"x" * len(buffer))
    return buffer, ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def test_each_thread_s_region_goes_to_its_own_node_and_others_stay():
    node = min(linux.numa_nodes())
    buffer, start = _pages(8)
    page = mmap.PAGESIZE
    follow = Follow(os.getpid(), {11: node, 12: node})
    regions = [
        SimpleNamespace(tid=11, start=start, size=3 * page),
        SimpleNamespace(tid=12, start=start + 3 * page, size=3 * page),
        SimpleNamespace(tid=99, start=start + 6 * page, size=2 * page),  # not re-pinned: stays
    ]
    follow.attached(regions)
    assert (follow.regions, follow.attached_bytes) == (2, 6 * page)
    assert follow.per_thread == {11: {"pages_moved": 3, "pages_left": 0}, 12: {"pages_moved": 3, "pages_left": 0}}
    assert (follow.pages_moved, follow.pages_left, follow.errors(), follow.program_ended) == (6, 0, "", False)
    buffer.close()


def test_a_region_larger_than_one_call_is_moved_in_chunks_and_counted_whole():
    from pinlab.memory import follow as module

    node = min(linux.numa_nodes())
    pages = module.CHUNK_PAGES + 5
    buffer, start = _pages(pages)
    follow = Follow(os.getpid(), {threading.get_native_id(): node})
    follow.attached([SimpleNamespace(tid=threading.get_native_id(), start=start, size=pages * mmap.PAGESIZE)])
    assert (follow.pages_moved, follow.pages_left) == (pages, 0)
    buffer.close()


def test_after_the_program_ended_nothing_more_is_tried():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    follow = Follow(int(child.stdout), {7: 0})
    follow.attached([SimpleNamespace(tid=7, start=0x10000000, size=2**20), SimpleNamespace(tid=7, start=0x20000000, size=2**20)])
    assert follow.program_ended and follow.regions == 1 and (follow.pages_moved, follow.pages_left) == (0, 0)
    assert follow.per_thread == {7: {"pages_moved": 0, "pages_left": 0}}


class _Tracker:
    """A page tracker that owns ``pages`` for thread 7 and answers the pause or not."""

    def __init__(self, pages, answers):
        self.pages, self.answers = pages, answers

    def majority_pages(self, tids):
        return {tid: self.pages for tid in tids}

    def paused(self):
        import contextlib

        @contextlib.contextmanager
        def pause():
            yield self.answers

        return pause()


def _refused_as_protected(pid, addresses, node, why=None):
    """What a kernel before 6.5 answers for pages still mapped PROT_NONE: EFAULT, each left."""
    addresses = list(addresses)
    why["EFAULT"] += len(addresses)
    return 0, len(addresses)


def test_pages_left_protected_because_the_tracer_did_not_pause_say_so(monkeypatch):
    from pinlab.memory import follow as module

    monkeypatch.setattr(module.migrate, "move_page_list", _refused_as_protected)
    late = Follow(os.getpid(), {7: 0})
    late.why["EFAULT"] = 2  # from an earlier move, not this one
    late.accessed(_Tracker([0x1000, 0x2000, 0x3000], answers=False), [7])
    assert (late.accessed_pages, late.pages_moved, late.pages_left) == (3, 0, 3)
    assert late.why == {"EFAULT": 2, module.TRACER_BUSY: 3}, late.why
    on_time = Follow(os.getpid(), {7: 0})
    on_time.accessed(_Tracker([0x1000], answers=True), [7])
    assert on_time.why == {"EFAULT": 1}, "a refusal after the tracer paused is the kernel's own"
