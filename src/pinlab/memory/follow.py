"""The data of re-pinned threads follows them to their new NUMA node.

Two controllers re-pin the threads of a running program: ``--balance`` (an idle node steals
threads, :mod:`pinlab.memory.balance`) and autopin (a new candidate placement,
``pinlab.autopin.controller``). Both then move each re-pinned thread's data to the node of its
new CPU, so that it keeps accessing local memory, and both know a thread's data the same two ways:
the regions the program attached to it (libpinlab-mem's ``pm_attach``,
:mod:`pinlab.memory.attached`) and the pages it touched first in most rounds of the page tracer
(:mod:`pinlab.memory.accessed`). :class:`Follow` is that move, once, with one way of counting what
it did: pages now on the node and pages left (per thread and in all), why the kernel left them,
and whether the program ended meanwhile (then the rest of its data went with it and is not called
left behind).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pinlab.memory import migrate
from pinlab.memory.migrate import ProcessEnded, errno_name

#: Pages of one ``move_pages`` call over an attached region: a call the kernel refuses whole costs
#: that call's pages, not the whole region's.
CHUNK_PAGES = 1024

#: Why pages were left when the page tracer had not answered the pause before they moved: the
#: kernel (before Linux 6.5) will not move a page still protected, and answers EFAULT for it.
TRACER_BUSY = "still protected (the tracer had not paused)"


@dataclass
class Follow:
    """Moves the data of the threads of process ``pid`` to ``node_of[tid]`` and counts what moved.

    Call :meth:`attached` and :meth:`accessed` in the order wanted; after the program ended
    (``program_ended``) both do nothing more.
    """

    pid: int
    node_of: Mapping[int, int]  # tid -> the node its data goes to (its new CPU's)
    pages_moved: int = 0  # pages now on their thread's node
    pages_left: int = 0  # pages the kernel did not move
    regions: int = 0  # attached regions tried
    attached_bytes: int = 0  # their bytes
    accessed_pages: int = 0  # pages the page tracer gave to the threads
    why: Counter = field(default_factory=Counter)  # why pages were left: errno name (or "node N") -> pages
    per_thread: dict[int, dict[str, int]] = field(default_factory=dict)  # tid -> its pages_moved and pages_left
    program_ended: bool = False

    def attached(self, regions: Iterable) -> None:
        """Each of ``regions`` (``tid``, ``start``, ``size``) whose thread is in ``node_of`` to that thread's node."""
        page = os.sysconf("SC_PAGE_SIZE")
        chunk = CHUNK_PAGES * page
        for region in regions:
            node = self.node_of.get(region.tid)
            if node is None or self.program_ended:
                continue
            self.regions += 1
            self.attached_bytes += region.size
            for start in range(region.start, region.start + region.size, chunk):
                size = min(chunk, region.start + region.size - start)
                if not self._move(region.tid, lambda: migrate.move_pages(self.pid, start, size, node, why=self.why), -(-size // page)):
                    return

    def accessed(self, tracker, tids: Iterable[int]) -> None:
        """The pages each of ``tids`` mostly accessed (``tracker``, a :class:`~pinlab.memory.accessed.PageTracker`)
        to its node; the tracer pauses meanwhile, so that it does not protect pages that are moving."""
        tids = [tid for tid in tids if tid in self.node_of]
        if not tids or self.program_ended:
            return
        owned = tracker.majority_pages(tids)
        self.accessed_pages += sum(len(owned[tid]) for tid in tids)
        with tracker.paused() as answered:
            refused_before = self.why["EFAULT"]
            try:
                for tid in tids:
                    mine = sorted(owned[tid])
                    if not self._move(tid, lambda: migrate.move_page_list(self.pid, mine, self.node_of[tid], why=self.why), len(mine)):
                        return
            finally:
                if not answered and self.why["EFAULT"] > refused_before:
                    # pages the kernel would not move because the tracer still protected them
                    self.why[TRACER_BUSY] += self.why.pop("EFAULT") - refused_before
                    if refused_before:
                        self.why["EFAULT"] = refused_before

    def _move(self, tid: int, move: Callable[[], tuple[int, int]], pages: int) -> bool:
        """Count ``move()`` for ``tid``; a move the kernel refuses whole leaves all ``pages``.
        False when the program ended: what had moved is counted, and nothing is moved after."""
        try:
            moved, left = move()
        except ProcessEnded as ended:
            self._count(tid, ended.moved, 0)
            self.program_ended = True
            return False
        except OSError as exc:
            self.why[errno_name(exc.errno or 0)] += pages
            moved, left = 0, pages
        self._count(tid, moved, left)
        return True

    def _count(self, tid: int, moved: int, left: int) -> None:
        self.pages_moved += moved
        self.pages_left += left
        mine = self.per_thread.setdefault(tid, {"pages_moved": 0, "pages_left": 0})
        mine["pages_moved"] += moved
        mine["pages_left"] += left

    def errors(self) -> str:
        """Why pages were left, as one phrase ("4 EFAULT, 2 node 1"); empty when none was."""
        return ", ".join(f"{n} {reason}" for reason, n in sorted(self.why.items()))
