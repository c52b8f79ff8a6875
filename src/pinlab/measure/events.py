"""The event ring shared by the preload library and pinlab: its format and a reader.

``pinlab run`` makes the ring (a header page, then room for lines, see native/preload); the
program's processes append lines to it concurrently while pinlab reads it, after the run
(:mod:`pinlab.launch.runner`) or while the program runs (:mod:`pinlab.live`).
"""

from __future__ import annotations

#: A header page (magic, capacity, used, dropped, then the slot table), then lines.
RING_MAGIC = b"PINLABE1"
RING_HEADER = 4096
RING_CAPACITY = 64 << 20  # sparse: only the pages written take space (about 150 bytes per thread)


def event_lines(path: str, warnings: list[str] | None = None, *, complete_only: bool = False) -> list[str]:
    """The lines of an event ring (or of a plain event file).

    ``complete_only`` is for a ring still being written: a line is kept only once its newline
    is there, so a line a process is copying right now (its bytes after the part copied are
    still zero) never comes back cut short. Without it, a last line without newline is kept
    (a process killed in the middle of writing, read after the run).
    """
    with open(path, "rb") as events:
        head = events.read(RING_HEADER)
        if head[:8] != RING_MAGIC:
            data = head + events.read()
            dropped = 0
        else:
            used = int.from_bytes(head[16:24], "little")
            dropped = int.from_bytes(head[24:32], "little")
            data = events.read(min(used, RING_CAPACITY))
    if dropped and warnings is not None:
        warnings.append(f"{dropped} thread events did not fit in the event file and are missing from the record")
    if complete_only:
        data = data[: data.rfind(b"\n") + 1]
    # A process killed between reserving room and copying its line (or still copying it) leaves
    # zero bytes before the next line: keep what follows the last zero byte of each segment.
    lines = (segment.rsplit("\0", 1)[-1] for segment in data.decode("utf-8", "replace").split("\n"))
    return [line for line in lines if line]
