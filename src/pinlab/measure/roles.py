"""What ``pinlab run`` recorded about a running program's threads: their roles and creation order.

The preload library writes one ``thread`` line per thread into the program's event ring (the
file named by ``PINLAB_EVENTS`` in its environment), as each thread starts. The ring is read
here while the program's processes keep appending to it: only lines already complete are
believed (see :func:`pinlab.measure.events.event_lines`).
"""

from __future__ import annotations

import os

from pinlab.measure.events import event_lines

ROLES = ("main", "worker", "helper", "nested")
_REQUIRED = ("pid", "index", "tid", "slot", "planned")


def _thread_entry(line: str) -> tuple[int, dict] | None:
    """(tid, its entry) from a ``thread`` line, None for any other line or a malformed one."""
    kind, *words = line.split(" ")
    if kind != "thread":
        return None
    fields = dict(w.split("=", 1) for w in words if "=" in w)
    try:
        numbers = {key: int(fields[key]) for key in _REQUIRED}
    except (KeyError, ValueError):
        return None
    if fields.get("role") not in ROLES or numbers["tid"] <= 0 or numbers["index"] < 0:
        return None
    return numbers["tid"], {
        "index": numbers["index"],
        "role": fields["role"],
        "pid": numbers["pid"],
        "slot": numbers["slot"] if numbers["slot"] >= 0 else None,
        "planned": numbers["planned"] if numbers["planned"] >= 0 else None,
        "library": fields.get("lib") if fields.get("lib") not in (None, "", "-") else None,
    }


def roles_from_events(path: str) -> dict[int, dict]:
    """tid -> {index, role, slot, pid, planned, library} for every thread the event ring at ``path`` names.

    Safe on a ring being written: lines not yet complete are left out (the thread then reads as
    unknown until a later look). A tid named twice (reused by the kernel after a thread ended)
    keeps its latest line. An unreadable or vanished ring (the run ended) gives an empty dict.
    """
    try:
        lines = event_lines(path, complete_only=True)
    except OSError:
        return {}
    found: dict[int, dict] = {}
    for line in lines:
        entry = _thread_entry(line)
        if entry is not None:
            found[entry[0]] = entry[1]
    return found


def events_path(pid: int) -> str | None:
    """The event ring of a process started by ``pinlab run`` (``PINLAB_EVENTS`` in its
    environment), None for another process, one whose environment is not ours to read, or once
    the ring is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            data = environ.read()
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(b"PINLAB_EVENTS="):
            path = os.fsdecode(entry[len(b"PINLAB_EVENTS=") :])
            return path if path and os.path.isfile(path) else None
    return None


def pinlab_processes() -> list[int]:
    """The processes of this user running under ``pinlab run``, in pid order: those whose event
    ring names their own main thread (so the preload library runs in them; pinlab-exec, which
    only passes the environment on, is left out)."""
    uid = os.getuid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        path = events_path(pid)
        if path is not None and roles_from_events(path).get(pid, {}).get("pid") == pid:
            found.append(pid)
    return sorted(found)
