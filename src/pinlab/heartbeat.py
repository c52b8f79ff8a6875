"""The application heartbeat: a program reports the units of work its threads do; pinlab reads them.

It is autopin's measure of useful work where the machine has no hardware performance counters.
A C program includes ``pinlab_heartbeat.h`` (``pinlab workload heartbeat-header``) and calls
``pinlab_beat(units)``; a Python program calls :func:`beat`. The counts live in a file of shared
memory named by the environment variable ``PINLAB_HEARTBEAT``, in the layout the header describes:
a header line (magic ``PINLABHB``, version, number of slots, slots claimed) and one cache line per
thread ``{count, tid}``; the last slot is an overflow slot shared by the threads past the end
(tid 0). A reader never locks: every count is one aligned 64-bit word, so a snapshot may be a
little old but never torn.

Either side may create the file: it is written complete under a temporary name and then linked to
its name (an existing file wins), so a half-written header is never seen.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import time

from pinlab.errors import UsageError
from pinlab.measure import shared_files
from pinlab.measure.linux import environ_path
from pinlab.measure.shared_files import shared_directory
from pinlab.native import native_path

ENV = "PINLAB_HEARTBEAT"
MAGIC = b"PINLABHB"
VERSION = 1
LINE = 64
DEFAULT_SLOTS = 1024
_HEADER = struct.Struct("<8sIIQ")  # magic, version, slots, claimed


def file_bytes(slots: int) -> int:
    """Size of a heartbeat file with ``slots`` slots."""
    return LINE * (1 + slots)


def _write_new(path: str, slots: int) -> bool:
    """Create ``path`` complete (temporary file, then link); False when it already exists."""
    tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, file_bytes(slots))
        os.pwrite(fd, _HEADER.pack(MAGIC, VERSION, slots, 0), 0)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.close(fd)
        os.unlink(tmp)


def _check_slots(slots: int) -> None:
    if not isinstance(slots, int) or not 2 <= slots <= 1 << 20:
        raise UsageError(f"a heartbeat file needs 2 to {1 << 20} slots (got {slots!r})")


def ensure(path: str, slots: int = DEFAULT_SLOTS) -> str:
    """Create the heartbeat file at ``path`` unless it exists (as a beating program would)."""
    _check_slots(slots)
    if not os.path.exists(path):
        try:
            _write_new(path, slots)
        except OSError as exc:
            raise UsageError(f"cannot create the heartbeat file {path}: {exc.strerror}; choose a writable directory such as /dev/shm") from None
    return path


def create(directory: str | None = None, slots: int = DEFAULT_SLOTS) -> str:
    """A fresh heartbeat file in ``directory`` (default: /dev/shm, else TMPDIR, as the event ring).

    The caller passes its path to the program as ``PINLAB_HEARTBEAT`` and :func:`remove` s it after.
    """
    _check_slots(slots)
    directory = os.path.abspath(directory) if directory else shared_directory()
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise UsageError(f"cannot create a heartbeat file in {directory}: not a writable directory")

    try:
        path, fd = shared_files.create(directory, "heartbeat")
        os.ftruncate(fd, file_bytes(slots))  # the program starts after this: it never sees a partial header
        os.pwrite(fd, _HEADER.pack(MAGIC, VERSION, slots, 0), 0)
    except OSError as exc:
        raise UsageError(f"cannot create a heartbeat file in {directory}: {exc.strerror or exc}") from None
    return path


def remove(path: str | None) -> None:
    """Delete a heartbeat file; one already gone is fine."""
    shared_files.release(path)


def path_of_process(pid: int) -> str | None:
    """The ``PINLAB_HEARTBEAT`` a running process was started with (absolute), or None."""
    return environ_path(pid, ENV)


class Heartbeat:
    """Lock-free reader of a heartbeat file (created at ``path`` when missing)."""

    def __init__(self, path: str, create: bool = True) -> None:
        self.path = path
        if create:
            ensure(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise UsageError(f"cannot open the heartbeat file {path}: {exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            if size < file_bytes(2):
                raise UsageError(f"{path} is not a heartbeat file (too small: {size} bytes)")
            self._map: mmap.mmap | None = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        magic, version, slots, _ = _HEADER.unpack_from(self._map, 0)
        if magic != MAGIC or version != VERSION or file_bytes(slots) > size or slots < 2:
            self._map.close()
            raise UsageError(f"{path} is not a pinlab heartbeat file (version {VERSION}): give the file named by the program's PINLAB_HEARTBEAT")
        self.slots = slots
        self._words = memoryview(self._map)[: file_bytes(slots)].cast("Q")  # 8 words a line: count at 8i+8, tid at 8i+9

    def claimed(self) -> int:
        """Slots handed out so far (0: no thread has beaten yet)."""
        return self._words[2]

    def read(self) -> dict[int, int]:
        """tid -> units counted so far (slots of one tid added; the overflow slot left out)."""
        used = min(self.claimed(), self.slots - 1)
        counts = self._words[8 : 8 + 8 * used : 8].tolist()
        tids = self._words[9 : 9 + 8 * used : 8].tolist()
        result: dict[int, int] = {}
        for tid, count in zip(tids, counts):
            if tid:
                result[tid] = result.get(tid, 0) + count
        return result

    def total(self) -> int:
        """Units counted by every thread, those of the overflow slot included."""
        used = min(self.claimed(), self.slots - 1)
        return sum(self._words[8 : 8 + 8 * used : 8].tolist()) + self._words[8 * self.slots]

    def close(self) -> None:
        if self._map is not None:
            self._words.release()
            self._map.close()
            self._map = None

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_beat = None


def beat(units: int = 1) -> None:
    """Report ``units`` of work done by the calling thread (a no-op without ``PINLAB_HEARTBEAT``).

    Calls the C implementation (libpinlab-heartbeat.so, the header compiled once) so that Python
    and C threads claim slots with the same atomic operations; the file named by
    ``PINLAB_HEARTBEAT`` when the process first beats is the one used from then on.
    """
    global _beat
    if units < 0:
        raise UsageError(f"a heartbeat counts units of work done: {units} is negative")
    if _beat is None:
        function = ctypes.PyDLL(str(native_path("libpinlab-heartbeat.so"))).pinlab_heartbeat_beat
        function.argtypes = [ctypes.c_uint64]
        function.restype = None
        _beat = function
    _beat(units)
