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
from collections.abc import Iterator
from pathlib import Path

SETTING = Path("/proc/sys/kernel/numa_balancing")


def current(setting: Path = SETTING) -> str | None:
    """The setting now ('0', '1', '2' for memory tiering, '3'), or None on a kernel without it."""
    try:
        return setting.read_text().strip()
    except OSError:
        return None


@contextlib.contextmanager
def balancing(wanted: bool | None, setting: Path = SETTING) -> Iterator[dict]:
    """Hold the balancing on (True) or off (False) for the ``with`` block, or leave it (None).

    Yields what the run ran under: ``{"value": "1", "was": "0", "set_by_pinlab": True}``, with a
    ``"why"`` when the wanted state could not be set. The previous value is written back after,
    even when the block raises.
    """
    before = current(setting)
    state: dict = {"value": before, "was": before, "set_by_pinlab": False, "wanted": wanted}
    target = None if wanted is None else ("1" if wanted else "0")
    enabled = before is not None and before != "0"
    if target is not None and (wanted != enabled):
        if before is None:
            state["why"] = f"{setting} does not exist: this kernel has no automatic NUMA balancing (CONFIG_NUMA_BALANCING)"
        else:
            try:
                setting.write_text(target)
                state.update(value=target, set_by_pinlab=True)
            except OSError as exc:
                state["why"] = (f"cannot write {setting} ({exc.strerror or exc}): run as root, or set it yourself with "
                                f"sysctl kernel.numa_balancing={target}")
    try:
        yield state
    finally:
        if state["set_by_pinlab"] and before is not None:
            try:
                setting.write_text(before)
            except OSError:
                pass
