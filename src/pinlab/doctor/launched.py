"""The doctor on a program it starts: ``pinlab run``'s launcher, with a controller that samples.

The program is started exactly as ``pinlab run`` starts it (unpinned unless a placement is
given), so its output, signals and exit status are those of ``pinlab run``; the doctor is a
:class:`~pinlab.launch.runner.Controller`, woken from the launcher's wait loop to sample the
program's threads until the window closes or the program ends. The preload library records which
library started each thread (the pools are counted exactly) and the program's own affinity calls;
without a placement it is loaded in a mode that pins nothing (``PINLAB_OBSERVE``).
"""

from __future__ import annotations

import math
import time

from pinlab.doctor.observe import SAMPLE_INTERVAL, ProcessObservation, ProcessSampler
from pinlab.launch import plan_spec
from pinlab.launch.record import RunRecord
from pinlab.launch.runner import ControllerBase, LaunchSpec
from pinlab.launch.runner import run as launch


class DoctorController(ControllerBase):
    """Samples the launched program every :data:`SAMPLE_INTERVAL` for ``seconds``."""

    def __init__(self, seconds: float, argv: list[str]) -> None:
        self.seconds = seconds
        self.argv = argv
        self.sampler: ProcessSampler | None = None
        self._next = math.inf
        self._deadline = math.inf

    def started(self, pid: int, events: str | None) -> None:
        now = time.monotonic()
        self.sampler = ProcessSampler(pid, events=events, start=now, argv=self.argv)
        self._deadline = now + self.seconds
        self._next = now

    def wake_at(self) -> float:
        return self._next

    def step(self) -> None:
        assert self.sampler is not None
        now = time.monotonic()
        if not self.sampler.sample() or now >= self._deadline:
            self._next = math.inf  # the window has closed (or the program has ended): the program runs on
        else:
            self._next = min(now + SAMPLE_INTERVAL, self._deadline)

    @property
    def observation(self) -> ProcessObservation | None:
        return None if self.sampler is None else self.sampler.observation


def launch_spec(argv: list[str], seconds: float, strategy: str | None, cpus: str | None, threads: int | None) -> tuple[LaunchSpec, DoctorController]:
    """The launch of ``argv`` (checked as ``pinlab run`` checks it, before anything runs) and its doctor."""
    spec = plan_spec(argv, strategy=strategy, cpus=cpus, threads=threads, sample_ms=None)
    controller = DoctorController(seconds, list(argv))
    spec.controller = controller
    spec.observe = True  # without a placement: recorded, not pinned
    return spec, controller


def run_observed(spec: LaunchSpec, controller: DoctorController) -> tuple[RunRecord, ProcessObservation | None]:
    """Run the program to its end; its record, and what the doctor saw of it."""
    record = launch(spec)
    return record, controller.observation
