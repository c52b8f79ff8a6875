"""The kernel's automatic NUMA balancing, as a placement to compare against (``-s autonuma``).

Linux can move pages (and tasks) towards the node that uses them by itself: with
``kernel.numa_balancing`` = 1 it unmaps pages now and then, sees which CPU faults them back in and
migrates them there. It is the zero-effort baseline a pinning must beat. ``-s autonuma`` runs the
program unpinned with the balancing switched on for that run and put back as it was after, when
pinlab may write the setting (root); otherwise the run goes ahead with the setting as it is and
says so. Every run records the setting it ran under either way (``numa_balancing`` in the record).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pinlab.measure.linux import process_alive

SETTING = Path("/proc/sys/kernel/numa_balancing")

#: What each value of the setting means (kernel.numa_balancing is a bit mask since Linux 5.18:
#: bit 0 the balancing between nodes, bit 1 memory tiering). ``-s autonuma`` wants bit 0.
MEANING = {
    "0": "off",
    "1": "on: pages (and tasks) move towards the node whose CPUs use them",
    "2": "memory tiering only: hot pages of slow memory nodes are promoted to fast ones; no balancing between ordinary nodes",
    "3": "on, with memory tiering: pages move towards the node using them, hot pages of slow memory are promoted",
}


def current(setting: Path = SETTING) -> str | None:
    """The setting now ('0', '1', '2' for memory tiering, '3'), or None on a kernel without it."""
    try:
        return setting.read_text().strip()
    except OSError:
        return None


def holders_file(setting: Path = SETTING) -> Path:
    """Where the pinlab runs that hold ``setting`` changed are listed, with the value from before
    the first of them: one file per machine for the real setting, beside a stand-in (tests)."""
    if setting != SETTING:
        return setting.with_name(setting.name + ".pinlab-holders")
    directory = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    return directory / "pinlab-numa-balancing.json"


@contextlib.contextmanager
def _holders(path: Path) -> Iterator[dict]:
    """The holders' file, read and locked for the block; what the block leaves in the dict is
    written back (the file is removed when no run holds the setting any more)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        yield {"pids": []}  # nowhere to share the state: each run for itself, as before
        return
    with os.fdopen(fd, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            data = json.loads(f.read() or "{}")
        except ValueError:
            data = {}
        data["pids"] = [p for p in data.get("pids", []) if isinstance(p, int) and process_alive(p)]
        yield data
        if data["pids"]:
            f.seek(0)
            f.truncate()
            f.write(json.dumps(data))
            f.flush()
        else:
            with contextlib.suppress(OSError):
                path.unlink()


@contextlib.contextmanager
def balancing(wanted: bool | None, setting: Path = SETTING) -> Iterator[dict]:
    """Hold the balancing between nodes on (True) or off (False) for the ``with`` block, or leave
    it (None); memory tiering (bit 1) is kept as it is.

    Yields what the run ran under: ``{"value": "1", "was": "0", "set_by_pinlab": True, "wanted":
    True, "means": ...}``, with a ``"why"`` when the wanted state could not be set and
    ``"value_at_end"`` when the setting was changed meanwhile by someone else. Runs overlapping in
    time share the change: the first one sets it, the last one to end puts back the value from
    before the first (also when the others were killed), so that none ends another's setting
    under it; a run wanting the opposite of what another holds is told so and changes nothing.
    """
    before = current(setting)
    state: dict = {"value": before, "was": before, "set_by_pinlab": False, "wanted": wanted}
    if before is None or wanted is None:
        if wanted is not None:
            state["why"] = f"{setting} does not exist: this kernel has no automatic NUMA balancing (CONFIG_NUMA_BALANCING)"
        if before is not None:
            state["means"] = MEANING.get(before, "unknown to pinlab")
        yield state
        return
    path = holders_file(setting)
    with _holders(path) as held:
        now = current(setting) or before
        ours = held.get("set_to") == now and "original" in held  # a pinlab run (live or killed) set it so
        if not held["pids"] and not ours:
            held.clear()
            held.update(pids=[], original=now, set_to=None)
        state.update(value=now, was=held.get("original", now), set_by_pinlab=ours)
        bits = int(now) if now.isdigit() else 0
        target = str(bits | 1 if wanted else bits & ~1)
        if target != now:
            if held["pids"] and ours:
                state["why"] = f"another pinlab run (PID {', '.join(map(str, held['pids']))}) holds it at {now} until it ends"
                state["set_by_pinlab"] = False  # not for this run, which holds nothing
            else:
                try:
                    setting.write_text(target)
                    state.update(value=target, set_by_pinlab=True)
                    held["set_to"] = target
                except OSError as exc:
                    state["why"] = (
                        f"cannot write {setting} ({exc.strerror or exc}): run as root, or set it yourself with sysctl kernel.numa_balancing={target}"
                    )
        if state["set_by_pinlab"]:
            held["pids"].append(os.getpid())
    state["means"] = MEANING.get(state["value"], "unknown to pinlab")
    try:
        yield state
    finally:
        end = current(setting)
        if end != state["value"]:
            state["value_at_end"] = end
        if state["set_by_pinlab"]:
            with _holders(path) as held:
                if os.getpid() in held["pids"]:
                    held["pids"].remove(os.getpid())
                if not held["pids"] and held.get("set_to") == end and held.get("original") is not None:
                    with contextlib.suppress(OSError):
                        setting.write_text(held["original"])
