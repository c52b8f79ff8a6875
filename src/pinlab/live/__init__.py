"""The threads of a running process: list them, tell workers from helpers, re-pin them.

``pinlab ps`` and ``pinlab pin`` are thin over this package, and autopin drives it. Roles and
creation order are known for programs started by ``pinlab run`` (from its event ring, see
:mod:`pinlab.measure.roles`); for any other process the main thread is ``main`` and the rest
``unknown``. Kept light: no scipy, pandas or matplotlib (the picture imports it when drawing).
"""

from __future__ import annotations

from pinlab.live.pin import Repin, apply_plan, pin_threads, plan_cpus, repin, select_threads
from pinlab.live.watch import Look, Watcher, WatchRequest
from pinlab.measure.roles import events_path, pinlab_processes, roles_from_events
from pinlab.measure.threads import LiveThread, alive, check_process, pages_per_node, process_threads, roles_known, workers

__all__ = [
    "LiveThread",
    "Look",
    "Repin",
    "WatchRequest",
    "Watcher",
    "alive",
    "apply_plan",
    "check_process",
    "events_path",
    "pages_per_node",
    "pin_threads",
    "pinlab_processes",
    "plan_cpus",
    "process_threads",
    "repin",
    "roles_from_events",
    "roles_known",
    "select_threads",
    "workers",
]
