"""The pages each thread of a running program mostly accesses, for programs without the memory API.

A program that attaches its data to its threads (``pm_attach``) tells pinlab what to move with a
thread. Other programs do not; for them ``pinlab run --balance-data accessed`` loads the page
tracer of ``pinlab trace --method pages`` (libpinlab-pagetrace) next to the pinning library: every
period it protects the program's large anonymous mappings, and the first thread to touch each
page in a round is counted for it. The counts live in a file the program maps shared (see
``native/tracer/pinlab_pagetrace.c``), which pinlab reads when it moves threads: a page belongs to
a thread when that thread was its first toucher in more than half of the rounds anyone touched it.

The pages a round keeps protected cannot be moved by ``move_pages(2)`` (the kernel answers EFAULT
for them), so pinlab pauses the rounds around a move (:meth:`PageTracker.paused`): the next round
gives every page its access back, says so in the file, and protects nothing until pinlab is done.

Costs and limits are the tracer's: a protection fault per page and round (a round every
``PERIOD_MS``, 100 ms), page granularity, and system calls made inside the C library meeting a protected page
(see the C file). It is an option, not a default.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pinlab.native import native_path

if TYPE_CHECKING:
    import numpy as np

TABLE_BITS = 20
SLOT_BYTES = 16  # one slot: key and count, two little-endian uint64 (the tracer's layout)
TABLE_BYTES = SLOT_BYTES << TABLE_BITS
CONTROL_BYTES = 4096  # after the table: pause (uint64, pinlab writes), paused (uint64, the tracer answers)
TID_BITS = 22
LIBRARY = "libpinlab-pagetrace.so"
#: A round every 100 ms: ten times fewer protection faults than ``pinlab trace``'s 10 ms; finding
#: which thread owns a page needs only a few rounds over a run, not a fine sample.
PERIOD_MS = 100


class PageTracker:
    """The page tracer for one run: the environment to give the program, and the counts it keeps.

    A context manager: on leaving, its files are removed.
    """

    def __init__(self, period_ms: int = PERIOD_MS):
        self.directory = tempfile.TemporaryDirectory(prefix="pinlab-accessed-")
        self.live = Path(self.directory.name) / "pages.table"
        with open(self.live, "wb") as f:
            f.truncate(TABLE_BYTES + CONTROL_BYTES)  # sparse: only the slots used take memory
        self.period_ms = period_ms
        self._pauses = 0

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the tracer added after what LD_PRELOAD already has (pinlab's pinning first)."""
        out = dict(env)
        out["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), str(native_path(LIBRARY))) if p)
        out["PINLAB_TRACE_DIR"] = self.directory.name
        out["PINLAB_PAGETRACE_LIVE"] = str(self.live)
        out["PINLAB_PAGETRACE_PERIOD_MS"] = str(self.period_ms)
        return out

    def counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import numpy as np  # heavy: only once a tracker runs, not on every launch

        """(tids, page numbers, counts) of every (thread, page) seen so far."""
        slot = np.dtype([("key", "<u8"), ("count", "<u8")])
        table = np.fromfile(self.live, dtype=slot, count=1 << TABLE_BITS)
        used = table[table["key"] != 0]
        keys = used["key"] - np.uint64(1)
        return (
            (keys & np.uint64((1 << TID_BITS) - 1)).astype(np.int64),
            (keys >> np.uint64(TID_BITS)).astype(np.int64),
            used["count"].astype(np.int64),
        )

    def majority_pages(self, tids: Iterable[int]) -> dict[int, list[int]]:
        """For each thread of ``tids``: the addresses of the pages it was the first toucher of in
        more than half of the rounds anyone touched them."""
        return majority_pages(*self.counts(), tids)

    @contextlib.contextmanager
    def paused(self, timeout: float = 2.0) -> Iterator[bool]:
        """No protection round while the block runs: it yields whether the program's tracer said
        every page has its access back (False when it did not answer within ``timeout`` seconds:
        it has ended, never loaded, or is blocked; moves may then leave protected pages behind)."""
        self._pauses += 1
        with open(self.live, "r+b") as f, mmap.mmap(f.fileno(), CONTROL_BYTES, offset=TABLE_BYTES) as control:
            control[0:8] = struct.pack("<Q", self._pauses)
            deadline = time.monotonic() + timeout
            answered = False
            while time.monotonic() < deadline:
                if struct.unpack("<Q", control[8:16])[0] == self._pauses:
                    answered = True
                    break
                time.sleep(0.001)
            try:
                yield answered
            finally:
                control[0:8] = struct.pack("<Q", 0)

    def close(self) -> None:
        self.directory.cleanup()

    def __enter__(self) -> PageTracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def majority_pages(tids: np.ndarray, pages: np.ndarray, counts: np.ndarray, wanted: Iterable[int]) -> dict[int, list[int]]:
    """Pages (as addresses) each wanted thread touched first in more than half of their rounds."""
    import numpy as np

    page_size = os.sysconf("SC_PAGE_SIZE")
    out: dict[int, list[int]] = {}
    if len(pages) == 0:
        return {tid: [] for tid in wanted}
    unique, index = np.unique(pages, return_inverse=True)
    total = np.bincount(index, weights=counts, minlength=len(unique))
    for tid in wanted:
        mine = tids == tid
        held = counts[mine] * 2 > total[index[mine]]
        out[tid] = [int(p) * page_size for p in pages[mine][held]]
    return out
