"""The plan as it is now, shared with the preload library while autopin re-pins the program.

``pinlab run`` hands the plan to the preload library once, in ``PINLAB_CPUS``. Under autopin the
plan changes while the program runs, and a thread created during probing must start on the
candidate being probed, not on the first one: the library maps this file (``PINLAB_LIVE_PLAN``)
and takes each new thread's CPU from it. Layout (native byte order, see ``struct live_plan`` in
native/preload/pinlab_preload.c): magic ``PINLABP1``, a generation counter, the number of CPUs,
4 bytes unused, then one int32 CPU per slot. Only pinlab writes it; the program maps it read-only.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Sequence

from pinlab.measure import shared_files

MAGIC = b"PINLABP1"
_HEADER = struct.Struct("=8sQII")


class LivePlan:
    """A live plan file for one program: create it, :meth:`write` each new candidate, :meth:`close`."""

    def __init__(self, cpus: Sequence[int], directory: str) -> None:
        self.ncpus = len(cpus)
        self.generation = 0
        self.path, fd = shared_files.create(directory, "plan")  # held until close(): removed at the next start if pinlab is killed
        try:
            size = _HEADER.size + 4 * self.ncpus
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            shared_files.release(self.path)
            raise
        self._map[: _HEADER.size] = _HEADER.pack(MAGIC, 0, self.ncpus, 0)
        self.write(cpus)

    def write(self, cpus: Sequence[int]) -> None:
        """Publish a new plan: the CPUs first, then the generation (readers take CPUs one by one)."""
        if len(cpus) != self.ncpus:
            raise ValueError(f"a live plan keeps its length ({self.ncpus} CPUs), got {len(cpus)}")
        struct.pack_into(f"={self.ncpus}i", self._map, _HEADER.size, *cpus)
        self.generation += 1
        struct.pack_into("=Q", self._map, 8, self.generation)

    def read(self) -> list[int]:
        return list(struct.unpack_from(f"={self.ncpus}i", self._map, _HEADER.size))

    def close(self) -> None:
        self._map.close()
        shared_files.release(self.path)
