"""The event ring shared by the preload library and pinlab: its format and a reader.

``pinlab run`` makes the ring (a header page, then room for lines, see native/preload); the
program's processes append lines to it concurrently while pinlab reads it, after the run
(:mod:`pinlab.launch.runner`) or while the program runs (:mod:`pinlab.live`).

Lines are key=value words, the first word the event's type (the list is at the top of
native/preload/pinlab_preload.c). The run's reader takes most of them apart where it uses them;
the ``affinity`` events, the program's own calls that change a mask, have their meaning here
(:class:`AffinityCall`), for the run record and whoever else asks who changed a mask.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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


def event_fields(line: str) -> tuple[str, dict[str, str]]:
    """An event line's type and its key=value words."""
    kind, *words = line.split(" ")
    return kind, dict(w.split("=", 1) for w in words if "=" in w)


def since_start(ns: str | None, start_ns: int) -> float | None:
    """An event's CLOCK_MONOTONIC nanoseconds as seconds after the start, rounded up to the
    microsecond (the samples' times are rounded down, so a sample never seems to follow an event
    it preceded); None when the event has no time."""
    if not ns or not ns.isdigit():
        return None
    return -((start_ns - int(ns)) // 1000) / 1e6


@dataclass(frozen=True)
class AffinityCall:
    """One call of the program's (its code or a library's) that set a thread's mask.

    The preload library forwards the program's ``sched_setaffinity`` and ``pthread_setaffinity_np``
    to the C library and records each, as it records a mask put on the attributes of a thread the
    program creates (``pthread_attr_setaffinity_np``, read at ``pthread_create``). pinlab's own
    pinning is never among them. A change made by a raw system call (LLVM's libomp binds so) or by
    another process is not: only the sampler's ``mask_changes`` show it.
    """

    t: float | None  #: seconds after the start (the run record's time base), at the call
    pid: int
    tid: int  #: the calling thread
    target_tid: int | None  #: the thread whose mask it set (None: not known)
    call: str  #: sched_setaffinity, pthread_setaffinity_np or pthread_attr_setaffinity_np
    library: str | None  #: the object that called: the executable or a library, as a path
    old: str | None  #: CPU list: the target's mask before (for a new thread: its creator's); None if unreadable
    new: str | None  #: CPU list asked for ("" when empty); None if unreadable
    result: int  #: 0, or the errno the call failed with (pthread_create's result for the attribute)
    applied: bool  #: False when it failed, or when pinlab's plan replaced the attribute's mask

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def affinity_call(fields: dict[str, str], start_ns: int) -> AffinityCall | None:
    """The call an ``affinity`` event's fields describe, None when they are not one (a cut line)."""
    try:
        target = int(fields["target"])
        return AffinityCall(
            t=since_start(fields.get("t"), start_ns),
            pid=int(fields["pid"]),
            tid=int(fields["tid"]),
            target_tid=target if target > 0 else None,
            call=fields["call"],
            library=None if fields.get("lib", "-") == "-" else fields["lib"],
            old=None if fields["old"] == "-" else fields["old"],
            new=None if fields["new"] == "-" else fields["new"],
            result=int(fields["result"]),
            applied=fields["applied"] == "1",
        )
    except (KeyError, ValueError):
        return None
