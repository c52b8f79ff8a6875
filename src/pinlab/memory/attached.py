"""The regions a program attached to its threads through libpinlab-mem, read from outside.

A program using pinlab's memory API attaches regions to threads (``pm_attach``). When it runs
under ``pinlab run --balance`` or ``pinlab autopin --migrate-pages attached``, pinlab creates a
small file, names it in ``PINLAB_MEM_ATTACH``, and the library mirrors its region table there
(layout in ``native/memory/pinlab_mem.c``). pinlab reads it without locks (each slot carries a
sequence number that is odd while the program writes it) to learn which data belongs to a thread
it moves, and moves that data with ``move_pages(2)``. Programs that do not use the API never
claim the file: they have no attachments, and their threads move without data.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pinlab.measure import shared_files
from pinlab.measure.linux import environ_path
from pinlab.measure.shared_files import shared_directory

MAGIC = b"PLMATT1\0"
SLOTS = 4096  # MAX_REGIONS of the library
_HEADER = struct.Struct("=8sii")
_SLOT = struct.Struct("=QQQii")
_SEQ = struct.Struct("=Q")
SIZE = _HEADER.size + SLOTS * _SLOT.size
ENV = "PINLAB_MEM_ATTACH"


@dataclass(frozen=True)
class Attachment:
    """One region of the program and the thread it is attached to (0: none)."""

    start: int
    size: int
    tid: int


class AttachTable:
    """The file a launched program publishes its regions in; a context manager that removes it."""

    def __init__(self, directory: str | None = None):
        name, fd = shared_files.create(directory or shared_directory(), "attach")  # held until close()
        try:
            os.pwrite(fd, _HEADER.pack(MAGIC, 0, SLOTS) + bytes(SLOTS * _SLOT.size), 0)
        except BaseException:
            shared_files.release(name)
            raise
        self.path = Path(name)

    def env(self) -> dict[str, str]:
        return {ENV: str(self.path)}

    def claimed_by(self) -> int:
        """The pid of the process that publishes here (0: none has loaded the library yet)."""
        return read_header(self.path.read_bytes()[: _HEADER.size])[1]

    def read(self) -> list[Attachment]:
        return read_attachments(self.path)

    def close(self) -> None:
        shared_files.release(str(self.path))

    def __enter__(self) -> AttachTable:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_header(data: bytes) -> tuple[bytes, int, int]:
    return _HEADER.unpack_from(data, 0)


def read_attachments(path: str | os.PathLike, attempts: int = 4) -> list[Attachment]:
    """The regions in use in a published table. Each slot is read between two readings of its
    sequence number; a slot the program is rewriting meanwhile is read again (up to ``attempts``
    times, then left out of this reading)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != SIZE:
            return []
        with mmap.mmap(f.fileno(), SIZE, prot=mmap.PROT_READ) as view:
            if read_header(view[: _HEADER.size])[0] != MAGIC:
                return []
            regions = []
            for i in range(SLOTS):
                offset = _HEADER.size + i * _SLOT.size
                for _ in range(attempts):
                    seq, start, size, tid, used = _SLOT.unpack_from(view, offset)
                    if seq % 2 == 0 and _SEQ.unpack_from(view, offset)[0] == seq:
                        if used:
                            regions.append(Attachment(start, size, tid))
                        break
    return regions


def table_of_process(pid: int) -> str | None:
    """The attachment table a running process publishes in (its ``PINLAB_MEM_ATTACH``, claimed
    by it), or None."""
    path = environ_path(pid, ENV)
    if path is None:
        return None
    try:
        with open(path, "rb") as table:
            head = table.read(_HEADER.size)
    except OSError:
        return None
    return path if len(head) == _HEADER.size and read_header(head)[:2] == (MAGIC, pid) else None
