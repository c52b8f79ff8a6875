"""Roles read from an event ring that the program's processes are still writing: a line being
copied is never taken for a thread, every complete line is; and the ring of a real run."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.live import events_path, roles_from_events
from pinlab.measure.events import RING_HEADER, RING_MAGIC, event_lines
from tests.live.conftest import ALLOWED

ROLE_NAMES = ["main", "worker", "helper", "nested"]


def thread_line(pid: int, index: int, tid: int, role: str, slot: int, planned: int, lib: str) -> bytes:
    return (
        f"thread pid={pid} index={index} tid={tid} role={role} slot={slot} planned={planned} cpu=0 mask=0-1 creator=0 t=123456789 lib={lib}\n"
    ).encode()


threads = st.lists(
    st.tuples(
        st.integers(1, 4_000_000),
        st.integers(0, 500),
        st.sampled_from(ROLE_NAMES),
        st.integers(-1, 64),
        st.integers(-1, 64),
        st.sampled_from(["-", "/usr/lib/libgomp.so.1", "/opt/mythread", "/usr/lib/libmpi.so"]),
    ),
    max_size=12,
    unique_by=lambda t: t[0],
)
#: A line being written (for a thread no complete line names), and which of its bytes are copied yet.
WRITING = thread_line(4242, 7, 9_999_999, "worker", 1, 1, "/opt/mythread")
in_flight = st.lists(
    st.tuples(st.integers(0, 12), st.lists(st.booleans(), min_size=len(WRITING), max_size=len(WRITING)).filter(lambda k: not all(k))), max_size=4
)


def ring(data: bytes, used: int) -> bytes:
    return RING_MAGIC + (1 << 20).to_bytes(8, "little") + used.to_bytes(8, "little") + bytes(8) + bytes(RING_HEADER - 32) + data


@settings(max_examples=300, deadline=None)
@given(threads=threads, writing=in_flight)
def test_lines_being_written_are_never_read_as_threads(tmp_path_factory, threads, writing):
    pid = 4242
    complete = [(tid, thread_line(pid, index, tid, role, slot, planned, lib)) for tid, index, role, slot, planned, lib in threads]
    truth = {
        tid: {
            "index": index,
            "role": role,
            "pid": pid,
            "slot": slot if slot >= 0 else None,
            "planned": planned if planned >= 0 else None,
            "library": None if lib == "-" else lib,
        }
        for tid, index, role, slot, planned, lib in threads
    }
    pieces = [line for _, line in complete]
    for position, copied in writing:
        pieces.insert(min(position, len(pieces)), bytes(b if k else 0 for b, k in zip(WRITING, copied)))  # the rest still zero
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("ring") / "events.bin"
    path.write_bytes(ring(data, len(data)))
    found = roles_from_events(str(path))
    assert found == truth


def test_a_last_line_without_its_newline_is_left_out_while_the_ring_is_being_written(tmp_path):
    line = b"thread pid=1 index=1 tid=12 role=worker slot=1 planned=0 cpu=0 mask=0 creator=1 t=1 lib=-\n"
    cut = line + line.replace(b"tid=12", b"tid=1234")[:40]  # "... tid=12" of tid=1234: not yet a thread 12
    path = tmp_path / "events.bin"
    path.write_bytes(ring(cut, len(cut)))
    assert len(event_lines(str(path))) == 2  # after the run, a process killed mid-line: kept, as before
    assert event_lines(str(path), complete_only=True) == [line.decode().strip()]
    assert list(roles_from_events(str(path))) == [12]


def test_a_vanished_ring_gives_no_roles(tmp_path):
    assert roles_from_events(str(tmp_path / "gone.bin")) == {}


def test_events_path_names_the_ring_of_a_program_under_pinlab_run_only(start_program):
    under = start_program(threads=1, pinlab=["-c", str(ALLOWED[0])])
    path = events_path(under.pid)
    assert path is not None and os.path.isfile(path)
    roles = roles_from_events(path)
    assert [roles[tid]["role"] for tid in under.tids] == ["main", "worker"]
    assert all(roles[tid]["pid"] == under.pid for tid in under.tids)
    direct = start_program(threads=1)
    assert events_path(direct.pid) is None
    assert under.wait() == 0
