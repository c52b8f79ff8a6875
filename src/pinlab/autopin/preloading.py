"""Loading the verdict's statistics where they cost the program nothing.

autopin's verdict needs numpy and scipy.stats, whose import takes about a second of CPU (more on
a busy machine or a large Python environment). Loaded when the verdict is due, they keep the
program on its last-probed candidate meanwhile; loaded beside the program, they slow the
candidate being probed and bias its rate; loaded before the program starts, they delay its
start by that second, a fixed cost that weighs on a short run.

So they are loaded by a thread of their own pinned to CPUs that no candidate uses, while the
program starts and is probed; only where every allowed CPU belongs to some candidate are they
loaded first (before the program starts, or with ``--pid`` before the probing begins). Where and
at what cost is measured and goes into the log's summary.
"""

from __future__ import annotations

import os
import signal as signals
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pinlab.launch.runner import FORWARDED
from pinlab.stats import preload


def already_loaded() -> bool:
    """Whether this process has imported them already (a Python program using pinlab's API)."""
    return "scipy.stats" in sys.modules


class StatisticsLoad:
    """Where the statistics are loaded (``beside`` the program on ``cpus``, ``before`` it starts,
    or ``already`` in this process) and, once loaded, the wall and CPU seconds the import took."""

    def __init__(self, candidates: Sequence[Any], allowed: Iterable[int]) -> None:
        used = frozenset().union(*(frozenset(c.cpus) for c in candidates))
        self.cpus = sorted(frozenset(allowed) - used)
        self.where = "already" if already_loaded() else "beside" if self.cpus else "before"
        self.seconds: float | None = None
        self.cpu_seconds: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Load now (``before``), or start the loading thread and return at once (``beside``)."""
        if self.where == "already":
            self.seconds = self.cpu_seconds = 0.0
            return
        if self.where == "before":
            self._load()
            return
        # A thread inherits the signal mask of its creator: the loader must never take a signal
        # that pinlab forwards to the program (a Ctrl-C landing there would be lost).
        old = signals.pthread_sigmask(signals.SIG_BLOCK, FORWARDED)
        try:
            self._thread = threading.Thread(target=self._load, kwargs={"pin": True}, name="pinlab-stats-load", daemon=True)
            self._thread.start()
        finally:
            signals.pthread_sigmask(signals.SIG_SETMASK, old)

    def loading(self) -> bool:
        """Whether the loading thread is still at work (the verdict waits for it)."""
        return self._thread is not None and self._thread.is_alive()

    def _load(self, pin: bool = False) -> None:
        if pin:
            try:
                os.sched_setaffinity(0, self.cpus)  # this thread alone: the rest of autopin stays where it was
            except OSError:
                pass
        began, cpu_began = time.monotonic(), time.thread_time()
        try:
            preload()
        except Exception:  # the verdict imports them itself, and says what is missing
            return
        self.cpu_seconds = round(time.thread_time() - cpu_began, 6)
        self.seconds = round(time.monotonic() - began, 6)

    def to_json(self) -> dict[str, Any]:
        """The summary's ``statistics``: seconds are null while (or if) the import has not finished."""
        return {"loaded": self.where, "cpus": self.cpus, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds}
