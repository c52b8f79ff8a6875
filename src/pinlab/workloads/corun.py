"""Co-runners: processes that load chosen CPUs while a measured program runs ([mazouz2011variability]'s noise).

Kinds: ``cpu`` (busy loop), ``sleep`` (busy for part of each period, then asleep; periods of
10 us to 10 ms), ``memory`` (streams through a buffer larger than the last-level cache).
Each co-runner is one ``pinlab-corun`` process pinned to one CPU. They never outlive pinlab:
they run in their own process group (a Ctrl-C meant for the measured program does not reach
them), ask the kernel for SIGTERM when their parent dies (PR_SET_PDEATHSIG), and stop cleanly
on SIGTERM/SIGINT.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.launch.spawn import spawn
from pinlab.native import native_path

KINDS = ("cpu", "sleep", "memory")
#: More co-runners than this is a typing mistake, not a load: no machine has that many CPUs to load.
MAX_COUNT = 4096


class CoRunners:
    """A group of co-runner processes; use as a context manager, or start() / stop()."""

    def __init__(
        self,
        kind: str,
        count: int,
        cpus: list[int] | str | None = None,
        *,
        period_us: int | None = None,
        duty: int | None = None,
        size: str | None = None,
        duration: float | None = None,
    ) -> None:
        if kind not in KINDS:
            raise UsageError(f"unknown co-runner kind {kind!r}: choose one of {', '.join(KINDS)}")
        if count < 1:
            raise UsageError(f"--count must be at least 1 (got {count})")
        if count > MAX_COUNT:
            raise UsageError(f"--count {count} is more co-runners than any machine needs ({MAX_COUNT} at most)")
        if duration is not None and not 0 < duration < 1e9:
            raise UsageError(f"--duration must be a positive number of seconds (got {duration})")
        allowed = sorted(os.sched_getaffinity(0))
        chosen = parse_cpulist(cpus, what="--cpus list") if isinstance(cpus, str) else (list(cpus) if cpus else allowed)
        for cpu in chosen:
            if cpu not in allowed:
                raise UsageError(f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(allowed)})")
        if period_us is not None and not 10 <= period_us <= 10_000:
            raise UsageError(f"--period-us must be between 10 and 10000 (got {period_us})")
        if duty is not None and not 0 < duty < 100:
            raise UsageError(f"--duty must be between 1 and 99 percent (got {duty})")
        self.kind, self.count, self.cpus, self.duration = kind, count, chosen, duration
        self.options = []
        if period_us is not None:
            self.options += ["--period-us", str(period_us)]
        if duty is not None:
            self.options += ["--duty", str(duty)]
        if size is not None:
            self.options += ["--size", size]
        self.pids: list[int] = []
        self._running: set[int] = set()
        self._ended: dict[int, int] = {}  # pid -> wait status, for co-runners that ended before stop()

    def start(self, ready_timeout: float = 60.0) -> CoRunners:
        """Start the co-runners, each pinned to its CPU and in its own process group, with no
        signal blocked (a caller waiting for signals may block some), and return once each has
        its load running or has ended (at most ``ready_timeout`` seconds).

        Waiting matters twice: the measured program then starts under the whole load (a memory
        co-runner first touches a buffer of 4x the last-level cache), and a co-runner that
        refuses its options has ended before the program starts, so :meth:`failure` sees it
        however short the program is.
        """
        exe = str(native_path("pinlab-corun"))
        ready_read, ready_write = os.pipe()
        os.set_inheritable(ready_write, True)  # each co-runner writes its byte here and closes it
        env = dict(os.environ, PINLAB_CORUN_PARENT=str(os.getpid()), PINLAB_CORUN_READY_FD=str(ready_write))
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for i in range(self.count):
                cpu = self.cpus[i % len(self.cpus)]
                pid = spawn(exe, [exe, self.kind, "--quiet", *self.options], env, cpus=frozenset({cpu}), sigmask=set(), stdin=null, new_group=True)
                self.pids.append(pid)
                self._running.add(pid)
        finally:
            os.close(null)
            os.close(ready_write)
        try:
            _wait_until_ready(ready_read, self.count, ready_timeout)
        finally:
            os.close(ready_read)
        return self

    def _reap(self) -> dict[int, int]:
        """Collect the co-runners that have ended; returns their wait statuses by pid."""
        ended = {}
        for pid in list(self._running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                self._running.discard(pid)
                ended[pid] = status
        return ended

    def hold(self, started: Callable[[CoRunners], None] | None = None) -> str | None:
        """Start the co-runners and keep them running until SIGINT, SIGTERM or SIGHUP comes, the
        duration (if any) is over, or one of them ends by itself (it failed); then stop them and
        return :meth:`failure`. ``started`` is called once they run.

        The signals are blocked and waited for rather than handled, so that a stop arriving at any
        moment (even while they start) ends the wait and nothing is left running.
        """
        stopping = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        waited = stopping | {signal.SIGCHLD}  # a co-runner that ends by itself has failed: stop and say so
        old = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
        try:
            with self:
                if started is not None:
                    started(self)
                deadline = None if self.duration is None else time.monotonic() + self.duration
                while self.failure() is None:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    info = signal.sigwaitinfo(waited) if left is None else signal.sigtimedwait(waited, left)
                    if info is not None and info.si_signo in stopping:
                        break
            return self.failure()  # after the stop: a co-runner that refused its options as it was stopped failed too
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def failure(self) -> str | None:
        """How the first co-runner that failed ended ("pid N exited with status 2"), or None.

        Co-runners run until stopped, so any that ended before :meth:`stop` failed (bad options,
        not enough memory, killed): the load they were meant to put on the machine was missing.
        So did one that, stopped, exited with a status other than 0: it had refused its options
        before the stop reached it (a program that ends at once can end before a co-runner has
        read its options). Ask after :meth:`stop` to see both.
        """
        self._ended.update(self._reap())
        if not self._ended:
            return None
        pid, status = next(iter(self._ended.items()))
        return f"{self.kind} (pid {pid}) {describe_status(status)}"

    def exit_status(self) -> int:
        """The shell-style exit status of the first co-runner that failed (0 if none did)."""
        self._ended.update(self._reap())
        if not self._ended:
            return 0
        status = next(iter(self._ended.values()))
        return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status) or 1)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM to every co-runner, then SIGKILL to any still there after ``timeout`` seconds."""
        self._ended.update(self._reap())
        for pid in self._running:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._running and time.monotonic() < deadline:
            time.sleep(0.002)
            self._keep_failed(self._reap())
        for pid in self._running:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self._running.clear()

    def _keep_failed(self, stopped: dict[int, int]) -> None:
        """Of co-runners reaped after the stop: keep those that exited with an error status (a
        SIGTERM before the handler is in place, or the exit status 0 the handler leads to, is the
        stop itself)."""
        for pid, status in stopped.items():
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
                self._ended.setdefault(pid, status)

    def __enter__(self) -> CoRunners:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _wait_until_ready(fd: int, count: int, timeout: float) -> int:
    """Read the co-runners' ready bytes from ``fd`` until ``count`` have come, every writer has
    gone (end of file: the rest ended without getting ready), or ``timeout`` seconds have passed;
    returns how many are ready."""
    ready = 0
    deadline = time.monotonic() + timeout
    while ready < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        data = os.read(fd, count - ready)
        if not data:
            break
        ready += len(data)
    return ready


def describe_status(status: int) -> str:
    """A wait status in words."""
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"
