"""Co-runners: processes that load chosen CPUs while a measured program runs (seed 004's noise).

Kinds: ``cpu`` (busy loop), ``sleep`` (busy for part of each period, then asleep; periods of
10 us to 10 ms), ``memory`` (streams through a buffer larger than the last-level cache).
Each co-runner is one ``pinlab-corun`` process pinned to one CPU. They never outlive pinlab:
they run in their own process group (a Ctrl-C meant for the measured program does not reach
them), ask the kernel for SIGTERM when their parent dies (PR_SET_PDEATHSIG), and stop cleanly
on SIGTERM/SIGINT.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

from pinlab.errors import UsageError
from pinlab.topology.cpuset import format_cpulist, parse_cpulist

KINDS = ("cpu", "sleep", "memory")


class CoRunners:
    """A group of co-runner processes; use as a context manager, or start() / stop()."""

    def __init__(self, kind: str, count: int, cpus: list[int] | str | None = None, *, period_us: int | None = None,
                 duty: int | None = None, size: str | None = None) -> None:
        if kind not in KINDS:
            raise UsageError(f"unknown co-runner kind {kind!r}: choose one of {', '.join(KINDS)}")
        if count < 1:
            raise UsageError(f"--count must be at least 1 (got {count})")
        allowed = sorted(os.sched_getaffinity(0))
        chosen = parse_cpulist(cpus, what="--cpus list") if isinstance(cpus, str) else (list(cpus) if cpus else allowed)
        for cpu in chosen:
            if cpu not in allowed:
                raise UsageError(f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(allowed)})")
        if period_us is not None and not 10 <= period_us <= 10_000:
            raise UsageError(f"--period-us must be between 10 and 10000 (got {period_us})")
        if duty is not None and not 0 < duty < 100:
            raise UsageError(f"--duty must be between 1 and 99 percent (got {duty})")
        self.kind, self.count, self.cpus = kind, count, chosen
        self.options = []
        if period_us is not None:
            self.options += ["--period-us", str(period_us)]
        if duty is not None:
            self.options += ["--duty", str(duty)]
        if size is not None:
            self.options += ["--size", size]
        self.processes: list[subprocess.Popen] = []

    def start(self) -> CoRunners:
        from pinlab.native import native_path

        exe = str(native_path("pinlab-corun"))
        env = dict(os.environ, PINLAB_CORUN_PARENT=str(os.getpid()))
        for i in range(self.count):
            cpu = self.cpus[i % len(self.cpus)]
            proc = subprocess.Popen([exe, self.kind, "--quiet", *self.options], env=env, stdin=subprocess.DEVNULL,
                                    preexec_fn=_pin_and_detach(cpu))
            self.processes.append(proc)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM to every co-runner, then SIGKILL to any still there after ``timeout`` seconds."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.processes:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def __enter__(self) -> CoRunners:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _pin_and_detach(cpu: int):
    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # a caller waiting on signals may have blocked them
        os.setpgid(0, 0)  # own process group: the terminal's Ctrl-C is for the measured program
        os.sched_setaffinity(0, {cpu})

    return setup
